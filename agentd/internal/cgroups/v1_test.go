//go:build linux

package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"golang.org/x/sys/unix"

	"github.com/allot/allot/masterd/api"
)

// The test binary doubles as the processes the tests put in cgroups: with
// helperEnv set it runs runHelper instead of the tests.
const helperEnv = "ALLOT_CGROUPS_V1_TEST_HELPER"

func init() {
	if args := os.Getenv(helperEnv); args != "" {
		os.Exit(runHelper(strings.Fields(args)))
	}
}

// runHelper:
//
//	hold <MiB>                touch MiB of memory, print "ready", sleep
//	grow                      touch memory 1 MiB at a time until killed
//	readfile <path> <MiB>     read path through the page cache (evicted
//	                          first, so the pages are charged to this
//	                          cgroup), then hold MiB
//	steps <MiB>               print "ready", then for each byte on stdin:
//	                          '+' touches MiB more and prints how many
//	                          nanoseconds that took, '-' gives back the
//	                          last MiB touched and prints 0
//
// Memory comes from mmap, outside the Go heap, so that what a helper holds
// is what it asked for plus a small runtime, also in a -race build (whose
// shadow memory would multiply a heap).
func runHelper(args []string) int {
	touch := func(mib int) {
		for range mib {
			b, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
		}
	}
	switch args[0] {
	case "hold":
		mib, _ := strconv.Atoi(args[1])
		touch(mib)
	case "grow":
		for {
			touch(1)
		}
	case "readfile":
		f, err := os.Open(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		buf := make([]byte, 1<<20)
		for {
			if _, err := f.Read(buf); err != nil {
				break
			}
		}
		mib, _ := strconv.Atoi(args[2])
		touch(mib)
	case "steps":
		mib, _ := strconv.Atoi(args[1])
		fmt.Println("ready")
		var held [][]byte
		in := bufio.NewReader(os.Stdin)
		for {
			cmd, err := in.ReadByte()
			if err != nil {
				return 0
			}
			switch cmd {
			case '+':
				start := time.Now()
				b, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 2
				}
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1
				}
				held = append(held, b)
				fmt.Println(time.Since(start).Nanoseconds())
			case '-':
				if n := len(held); n > 0 {
					_ = unix.Munmap(held[n-1])
					held = held[:n-1]
				}
				fmt.Println(0)
			}
		}
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", args)
		return 2
	}
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
	}
}

// testCgroupPath is a path no other test (or test run) uses.
func testCgroupPath(name string) string {
	return fmt.Sprintf("/allot-test-%d-%s", os.Getpid(), name)
}

// createTestCgroup creates the cgroup and, at cleanup, kills what is left
// in it and deletes it. Cleanups run last-registered first, so children
// registered after their parent go first.
func createTestCgroup(t testing.TB, m Manager, path string, spec Spec) Cgroup {
	t.Helper()
	c, err := m.Create(path, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.KillAll(); err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := c.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return c
}

type testProc struct {
	cmd  *exec.Cmd
	out  *bufio.Reader
	done chan struct{}
	err  error // cmd.Wait's, once done is closed
}

func (p *testProc) wait() error { <-p.done; return p.err }

func (p *testProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady waits for the helper's "ready" line.
func (p *testProc) waitReady(t *testing.T) {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("helper %v: got %q, %v; exited: %v", p.cmd.Args, line, err, p.wait())
	}
}

// killedBy reports the signal that ended the process, or 0.
func (p *testProc) killedBy() syscall.Signal {
	var exitErr *exec.ExitError
	if errors.As(p.wait(), &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// startIn starts cmd in c and reaps it in the background; at cleanup,
// whatever is left in c is killed (never anything outside c) and cmd
// reaped.
func startIn(t *testing.T, c Cgroup, cmd *exec.Cmd) *testProc {
	t.Helper()
	// A pipe of our own rather than StdoutPipe: Wait, which runs at once in
	// the background, would close that one under the reader.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	err = c.Start(cmd)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := &testProc{cmd: cmd, out: bufio.NewReader(r), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := c.KillAll(); err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		p.wait()
	})
	return p
}

// startHelper starts the test binary as a helper process in c.
func startHelper(t *testing.T, c Cgroup, args ...string) *testProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(args, " "))
	return startIn(t, c, cmd)
}

