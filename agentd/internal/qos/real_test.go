package qos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// TestNewOnThisMachine builds both controllers on this machine's /proc;
// with no tasks they kill nothing whatever the node's state.
func TestNewOnThisMachine(t *testing.T) {
	requirePSI(t)
	for _, cfg := range []Config{
		{Kind: KindLoad, Load5: 1000},
		{Kind: KindPressure, CPUSome: 0.01, MemorySome: 0.01, MemoryFull: 0.01, MemoryFraction: 0.01},
	} {
		c, err := New(cfg)
		if err != nil {
			t.Fatalf("New(%+v) on this machine: %v", cfg, err)
		}
		got, err := c.Corrections(time.Now(), Node{MemoryUsed: 1 << 30, MemoryLimit: 1 << 30})
		if err != nil || got != nil {
			t.Errorf("%s with no tasks: %v, %v", c.Name(), got, err)
		}
	}
	// The root cgroup v2 (hybrid mode mounts it at /sys/fs/cgroup/unified)
	// has pressure files of its own.
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(dir, "cpu.pressure")); err != nil {
			continue
		}
		c, err := New(Config{Kind: KindPressure, CPUSome: 50, ProcDir: t.TempDir(), CgroupDir: dir})
		if err != nil {
			t.Fatalf("pressure from the cgroup %s alone: %v", dir, err)
		}
		if got, err := c.Corrections(time.Now(), Node{}); err != nil || got != nil {
			t.Errorf("cgroup %s: %v, %v", dir, got, err)
		}
	}
}

// TestPressureUnderSyntheticLoad runs stress-ng as revocable tasks: cpu
// pressure goes over a threshold above this machine's current level, the
// controller names tasks to kill (the test kills them, as the agent does),
// and once the load has ended it names none although a light revocable
// task still runs.
func TestPressureUnderSyntheticLoad(t *testing.T) {
	requirePSI(t)
	stressNG := requireStressNG(t)
	now, err := readFile("/proc/pressure/cpu", parsePSI)
	if err != nil {
		t.Fatal(err)
	}
	// Above what the other work on this machine causes now; eight busy
	// threads on its cores push some avg10 far past it within seconds.
	threshold := min(max(now.Some.Avg10+25, 30), 90)
	c, err := New(Config{Kind: KindPressure, CPUSome: threshold})
	if err != nil {
		t.Fatal(err)
	}
	syntheticLoad(t, stressNG, c, threshold, true,
		regexp.MustCompile(`^qos pressure: cpu some avg10 (\d+\.\d)% over `+regexp.QuoteMeta(strconv.FormatFloat(threshold, 'g', -1, 64))+`%$`),
		func() float64 {
			p, err := readFile("/proc/pressure/cpu", parsePSI)
			if err != nil {
				t.Fatal(err)
			}
			return p.Some.Avg10
		})
}

// TestLoadUnderSyntheticLoad: as above for the 5-minute load average, with
// a threshold just above its current value: a rise of 0.2 takes some
// seconds of eight busy threads. Only the first phase: the average falls
// back under for minutes after the load ends, longer than the rest of this
// shared machine's load stays put (a run here saw it climb from 1.4 to 3
// meanwhile), so whether it names none afterwards is the simulated node's
// test (TestControllersAgainstSimulatedNode), where the load is known.
func TestLoadUnderSyntheticLoad(t *testing.T) {
	stressNG := requireStressNG(t)
	now, err := readFile("/proc/loadavg", parseLoadAvg)
	if err != nil {
		t.Fatal(err)
	}
	threshold := api.RoundScalar(now.Load5 + 0.2)
	c, err := New(Config{Kind: KindLoad, Load5: threshold})
	if err != nil {
		t.Fatal(err)
	}
	syntheticLoad(t, stressNG, c, threshold, false,
		regexp.MustCompile(`^qos load: 5-minute load (\d+\.\d\d) over `+regexp.QuoteMeta(strconv.FormatFloat(threshold, 'g', -1, 64))+`$`),
		func() float64 {
			l, err := readFile("/proc/loadavg", parseLoadAvg)
			if err != nil {
				t.Fatal(err)
			}
			return l.Load5
		})
}

