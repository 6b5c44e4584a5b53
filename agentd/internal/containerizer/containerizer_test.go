package containerizer

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/cgroups/cgroupstest"
	"github.com/allot/allot/masterd/api"
)

// procCgroup is the task's cgroup in the memory (v1) or unified (v2)
// hierarchy, from /proc/<pid>/cgroup.
func procCgroup(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	unified := ""
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if slices.Contains(strings.Split(parts[1], ","), "memory") {
			return parts[2]
		}
		if parts[1] == "" {
			unified = parts[2]
		}
	}
	return unified
}

func TestLaunchRunsTheTaskInItsCgroupSandboxAndEnvironment(t *testing.T) {
	h := newHarness(t)
	spec := task("env-1", cgroups.Spec{CPUShares: 512, MemorySoftBytes: 256 * mib, MemoryLimitBytes: 512 * mib}, 256*mib, "hold", "1")
	spec.Env = []string{"GOMAXPROCS=1", "ALLOT_TEST=ok", "EMPTY="}
	c := h.launch(spec)
	// Launch returns once exec has begun (the monitor learns it when the
	// exec closes its close-on-exec fds); the kernel sets up the new
	// program's environment block a moment later.
	waitFor(t, "the task to run", func() bool {
		_, err := os.Stat(filepath.Join(c.Sandbox, "ready"))
		return err == nil
	})

	if want := "/" + h.cfg.CgroupRoot + "/env-1"; c.Cgroup != want || procCgroup(t, c.Pid) != want {
		t.Errorf("cgroup: container says %s, /proc says %s, want %s", c.Cgroup, procCgroup(t, c.Pid), want)
	}
	pids, err := h.ctz.Pids("env-1")
	if err != nil || !slices.Contains(pids, c.Pid) {
		t.Errorf("Pids = %v, %v; want them to hold the task %d", pids, err, c.Pid)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", c.Pid)); err != nil || cwd != c.Sandbox {
		t.Errorf("cwd = %q (%v), want the sandbox %q", cwd, err, c.Sandbox)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(environ), "\x00"), "\x00"); !slices.Equal(got, spec.Env) {
		t.Errorf("environment = %q, want exactly %q", got, spec.Env)
	}

	// oom_score_adj = 1000 − 1000 × 256 MiB / 1 GiB for the task from its
	// first instruction on; the monitor keeps agentd's (ours).
	if got := readInt(t, fmt.Sprintf("/proc/%d/oom_score_adj", c.Pid)); got != 750 || c.OOMScoreAdj != 750 {
		t.Errorf("task oom_score_adj = %d (container says %d), want 750", got, c.OOMScoreAdj)
	}
	if got, own := readInt(t, fmt.Sprintf("/proc/%d/oom_score_adj", c.MonitorPid)), readInt(t, "/proc/self/oom_score_adj"); got != own {
		t.Errorf("monitor oom_score_adj = %d, want agentd's own %d", got, own)
	}
	// The monitor is the task's parent, in a session of its own.
	if st, err := readProcStat(c.Pid); err != nil || st.PPid != c.MonitorPid {
		t.Errorf("task's parent = %+v (%v), want the monitor %d", st, err, c.MonitorPid)
	}
	if sid, _ := unix.Getsid(c.MonitorPid); sid != c.MonitorPid {
		t.Errorf("monitor session = %d, want its own (%d)", sid, c.MonitorPid)
	}
	if got := h.ctz.Containers(); len(got) != 1 || got[0] != c {
		t.Errorf("Containers() = %+v, want [%+v]", got, c)
	}

	if err := h.ctz.Kill("env-1", time.Second); err != nil {
		t.Fatal(err)
	}
	st := h.waitExit("env-1")
	if st.Signal != syscall.SIGTERM {
		t.Errorf("killed task: %+v, want SIGTERM", st)
	}
	if n := len(h.ctz.Containers()); n != 0 {
		t.Errorf("%d containers listed after the end", n)
	}
}