func readCgroupFile(t *testing.T, m *v1Manager, controller cgroup1.Name, path, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.hierarchy(controller).dir(path), file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func stats(t *testing.T, c Cgroup) Stats {
	t.Helper()
	s, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestV1CreateWritesTheSpec(t *testing.T) {
	m := requireV1(t)
	// The kernel shows an unlimited memory limit as its largest page
	// multiple; the root cgroup has no limit, so it shows that value.
	unlimited := readCgroupFile(t, m, cgroup1.Memory, "/", "memory.limit_in_bytes")
	for name, tc := range map[string]struct {
		spec Spec
		want map[string]string // file → content
	}{
		"cpu limited": {
			spec: SpecFor(api.Resources{"cpus": 0.5, "mem": 32}, api.Limits{"cpus": {Value: 0.75}}),
			want: map[string]string{
				"cpu.shares": "512", "cpu.cfs_quota_us": "75000", "cpu.cfs_period_us": "100000",
				"memory.soft_limit_in_bytes": "33554432", "memory.limit_in_bytes": "33554432",
			},
		},
		"mem limited": {
			spec: SpecFor(api.Resources{"cpus": 1, "mem": 32}, api.Limits{"mem": {Value: 64}}),
			want: map[string]string{
				"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000",
				"memory.soft_limit_in_bytes": "33554432", "memory.limit_in_bytes": "67108864",
			},
		},
		"Infinity": {
			spec: SpecFor(api.Resources{"cpus": 2, "mem": 16}, api.Limits{"cpus": {Infinite: true}, "mem": {Infinite: true}}),
			want: map[string]string{
				"cpu.shares": "2048", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000",
				"memory.soft_limit_in_bytes": "16777216", "memory.limit_in_bytes": unlimited,
			},
		},
		"own period": {
			spec: Spec{CPUQuotaMicros: 20000, CPUPeriodMicros: 50000},
			want: map[string]string{
				"cpu.shares": "1024", "cpu.cfs_quota_us": "20000", "cpu.cfs_period_us": "50000",
				"memory.soft_limit_in_bytes": unlimited, "memory.limit_in_bytes": unlimited,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := testCgroupPath("spec-" + strings.ReplaceAll(name, " ", "-"))
			c := createTestCgroup(t, m, path, tc.spec)
			for file, want := range tc.want {
				controller := cgroup1.Name(strings.Split(file, ".")[0])
				if got := readCgroupFile(t, m, controller, path, file); got != want {
					t.Errorf("%s = %s, want %s", file, got, want)
				}
			}
			if got := readCgroupFile(t, m, cgroup1.Memory, path, "memory.use_hierarchy"); got != "1" {
				t.Errorf("memory.use_hierarchy = %s, want 1", got)
			}
			// A child can take tasks only with cpus and mems of its own.
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				if got, want := readCgroupFile(t, m, cgroup1.Cpuset, path, file), readCgroupFile(t, m, cgroup1.Cpuset, "/", file); got != want {
					t.Errorf("%s = %q, want the parent's %q", file, got, want)
				}
			}
			// Update with the zero Spec puts every default back.
			if err := c.Update(Spec{}); err != nil {
				t.Fatal(err)
			}
			for file, want := range map[string]string{
				"cpu.shares": "1024", "cpu.cfs_quota_us": "-1", "cpu.cfs_period_us": "100000",
				"memory.soft_limit_in_bytes": unlimited, "memory.limit_in_bytes": unlimited,
			} {
				controller := cgroup1.Name(strings.Split(file, ".")[0])
				if got := readCgroupFile(t, m, controller, path, file); got != want {
					t.Errorf("after Update(Spec{}): %s = %s, want %s", file, got, want)
				}
			}
		})
	}
}

// A child's cpu quota may not exceed its parent's (as a share of the
// period). Changing quota and period together must never pass through such
// a ratio, whichever way they change.
func TestV1UpdateChangesPeriodAndQuotaInAValidOrder(t *testing.T) {
	m := requireV1(t)
	parentPath := testCgroupPath("cpu-parent")
	createTestCgroup(t, m, parentPath, Spec{CPUQuotaMicros: 200000}) // 2 cpus
	childPath := parentPath + "/child"
	child := createTestCgroup(t, m, childPath, Spec{CPUQuotaMicros: 200000})

	// The rule the order guards against: period 25 ms with a 200 ms quota
	// would be 8 cpus under a parent of 2.
	err := writeV1File(filepath.Join(m.hierarchy(cgroup1.Cpu).dir(childPath), "cpu.cfs_period_us"), "25000")
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("shrinking the period under a quota the parent caps: got %v, want EINVAL", err)
	}
	for _, spec := range []Spec{
		{CPUQuotaMicros: 50000, CPUPeriodMicros: 25000},   // 2 cpus: period first would be 8
		{CPUQuotaMicros: 200000, CPUPeriodMicros: 100000}, // 2 cpus: quota first would be 8
		{CPUQuotaMicros: 100000, CPUPeriodMicros: 50000},
	} {
		if err := child.Update(spec); err != nil {
			t.Fatalf("Update(%+v): %v", spec, err)
		}
		quota := readCgroupFile(t, m, cgroup1.Cpu, childPath, "cpu.cfs_quota_us")
		period := readCgroupFile(t, m, cgroup1.Cpu, childPath, "cpu.cfs_period_us")
		if quota != strconv.FormatInt(spec.CPUQuotaMicros, 10) || period != strconv.FormatUint(spec.CPUPeriodMicros, 10) {
			t.Errorf("after Update(%+v): quota %s, period %s", spec, quota, period)
		}
	}
}

