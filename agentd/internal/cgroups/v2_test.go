//go:build linux

package cgroups

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"golang.org/x/sys/unix"
)

func openV2Fixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "v2", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseFlatKeyed(t *testing.T) {
	for name, tc := range map[string]struct {
		fixture string
		want    map[string]uint64
		wantErr bool
	}{
		"cpu.stat": {fixture: "cpu.stat", want: map[string]uint64{
			"usage_usec": 1523000, "user_usec": 1200000, "system_usec": 323000,
			"core_sched.force_idle_usec": 0, "nr_periods": 50, "nr_throttled": 12,
			"throttled_usec": 800000, "nr_bursts": 0, "burst_usec": 0,
		}},
		"memory.events": {fixture: "memory.events", want: map[string]uint64{
			"low": 0, "high": 0, "max": 1204, "oom": 3, "oom_kill": 2, "oom_group_kill": 0,
		}},
		"memory.events of 4.19, without oom_group_kill": {fixture: "memory.events-4.19", want: map[string]uint64{
			"low": 0, "high": 0, "max": 0, "oom": 0, "oom_kill": 0,
		}},
		"cgroup.events":          {fixture: "cgroup.events", want: map[string]uint64{"populated": 1, "frozen": 0}},
		"a negative value":       {fixture: "memory.events-bad", wantErr: true},
		"a value without a key":  {fixture: "cgroup.events-bad", wantErr: true},
		"empty (a fresh cgroup)": {fixture: "../v1/cgroup.procs-empty", want: map[string]uint64{}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseFlatKeyed(openV2Fixture(t, tc.fixture))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestParseControllersAndPids(t *testing.T) {
	controllers, err := parseControllers(openV2Fixture(t, "cgroup.controllers"))
	if err != nil || !reflect.DeepEqual(controllers, []string{"cpu", "memory", "pids"}) {
		t.Errorf("cgroup.controllers: got %q, %v", controllers, err)
	}
	pids, err := parsePidList(openV2Fixture(t, "cgroup.procs"))
	if err != nil || !reflect.DeepEqual(pids, []int{4211, 4230, 4231}) {
		t.Errorf("cgroup.procs: got %v, %v", pids, err)
	}
	current, err := parseV1Uint(openV2Fixture(t, "memory.current"))
	if err != nil || current != 48213988 {
		t.Errorf("memory.current: got %d, %v", current, err)
	}
}

func TestParseKernelRelease(t *testing.T) {
	for release, want := range map[string][2]int{
		"6.18.44-fc-v669":        {6, 18},
		"5.4.0-150-generic":      {5, 4},
		"5.10":                   {5, 10},
		"4.19.0+":                {4, 19},
		"3.10.0-1160.el7.x86_64": {3, 10},
	} {
		major, minor, err := parseKernelRelease(release)
		if err != nil || [2]int{major, minor} != want {
			t.Errorf("%q: got %d.%d, %v; want %d.%d", release, major, minor, err, want[0], want[1])
		}
	}
	for _, bad := range []string{"", "6", "x.y", "6.-1"} {
		if _, _, err := parseKernelRelease(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestCPUWeightFromShares(t *testing.T) {
	// runc's and crun's conversion, weight = 1 + ((shares-2)*9999)/262142.
	for shares, want := range map[uint64]uint64{
		2:      1,     // the least v1 allows is the least v2 allows
		256:    10,    // 0.25 cpu
		512:    20,    // 0.5 cpu
		768:    30,    // 0.75 cpu
		1024:   39,    // 1 cpu
		262144: 10000, // the most on both sides
	} {
		if got := cpuWeight(shares); got != want {
			t.Errorf("cpuWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

// specFiles reads the four files a Spec is written to.
func specFiles(k *fakeV2Kernel, path string) map[string]string {
	out := map[string]string{}
	for _, file := range v2Files {
		out[file] = k.read(path, file)
	}
	return out
}

func TestV2CreateWritesTheSpecOfALoneTask(t *testing.T) {
	k, m := newFakeV2(t, "cpu io memory pids")
	if _, err := m.Create("/allot", Spec{}); err != nil {
		t.Fatal(err)
	}
	spec := SpecFor(api.Resources{"cpus": 0.5, "mem": 128}, api.Limits{"cpus": {Value: 1}, "mem": {Value: 256}})
	cg, err := m.Create("/allot/task-1", spec)
	if err != nil {
		t.Fatal(err)
	}
	if cg.Path() != "/allot/task-1" {
		t.Errorf("Path() = %q", cg.Path())
	}
	want := map[string]string{
		"cpu.weight": "20",            // 512 shares
		"cpu.max":    "100000 100000", // 1 cpu
		"memory.low": "134217728",     // 128 MiB
		"memory.max": "268435456",     // 256 MiB
	}
	if got := specFiles(k, "allot/task-1"); !reflect.DeepEqual(got, want) {
		t.Errorf("task files:\n got  %v\n want %v", got, want)
	}
	// Every write, in order: the controllers at the root, the agent's
	// root cgroup at the kernel's defaults, the controllers for its
	// children, the task. Nothing written twice, io never enabled.
	wantWrites := []string{
		"cgroup.subtree_control: +cpu +memory +pids",
		"allot/cpu.weight: 100",
		"allot/cpu.max: max 100000",
		"allot/memory.low: 0",
		"allot/memory.max: max",
		"allot/cgroup.subtree_control: +cpu +memory +pids",
		"allot/task-1/cpu.weight: 20",
		"allot/task-1/cpu.max: 100000 100000",
		"allot/task-1/memory.low: 134217728",
		"allot/task-1/memory.max: 268435456",
	}
	if !reflect.DeepEqual(k.writes, wantWrites) {
		t.Errorf("writes:\n got  %q\n want %q", k.writes, wantWrites)
	}
	for _, path := range []string{"", "allot"} {
		if got := k.read(path, "cgroup.subtree_control"); got != "cpu memory pids" {
			t.Errorf("/%s cgroup.subtree_control = %q, want %q", path, got, "cpu memory pids")
		}
	}
}

func TestV2CreateWithAnInfiniteMemoryLimit(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	spec := SpecFor(api.Resources{"cpus": 0.5, "mem": 128}, api.Limits{"mem": {Infinite: true}})
	if _, err := m.Create("/task-inf", spec); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cpu.weight": "20",
		"cpu.max":    "max 100000", // no cpu limit
		"memory.low": "134217728",
		"memory.max": "max",
	}
	if got := specFiles(k, "task-inf"); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestV2CreateTaskGroupWithNestedCgroups(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	if _, err := m.Create("/allot", Spec{}); err != nil {
		t.Fatal(err)
	}
	ta := TaskResources{api.Resources{"cpus": 0.5, "mem": 128}, api.Limits{"cpus": {Value: 1}, "mem": {Value: 256}}}
	tb := TaskResources{api.Resources{"cpus": 0.25, "mem": 64}, nil}
	a, b := SpecFor(ta.Requests, ta.Limits), SpecFor(tb.Requests, tb.Limits)
	executor := GroupSpecFor(nil, []TaskResources{ta, tb})
	if _, err := m.Create("/allot/exec", executor); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create("/allot/exec/a", a); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create("/allot/exec/b", b); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]map[string]string{
		// Requests add up (768 shares, 192 MiB); b has no limits, so its
		// memory request counts into the executor's memory limit (256 +
		// 64 MiB), and, b free to burst on cpu, the executor has no quota.
		"allot/exec":   {"cpu.weight": "30", "cpu.max": "max 100000", "memory.low": "201326592", "memory.max": "335544320"},
		"allot/exec/a": {"cpu.weight": "20", "cpu.max": "100000 100000", "memory.low": "134217728", "memory.max": "268435456"},
		// Without a memory limit a task is held to its request.
		"allot/exec/b": {"cpu.weight": "10", "cpu.max": "max 100000", "memory.low": "67108864", "memory.max": "67108864"},
	} {
		if got := specFiles(k, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %v\n want %v", path, got, want)
		}
	}
	if got := k.read("allot/exec", "cgroup.subtree_control"); got != "cpu memory pids" {
		t.Errorf("executor's cgroup.subtree_control = %q", got)
	}
	// The executor's subtree_control is written once, by the first task.
	n := 0
	for _, w := range k.writes {
		if strings.HasPrefix(w, "allot/exec/cgroup.subtree_control:") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("allot/exec/cgroup.subtree_control written %d times: %q", n, k.writes)
	}
}

func TestV2CreateEnablesOnlyMissingControllers(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory") // no pids controller on this host
	k.put(k.root, "cgroup.subtree_control", "cpu\n")
	if _, err := m.Create("/t", Spec{}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"cgroup.subtree_control: +memory"}; !reflect.DeepEqual(k.writes[:1], want) {
		t.Errorf("writes %q, want them to start with %q", k.writes, want)
	}
	if got := k.read("", "cgroup.subtree_control"); got != "cpu memory" {
		t.Errorf("root cgroup.subtree_control = %q", got)
	}
}

func TestNewV2NeedsCPUAndMemory(t *testing.T) {
	for controllers, wantErr := range map[string]string{
		"cpuset cpu io memory hugetlb pids rdma misc": "",
		"cpu memory":  "",
		"memory pids": "controllers cpu are not available",
		"hugetlb":     "controllers cpu, memory are not available",
		"":            "controllers cpu, memory are not available",
	} {
		k, _ := newFakeV2(t, controllers)
		m, err := NewV2(k.root)
		if wantErr == "" {
			if err != nil || m.Mode() != V2 {
				t.Errorf("controllers %q: got %v, %v", controllers, m, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("controllers %q: got error %v, want %q", controllers, err, wantErr)
		}
	}
	if _, err := NewV2(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is not a cgroup2 hierarchy") {
		t.Errorf("plain directory: got %v", err)
	}
	if _, err := NewV2("sys/fs/cgroup"); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("relative mount point: got %v", err)
	}
}

func TestV2BadInputChangesNothing(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	for name, tc := range map[string]struct {
		path string
		spec Spec
		want string
	}{
		"relative path":        {path: "allot", want: "want a clean absolute path"},
		"the hierarchy's root": {path: "/", want: "want a clean absolute path"},
		"unclean path":         {path: "/a/../b", want: "want a clean absolute path"},
		"shares below 2":       {path: "/t", spec: Spec{CPUShares: 1}, want: "cpu shares 1 outside"},
		"quota below 1 ms":     {path: "/t", spec: Spec{CPUQuotaMicros: 999}, want: "cpu quota 999"},
		"period above 1 s":     {path: "/t", spec: Spec{CPUPeriodMicros: 2000000}, want: "cpu period"},
		"negative memory":      {path: "/t", spec: Spec{MemoryLimitBytes: -5}, want: "memory limit -5"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := m.Create(tc.path, tc.spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if len(k.writes) != 0 {
		t.Errorf("refused specs wrote %q", k.writes)
	}
	if _, err := os.Stat(filepath.Join(k.root, "t")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Create left /t behind: %v", err)
	}
	if _, err := m.Create("/missing/t", Spec{}); !errors.Is(err, ErrNotExist) {
		t.Errorf("Create under a missing parent: %v, want ErrNotExist", err)
	}
	if _, err := m.Load("/missing"); !errors.Is(err, ErrNotExist) {
		t.Errorf("Load of a missing cgroup: %v, want ErrNotExist", err)
	}
}

func TestV2RefusedWriteIsUndone(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	old := Spec{CPUShares: 512, CPUQuotaMicros: 50000, MemorySoftBytes: 1 << 20, MemoryLimitBytes: 1 << 30}
	cg, err := m.Create("/t", old)
	if err != nil {
		t.Fatal(err)
	}
	before := specFiles(k, "t")
	k.refuse = map[string]error{"memory.max": unix.EINVAL}
	err = cg.Update(Spec{CPUShares: 2048, MemoryLimitBytes: 1 << 20})
	if !errors.Is(err, unix.EINVAL) || !strings.Contains(err.Error(), "cgroup /t: write 1048576 to") {
		t.Fatalf("Update: %v", err)
	}
	if got := specFiles(k, "t"); !reflect.DeepEqual(got, before) {
		t.Errorf("after a refused Update:\n got  %v\n want %v", got, before)
	}
	// A refused new cgroup is removed again.
	if _, err := m.Create("/u", old); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Create: %v", err)
	}
	if _, err := os.Stat(filepath.Join(k.root, "u")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Create left /u behind: %v", err)
	}
}

func TestV2UpdateAndCreateAgainResetToDefaults(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	big := Spec{CPUShares: 4096, CPUQuotaMicros: 400000, MemorySoftBytes: 1 << 30, MemoryLimitBytes: 2 << 30}
	cg, err := m.Create("/t", big)
	if err != nil {
		t.Fatal(err)
	}
	if err := cg.Update(Spec{}); err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{"cpu.weight": "100", "cpu.max": "max 100000", "memory.low": "0", "memory.max": "max"}
	if got := specFiles(k, "t"); !reflect.DeepEqual(got, defaults) {
		t.Errorf("after Update(Spec{}):\n got  %v\n want %v", got, defaults)
	}
	// Create of an existing cgroup writes the spec again; Unlimited
	// request protects everything, a custom period goes with the quota.
	again := Spec{CPUShares: 2, CPUQuotaMicros: 5000, CPUPeriodMicros: 10000, MemorySoftBytes: Unlimited, MemoryLimitBytes: Unlimited}
	if _, err := m.Create("/t", again); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cpu.weight": "1", "cpu.max": "5000 10000", "memory.low": "max", "memory.max": "max"}
	if got := specFiles(k, "t"); !reflect.DeepEqual(got, want) {
		t.Errorf("after Create again:\n got  %v\n want %v", got, want)
	}
}

func TestV2CreateInACgroupWithProcesses(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	if _, err := m.Create("/busy", Spec{}); err != nil {
		t.Fatal(err)
	}
	k.put(filepath.Join(k.root, "busy"), "cgroup.procs", "4242\n")
	_, err := m.Create("/busy/child", Spec{})
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "no processes of its own") {
		t.Fatalf("got %v, want EBUSY with an explanation", err)
	}
	if _, err := os.Stat(filepath.Join(k.root, "busy", "child")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Create left /busy/child behind: %v", err)
	}
}

func TestV2Stats(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(k.root, "t")
	copyFixture := func(fixture, file string) {
		b, err := os.ReadFile(filepath.Join("testdata", "v2", fixture))
		if err != nil {
			t.Fatal(err)
		}
		k.put(dir, file, string(b))
	}
	copyFixture("cpu.stat", "cpu.stat")
	copyFixture("memory.current", "memory.current")
	copyFixture("memory.events", "memory.events")
	copyFixture("memory.events.local", "memory.events.local")
	k.put(dir, "memory.peak", "99000000\n")
	got, err := cg.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{
		CPUUsageNanos:    1523000 * 1000,
		MemoryUsageBytes: 48213988,
		MemoryMaxBytes:   99000000,
		OOMKills:         2, // memory.events: counts descendants' kills too
		LimitOOMs:        1, // memory.events.local: its own limit only, not the 3 of the subtree
	}
	if got != want {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// A handle opened now counts from now; the first one keeps counting.
	later, err := m.Load("/t")
	if err != nil {
		t.Fatal(err)
	}
	k.put(dir, "memory.events.local", "low 0\nhigh 0\nmax 400\noom 3\noom_kill 1\noom_group_kill 0\n")
	for handle, want := range map[Cgroup]uint64{cg: 3, later: 2} {
		s, err := handle.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if s.LimitOOMs != want {
			t.Errorf("LimitOOMs = %d, want %d", s.LimitOOMs, want)
		}
	}

	k.put(dir, "memory.current", "lots\n")
	if _, err := cg.Stats(); err == nil || !strings.Contains(err.Error(), "cgroup /t:") {
		t.Errorf("unreadable memory.current: %v", err)
	}
}

func TestV2StatsOnOlderKernels(t *testing.T) {
	// Before 5.2 there is no memory.events.local; before 5.19 no
	// memory.peak.
	k, m := newFakeV2(t, "cpu memory pids", func(k *fakeV2Kernel) { k.noLocalEvents, k.noPeak = true, true })
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	k.put(filepath.Join(k.root, "t"), "memory.events", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n")
	s, err := cg.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.LimitOOMs != 2 || s.OOMKills != 2 || s.MemoryMaxBytes != 0 {
		t.Errorf("got %+v, want LimitOOMs 2 and OOMKills 2 from memory.events, MemoryMaxBytes 0", s)
	}
}

func TestV2PidsKillAllAndDeleteOnAFake(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids")
	for _, p := range []string{"/g", "/g/a", "/g/b"} {
		if _, err := m.Create(p, Spec{}); err != nil {
			t.Fatal(err)
		}
	}
	cg, err := m.Load("/g")
	if err != nil {
		t.Fatal(err)
	}
	k.put(filepath.Join(k.root, "g", "a"), "cgroup.procs", "31\n12\n")
	k.put(filepath.Join(k.root, "g", "b"), "cgroup.procs", "20\n")
	pids, err := cg.Pids()
	if err != nil || !reflect.DeepEqual(pids, []int{12, 20, 31}) {
		t.Errorf("Pids() = %v, %v; want the processes of all descendants", pids, err)
	}
	err = cg.Delete()
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "processes [20] are in it") {
		t.Errorf("Delete with processes: %v", err)
	}
	// The fake's processes "exit".
	k.put(filepath.Join(k.root, "g", "a"), "cgroup.procs", "")
	k.put(filepath.Join(k.root, "g", "b"), "cgroup.procs", "")
	k.writes = nil
	if err := cg.KillAll(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"g/cgroup.kill: 1"}; !reflect.DeepEqual(k.writes, want) {
		t.Errorf("KillAll wrote %q, want %q", k.writes, want)
	}
	if err := cg.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(k.root, "g")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Delete left /g: %v", err)
	}
	if err := cg.Delete(); err != nil {
		t.Errorf("Delete of a deleted cgroup: %v", err)
	}
	if err := cg.KillAll(); err != nil {
		t.Errorf("KillAll of a deleted cgroup: %v", err)
	}
}

func TestV2KillAllWithoutCgroupKillFreezesAndThaws(t *testing.T) {
	k, m := newFakeV2(t, "cpu memory pids", func(k *fakeV2Kernel) { k.noKill = true })
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	k.writes = nil
	if err := cg.KillAll(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"t/cgroup.freeze: 1", "t/cgroup.freeze: 0"}; !reflect.DeepEqual(k.writes, want) {
		t.Errorf("KillAll wrote %q, want %q", k.writes, want)
	}
}

func TestV2StartChecksBeforeStarting(t *testing.T) {
	_, m := newFakeV2(t, "cpu memory pids")
	cg, err := m.Create("/t", Spec{})
	if err != nil {
		t.Fatal(err)
	}
	m.major, m.minor, m.release = 5, 4, "5.4.0-150-generic"
	cmd := exec.Command("true")
	err = cg.Start(cmd)
	if err == nil || !strings.Contains(err.Error(), "needs Linux 5.7 or later") || !strings.Contains(err.Error(), "5.4.0-150-generic") {
		t.Errorf("Start on 5.4: %v", err)
	}
	if cmd.Process != nil {
		t.Errorf("Start on 5.4 started %d", cmd.Process.Pid)
	}
}