func TestTaskOutputGoesToTheSandbox(t *testing.T) {
	h := newHarness(t)
	c := h.launch(shell("out-1", "echo to-stdout; echo to-stderr >&2; pwd"))
	if st := h.waitExit("out-1"); st != (ExitStatus{MemoryPeakBytes: st.MemoryPeakBytes}) {
		t.Errorf("exit = %+v, want code 0", st)
	}
	stdout, _ := os.ReadFile(filepath.Join(c.Sandbox, "stdout"))
	stderr, _ := os.ReadFile(filepath.Join(c.Sandbox, "stderr"))
	if string(stdout) != "to-stdout\n"+c.Sandbox+"\n" || string(stderr) != "to-stderr\n" {
		t.Errorf("stdout %q, stderr %q", stdout, stderr)
	}
}

func TestExitStatus(t *testing.T) {
	h := newHarness(t)
	for name, tc := range map[string]struct {
		script string
		code   int
		signal syscall.Signal
	}{
		"exit 0":      {script: "exit 0"},
		"exit 3":      {script: "exit 3", code: 3},
		"exit 255":    {script: "exit 255", code: 255},
		"own SIGSEGV": {script: "kill -SEGV $$", signal: syscall.SIGSEGV},
		"own SIGKILL": {script: "kill -KILL $$", signal: syscall.SIGKILL},
	} {
		t.Run(name, func(t *testing.T) {
			id := "exit-" + strings.ReplaceAll(name, " ", "-")
			h.launch(shell(id, tc.script))
			st := h.waitExit(id)
			if st.ExitCode != tc.code || st.Signal != tc.signal || st.OOMKilled || st.LimitOOM || st.Lost || st.StartError != "" {
				t.Errorf("%s: %+v, want code %d signal %v", tc.script, st, tc.code, tc.signal)
			}
		})
	}
}

func TestCommandThatCannotStart(t *testing.T) {
	h := newHarness(t)
	notExecutable := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		argv []string
		want string
	}{
		"no such file":       {argv: []string{"/nonexistent/program"}, want: "no such file"},
		"not in PATH":        {argv: []string{"no-such-program-anywhere"}, want: "not found"},
		"not executable":     {argv: []string{notExecutable}, want: "permission denied"},
		"a directory":        {argv: []string{"/etc"}, want: "permission denied"},
		"relative, no file":  {argv: []string{"./missing"}, want: "no such file"},
		"empty program name": {argv: []string{""}, want: "no command"},
	} {
		t.Run(name, func(t *testing.T) {
			id := "nostart-" + strings.ReplaceAll(name, " ", "-")
			id = strings.ReplaceAll(id, ",", "")
			_, err := h.ctz.Launch(LaunchSpec{ContainerID: id, Argv: tc.argv, Env: []string{"PATH=/usr/bin:/bin"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Launch(%q) = %v, want an error with %q", tc.argv, err, tc.want)
			}
			for _, dir := range []string{h.ctz.recordsDir(id), h.ctz.sandboxDir(id)} {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left behind (%v)", dir, err)
				}
			}
			if dirs := h.cgroupDirs(); len(dirs) > 0 {
				t.Errorf("cgroups left: %v", dirs)
			}
			if mons := h.liveMonitors(); len(mons) > 0 {
				t.Errorf("monitors left: %v", mons)
			}
			if n := len(h.exitsOf(id)); n != 0 {
				t.Errorf("OnExit called for a container that never ran")
			}
			// The id is free again.
			h.launch(shell(id, "exit 0"))
			h.waitExit(id)
		})
	}
}

func TestBadLaunchSpecsChangeNothing(t *testing.T) {
	h := newHarness(t)
	for name, spec := range map[string]LaunchSpec{
		"id with a slash":       {ContainerID: "../escape", Argv: []string{"/bin/true"}},
		"id dot dot":            {ContainerID: "..", Argv: []string{"/bin/true"}},
		"absolute id":           {ContainerID: "/etc", Argv: []string{"/bin/true"}},
		"NUL in id":             {ContainerID: "a\x00b", Argv: []string{"/bin/true"}},
		"NUL in an argument":    {ContainerID: "nul-arg", Argv: []string{"/bin/echo", "a\x00b"}},
		"NUL in environment":    {ContainerID: "nul-env", Argv: []string{"/bin/true"}, Env: []string{"A=b\x00c"}},
		"environment without =": {ContainerID: "bad-env", Argv: []string{"/bin/true"}, Env: []string{"JUSTNAME"}},
		"group escapes":         {ContainerID: "grp", Group: "../x", Argv: []string{"/bin/true"}},
		"unknown group":         {ContainerID: "grp2", Group: "nogroup", Argv: []string{"/bin/true"}},
		"no command":            {ContainerID: "noargv"},
		"too long id":           {ContainerID: strings.Repeat("a", 300), Argv: []string{"/bin/true"}},
		"bad cgroup spec":       {ContainerID: "badspec", Argv: []string{"/bin/true"}, Resources: cgroups.Spec{CPUShares: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := h.ctz.Launch(spec); err == nil {
				t.Fatalf("Launch accepted %+v", spec)
			}
		})
	}
	for _, dir := range []string{sandboxesDir, recordsDir} {
		if entries, _ := os.ReadDir(filepath.Join(h.workDir, dir)); len(entries) > 0 {
			t.Errorf("%s holds %v after refused launches", dir, entries)
		}
	}
}