// A spec the kernel refuses is an error naming the cgroup and the file, and
// a cgroup created for it is removed again.
func TestV1CreateRefusedByTheKernelLeavesNothing(t *testing.T) {
	m := requireV1(t)
	parentPath := testCgroupPath("refused")
	createTestCgroup(t, m, parentPath, Spec{CPUQuotaMicros: 100000})
	childPath := parentPath + "/child"
	_, err := m.Create(childPath, Spec{CPUQuotaMicros: 300000})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), childPath) || !strings.Contains(err.Error(), "cpu.cfs_quota_us") {
		t.Fatalf("got %v, want EINVAL naming %s and cpu.cfs_quota_us", err, childPath)
	}
	assertGone(t, m, childPath)
}

func TestV1BadInputChangesNothing(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("bad-input")
	for _, bad := range []string{"", "/", "relative", path + "/../x", path + "/"} {
		if _, err := m.Create(bad, Spec{}); err == nil {
			t.Errorf("Create(%q): want an error", bad)
		}
		if _, err := m.Load(bad); err == nil {
			t.Errorf("Load(%q): want an error", bad)
		}
	}
	if _, err := m.Create(path, Spec{CPUShares: 1}); err == nil || !strings.Contains(err.Error(), "shares") {
		t.Errorf("Create with shares 1: got %v", err)
	}
	assertGone(t, m, path)

	if _, err := m.Create(path+"/child", Spec{}); !errors.Is(err, ErrNotExist) {
		t.Errorf("Create without its parent: got %v, want ErrNotExist", err)
	}
	assertGone(t, m, path)
	if _, err := m.Load(path); !errors.Is(err, ErrNotExist) {
		t.Errorf("Load of a missing cgroup: got %v, want ErrNotExist", err)
	}

	c := createTestCgroup(t, m, path, Spec{MemoryLimitBytes: 64 * mib})
	if err := c.Update(Spec{MemoryLimitBytes: -7}); err == nil {
		t.Error("Update with a negative limit: want an error")
	}
	if got := readCgroupFile(t, m, cgroup1.Memory, path, "memory.limit_in_bytes"); got != "67108864" {
		t.Errorf("after a refused Update: memory.limit_in_bytes = %s", got)
	}
}

