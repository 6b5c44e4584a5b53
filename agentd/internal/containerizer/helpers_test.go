package containerizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/cgroups/cgroupstest"
)

// The test binary plays every part: agentd's monitor (as agentd re-executes
// itself), tasks with exact memory and cpu behaviour, and a whole agentd
// to kill -9.
const (
	monitorArg = "containerizer-test-monitor"
	taskArg    = "containerizer-test-task"
	agentdArg  = "containerizer-test-agentd"
)

func TestMain(m *testing.M) {
	// Built with -race, every monitor would sleep a second in the race
	// runtime's exit (ThreadSanitizer's atexit_sleep_ms) before its end
	// shows: a delay of the test build, not of agentd's.
	if _, set := os.LookupEnv("GORACE"); !set {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case monitorArg:
			RunMonitor(os.Args[2:])
		case taskArg:
			runTestTask(os.Args[2:])
		case agentdArg:
			runTestAgentd(os.Args[2:])
		}
	}
	os.Exit(m.Run())
}

const mib = 1 << 20

// runTestTask is a task's program:
//
//	hog           maps and touches memory 1 MiB at a time, without end
//	hold <MiB>    maps and touches that much, writes ./ready, sleeps
//	spin <n>      keeps n threads busy
//	signalled <base MiB> <step MiB>
//	              holds base, writes ./ready; on SIGUSR1 touches step
//	              MiB more, on SIGUSR2 gives back the last step, on
//	              SIGHUP starts a child (sleep 1000)
//	readfile <path> <MiB>
//	              reads path through the page cache (evicted first, so
//	              that the pages are charged to the task), holds MiB,
//	              writes ./ready, sleeps
func runTestTask(args []string) {
	touch := func(n int) []byte {
		b, err := unix.Mmap(-1, 0, n*mib, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mmap:", err)
			os.Exit(3)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		return b
	}
	switch args[0] {
	case "signalled":
		base, _ := strconv.Atoi(args[1])
		step, _ := strconv.Atoi(args[2])
		signals := make(chan os.Signal, 16)
		signal.Notify(signals, unix.SIGUSR1, unix.SIGUSR2, unix.SIGHUP)
		if base > 0 {
			touch(base)
		}
		if err := os.WriteFile("ready", nil, 0o644); err != nil {
			os.Exit(3)
		}
		var steps [][]byte
		for sig := range signals {
			switch sig {
			case unix.SIGUSR1:
				steps = append(steps, touch(step))
			case unix.SIGUSR2:
				if n := len(steps); n > 0 {
					_ = unix.Munmap(steps[n-1])
					steps = steps[:n-1]
				}
			case unix.SIGHUP:
				if err := exec.Command("/bin/sleep", "1000").Start(); err != nil {
					os.Exit(3)
				}
			}
		}
	case "readfile":
		f, err := os.Open(args[1])
		if err != nil {
			os.Exit(3)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			os.Exit(3)
		}
		buf := make([]byte, mib)
		for {
			if _, err := f.Read(buf); err != nil {
				break
			}
		}
		n, _ := strconv.Atoi(args[2])
		touch(n)
		if err := os.WriteFile("ready", nil, 0o644); err != nil {
			os.Exit(3)
		}
		select {}
	case "hog":
		for {
			touch(1)
		}
	case "hold":
		n, _ := strconv.Atoi(args[1])
		touch(n)
		if err := os.WriteFile("ready", nil, 0o644); err != nil {
			os.Exit(3)
		}
		select {}
	case "spin":
		n, _ := strconv.Atoi(args[1])
		for range n {
			go func() {
				for {
				}
			}()
		}
		select {}
	}
	os.Exit(2)
}

var testRoots atomic.Int64

// harness is a Containerizer on real cgroups under a root cgroup of its
// own, with its OnExit calls collected.
type harness struct {
	t       testing.TB
	mgr     cgroups.Manager
	cfg     Config
	ctz     *Containerizer
	rootCg  cgroups.Cgroup
	workDir string

	mu    sync.Mutex
	exits map[string][]ExitStatus
	cond  *sync.Cond
}

type harnessOption func(*Config)

func withRoot(spec cgroups.Spec) harnessOption { return func(c *Config) { c.Root = spec } }
func withNodeMemory(b int64) harnessOption     { return func(c *Config) { c.NodeMemoryBytes = b } }

// newHarness creates the test's root cgroup (/allot-ct-<pid>-<n>) and work
// dir; at the end it checks that nothing is left under the root (no cgroup,
// no process, no monitor) and removes the root whatever happened.
func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	mgr := cgroupstest.Manager(t)
	h := &harness{t: t, mgr: mgr, workDir: t.TempDir(), exits: map[string][]ExitStatus{}}
	h.cond = sync.NewCond(&h.mu)
	h.cfg = Config{
		WorkDir:         h.workDir,
		CgroupRoot:      fmt.Sprintf("allot-ct-%d-%d", os.Getpid(), testRoots.Add(1)),
		Cgroups:         mgr,
		Root:            cgroups.Spec{CPUShares: 2048, MemoryLimitBytes: 1 << 30},
		NodeMemoryBytes: 1 << 30,
		MonitorCommand:  []string{testBinary(t), monitorArg},
		OnExit:          h.onExit,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "containerizer", Output: testLogWriter{t}, Level: hclog.Debug}),
	}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.ctz = h.newContainerizer()
	var err error
	if h.rootCg, err = mgr.Load("/" + h.cfg.CgroupRoot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.cleanup)
	return h
}