func TestMemoryHogIsKilledAtItsOwnLimit(t *testing.T) {
	h := newHarness(t)
	// A process outside the task's cgroup, which the OOM killer must spare.
	sentinel := exec.Command("sleep", "1000")
	if err := sentinel.Start(); err != nil {
		t.Fatal(err)
	}
	sentinelDone := make(chan struct{})
	go func() { _ = sentinel.Wait(); close(sentinelDone) }()
	defer func() { _ = sentinel.Process.Kill(); <-sentinelDone }()

	limit := cgroups.Spec{CPUShares: 512, MemorySoftBytes: 32 * mib, MemoryLimitBytes: 64 * mib}
	for i := range 20 {
		id := fmt.Sprintf("hog-%d", i)
		h.launch(task(id, limit, 32*mib, "hog"))
		st := h.waitExit(id)
		if !st.OOMKilled || !st.LimitOOM || st.Signal != syscall.SIGKILL {
			t.Errorf("run %d: %+v, want OOMKilled and LimitOOM by SIGKILL", i, st)
		}
		// The kernel's charges may pass the limit by a few pages (batched
		// and must-succeed kernel charges).
		if st.MemoryPeakBytes < 48*mib || st.MemoryPeakBytes > 65*mib {
			t.Errorf("run %d: peak %d bytes, want close to the 64 MiB limit", i, st.MemoryPeakBytes)
		}
	}
	select {
	case <-sentinelDone:
		t.Error("the sentinel process outside the task's cgroup was killed")
	default:
	}
}

func TestNodePressureKillsTheTaskAboveItsRequest(t *testing.T) {
	// The agent's root holds 160 MiB: A asks for 32 MiB with no limit of
	// its own and grows; B asks for 64 MiB and holds 48. The root runs
	// out; the OOM killer takes A (above its request, higher
	// oom_score_adj), not B.
	h := newHarness(t, withRoot(cgroups.Spec{CPUShares: 2048, MemoryLimitBytes: 160 * mib}), withNodeMemory(160*mib))
	b := h.launch(task("b-holder", cgroups.SpecFor(api.Resources{"cpus": 0.5, "mem": 64}, nil), 64*mib, "hold", "48"))
	waitFor(t, "B to hold its memory", func() bool {
		_, err := os.Stat(filepath.Join(b.Sandbox, "ready"))
		return err == nil
	})
	a := h.launch(task("a-grower", cgroups.Spec{CPUShares: 512, MemorySoftBytes: 32 * mib, MemoryLimitBytes: cgroups.Unlimited}, 32*mib, "hog"))
	if a.OOMScoreAdj != 800 || b.OOMScoreAdj != 600 {
		t.Errorf("oom_score_adj A %d B %d, want 800 and 600", a.OOMScoreAdj, b.OOMScoreAdj)
	}
	st := h.waitExit("a-grower")
	if !st.OOMKilled || st.LimitOOM {
		t.Errorf("A: %+v, want OOMKilled without LimitOOM (node pressure)", st)
	}
	if st.MemoryPeakBytes <= 32*mib {
		t.Errorf("A: peak %d bytes, want above its 32 MiB request", st.MemoryPeakBytes)
	}
	if got := h.exitsOf("b-holder"); len(got) != 0 || !processAlive(b.Pid) {
		t.Fatalf("B, within its request, ended: %+v", got)
	}
	if err := h.ctz.Kill("b-holder", 0); err != nil {
		t.Fatal(err)
	}
	if st := h.waitExit("b-holder"); st.OOMKilled {
		t.Errorf("B: %+v, want no OOM kill", st)
	}
}