// Create on an existing cgroup writes the spec again; Load finds it.
func TestV1CreateExistingAndLoad(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("again")
	createTestCgroup(t, m, path, Spec{CPUShares: 100})
	again, err := m.Create(path, Spec{CPUShares: 200})
	if err != nil {
		t.Fatal(err)
	}
	if got := readCgroupFile(t, m, cgroup1.Cpu, path, "cpu.shares"); got != "200" {
		t.Errorf("cpu.shares = %s, want 200", got)
	}
	loaded, err := m.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Path() != path || again.Path() != path {
		t.Errorf("paths %s, %s", loaded.Path(), again.Path())
	}
}

func TestV1UpdateBelowUsageSaysWhy(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("below-usage")
	c := createTestCgroup(t, m, path, Spec{MemoryLimitBytes: 128 * mib})
	startHelper(t, c, "hold", "48").waitReady(t)
	// The cpu part is written first and accepted; the refused memory limit
	// takes it back.
	err := c.Update(Spec{CPUShares: 300, CPUQuotaMicros: 30000, MemoryLimitBytes: 16 * mib})
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "memory.limit_in_bytes") || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want EBUSY naming %s and memory.limit_in_bytes", err, path)
	}
	for file, want := range map[string]string{
		"memory.limit_in_bytes": strconv.Itoa(128 * mib),
		"cpu.shares":            "1024",
		"cpu.cfs_quota_us":      "-1",
	} {
		controller := cgroup1.Name(strings.Split(file, ".")[0])
		if got := readCgroupFile(t, m, controller, path, file); got != want {
			t.Errorf("after a refused Update: %s = %s, want %s as before", file, got, want)
		}
	}
}

// threadCgroups maps each thread of this process to its /proc cgroup file.
func threadCgroups(t *testing.T) map[string]string {
	t.Helper()
	tids, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tid := range tids {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", tid.Name(), "cgroup"))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) { // the thread ended
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[tid.Name()] = string(b)
	}
	return out
}

func TestV1StartRunsTheCommandInsideTheCgroup(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("start")
	c := createTestCgroup(t, m, path, Spec{})
	before := threadCgroups(t)

	p := startIn(t, c, exec.Command("cat", "/proc/self/cgroup"))
	got, err := parseProcCgroupV1(p.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	for controller := range m.byController {
		if got[controller] != path {
			t.Errorf("cat ran in %s cgroup %q, want %q", controller, got[controller], path)
		}
	}

	// Every thread of ours is where it was (or new and outside), and
	// nothing of ours is left in the cgroup.
	for tid, cgroups := range threadCgroups(t) {
		if was, ok := before[tid]; ok && was != cgroups {
			t.Errorf("thread %s moved:\nwas %s\nnow %s", tid, was, cgroups)
		}
		if strings.Contains(cgroups, ":"+path+"\n") {
			t.Errorf("thread %s is still in %s:\n%s", tid, path, cgroups)
		}
	}
	for _, h := range m.hierarchies {
		if tasks := readCgroupFile(t, m, cgroup1.Name(h.controllers[0]), path, "tasks"); tasks != "" {
			t.Errorf("%s tasks after cat exited: %q", h.controllers[0], tasks)
		}
	}
}

func TestV1StartErrorLeavesNothingInTheCgroup(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("start-error")
	c := createTestCgroup(t, m, path, Spec{})
	before := threadCgroups(t)
	err := c.Start(exec.Command(filepath.Join(t.TempDir(), "no-such-program")))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want ErrNotExist naming %s", err, path)
	}
	for tid, cgroups := range threadCgroups(t) {
		if was, ok := before[tid]; ok && was != cgroups {
			t.Errorf("thread %s moved:\nwas %s\nnow %s", tid, was, cgroups)
		}
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("Pids = %v, %v; want none", pids, err)
	}
	started := exec.Command("true")
	if err := started.Start(); err != nil {
		t.Fatal(err)
	}
	started.Wait()
	if err := c.Start(started); err == nil {
		t.Error("Start of a started command: want an error")
	}
}