// restart is agentd's restart, minus the process: the containerizer stops
// watching (its monitors and tasks live on), and a new one takes over.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.ctz.Close(); err != nil {
		h.t.Error(err)
	}
	h.ctz = h.newContainerizer()
}

func (h *harness) newContainerizer() *Containerizer {
	h.t.Helper()
	ctz, err := New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return ctz
}

func testBinary(t testing.TB) string {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}

// hclogTo is a debug logger writing to w (its writes are serialized by
// hclog).
func hclogTo(w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "containerizer", Output: w, Level: hclog.Debug})
}

// syncBuffer collects log output that the test reads while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (h *harness) onExit(id string, st ExitStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.exits[id] = append(h.exits[id], st)
	h.cond.Broadcast()
}

// waitExit waits for the container's OnExit, and checks that it came once.
func (h *harness) waitExit(id string) ExitStatus {
	h.t.Helper()
	timer := time.AfterFunc(2*time.Minute, func() {
		h.mu.Lock()
		h.exits["timeout:"+id] = nil
		h.cond.Broadcast()
		h.mu.Unlock()
	})
	defer timer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.exits[id]) == 0 {
		if _, late := h.exits["timeout:"+id]; late {
			h.t.Fatalf("container %s: no OnExit after 2 minutes", id)
		}
		h.cond.Wait()
	}
	if n := len(h.exits[id]); n != 1 {
		h.t.Fatalf("container %s: OnExit called %d times: %+v", id, n, h.exits[id])
	}
	return h.exits[id][0]
}

func (h *harness) exitsOf(id string) []ExitStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.exits[id])
}

func (h *harness) launch(spec LaunchSpec) Container {
	h.t.Helper()
	c, err := h.ctz.Launch(spec)
	if err != nil {
		h.t.Fatalf("launch %s: %v", spec.ContainerID, err)
	}
	return c
}

// task is a LaunchSpec running the test binary as the task's program.
func task(id string, resources cgroups.Spec, memRequest int64, args ...string) LaunchSpec {
	self, _ := os.Executable()
	return LaunchSpec{
		ContainerID:        id,
		Resources:          resources,
		MemoryRequestBytes: memRequest,
		Argv:               append([]string{self, taskArg}, args...),
		Env:                []string{"GOMAXPROCS=2"},
	}
}

// shell is a LaunchSpec running a /bin/sh command.
func shell(id, script string) LaunchSpec {
	return LaunchSpec{
		ContainerID:        id,
		Resources:          cgroups.Spec{CPUShares: 256, MemorySoftBytes: 32 * mib, MemoryLimitBytes: 64 * mib},
		MemoryRequestBytes: 32 * mib,
		Argv:               []string{"/bin/sh", "-c", script},
		Env:                []string{"PATH=/usr/bin:/bin"},
	}
}