func TestCPULimitIsEnforced(t *testing.T) {
	// The one measured bound the issue asks for: a task that wants 2
	// cores, limited to 0.5, gets 0.5 ± 0.05 cores over 5 s, from its
	// cgroup's own accounting.
	h := newHarness(t)
	spec := cgroups.SpecFor(api.Resources{"cpus": 0.5, "mem": 64}, api.Limits{"cpus": {Value: 0.5}})
	if spec.CPUQuotaMicros != 50000 {
		t.Fatalf("SpecFor gave quota %d µs, want 50000", spec.CPUQuotaMicros)
	}
	// Our root's cpu shares give it the machine's attention among the
	// host's other cgroups; the quota alone caps the task.
	h.launch(task("spin", spec, 64*mib, "spin", "2"))
	waitFor(t, "the task to use cpu", func() bool {
		st, err := h.ctz.Stats("spin")
		return err == nil && st.CPUUsageNanos > 0
	})
	// The quota is a hard cap, so more than 0.55 cores fails at once. Less
	// than 0.45 can also mean the shared machine was busy: a window that
	// falls short is measured again, up to three.
	var cores float64
	for window := 1; window <= 3; window++ {
		before, err := h.ctz.Stats("spin")
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		time.Sleep(5 * time.Second)
		after, err := h.ctz.Stats("spin")
		wall := time.Since(begin)
		if err != nil {
			t.Fatal(err)
		}
		cores = float64(after.CPUUsageNanos-before.CPUUsageNanos) / float64(wall.Nanoseconds())
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("0.5-cpu limit, window %d: %.3f cores over %v (load %s)", window, cores, wall, strings.TrimSpace(string(load)))
		if cores > 0.55 {
			t.Fatalf("the task used %.3f cores, more than its 0.5 limit allows (0.5 ± 0.05)", cores)
		}
		if cores >= 0.45 {
			break
		}
	}
	if cores < 0.45 {
		t.Errorf("the task used %.3f cores in each of 3 windows, want 0.5 ± 0.05", cores)
	}
	if err := h.ctz.Kill("spin", 0); err != nil {
		t.Fatal(err)
	}
	h.waitExit("spin")
}

func TestKillOfATaskIgnoringSIGTERM(t *testing.T) {
	h := newHarness(t)
	c := h.launch(shell("stubborn", `trap "" TERM; touch trapped; while :; do sleep 1; done`))
	waitFor(t, "the trap", func() bool {
		_, err := os.Stat(filepath.Join(c.Sandbox, "trapped"))
		return err == nil
	})
	const grace = 2 * time.Second
	begin := time.Now()
	if err := h.ctz.Kill("stubborn", grace); err != nil {
		t.Fatal(err)
	}
	st := h.waitExit("stubborn")
	// A measured bound the issue asks for: kill ends within grace + 1 s.
	took := time.Since(begin)
	t.Logf("kill with %v grace took %v", grace, took)
	if took > grace+time.Second {
		t.Errorf("kill took %v, want at most grace + 1 s", took)
	}
	if took < grace {
		t.Errorf("kill took %v: SIGKILL came before the grace period of %v", took, grace)
	}
	if st.Signal != syscall.SIGKILL {
		t.Errorf("exit = %+v, want SIGKILL", st)
	}
	if err := h.ctz.Kill("stubborn", grace); !errors.Is(err, ErrNotFound) {
		t.Errorf("Kill after the end = %v, want ErrNotFound", err)
	}
}

func TestKillEndsEveryProcessOfTheCgroup(t *testing.T) {
	h := newHarness(t)
	// Children in other process groups and sessions (a daemonizing
	// child) are in the cgroup all the same.
	c := h.launch(shell("family", `setsid sleep 1000 & sleep 1000 & touch started; wait`))
	waitFor(t, "the children", func() bool {
		pids, _ := h.ctz.Pids("family")
		return len(pids) >= 3
	})
	pids, _ := h.ctz.Pids("family")
	if err := h.ctz.Kill("family", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	h.waitExit("family")
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("process %d of the container outlived it", pid)
		}
	}
	_ = c
}