func TestV1MemoryLimitOOM(t *testing.T) {
	m := requireV1(t)
	// The limited cgroup sits below one without a limit, to show that its
	// own OOM is not its parent's.
	parentPath := testCgroupPath("limit-oom")
	parent := createTestCgroup(t, m, parentPath, Spec{})
	path := parentPath + "/task"
	c := createTestCgroup(t, m, path, Spec{MemoryLimitBytes: 64 * mib})

	hog := startHelper(t, c, "grow")
	if sig := hog.killedBy(); sig != syscall.SIGKILL {
		t.Fatalf("hog ended with %v, want SIGKILL by the OOM killer", hog.wait())
	}
	s := stats(t, c)
	t.Logf("task (64 MiB limit): %+v, failcnt %s", s, readCgroupFile(t, m, cgroup1.Memory, path, "memory.failcnt"))
	if s.OOMKills < 1 || s.LimitOOMs < 1 {
		t.Errorf("task stats %+v: want OOMKills ≥ 1 and LimitOOMs ≥ 1", s)
	}
	// The kernel may charge a few pages past the limit before it reclaims
	// or kills (per-cpu charge batches): allow 1 MiB over.
	if s.MemoryMaxBytes == 0 || s.MemoryMaxBytes > 65*mib {
		t.Errorf("MemoryMaxBytes %d, want about the 64 MiB limit and above 0", s.MemoryMaxBytes)
	}
	ps := stats(t, parent)
	t.Logf("its parent (no limit): %+v", ps)
	if ps.OOMKills < 1 || ps.LimitOOMs != 0 {
		t.Errorf("parent stats %+v: want its child's kill counted and no OOM of its own", ps)
	}
}

// The agent's root cgroup runs out while its children are within their
// own (absent) limits: the child killed for it shows an OOM kill but no
// OOM at its own limit.
func TestV1ParentOOMIsNotTheChildsLimit(t *testing.T) {
	m := requireV1(t)
	parentPath := testCgroupPath("pressure")
	parent := createTestCgroup(t, m, parentPath, Spec{MemoryLimitBytes: 96 * mib})
	quiet := createTestCgroup(t, m, parentPath+"/quiet", Spec{})
	greedy := createTestCgroup(t, m, parentPath+"/greedy", Spec{})

	holder := startHelper(t, quiet, "hold", "24")
	holder.waitReady(t)
	hog := startHelper(t, greedy, "grow")
	if sig := hog.killedBy(); sig != syscall.SIGKILL {
		t.Fatalf("hog ended with %v, want SIGKILL by the OOM killer", hog.wait())
	}
	if holder.exited() {
		t.Fatalf("the quiet child died too: %v", holder.wait())
	}
	for _, c := range []struct {
		name   string
		cg     Cgroup
		kills  bool // OOMKills ≥ 1, else 0
		ownOOM bool // LimitOOMs ≥ 1, else 0
	}{
		{"greedy child", greedy, true, false},
		{"quiet child", quiet, false, false},
		{"parent (96 MiB limit)", parent, true, true},
	} {
		s := stats(t, c.cg)
		t.Logf("%s: %+v, failcnt %s", c.name, s, readCgroupFile(t, m, cgroup1.Memory, c.cg.Path(), "memory.failcnt"))
		if (s.OOMKills >= 1) != c.kills || (s.LimitOOMs >= 1) != c.ownOOM || (!c.kills && s.OOMKills != 0) || (!c.ownOOM && s.LimitOOMs != 0) {
			t.Errorf("%s %+v: want OOM kills %v, OOMs at its own limit %v", c.name, s, c.kills, c.ownOOM)
		}
	}
}

