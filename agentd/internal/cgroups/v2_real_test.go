//go:build linux

package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Tests on the kernel's own cgroup2. On a hybrid host like this one the
// cgroup2 at /sys/fs/cgroup/unified has no cpu or memory controller, but
// processes, clone3 into a cgroup, cgroup.procs, cgroup.kill,
// cgroup.freeze and rmdir work as on any unified host.

// requireCgroup2 returns a Manager on this host's cgroup2 mount (without
// the controller check of NewV2) and a fresh cgroup path of the test's in
// it, removed at the end, or skips the test when the machine cannot run
// it: not root, no cgroup2 mounted, not writable, a kernel before 5.7.
// needController also asks for a controller the test cgroup can enable
// for its children, and returns its name. It is the one place tests on a
// real cgroup2 skip.
func requireCgroup2(t *testing.T, needController bool) (m *v2Manager, path, controller string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates real cgroup v2 cgroups")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("needs /proc/self/mountinfo: %v", err)
	}
	mounts, err := parseMountinfo(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var mountpoint string
	for _, mount := range visibleMounts(mounts) {
		if mount.fsType == "cgroup2" {
			mountpoint = mount.mountPoint
			break
		}
	}
	if mountpoint == "" {
		t.Skip("needs a cgroup2 mount: none in /proc/self/mountinfo")
	}
	m, err = newV2Manager(mountpoint, realV2Kernel{})
	if err != nil {
		t.Skipf("needs a usable cgroup2 mount: %v", err)
	}
	if m.major < 5 || m.major == 5 && m.minor < 7 {
		t.Skipf("needs Linux 5.7 for clone3 CLONE_INTO_CGROUP; this is %s", m.release)
	}
	path = fmt.Sprintf("/allot-v2test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	if needController {
		// The test cgroup is offered what the root enables for its
		// children. When the root enables nothing, one controller it
		// has is enabled for the test and disabled again afterwards
		// (registered first, so it runs after the cgroup is gone).
		enabled, err := m.readControllers(m.mountpoint, "cgroup.subtree_control")
		if err != nil {
			t.Fatal(err)
		}
		if len(enabled) > 0 {
			controller = enabled[0]
		} else {
			available, err := m.readControllers(m.mountpoint, "cgroup.controllers")
			if err != nil {
				t.Fatal(err)
			}
			if len(available) == 0 {
				t.Skipf("needs a controller in the cgroup2 at %s; it has none", mountpoint)
			}
			controller = available[0]
			rootControl := filepath.Join(m.mountpoint, "cgroup.subtree_control")
			if err := m.kernel.WriteFile(rootControl, "+"+controller); err != nil {
				t.Skipf("needs to enable %s in %s: %v", controller, rootControl, err)
			}
			t.Cleanup(func() {
				if err := m.kernel.WriteFile(rootControl, "-"+controller); err != nil {
					t.Errorf("disable %s again in %s: %v", controller, rootControl, err)
				}
			})
		}
	}
	if err := m.kernel.Mkdir(m.dir(path)); err != nil {
		t.Skipf("needs a writable cgroup2 at %s: %v", mountpoint, err)
	}
	t.Cleanup(func() {
		cg := &v2Cgroup{m: m, path: path}
		if err := errors.Join(cg.KillAll(), cg.Delete()); err != nil {
			t.Errorf("clean up %s: %v", path, err)
		}
	})
	return m, path, controller
}

// startV2 starts argv, a process that lives until it is killed, in cg and
// reaps it at the end of the test.
func startV2(t *testing.T, cg Cgroup, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cg.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The process is in the cgroup from its clone: no wait is needed to
	// see it there (and waitV2Pids never waits for one that is not).
	pids, err := cg.Pids()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pids, cmd.Process.Pid) {
		t.Fatalf("process %d is not in %s right after Start (it holds %v)", cmd.Process.Pid, cg.Path(), pids)
	}
	return cmd
}

// waitV2Pids waits until the cgroup holds n processes, for a shell that
// starts its children, which inherit the shell's cgroup. It has no time
// limit: go test's -timeout ends a test whose processes never come.
func waitV2Pids(t *testing.T, cg Cgroup, n int) []int {
	t.Helper()
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		pids, err := cg.Pids()
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) == n {
			return pids
		}
		if len(pids) > n {
			t.Fatalf("cgroup %s holds %d processes, want %d: %v", cg.Path(), len(pids), n, pids)
		}
		time.Sleep(pause)
	}
}

func TestV2RealStartPlacesTheProcessBeforeItRuns(t *testing.T) {
	m, path, _ := requireCgroup2(t, false)
	cg, err := m.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	// cat reads its own /proc/self/cgroup: the first thing it does, so a
	// process moved in after the start would show its parent's cgroup.
	cmd := exec.Command("cat", "/proc/self/cgroup")
	var out strings.Builder
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	shared := cmd.SysProcAttr
	if err := cg.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	var v2Line string
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "0::") {
			v2Line = sc.Text()
		}
	}
	if !strings.HasSuffix(v2Line, path) {
		t.Errorf("the process saw its cgroup2 path as %q, want one ending in %s (all: %q)", v2Line, path, out.String())
	}
	if shared.UseCgroupFD || !shared.Setpgid {
		t.Errorf("Start changed the caller's SysProcAttr: %+v", shared)
	}
	if err := cg.Start(cmd); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Errorf("second Start: %v", err)
	}
}