func TestTaskGroups(t *testing.T) {
	h := newHarness(t)
	groupSpec := cgroups.Spec{CPUShares: 1024, MemorySoftBytes: 64 * mib, MemoryLimitBytes: 96 * mib}
	if err := h.ctz.CreateGroup("exec-1", groupSpec); err != nil {
		t.Fatal(err)
	}
	if err := h.ctz.CreateGroup("exec-1", groupSpec); err != nil {
		t.Fatalf("CreateGroup again (a new spec): %v", err)
	}
	nested := shell("nested-1", "sleep 1000")
	nested.Group, nested.OwnCgroup = "exec-1", true
	n := h.launch(nested)
	shared := shell("shared-1", "sleep 1000")
	shared.Group = "exec-1"
	s := h.launch(shared)

	root := "/" + h.cfg.CgroupRoot
	if got := procCgroup(t, n.Pid); got != root+"/exec-1/nested-1" || n.Cgroup != got {
		t.Errorf("nested task in %s (says %s), want %s/exec-1/nested-1", got, n.Cgroup, root)
	}
	if got := procCgroup(t, s.Pid); got != root+"/exec-1" || s.Cgroup != got {
		t.Errorf("shared task in %s (says %s), want %s/exec-1", got, s.Cgroup, root)
	}

	// Killing the shared task leaves its sibling alone.
	if err := h.ctz.Kill("shared-1", time.Second); err != nil {
		t.Fatal(err)
	}
	if st := h.waitExit("shared-1"); st.Signal != syscall.SIGTERM {
		t.Errorf("shared task: %+v, want SIGTERM", st)
	}
	if !processAlive(n.Pid) {
		t.Fatal("killing the shared task killed its sibling")
	}

	// A shared task that hogs memory hits the group's limit: its own
	// limit as far as it knows.
	hog := task("shared-hog", cgroups.Spec{}, 16*mib, "hog")
	hog.Group = "exec-1"
	h.launch(hog)
	if st := h.waitExit("shared-hog"); !st.OOMKilled || !st.LimitOOM {
		t.Errorf("shared hog: %+v, want OOMKilled at the group's limit", st)
	}

	if err := h.ctz.DestroyGroup("exec-1"); err != nil {
		t.Fatal(err)
	}
	if st := h.waitExit("nested-1"); st.Signal != syscall.SIGKILL {
		t.Errorf("nested task after DestroyGroup: %+v, want SIGKILL", st)
	}
	if err := h.ctz.DestroyGroup("exec-1"); err != nil {
		t.Errorf("DestroyGroup of a gone group: %v", err)
	}
}