// A task that filled its own limit with page cache (memory.failcnt in the
// thousands, no OOM) and is then killed because its parent ran out must
// not count as an OOM at its own limit: why LimitOOMs does not come from
// failcnt.
func TestV1PageCacheAtTheLimitThenParentOOM(t *testing.T) {
	m := requireV1(t)
	data := filepath.Join(t.TempDir(), "data")
	writeFileOfSize(t, data, 160*mib)

	parentPath := testCgroupPath("page-cache")
	createTestCgroup(t, m, parentPath, Spec{MemoryLimitBytes: 96 * mib})
	readerPath := parentPath + "/reader"
	reader := createTestCgroup(t, m, readerPath, Spec{MemoryLimitBytes: 64 * mib})
	greedy := createTestCgroup(t, m, parentPath+"/greedy", Spec{})

	r := startHelper(t, reader, "readfile", data, "40")
	r.waitReady(t)
	failcnt, err := strconv.Atoi(readCgroupFile(t, m, cgroup1.Memory, readerPath, "memory.failcnt"))
	if err != nil || failcnt == 0 {
		t.Fatalf("reader's memory.failcnt = %d, %v: want it above 0 after reading past its limit", failcnt, err)
	}
	if s := stats(t, reader); s.OOMKills != 0 || s.LimitOOMs != 0 {
		t.Fatalf("reader after reading %+v: reclaimed page cache is no OOM", s)
	}
	// Make the reader the OOM killer's choice, as agentd makes a task above
	// its request (oom_score_adj 1000).
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", r.cmd.Process.Pid), []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	startHelper(t, greedy, "grow")
	if sig := r.killedBy(); sig != syscall.SIGKILL {
		t.Fatalf("reader ended with %v, want SIGKILL by the OOM killer", r.wait())
	}
	s := stats(t, reader)
	t.Logf("reader (64 MiB limit, killed by its parent's OOM): %+v, failcnt %s (%d before the OOM)",
		s, readCgroupFile(t, m, cgroup1.Memory, readerPath, "memory.failcnt"), failcnt)
	if s.OOMKills < 1 || s.LimitOOMs != 0 {
		t.Errorf("reader %+v (failcnt %d): want OOMKills ≥ 1 and LimitOOMs 0", s, failcnt)
	}
}

func writeFileOfSize(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, mib)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for written := 0; written < size; written += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds: the kernel gives no event for what
// the tests wait on.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// forkBomb forks without end: a tree of 2^(depth+1)-1 shells, each forking
// /bin/true in a loop, so processes come and go while KillAll runs.
const forkBomb = `spawn() { if [ "$1" -gt 0 ]; then spawn $(($1-1)) & spawn $(($1-1)) & fi; while :; do /bin/true; done; }; spawn 4`

func TestV1KillAllKillsAForkingTree(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("fork-bomb")
	// Half a cpu, so that the bomb leaves the machine usable, and at most
	// 200 processes (twice what the two trees reach) as a safety net.
	c := createTestCgroup(t, m, path, Spec{CPUQuotaMicros: 50000})
	inner := createTestCgroup(t, m, path+"/inner", Spec{})
	if h := m.hierarchy(cgroup1.Pids); h != nil {
		if err := writeV1File(filepath.Join(h.dir(path), "pids.max"), "200"); err != nil {
			t.Fatal(err)
		}
	}
	// A process outside, which must survive.
	outside := exec.Command("cat")
	stdin, err := outside.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := outside.Wait(); err != nil {
			t.Errorf("the process outside the cgroup: %v", err)
		}
	}()

	top := startIn(t, c, exec.Command("sh", "-c", forkBomb))
	nested := startIn(t, inner, exec.Command("sh", "-c", forkBomb))
	waitFor(t, "both trees to grow", func() (bool, error) {
		pids, err := c.Pids()
		innerPids, err2 := inner.Pids()
		return len(pids) >= 40 && len(innerPids) >= 20, errors.Join(err, err2)
	})
	if err := c.KillAll(); err != nil {
		t.Fatal(err)
	}
	if pids, err := c.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after KillAll: Pids = %v, %v", pids, err)
	}
	for _, p := range []*testProc{top, nested} {
		if sig := p.killedBy(); sig != syscall.SIGKILL {
			t.Errorf("%v ended with %v, want SIGKILL", p.cmd.Args[:2], p.wait())
		}
	}
	if state := readCgroupFile(t, m, cgroup1.Freezer, path, "freezer.state"); state != "THAWED" {
		t.Errorf("freezer.state = %s after KillAll", state)
	}
	if err := outside.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the process outside the cgroup: %v", err)
	}
}