func TestV2RealPidsSignalKillAllDelete(t *testing.T) {
	m, path, _ := requireCgroup2(t, false)
	if err := m.kernel.Mkdir(m.dir(path + "/child")); err != nil {
		t.Fatal(err)
	}
	parent, err := m.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	child, err := m.Load(path + "/child")
	if err != nil {
		t.Fatal(err)
	}
	// Without controllers enabled, a cgroup with children may hold
	// processes itself; the recursive listing must find both.
	a := startV2(t, parent, "sleep", "1000")
	b := startV2(t, child, "sleep", "1000")
	want := []int{a.Process.Pid, b.Process.Pid}
	slices.Sort(want)
	if got, err := parent.Pids(); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parent Pids() = %v, %v; want %v", got, err, want)
	}
	if got, err := child.Pids(); err != nil || !reflect.DeepEqual(got, []int{b.Process.Pid}) {
		t.Errorf("child Pids() = %v, %v; want [%d]", got, err, b.Process.Pid)
	}

	if err := parent.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{a, b} {
		err := cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("pid %d: %v, want killed by SIGTERM", cmd.Process.Pid, err)
		}
	}

	// A shell that has started eight children: KillAll through
	// cgroup.kill returns only when none is left, without their being
	// reaped (the shell's children die with it, the shell is ours).
	shell := startV2(t, child, "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 1000 & done; wait")
	waitV2Pids(t, parent, 9)
	err = parent.Delete()
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "are in it") {
		t.Errorf("Delete with processes: %v, want EBUSY naming them", err)
	}
	if err := parent.KillAll(); err != nil {
		t.Fatal(err)
	}
	if pids, err := parent.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after KillAll: %v, %v", pids, err)
	}
	if err := shell.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("shell: %v, want killed", err)
	}
	if err := parent.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Delete: %v", err)
	}
	if err := parent.Delete(); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if err := parent.KillAll(); err != nil {
		t.Errorf("KillAll of a deleted cgroup: %v", err)
	}
	if err := child.Start(exec.Command("true")); !errors.Is(err, ErrNotExist) {
		t.Errorf("Start in a deleted cgroup: %v, want ErrNotExist", err)
	}
}

// The fallback of kernels before 5.14, run on this one: freeze, SIGKILL,
// thaw.
func TestV2RealKillByFreezing(t *testing.T) {
	m, path, _ := requireCgroup2(t, false)
	if err := m.kernel.Mkdir(m.dir(path + "/child")); err != nil {
		t.Fatal(err)
	}
	parent, err := m.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	child, err := m.Load(path + "/child")
	if err != nil {
		t.Fatal(err)
	}
	shell := startV2(t, child, "sh", "-c", "for i in 1 2 3 4; do sleep 1000 & done; wait")
	waitV2Pids(t, parent, 5)
	if err := parent.(*v2Cgroup).killByFreezing(); err != nil {
		t.Fatal(err)
	}
	if pids, err := parent.Pids(); err != nil || len(pids) != 0 {
		t.Errorf("after killByFreezing: %v, %v", pids, err)
	}
	if err := shell.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("shell: %v, want killed", err)
	}
	b, err := os.ReadFile(filepath.Join(m.dir(path), "cgroup.freeze"))
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		t.Errorf("cgroup.freeze = %q, %v; want the cgroup thawed", b, err)
	}
	// A process started afterwards runs (in a cgroup left frozen it would
	// never end).
	cmd := exec.Command("true")
	if err := child.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("a process started after the kill: %v", err)
	}
}

func TestV2RealStartRefusesACgroupWithControllersForChildren(t *testing.T) {
	m, path, controller := requireCgroup2(t, true)
	if err := m.kernel.Mkdir(m.dir(path + "/child")); err != nil {
		t.Fatal(err)
	}
	if err := m.kernel.WriteFile(filepath.Join(m.dir(path), "cgroup.subtree_control"), "+"+controller); err != nil {
		t.Fatal(err)
	}
	cg, err := m.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	err = cg.Start(cmd)
	if !errors.Is(err, unix.EBUSY) || !strings.Contains(err.Error(), "keeps processes out of such cgroups") {
		t.Errorf("Start: %v, want EBUSY with an explanation", err)
	}
	if cmd.Process != nil {
		t.Errorf("started %d", cmd.Process.Pid)
	}
}

func TestNewV2OnThisHostsCgroup2(t *testing.T) {
	m, _, _ := requireCgroup2(t, false)
	controllers, err := m.readControllers(m.mountpoint, "cgroup.controllers")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewV2(m.mountpoint)
	usable := slices.Contains(controllers, "cpu") && slices.Contains(controllers, "memory")
	if usable != (err == nil) {
		t.Errorf("NewV2(%s) with controllers %q: %v", m.mountpoint, controllers, err)
	}
	if !usable && !strings.Contains(err.Error(), "are not available") {
		t.Errorf("NewV2(%s): %v, want it to name the missing controllers", m.mountpoint, err)
	}
}