func TestRecoverAfterAgentdKill9(t *testing.T) {
	h := newHarness(t)
	// Monitors orphaned by the kill come to us, as they would to init, and
	// the recovering containerizer reaps them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

	waitForGo := `while [ ! -e go ]; do sleep 0.02; done; exit $(cat go)`
	agentd := exec.Command(testBinary(t), agentdArg, h.workDir, h.cfg.CgroupRoot,
		"stays-1="+waitForGo, "stays-2="+waitForGo, "ends-meanwhile="+waitForGo)
	out, err := agentd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	agentd.Stderr = os.Stderr
	if err := agentd.Start(); err != nil {
		t.Fatal(err)
	}
	launched := map[string]Container{}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "ready" {
		var c Container
		if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
			t.Fatalf("test agentd: %s", lines.Text())
		}
		launched[c.ID] = c
	}
	if len(launched) != 3 {
		t.Fatalf("test agentd launched %d containers", len(launched))
	}
	if err := agentd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = agentd.Wait()
	for id, c := range launched {
		if !processAlive(c.MonitorPid) || !processAlive(c.Pid) {
			t.Fatalf("%s: monitor %d or task %d died with agentd", id, c.MonitorPid, c.Pid)
		}
	}

	// One task ends while agentd is down; its monitor records it.
	release := func(id string, code int) { releaseTask(t, launched[id].Sandbox, code) }
	release("ends-meanwhile", 7)
	waitFor(t, "the monitor of the ended task to exit", func() bool { return !processAlive(launched["ends-meanwhile"].MonitorPid) })

	h.restart()
	if err := h.ctz.Recover([]string{"stays-1", "stays-2", "ends-meanwhile"}, nil); err != nil {
		t.Fatal(err)
	}
	if st := h.waitExit("ends-meanwhile"); st.ExitCode != 7 || st.Lost {
		t.Errorf("task that ended while agentd was down: %+v, want exit code 7", st)
	}
	live := h.ctz.Containers()
	if len(live) != 2 {
		t.Fatalf("recovered %+v, want stays-1 and stays-2", live)
	}
	for _, c := range live {
		want := launched[c.ID]
		if c.Pid != want.Pid || c.MonitorPid != want.MonitorPid || c.Cgroup != want.Cgroup || c.OOMScoreAdj != want.OOMScoreAdj {
			t.Errorf("recovered %+v, launched %+v", c, want)
		}
	}
	release("stays-1", 0)
	release("stays-2", 5)
	if st := h.waitExit("stays-1"); st.ExitCode != 0 || st.Lost {
		t.Errorf("stays-1: %+v, want exit code 0", st)
	}
	if st := h.waitExit("stays-2"); st.ExitCode != 5 || st.Lost {
		t.Errorf("stays-2: %+v, want exit code 5", st)
	}
	h.assertClean()
	for _, c := range launched {
		if st, err := readProcStat(c.MonitorPid); err == nil && st.PPid == os.Getpid() && st.State == 'Z' {
			t.Errorf("monitor %d left as a zombie", c.MonitorPid)
		}
	}
	// The dead agentd's spare monitors exited when their stdin closed;
	// as their init would, we collect them.
	waitFor(t, "the dead agentd's spare monitors to exit", func() bool {
		for _, pid := range childrenOf(os.Getpid()) {
			if st, err := readProcStat(pid); err == nil && st.State == 'Z' {
				_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
			}
		}
		return len(ourMonitorChildren(h.cfg.MonitorCommand)) <= spareMonitors // the harness's own
	})
}

// releaseTask lets a task waiting for a "go" file in its sandbox exit with
// code. The file is written aside and renamed: a task that saw "go" between
// its creation and its content would read nothing and exit 0.
func releaseTask(t *testing.T, sandbox string, code int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(sandbox, "go.tmp"), []byte(strconv.Itoa(code)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(sandbox, "go.tmp"), filepath.Join(sandbox, "go")); err != nil {
		t.Fatal(err)
	}
}

func TestRecoverWithDamagedRecords(t *testing.T) {
	h := newHarness(t)
	waitForGo := `while [ ! -e go ]; do sleep 0.02; done; exit $(cat go)`
	ids := []string{"bad-launch-record", "bad-monitor-record", "bad-exit-record", "missing", "stray", "ended-stray"}
	launched := map[string]Container{}
	for _, id := range ids[:3] {
		launched[id] = h.launch(shell(id, waitForGo))
	}
	launched["stray"] = h.launch(shell("stray", "sleep 1000"))
	launched["ended-stray"] = h.launch(shell("ended-stray", "exit 0"))
	h.waitExit("ended-stray")
	release := func(id string, code int) { releaseTask(t, launched[id].Sandbox, code) }
	if err := h.ctz.Close(); err != nil { // agentd stops; everything runs on
		t.Fatal(err)
	}

	damage := func(id, record string) {
		path := filepath.Join(h.ctz.recordsDir(id), record)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	damage("bad-launch-record", containerRecord)
	damage("bad-monitor-record", monitorRecord)
	// The third ends while agentd is down, and its exit record is torn.
	release("bad-exit-record", 4)
	waitFor(t, "the third task's monitor to exit", func() bool { return !processAlive(launched["bad-exit-record"].MonitorPid) })
	damage("bad-exit-record", exitRecord)

	logs := &syncBuffer{}
	h.cfg.Logger = hclogTo(logs)
	h.ctz = h.newContainerizer()
	if err := h.ctz.Recover(ids[:4], nil); err != nil {
		t.Fatal(err)
	}
	if st := h.waitExit("bad-exit-record"); !st.Lost {
		t.Errorf("torn exit record: %+v, want Lost", st)
	}
	if st := h.waitExit("missing"); !st.Lost {
		t.Errorf("container without any record: %+v, want Lost", st)
	}
	// The stray the agent no longer knows is killed; its monitor records
	// the end, and no OnExit comes for it.
	waitFor(t, "the stray to be killed", func() bool { return !processAlive(launched["stray"].Pid) })
	if got := h.exitsOf("stray"); len(got) != 0 {
		t.Errorf("OnExit for a stray: %+v", got)
	}
	live := map[string]Container{}
	for _, c := range h.ctz.Containers() {
		live[c.ID] = c
	}
	for _, id := range ids[:2] {
		if live[id].MonitorPid != launched[id].MonitorPid || live[id].Pid != launched[id].Pid || live[id].Cgroup != launched[id].Cgroup {
			t.Errorf("%s: recovered %+v, launched %+v", id, live[id], launched[id])
		}
	}
	for _, want := range []string{"damaged record", "found the monitor by its command line"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line with %q in:\n%s", want, logs)
		}
	}
	release("bad-launch-record", 2)
	release("bad-monitor-record", 3)
	if st := h.waitExit("bad-launch-record"); st.ExitCode != 2 {
		t.Errorf("bad-launch-record: %+v, want exit code 2", st)
	}
	if st := h.waitExit("bad-monitor-record"); st.ExitCode != 3 {
		t.Errorf("bad-monitor-record: %+v, want exit code 3", st)
	}
	h.assertClean()
}

