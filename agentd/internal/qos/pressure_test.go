package qos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNewPressureRejectsBadConfig(t *testing.T) {
	proc := newFakeProc(t)
	proc.write(t, "pressure/cpu", psiFile(0, 0))
	proc.write(t, "pressure/memory", psiFile(0, 0))
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"every threshold off":   {cfg: Config{}, want: "every threshold is off"},
		"percent over 100":      {cfg: Config{CPUSome: 101}, want: "-qos-pressure-cpu-some 101"},
		"negative":              {cfg: Config{MemoryFull: -1}, want: "-qos-pressure-memory-full -1"},
		"NaN":                   {cfg: Config{MemorySome: nan()}, want: "-qos-pressure-memory-some NaN"},
		"fraction over 1":       {cfg: Config{MemoryFraction: 1.5}, want: "-qos-pressure-memory-fraction 1.5"},
		"negative cpus":         {cfg: Config{CPUSome: 50, CPUs: -2}, want: "cpus -2"},
		"kernel without PSI":    {cfg: Config{CPUSome: 50, ProcDir: t.TempDir()}, want: "the kernel reports no pressure stall information"},
		"cgroup without either": {cfg: Config{CPUSome: 50, ProcDir: t.TempDir(), CgroupDir: t.TempDir()}, want: "cpu.pressure: no such file"},
		"PSI turned off at boot": {cfg: Config{CPUSome: 50, ProcDir: psiOff(t)},
			want: "is a directory"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Kind = KindPressure
			if tc.cfg.ProcDir == "" {
				tc.cfg.ProcDir = string(proc)
			}
			c, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "qos pressure: ") {
				t.Fatalf("New(%+v) = %v, %v; want an error saying %q", tc.cfg, c, err, tc.want)
			}
		})
	}
}