// syntheticLoad is the scenario both real tests run. A light revocable
// task (10% of a core) runs throughout; four heavy ones (two busy threads
// each) make the load. Phase 1 waits for corrections, each naming a heavy
// task and a reading over the threshold. Then the load ends (the test
// kills the heavy tasks left), and with untilUnder phase 2 waits for a
// round that names no task while the light one runs and the reading is
// back under. A light task named meanwhile (the rest of the machine may
// push the reading up) must come with a reading over the threshold; it is
// started anew.
func syntheticLoad(t *testing.T, stressNG string, c Controller, threshold float64, untilUnder bool, message *regexp.Regexp, reading func() float64) {
	const phaseLimit = 5 * time.Minute
	procs := map[string]*stressTask{}
	var tasks []Task
	start := func(id string, args ...string) {
		p := startStress(t, stressNG, args...)
		procs[id] = p
		tasks = append(tasks, Task{ContainerID: id, TaskID: id, Revocable: true, Throttleable: true, StartedAt: time.Now(),
			Requests: api.Resources{"cpus": 1, "mem": 64}, Used: api.Resources{"cpus": 0, "mem": 0}})
	}
	stop := func(id string) {
		procs[id].kill()
		delete(procs, id)
		tasks = slices.DeleteFunc(tasks, func(t Task) bool { return t.ContainerID == id })
	}
	// round measures the tasks' cpu since the last round, as the agent does
	// from their cgroups, asks the controller, and kills what it names.
	round := func() []Correction {
		t.Helper()
		time.Sleep(time.Second) // the round interval (-qos-interval), not a wait for an outcome
		for i := range tasks {
			tasks[i].Used["cpus"] = procs[tasks[i].ContainerID].cpus(t)
		}
		got, err := c.Corrections(time.Now(), Node{Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		for _, correction := range got {
			m := message.FindStringSubmatch(correction.Message)
			if m == nil {
				t.Fatalf("correction %+v: message does not match %s", correction, message)
			}
			if v, _ := strconv.ParseFloat(m[1], 64); v <= threshold {
				t.Fatalf("correction %+v: reading %v is not over the threshold %v", correction, v, threshold)
			}
			if procs[correction.ContainerID] == nil {
				t.Fatalf("correction %+v names no running task", correction)
			}
			stop(correction.ContainerID)
		}
		return got
	}

	start("light", "--cpu", "1", "--cpu-load", "10")
	for i := range 4 {
		start(fmt.Sprint("heavy-", i), "--cpu", "2")
	}

	deadline := time.Now().Add(phaseLimit)
	var killed []string
	for len(killed) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("under load for %v: no correction; reading %v, threshold %v", phaseLimit, reading(), threshold)
		}
		for _, correction := range round() {
			killed = append(killed, correction.ContainerID)
			t.Logf("under load: %s: %s", correction.ContainerID, correction.Message)
		}
	}

	// The load ends.
	for id := range procs {
		if id != "light" {
			stop(id)
		}
	}
	if !untilUnder {
		t.Logf("killed %v under load", killed)
		return
	}
	deadline = time.Now().Add(phaseLimit)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("load ended %v ago: still correcting or over; reading %v, threshold %v", phaseLimit, reading(), threshold)
		}
		got := round()
		for _, correction := range got {
			t.Logf("after the load: %s: %s (started anew)", correction.ContainerID, correction.Message)
			start("light", "--cpu", "1", "--cpu-load", "10")
		}
		if len(got) == 0 && procs["light"] != nil && reading() < threshold {
			break
		}
	}
	t.Logf("killed %v under load; none once it ended (reading %v, threshold %v)", killed, reading(), threshold)
}

// stressTask is a stress-ng run in its own process group.
type stressTask struct {
	cmd       *exec.Cmd
	lastTicks uint64
	lastAt    time.Time
}

func startStress(t *testing.T, stressNG string, args ...string) *stressTask {
	t.Helper()
	cmd := exec.Command(stressNG, append(args, "--timeout", "10m", "--quiet")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stress-ng: %v", err)
	}
	p := &stressTask{cmd: cmd, lastAt: time.Now()}
	t.Cleanup(p.kill)
	return p
}

func (p *stressTask) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.cmd.Wait()
}

// cpus is the cores the run used since the last call: the utime and stime
// of its process group's processes, in clock ticks of 1/100 s.
func (p *stressTask) cpus(t *testing.T) float64 {
	ticks := groupTicks(t, p.cmd.Process.Pid)
	now := time.Now()
	used := float64(ticks-min(ticks, p.lastTicks)) / 100 / now.Sub(p.lastAt).Seconds()
	p.lastTicks, p.lastAt = ticks, now
	return used
}

// groupTicks adds the cpu time of the processes in process group pgid.
func groupTicks(t *testing.T, pgid int) uint64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// The fields after the command (which may hold spaces) in parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
		if len(fields) < 13 {
			continue
		}
		if pgrp, _ := strconv.Atoi(string(fields[2])); pgrp != pgid {
			continue
		}
		utime, _ := strconv.ParseUint(string(fields[11]), 10, 64)
		stime, _ := strconv.ParseUint(string(fields[12]), 10, 64)
		sum += utime + stime
	}
	return sum
}
