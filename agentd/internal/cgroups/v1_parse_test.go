//go:build linux

package cgroups

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/cgroups/v3/cgroup1"
)

func openFixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "v1", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestParseV1Mounts(t *testing.T) {
	for name, tc := range map[string]struct {
		fixture string
		want    []v1Hierarchy
		wantErr bool
	}{
		"hybrid host, one mount per controller": {
			fixture: "mountinfo-hybrid",
			want: []v1Hierarchy{
				{mount: "/sys/fs/cgroup/cpu", root: "/", controllers: []string{"cpu"}},
				{mount: "/sys/fs/cgroup/cpuacct", root: "/", controllers: []string{"cpuacct"}},
				{mount: "/sys/fs/cgroup/cpuset", root: "/", controllers: []string{"cpuset"}},
				{mount: "/sys/fs/cgroup/memory", root: "/", controllers: []string{"memory"}},
				{mount: "/sys/fs/cgroup/devices", root: "/", controllers: []string{"devices"}},
				{mount: "/sys/fs/cgroup/freezer", root: "/", controllers: []string{"freezer"}},
				{mount: "/sys/fs/cgroup/blkio", root: "/", controllers: []string{"blkio"}},
				{mount: "/sys/fs/cgroup/pids", root: "/", controllers: []string{"pids"}},
				{mount: "/sys/fs/cgroup/systemd", root: "/", controllers: []string{"name=systemd"}},
			},
		},
		"co-mounted cpu,cpuacct, mount flags, a bind mount with an escaped space": {
			fixture: "mountinfo-comounted",
			want: []v1Hierarchy{
				{mount: "/sys/fs/cgroup/systemd", root: "/", controllers: []string{"name=systemd"}},
				{mount: "/sys/fs/cgroup/cpu,cpuacct", root: "/", controllers: []string{"cpu", "cpuacct"}},
				{mount: "/sys/fs/cgroup/memory", root: "/", controllers: []string{"memory"}},
				{mount: "/sys/fs/cgroup/freezer", root: "/", controllers: []string{"freezer"}},
				{mount: "/sys/fs/cgroup/pids", root: "/", controllers: []string{"pids"}},
				{mount: "/sys/fs/cgroup/cpuset", root: "/", controllers: []string{"cpuset"}},
				{mount: "/mnt/cgroup memory", root: "/docker/abc", controllers: []string{"memory"}},
			},
		},
		"unified host has no v1 hierarchy": {fixture: "mountinfo-unified"},
		"line without separator":           {fixture: "mountinfo-bad", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseV1Mounts(openFixture(t, tc.fixture))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNewV1ManagerNeedsTheRequiredControllers(t *testing.T) {
	mounts, err := parseV1Mounts(openFixture(t, "mountinfo-hybrid"))
	if err != nil {
		t.Fatal(err)
	}
	var withoutFreezer []v1Hierarchy
	for _, h := range mounts {
		if h.controllers[0] != "freezer" {
			withoutFreezer = append(withoutFreezer, h)
		}
	}
	_, err = newV1Manager(withoutFreezer)
	if err == nil || !strings.Contains(err.Error(), "freezer is not mounted") {
		t.Errorf("without freezer: got %v, want an error naming freezer", err)
	}
	_, err = newV1Manager(nil)
	if err == nil {
		t.Error("without any hierarchy: want an error")
	}
}

func TestV1HierarchyRelative(t *testing.T) {
	bind := v1Hierarchy{mount: "/mnt/memory", root: "/docker/abc"}
	for in, want := range map[string]string{
		"/docker/abc":        "/",
		"/docker/abc/allot":  "/allot",
		"/docker/abcdef/x":   "",
		"/somewhere/else":    "",
		"/docker/abc/a/b/cc": "/a/b/cc",
	} {
		got, ok := bind.relative(in)
		if ok != (want != "") || got != want {
			t.Errorf("relative(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	plain := v1Hierarchy{mount: "/sys/fs/cgroup/memory", root: "/"}
	if got, ok := plain.relative("/allot/x"); !ok || got != "/allot/x" {
		t.Errorf("relative on a plain mount = %q, %v", got, ok)
	}
}

func TestParseProcCgroupV1(t *testing.T) {
	got, err := parseProcCgroupV1(openFixture(t, "proc-cgroup-comounted"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pids": "/allot/task", "cpuset": "/allot/task", "cpu": "/allot/task", "cpuacct": "/allot/task",
		"memory": "/allot/task", "freezer": "/allot/task", "name=systemd": "/system.slice/allot-agent.service",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	got, err = parseProcCgroupV1(openFixture(t, "proc-cgroup-hybrid"))
	if err != nil {
		t.Fatal(err)
	}
	if got["memory"] != "/system.slice/allot-agent.service" || got["cpu"] != "/" || got["cpuacct"] != "/" {
		t.Errorf("hybrid: got %v", got)
	}
	if _, err := parseProcCgroupV1(strings.NewReader("4-memory-/x\n")); err == nil {
		t.Error("a line without colons: want an error")
	}
}

func TestParseOOMControl(t *testing.T) {
	for fixture, want := range map[string]v1OOMControl{
		"oom_control":     {OOMKills: 3},
		"oom_control-4.9": {KillDisabled: true, UnderOOM: true},
	} {
		got, err := parseOOMControl(openFixture(t, fixture))
		if err != nil {
			t.Fatalf("%s: %v", fixture, err)
		}
		if got != want {
			t.Errorf("%s: got %+v, want %+v", fixture, got, want)
		}
	}
	if _, err := parseOOMControl(openFixture(t, "oom_control-bad")); err == nil {
		t.Error("oom_control-bad: want an error")
	}
}

func TestParsePidList(t *testing.T) {
	got, err := parsePidList(openFixture(t, "cgroup.procs"))
	if err != nil || !reflect.DeepEqual(got, []int{12, 345, 6789}) {
		t.Errorf("cgroup.procs: got %v, %v", got, err)
	}
	got, err = parsePidList(openFixture(t, "cgroup.procs-empty"))
	if err != nil || len(got) != 0 {
		t.Errorf("empty cgroup.procs: got %v, %v", got, err)
	}
	if _, err := parsePidList(openFixture(t, "cgroup.procs-bad")); err == nil {
		t.Error("cgroup.procs-bad: want an error")
	}
}

func TestParseV1Uint(t *testing.T) {
	for fixture, want := range map[string]uint64{
		"cpuacct.usage":                   123456789,
		"memory.limit_in_bytes-unlimited": 9223372036854771712,
	} {
		got, err := parseV1Uint(openFixture(t, fixture))
		if err != nil || got != want {
			t.Errorf("%s: got %d, %v; want %d", fixture, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1\n", "12 34\n", "max\n"} {
		if v, err := parseV1Uint(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: got %d, want an error", bad, v)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:   "/a b",
		`/tab\011x`: "/tab\tx",
		`/plain`:    "/plain",
		`/end\04`:   `/end\04`,
		`/x\999`:    `/x\999`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckV1Path(t *testing.T) {
	for _, bad := range []string{"", "/", "allot", "/allot/", "/allot/../x", "/allot//x", "/./allot"} {
		if err := checkV1Path(bad); err == nil {
			t.Errorf("checkV1Path(%q): want an error", bad)
		}
	}
	for _, good := range []string{"/allot", "/allot/task-1", "/a/b/c"} {
		if err := checkV1Path(good); err != nil {
			t.Errorf("checkV1Path(%q): %v", good, err)
		}
	}
}

func TestCheckV1Spec(t *testing.T) {
	for name, s := range map[string]Spec{
		"shares below the kernel's minimum": {CPUShares: 1},
		"shares above the kernel's maximum": {CPUShares: 1<<18 + 1},
		"quota below 1 ms":                  {CPUQuotaMicros: 999},
		"negative quota":                    {CPUQuotaMicros: -2},
		"period below 1 ms":                 {CPUPeriodMicros: 999},
		"period above 1 s":                  {CPUPeriodMicros: 1000001},
		"negative memory limit":             {MemoryLimitBytes: -5},
		"negative memory request":           {MemorySoftBytes: -5},
	} {
		if err := checkV1Spec("/x", s); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	for name, s := range map[string]Spec{
		"zero":      {},
		"unlimited": {CPUQuotaMicros: Unlimited, MemoryLimitBytes: Unlimited, MemorySoftBytes: Unlimited},
		"limits":    {CPUShares: 2, CPUQuotaMicros: 1000, CPUPeriodMicros: 1000000, MemoryLimitBytes: 1},
	} {
		if err := checkV1Spec("/x", s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Controllers mounted apart from their name (cpu,cpuacct) are found through
// the symlink distributions make; without one the Manager says so.
func TestV1SubsystemNeedsTheControllerAtItsName(t *testing.T) {
	dir := t.TempDir()
	comounted := filepath.Join(dir, "cpu,cpuacct")
	if err := os.Mkdir(comounted, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := v1Subsystem(cgroup1.Cpu, comounted); err == nil {
		t.Error("no cpu symlink: want an error")
	}
	if err := os.Symlink("cpu,cpuacct", filepath.Join(dir, "cpu")); err != nil {
		t.Fatal(err)
	}
	s, err := v1Subsystem(cgroup1.Cpu, comounted)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != cgroup1.Cpu {
		t.Errorf("got %s", s.Name())
	}
}
