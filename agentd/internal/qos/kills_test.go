package qos

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func TestKillResidual(t *testing.T) {
	k := newKills(5*time.Second, 5*time.Minute)
	tk := task("a", 10, true, true, 1, 256) // started 10 minutes before at
	k.add(at, tk, 7)
	cpus := func(rec *kill) float64 { return rec.cpus }
	mem := func(rec *kill) float64 { return rec.memMiB }
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	listed := []Task{tk}
	k.observe(at.Add(time.Second), listed)
	// Listed: all it added in ten minutes of a 5-minute average.
	near("listed", k.residual(at.Add(time.Second), 5*time.Minute, cpus), 1-math.Exp(-601.0/300))
	near("listed, instant reading", k.residual(at.Add(time.Second), 0, mem), 256)
	if !k.inFlight(at.Add(time.Second), func(*kill) bool { return true }) {
		t.Errorf("a listed kill is not in flight")
	}

	gone := at.Add(2 * time.Second)
	k.observe(gone, nil)
	near("gone, not settled", k.residual(gone.Add(time.Second), 5*time.Minute, cpus), 1-math.Exp(-603.0/300))
	near("gone, instant reading", k.residual(gone, 0, mem), 0)
	later := gone.Add(5*time.Second + 5*time.Minute)
	near("gone a time constant", k.residual(later, 5*time.Minute, cpus), math.Exp(-1)-math.Exp(-later.Sub(tk.StartedAt).Seconds()/300))
	if k.inFlight(later, func(*kill) bool { return true }) {
		t.Errorf("a kill gone and settled is in flight")
	}

	k.observe(gone.Add(5*time.Second+35*time.Minute-time.Second), nil)
	if !k.pending(tk) {
		t.Errorf("forgotten before seven time constants")
	}
	k.observe(gone.Add(5*time.Second+35*time.Minute+time.Second), nil)
	if k.pending(tk) {
		t.Errorf("remembered after seven time constants")
	}
}

// simulatedNode is a node whose load average and cpu pressure follow the
// kernel's formulas (exponential averages updated every 5 s and 2 s) over
// the cores its tasks keep busy, written to a fake /proc each simulated
// second: a controller run against it must kill exactly the tasks the
// arithmetic says, however the averages lag.
type simulatedNode struct {
	proc     fakeProc
	cores    float64 // the node's
	baseline float64 // cores busy with work that is no task (and regular tasks)
	tasks    []Task
	load5    float64
	some10   float64
}

func (s *simulatedNode) demand() float64 {
	d := s.baseline
	for _, tk := range s.tasks {
		d += tk.Used["cpus"]
	}
	return d
}

func (s *simulatedNode) tick(t *testing.T, second int) {
	t.Helper()
	if second%5 == 0 {
		e := math.Exp(-5.0 / 300)
		s.load5 = s.load5*e + s.demand()*(1-e)
	}
	if second%2 == 0 {
		e := math.Exp(-2.0 / 10)
		some := math.Min(math.Max(s.demand()-s.cores, 0)/s.cores, 1) * 100
		s.some10 = s.some10*e + some*(1-e)
	}
	s.proc.write(t, "loadavg", fmt.Sprintf("0.00 %.2f 0.00 1/100 1\n", s.load5))
	s.proc.write(t, "pressure/cpu", psiFile(s.some10, 0))
}

func TestControllersAgainstSimulatedNode(t *testing.T) {
	cases := map[string]struct {
		cfg      Config
		baseline float64
		wantKill int
	}{
		// 3 cores of other work and 5 revocable tasks of 1 core: a load of
		// 8 against 6.5 needs 1.5 cores freed: 2 tasks, leaving 6.
		"load": {cfg: Config{Kind: KindLoad, Load5: 6.5}, baseline: 3, wantKill: 2},
		// 4 cores, 1 of other work and the 5 tasks: (6−4)/4 = 50% some
		// against 30% needs 0.8 cores freed: 1 task, leaving 25%.
		"pressure": {cfg: Config{Kind: KindPressure, CPUSome: 30, CPUs: 4}, baseline: 1, wantKill: 1},
		// 2 of other work: 75% needs 1.8 cores: 2 tasks.
		"pressure higher": {cfg: Config{Kind: KindPressure, CPUSome: 30, CPUs: 4}, baseline: 2, wantKill: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node := &simulatedNode{proc: newFakeProc(t), cores: 4, baseline: tc.baseline}
			node.load5, node.some10 = tc.baseline, math.Max(tc.baseline-4, 0)/4*100
			node.tick(t, 1)
			tc.cfg.ProcDir = string(node.proc)
			c, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			start := at
			for i := range 5 {
				tk := task(fmt.Sprint("rev-", i), 0, true, true, 1, 0)
				tk.StartedAt = start
				node.tasks = append(node.tasks, tk)
			}
			var killed []string
			for second := 1; second <= 3600; second++ {
				node.tick(t, second)
				got, err := c.Corrections(start.Add(time.Duration(second)*time.Second), Node{Tasks: node.tasks})
				if err != nil {
					t.Fatal(err)
				}
				// The agent kills them; they are gone by the next round.
				for _, correction := range got {
					killed = append(killed, correction.ContainerID)
					node.tasks = slices.DeleteFunc(node.tasks, func(t Task) bool { return t.ContainerID == correction.ContainerID })
				}
			}
			if len(killed) != tc.wantKill {
				t.Errorf("killed %v in an hour, want %d", killed, tc.wantKill)
			}
			t.Logf("killed %v; load5 %.2f, cpu some %.1f%% at the end", killed, node.load5, node.some10)
		})
	}
}