func TestV1SignalReachesDescendantsOnly(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("signal")
	c := createTestCgroup(t, m, path, Spec{})
	child := createTestCgroup(t, m, path+"/child", Spec{})
	a := startIn(t, c, exec.Command("sleep", "1000"))
	b := startIn(t, child, exec.Command("sleep", "1000"))
	outside := exec.Command("sleep", "1000")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	outsideDone := make(chan error, 1)
	go func() { outsideDone <- outside.Wait() }()

	pids, err := c.Pids()
	if err != nil {
		t.Fatal(err)
	}
	want := []int{a.cmd.Process.Pid, b.cmd.Process.Pid}
	slices.Sort(want)
	if !slices.Equal(pids, want) {
		t.Errorf("Pids = %v, want %v", pids, want)
	}
	// A pid that is not ours is refused even when asked for directly, as
	// after a pid was reused.
	if err := c.(*v1Cgroup).signalMember(outside.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*testProc{a, b} {
		if sig := p.killedBy(); sig != syscall.SIGTERM {
			t.Errorf("%v ended with %v, want SIGTERM", p.cmd.Args, p.wait())
		}
	}
	select {
	case err := <-outsideDone:
		t.Errorf("the process outside the cgroup ended: %v", err)
	default:
	}
	// It is this test's own child, started outside any test cgroup; it
	// ends through its own process handle.
	outside.Process.Signal(syscall.SIGTERM)
	<-outsideDone
}

func TestV1StatsCountCPUAndMemory(t *testing.T) {
	m := requireV1(t)
	c := createTestCgroup(t, m, testCgroupPath("stats"), Spec{})
	if s := stats(t, c); s != (Stats{}) {
		t.Errorf("stats of a new cgroup %+v, want zeros", s)
	}
	busy := startIn(t, c, exec.Command("sh", "-c", `i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done`))
	if err := busy.wait(); err != nil {
		t.Fatal(err)
	}
	if s := stats(t, c); s.CPUUsageNanos == 0 {
		t.Errorf("CPUUsageNanos 0 after a busy loop")
	}
	startHelper(t, c, "hold", "24").waitReady(t)
	s := stats(t, c)
	if s.MemoryUsageBytes < 24*mib || s.MemoryMaxBytes < s.MemoryUsageBytes {
		t.Errorf("stats %+v: want usage ≥ 24 MiB and max ≥ usage", s)
	}
}

func TestV1DeleteRemovesEverything(t *testing.T) {
	m := requireV1(t)
	path := testCgroupPath("delete")
	c, err := m.Create(path, Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.KillAll(); c.Delete() }) // if the test fails half way
	if _, err := m.Create(path+"/a", Spec{}); err != nil {
		t.Fatal(err)
	}
	deep, err := m.Create(path+"/a/b", Spec{MemoryLimitBytes: 64 * mib})
	if err != nil {
		t.Fatal(err)
	}
	p := startIn(t, deep, exec.Command("sleep", "1000"))

	err = c.Delete()
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), strconv.Itoa(p.cmd.Process.Pid)) {
		t.Fatalf("Delete with a process inside: got %v, want EBUSY naming pid %d", err, p.cmd.Process.Pid)
	}
	if _, err := m.Load(path + "/a/b"); err != nil {
		t.Fatalf("the busy cgroup must stay: %v", err)
	}
	if err := c.KillAll(); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, m, path)
	if err := c.Delete(); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if _, err := m.Load(path); !errors.Is(err, ErrNotExist) {
		t.Errorf("Load after Delete: got %v, want ErrNotExist", err)
	}
}

func assertGone(t *testing.T, m *v1Manager, path string) {
	t.Helper()
	for _, h := range m.hierarchies {
		if _, err := os.Stat(h.dir(path)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it gone", h.dir(path), err)
		}
	}
}

// BenchmarkV1Start compares starting /bin/true inside a cgroup (the thread
// moves in and out around the fork) with a plain start, waits included.
func BenchmarkV1Start(b *testing.B) {
	m := requireV1(b)
	c, err := m.Create(testCgroupPath("bench-start"), Spec{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := errors.Join(c.KillAll(), c.Delete()); err != nil {
			b.Error(err)
		}
	})
	for _, tc := range []struct {
		name  string
		start func(*exec.Cmd) error
	}{
		{"in=cgroup", c.Start},
		{"in=plain", (*exec.Cmd).Start},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cmd := exec.Command("/bin/true")
				if err := tc.start(cmd); err != nil {
					b.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