// cgroupDirs lists the cgroup directories below the test's root in every
// mounted hierarchy (v1 mounts under /sys/fs/cgroup/<controller>, v2 at
// /sys/fs/cgroup).
func (h *harness) cgroupDirs() []string {
	var dirs []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/" + h.cfg.CgroupRoot + "/*", "/sys/fs/cgroup/" + h.cfg.CgroupRoot + "/*"} {
		matches, _ := filepath.Glob(pattern)
		for _, m := range matches {
			if fi, err := os.Stat(m); err == nil && fi.IsDir() {
				dirs = append(dirs, m)
			}
		}
	}
	return dirs
}

// liveMonitors lists monitors of this harness's containers that run.
func (h *harness) liveMonitors() map[string]monitorProc {
	all, err := findMonitors(h.cfg.MonitorCommand)
	if err != nil {
		h.t.Fatal(err)
	}
	mine := map[string]monitorProc{}
	for dir, m := range all {
		if strings.HasPrefix(dir, h.workDir+"/") {
			mine[dir] = m
		}
	}
	return mine
}

// assertClean fails the test when a cgroup, process or monitor is left.
func (h *harness) assertClean() {
	h.t.Helper()
	if dirs := h.cgroupDirs(); len(dirs) > 0 {
		h.t.Errorf("cgroups left under the root: %v", dirs)
	}
	if pids, err := h.rootCg.Pids(); err != nil || len(pids) > 0 {
		h.t.Errorf("processes left under the root: %v (%v)", pids, err)
	}
	if mons := h.liveMonitors(); len(mons) > 0 {
		h.t.Errorf("monitors left: %v", mons)
	}
}

// ourMonitorChildren lists live monitor processes that are children of the
// test process: spares are, until they exit.
func ourMonitorChildren(monitorCommand []string) []int {
	var pids []int
	for _, pid := range childrenOf(os.Getpid()) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args, _ := parseCmdline(f)
		f.Close()
		if isMonitorCommand(args, monitorCommand) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (h *harness) cleanup() {
	if err := h.ctz.Close(); err != nil {
		h.t.Error(err)
	}
	if !h.t.Failed() {
		// Everything should have ended by now; a monitor may still be
		// writing its record for a container the test did not wait for.
		waitFor(h.t, "containers to be gone", func() bool {
			return len(h.cgroupDirs()) == 0 && len(h.liveMonitors()) == 0
		})
		h.assertClean()
		// Close ended the spares too.
		if spares := ourMonitorChildren(h.cfg.MonitorCommand); len(spares) > 0 {
			h.t.Errorf("monitor processes left after Close (spares?): %v", spares)
		}
	}
	// Whatever happened, nothing stays on the host.
	_ = h.rootCg.KillAll()
	for _, m := range h.liveMonitors() {
		_ = unix.Kill(m.Pid, unix.SIGKILL)
	}
	for _, dir := range h.cgroupDirs() {
		name := filepath.Base(dir)
		sub, _ := filepath.Glob(dir + "/*")
		for _, s := range sub {
			if fi, err := os.Stat(s); err == nil && fi.IsDir() {
				if cg, err := h.mgr.Load("/" + h.cfg.CgroupRoot + "/" + name + "/" + filepath.Base(s)); err == nil {
					_ = cg.Delete()
				}
			}
		}
		if cg, err := h.mgr.Load("/" + h.cfg.CgroupRoot + "/" + name); err == nil {
			_ = cg.Delete()
		}
	}
	if err := h.rootCg.Delete(); err != nil {
		h.t.Errorf("remove the test's root cgroup: %v", err)
	}
}

// waitFor waits, without a deadline of its own beyond a generous bound
// that only catches hangs, until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, 100*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 2 minutes for %s", what)
		}
		time.Sleep(pause)
	}
}

func readInt(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return n
}

// processAlive reports whether pid runs (exists and is not a zombie).
func processAlive(pid int) bool {
	st, err := readProcStat(pid)
	return err == nil && st.State != 'Z'
}

// runTestAgentd is an agentd that launches containers and is then killed
// with SIGKILL by the test: args are the work dir, the cgroup root, then
// one "id=shell script" per container. It prints each launched Container
// as a JSON line, then "ready", and waits to die.
func runTestAgentd(args []string) {
	mgr, err := newManager()
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	self, _ := os.Executable()
	ctz, err := New(Config{
		WorkDir: args[0], CgroupRoot: args[1], Cgroups: mgr,
		Root:            cgroups.Spec{CPUShares: 2048, MemoryLimitBytes: 1 << 30},
		NodeMemoryBytes: 1 << 30, MonitorCommand: []string{self, monitorArg},
	})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for _, a := range args[2:] {
		id, script, _ := strings.Cut(a, "=")
		c, err := ctz.Launch(shell(id, script))
		if err != nil {
			fmt.Fprintln(out, "error", err)
			out.Flush()
			os.Exit(1)
		}
		b, _ := json.Marshal(c)
		fmt.Fprintln(out, string(b))
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	select {}
}