func TestGCSandboxes(t *testing.T) {
	h := newHarness(t)
	if err := h.ctz.CreateGroup("gc-group", cgroups.Spec{}); err != nil {
		t.Fatal(err)
	}
	ended := h.launch(shell("gc-ended", "exit 0"))
	h.waitExit("gc-ended")
	running := h.launch(shell("gc-running", "sleep 1000"))

	if err := h.ctz.GCSandboxes(time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ended.Sandbox); err != nil {
		t.Errorf("GC removed a sandbox younger than its max age: %v", err)
	}
	if err := h.ctz.GCSandboxes(0); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{ended.Sandbox, h.ctz.recordsDir("gc-ended")} {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("GC kept %s of an ended container (%v)", dir, err)
		}
	}
	for _, dir := range []string{running.Sandbox, h.ctz.recordsDir("gc-running"), h.ctz.recordsDir("gc-group")} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("GC removed %s of a live container or group: %v", dir, err)
		}
	}
	// Nor does a containerizer that has not recovered yet collect a
	// container whose monitor lives.
	h.restart()
	if err := h.ctz.GCSandboxes(0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(running.Sandbox); err != nil {
		t.Errorf("GC before recovery removed a running container's sandbox: %v", err)
	}
	if err := h.ctz.Recover([]string{"gc-running"}, []string{"gc-group"}); err != nil {
		t.Fatal(err)
	}
	if err := h.ctz.Kill("gc-running", 0); err != nil {
		t.Fatal(err)
	}
	h.waitExit("gc-running")
	if err := h.ctz.DestroyGroup("gc-group"); err != nil {
		t.Fatal(err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	mgr := cgroupstest.Manager(t)
	good := Config{WorkDir: t.TempDir(), CgroupRoot: "allot-ct-bad", Cgroups: mgr, NodeMemoryBytes: 1, MonitorCommand: []string{"x"}}
	for name, mutate := range map[string]func(*Config){
		"root escapes":                       func(c *Config) { c.CgroupRoot = "../x" },
		"absolute root":                      func(c *Config) { c.CgroupRoot = "/allot" },
		"empty root":                         func(c *Config) { c.CgroupRoot = "" },
		"no node memory":                     func(c *Config) { c.NodeMemoryBytes = 0 },
		"no monitor":                         func(c *Config) { c.MonitorCommand = nil },
		"no work dir":                        func(c *Config) { c.WorkDir = "" },
		"no cgroup manager":                  func(c *Config) { c.Cgroups = nil },
		"negative root memory high fraction": func(c *Config) { c.RootMemoryHighFraction = -0.1 },
		"root memory high fraction above 1":  func(c *Config) { c.RootMemoryHighFraction = 1.5 },
		"root memory high fraction NaN":      func(c *Config) { c.RootMemoryHighFraction = math.NaN() },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			if _, err := New(cfg); err == nil {
				t.Errorf("New accepted %+v", cfg)
			}
		})
	}
}