// psiOff is a /proc whose pressure files cannot be read, as with a kernel
// booted with psi=0 (there they answer EOPNOTSUPP; here they are
// directories, which fail to read as well).
func psiOff(t *testing.T) string {
	proc := newFakeProc(t)
	for _, name := range []string{"cpu", "memory"} {
		if err := os.Mkdir(filepath.Join(string(proc), "pressure", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return string(proc)
}

// TestPressureFromTheRootCgroupAlone: without /proc/pressure the root
// cgroup's own files are enough, and their readings are named as theirs.
func TestPressureFromTheRootCgroupAlone(t *testing.T) {
	cgroup := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(cgroup, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cpu.pressure", psiFile(10, 0))
	write("memory.pressure", psiFile(0, 0))
	c, err := New(Config{Kind: KindPressure, CPUSome: 50, CPUFull: 20, CPUs: 4, ProcDir: t.TempDir(), CgroupDir: cgroup})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{task("slack", 1, true, true, 2, 0)}
	if got, err := c.Corrections(at, Node{Tasks: tasks}); got != nil || err != nil {
		t.Fatalf("under: %v, %v", got, err)
	}
	write("cpu.pressure", psiFile(30, 25))
	got, err := c.Corrections(at, Node{Tasks: tasks})
	if err != nil || len(got) != 1 || got[0].Message != "qos pressure: root cgroup cpu full avg10 25.0% over 20%" {
		t.Fatalf("cgroup cpu full over: %+v, %v", got, err)
	}
}

// TestPressureCPU: cpu pressure over its threshold kills the fewest
// revocable tasks, youngest first, whose cpu covers the excess in cores
// (excess points × cores / 100), and never a regular task.
func TestPressureCPU(t *testing.T) {
	proc := newFakeProc(t)
	proc.write(t, "pressure/cpu", psiFile(0, 0))
	proc.write(t, "pressure/memory", psiFile(0, 0))
	c, err := New(Config{Kind: KindPressure, CPUSome: 40, MemorySome: 20, CPUs: 4, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{
		task("regular", 1, false, false, 4, 0),
		task("young", 2, true, true, 0.5, 100),
		task("one", 3, true, true, 1, 100),
		task("two", 4, true, true, 2, 100),
	}
	round := func(now time.Time, tasks []Task, cpuSome float64) []Correction {
		t.Helper()
		proc.write(t, "pressure/cpu", psiFile(cpuSome, 0))
		got, err := c.Corrections(now, Node{Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := round(at, tasks, 40); got != nil {
		t.Fatalf("at the threshold: %v, want none", got)
	}
	// 63.2 − 40 = 23.2 points of 4 cores = 0.93 cores: "one" alone.
	got := round(at, tasks, 63.2)
	if !slices.Equal(ids(got), []string{"one"}) || got[0].Message != "qos pressure: cpu some avg10 63.2% over 40%" {
		t.Fatalf("cpu some over: %+v, want one", got)
	}
	// A round later the average has not moved: "one" is accounted for.
	if got := round(at.Add(time.Second), tasks, 63.2); got != nil {
		t.Fatalf("while one is being killed: %v", got)
	}
	// "one" gone; the average falls as the kernel's would (e^(−t/10 s)
	// from its settling): nothing more to kill.
	left := []Task{tasks[0], tasks[1], tasks[3]}
	round(at.Add(2*time.Second), left, 63)
	if got := round(at.Add(10*time.Second), left, 50); got != nil {
		t.Fatalf("falling after the kill: %v", got)
	}
	// Still over much later: the kill did not help enough; kill more.
	got = round(at.Add(2*time.Minute), left, 90)
	if !slices.Equal(ids(got), []string{"two"}) {
		t.Fatalf("over again: %v, want two (2 cores of 2 needed)", ids(got))
	}
}

// TestPressureMemoryFraction: the root cgroup close to its limit kills
// revocable tasks first (the fewest, youngest first, by memory in use),
// then regular tasks furthest above their request, until under.
func TestPressureMemoryFraction(t *testing.T) {
	proc := newFakeProc(t)
	proc.write(t, "pressure/cpu", psiFile(0, 0))
	proc.write(t, "pressure/memory", psiFile(0, 0))
	c, err := New(Config{Kind: KindPressure, MemoryFraction: 0.9, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	withMem := func(id string, minutes int, revocable bool, request, used float64) Task {
		tk := task(id, minutes, revocable, revocable, 0.5, used)
		tk.Requests["mem"] = request
		return tk
	}
	tasks := []Task{
		withMem("within", 1, false, 4096, 4000), // promised: never
		withMem("rev-small", 2, true, 64, 100),
		withMem("rev-big", 3, true, 64, 300),
		withMem("over-150", 4, false, 100, 250),
		withMem("over-300", 5, false, 100, 400),
	}
	limit := int64(10000) * mib
	node := func(usedMiB int64, tasks []Task) Node {
		return Node{Tasks: tasks, MemoryUsed: usedMiB * mib, MemoryLimit: limit}
	}
	cases := map[string]struct {
		usedMiB int64
		want    []string
		message string
	}{
		"under":                       {usedMiB: 9000, want: nil},
		"the youngest revocable":      {usedMiB: 9050, want: []string{"rev-small"}},
		"the fewest revocable":        {usedMiB: 9200, want: []string{"rev-big"}, message: "qos pressure: root cgroup memory 9200 MiB of 10000 MiB (92.0%) over 90%"},
		"then the furthest over":      {usedMiB: 9500, want: []string{"rev-small", "rev-big", "over-300"}},
		"then the next furthest over": {usedMiB: 10000, want: []string{"rev-small", "rev-big", "over-300", "over-150"}},
		"never a task within request": {usedMiB: 20000, want: []string{"rev-small", "rev-big", "over-300", "over-150"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := New(Config{Kind: KindPressure, MemoryFraction: 0.9, ProcDir: string(proc)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Corrections(at, node(tc.usedMiB, tasks))
			if err != nil || !slices.Equal(ids(got), tc.want) {
				t.Fatalf("Corrections = %v, %v; want %v", ids(got), err, tc.want)
			}
			if tc.message != "" && got[0].Message != tc.message {
				t.Errorf("message %q, want %q", got[0].Message, tc.message)
			}
			for _, c := range got {
				if strings.HasPrefix(c.ContainerID, "over-") && !strings.Contains(c.Message, "MiB over its memory request of 100 MiB") {
					t.Errorf("a regular task's message %q does not say it is over its request", c.Message)
				}
			}
		})
	}

	// Memory in use is measured afresh each round: what killed tasks still
	// hold counts as freed while they are listed, and not once gone.
	got, err := c.Corrections(at, node(9200, tasks))
	if err != nil || !slices.Equal(ids(got), []string{"rev-big"}) {
		t.Fatalf("first round: %v, %v", ids(got), err)
	}
	if got, _ := c.Corrections(at.Add(time.Second), node(9200, tasks)); got != nil {
		t.Fatalf("while rev-big is being killed: %v", ids(got))
	}
	left := slices.DeleteFunc(slices.Clone(tasks), func(t Task) bool { return t.ContainerID == "rev-big" })
	if got, _ := c.Corrections(at.Add(2*time.Second), node(8900, left)); got != nil {
		t.Fatalf("after it is gone, under: %v", ids(got))
	}
	if got, _ := c.Corrections(at.Add(3*time.Second), node(9050, left)); !slices.Equal(ids(got), []string{"rev-small"}) {
		t.Fatalf("over again: %v, want rev-small", ids(got))
	}
	// Without a known limit the fraction says nothing.
	c2, _ := New(Config{Kind: KindPressure, MemoryFraction: 0.9, ProcDir: string(proc)})
	if got, _ := c2.Corrections(at, Node{Tasks: tasks, MemoryUsed: 1 << 40}); got != nil {
		t.Fatalf("no limit: %v", ids(got))
	}
}

// TestPressureMemoryPSI: stalls say memory is short, not by how much: one
// task a round, revocable first, then the furthest over its request; the
// next waits until the average shows what the last kill did.
func TestPressureMemoryPSI(t *testing.T) {
	proc := newFakeProc(t)
	proc.write(t, "pressure/cpu", psiFile(0, 0))
	proc.write(t, "pressure/memory", psiFile(0, 0))
	c, err := New(Config{Kind: KindPressure, MemorySome: 20, MemoryFull: 10, CPUs: 2, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	over := task("over", 1, false, false, 0.1, 500) // request 128 MiB
	tasks := []Task{
		task("within", 1, false, false, 0.1, 100),
		over,
		task("rev-old", 10, true, true, 0.1, 300),
		task("rev-young", 2, true, true, 0.1, 50),
	}
	round := func(now time.Time, tasks []Task, some, full float64) []Correction {
		t.Helper()
		proc.write(t, "pressure/memory", psiFile(some, full))
		got, err := c.Corrections(now, Node{Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := round(at, tasks, 42, 5)
	if !slices.Equal(ids(got), []string{"rev-young"}) || got[0].Message != "qos pressure: memory some avg10 42.0% over 20%" {
		t.Fatalf("memory some over: %+v, want rev-young", got)
	}
	if got := round(at.Add(time.Second), tasks, 45, 5); got != nil {
		t.Fatalf("while rev-young is being killed: %v", ids(got))
	}
	tasks = slices.DeleteFunc(tasks, func(t Task) bool { return t.ContainerID == "rev-young" })
	round(at.Add(2*time.Second), tasks, 45, 5) // seen gone
	// Once its death shows, the stalls are still there (the full average
	// rose): the next one goes.
	got = round(at.Add(20*time.Second), tasks, 25, 30)
	if !slices.Equal(ids(got), []string{"rev-old"}) || got[0].Message != "qos pressure: memory full avg10 30.0% over 10%" {
		t.Fatalf("still stalled: %+v, want rev-old for memory full", got)
	}
	tasks = slices.DeleteFunc(tasks, func(t Task) bool { return t.ContainerID == "rev-old" })
	round(at.Add(21*time.Second), tasks, 45, 30)
	got = round(at.Add(40*time.Second), tasks, 45, 30)
	if !slices.Equal(ids(got), []string{"over"}) || !strings.Contains(got[0].Message, "372 MiB over its memory request of 128 MiB") {
		t.Fatalf("no revocable task left: %+v, want over", got)
	}
	// The average falls: nothing more, and never the task within its request.
	tasks = slices.DeleteFunc(tasks, func(t Task) bool { return t.ContainerID == "over" })
	round(at.Add(41*time.Second), tasks, 45, 30)
	for i, avg := range []float64{30, 15, 5} {
		if got := round(at.Add(time.Duration(45+5*i)*time.Second), tasks, avg, avg/2); got != nil {
			t.Fatalf("falling (%v%%): %v", avg, ids(got))
		}
	}
}

// TestPressureMemoryBeforeCPU: one round with both: memory first, and what
// dies for memory counts toward the cpu to free.
func TestPressureMemoryBeforeCPU(t *testing.T) {
	proc := newFakeProc(t)
	proc.write(t, "pressure/cpu", psiFile(70, 0))
	proc.write(t, "pressure/memory", psiFile(0, 0))
	c, err := New(Config{Kind: KindPressure, CPUSome: 50, MemoryFraction: 0.5, CPUs: 2, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{
		task("cpu-hog", 1, true, true, 0.4, 10),
		task("mem-hog", 5, true, true, 0.3, 600),
	}
	// 20 points of 2 cores = 0.4 cores: mem-hog frees 0.3 of them, cpu-hog
	// the rest.
	got, err := c.Corrections(at, Node{Tasks: tasks, MemoryUsed: 1000 * mib, MemoryLimit: 1500 * mib})
	if err != nil || !slices.Equal(ids(got), []string{"mem-hog", "cpu-hog"}) {
		t.Fatalf("Corrections = %v, %v; want mem-hog then cpu-hog", ids(got), err)
	}
	if !strings.Contains(got[0].Message, "root cgroup memory") || !strings.Contains(got[1].Message, "cpu some avg10 70.0% over 50%") {
		t.Errorf("messages %q, %q", got[0].Message, got[1].Message)
	}
	// With 0.2 cores to free, mem-hog's 0.3 is enough.
	proc.write(t, "pressure/cpu", psiFile(60, 0))
	c, _ = New(Config{Kind: KindPressure, CPUSome: 50, MemoryFraction: 0.5, CPUs: 2, ProcDir: string(proc)})
	got, err = c.Corrections(at, Node{Tasks: tasks, MemoryUsed: 1000 * mib, MemoryLimit: 1500 * mib})
	if err != nil || !slices.Equal(ids(got), []string{"mem-hog"}) {
		t.Fatalf("Corrections = %v, %v; want mem-hog alone", ids(got), err)
	}
}

func TestPressureReadError(t *testing.T) {
	proc := newFakeProc(t)
	proc.write(t, "pressure/cpu", psiFile(0, 0))
	c, err := New(Config{Kind: KindPressure, CPUSome: 50, ProcDir: string(proc)})
	if err != nil {
		t.Fatal(err)
	}
	proc.write(t, "pressure/cpu", "some avg10=oops\n")
	got, err := c.Corrections(at, Node{Tasks: []Task{task("a", 1, true, true, 1, 0)}})
	if err == nil || got != nil || !strings.Contains(err.Error(), filepath.Join(string(proc), "pressure", "cpu")) {
		t.Fatalf("Corrections = %v, %v; want an error naming the file", got, err)
	}
}
