//go:build linux

package cgroups

import (
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
	"time"

	"golang.org/x/sys/unix"
)

// The controllers allot's cgroups need on the unified hierarchy, and those
// joined where the parent offers them (containerd's cgroup2 enables the
// same three).
var (
	v2Required = []string{"cpu", "memory"}
	v2Optional = []string{"pids"}
)

// Bounds on waits for the kernel, as in v1: far above what a healthy
// kernel needs, so that a process stuck in uninterruptible sleep becomes an
// error instead of a hung agent.
const (
	v2RoundWait   = time.Second      // per KillAll round (freeze, then exit after SIGKILL)
	v2KillTimeout = 30 * time.Second // for all of KillAll
	v2RemoveWait  = 5 * time.Second  // for rmdir's EBUSY on a cgroup whose children are still dying
)

// v2Kernel is what the kernel does on the three writing operations of the
// cgroup file system. On a real hierarchy mkdir creates the interface
// files and rmdir removes them; tests replace it with a fake kernel over a
// plain directory, which must do the same. Reads go to the files directly.
type v2Kernel interface {
	Mkdir(dir string) error
	Rmdir(dir string) error
	// WriteFile writes value to an existing interface file in one
	// write(2); it never creates a file.
	WriteFile(path, value string) error
}

type realV2Kernel struct{}

func (realV2Kernel) Mkdir(dir string) error { return unix.Mkdir(dir, 0o755) }
func (realV2Kernel) Rmdir(dir string) error { return unix.Rmdir(dir) }

func (realV2Kernel) WriteFile(path, value string) error {
	// O_TRUNC as runc does; cgroup files ignore it, and it spares a fake
	// hierarchy of regular files the tail of a longer old value.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return unwrapPathError(err)
	}
	_, err = f.WriteString(value)
	return errors.Join(unwrapPathError(err), unwrapPathError(f.Close()))
}

type v2Manager struct {
	mountpoint string
	kernel     v2Kernel
	// release is uname's kernel release; major and minor are 0 when it
	// could not be read, and then Start leaves the check to clone3.
	release      string
	major, minor int
	// memoryPoll is WatchMemory's V2MemoryPollInterval (tests shorten or
	// lengthen it).
	memoryPoll time.Duration
	inotify    *inotifyHub
}

// NewV2 returns the Manager of the cgroup v2 (unified) hierarchy mounted at
// mountpoint. It fails when the hierarchy does not offer the cpu and memory
// controllers at its root: they are bound to a v1 hierarchy (a hybrid
// host), or not delegated to agentd's cgroup namespace.
func NewV2(mountpoint string) (Manager, error) {
	m, err := newV2Manager(mountpoint, realV2Kernel{})
	if err != nil {
		return nil, err
	}
	controllers, err := m.readControllers(m.mountpoint, "cgroup.controllers")
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, c := range v2Required {
		if !slices.Contains(controllers, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("cgroup v2 at %s: controllers %s are not available (cgroup.controllers: %q); they are bound to cgroup v1 hierarchies or not delegated to this cgroup namespace",
			mountpoint, strings.Join(missing, ", "), strings.Join(controllers, " "))
	}
	return m, nil
}

// newV2Manager makes a Manager on any cgroup2 directory, with or without
// controllers; NewV2 adds the controller check.
func newV2Manager(mountpoint string, kernel v2Kernel) (*v2Manager, error) {
	if !filepath.IsAbs(mountpoint) {
		return nil, fmt.Errorf("cgroup v2: mount point %q is not an absolute path", mountpoint)
	}
	if _, err := os.Stat(filepath.Join(mountpoint, "cgroup.controllers")); err != nil {
		return nil, fmt.Errorf("cgroup v2: %s is not a cgroup2 hierarchy: %w", mountpoint, err)
	}
	m := &v2Manager{mountpoint: filepath.Clean(mountpoint), kernel: kernel, memoryPoll: V2MemoryPollInterval, inotify: &inotifyHub{}}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		m.release = unix.ByteSliceToString(uts.Release[:])
		m.major, m.minor, _ = parseKernelRelease(m.release)
	}
	return m, nil
}

func (m *v2Manager) Mode() Mode { return V2 }

// dir is the directory of the cgroup at path, relative to the mount point.
func (m *v2Manager) dir(path string) string { return filepath.Join(m.mountpoint, path) }

func (m *v2Manager) readControllers(dir, file string) ([]string, error) {
	path := filepath.Join(dir, file)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	defer f.Close()
	controllers, err := parseControllers(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup v2: %s: %w", path, err)
	}
	return controllers, nil
}

// Create makes the cgroup after enabling cpu, memory (and pids) for the
// children of each of its ancestors, from the mount point down: a child
// has a controller's files (cpu.weight, memory.max, …) only when its
// parent lists the controller in cgroup.subtree_control, and a parent can
// list only what its own parent enabled. Controllers already enabled are
// not written again, so a delegated hierarchy whose upper levels agentd
// may not write works as long as they are set up.
func (m *v2Manager) Create(path string, spec Spec) (Cgroup, error) {
	if err := checkV1Path(path); err != nil {
		return nil, err
	}
	if err := checkV1Spec(path, spec); err != nil {
		return nil, err
	}
	dir := m.dir(path)
	parent := filepath.Dir(dir)
	if _, err := os.Stat(parent); err != nil {
		return nil, fmt.Errorf("create cgroup %s: parent %s: %w", path, parent, notExist(err))
	}
	if err := m.enableControllers(path); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", path, err)
	}
	existed := false
	if err := m.kernel.Mkdir(dir); errors.Is(err, unix.EEXIST) {
		existed = true
	} else if err != nil {
		return nil, fmt.Errorf("create cgroup %s: mkdir %s: %w", path, dir, err)
	}
	c := &v2Cgroup{m: m, path: path}
	if existed {
		if err := c.update(spec); err != nil {
			return nil, err
		}
	} else if err := c.write(spec); err != nil {
		// A refused spec leaves nothing behind.
		if rmErr := m.kernel.Rmdir(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("create cgroup %s: remove it again: %w", path, rmErr))
		}
		return nil, err
	}
	if err := c.openOOMBaseline(); err != nil {
		return nil, err
	}
	return c, nil
}

// enableControllers writes cgroup.subtree_control in every ancestor of path.
func (m *v2Manager) enableControllers(path string) error {
	var ancestors []string
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		ancestors = append(ancestors, p)
		if p == "/" {
			break
		}
	}
	for _, ancestor := range slices.Backward(ancestors) {
		dir := m.dir(ancestor)
		available, err := m.readControllers(dir, "cgroup.controllers")
		if err != nil {
			return err
		}
		enabled, err := m.readControllers(dir, "cgroup.subtree_control")
		if err != nil {
			return err
		}
		var enable []string
		for _, c := range v2Required {
			if !slices.Contains(available, c) {
				return fmt.Errorf("controller %s is not available in %s (cgroup.controllers: %q)", c, dir, strings.Join(available, " "))
			}
			if !slices.Contains(enabled, c) {
				enable = append(enable, "+"+c)
			}
		}
		for _, c := range v2Optional {
			if slices.Contains(available, c) && !slices.Contains(enabled, c) {
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) == 0 {
			continue
		}
		file := filepath.Join(dir, "cgroup.subtree_control")
		value := strings.Join(enable, " ")
		if err := m.kernel.WriteFile(file, value); err != nil {
			if errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("write %q to %s: %w (cgroup v2 enables controllers for the children of a cgroup only while it has no processes of its own: move them to a leaf cgroup, or choose another -cgroup-root)",
					value, file, err)
			}
			return fmt.Errorf("write %q to %s: %w", value, file, err)
		}
	}
	return nil
}

func (m *v2Manager) Load(path string) (Cgroup, error) {
	if err := checkV1Path(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(m.dir(path)); err != nil {
		return nil, fmt.Errorf("load cgroup %s: %w", path, notExist(err))
	}
	c := &v2Cgroup{m: m, path: path}
	if err := c.openOOMBaseline(); err != nil {
		return nil, err
	}
	return c, nil
}

type v2Cgroup struct {
	m    *v2Manager
	path string
	// oomBase is the cgroup's own OOM count when this handle was opened:
	// LimitOOMs counts from then on, as v1's eventfds do, so that callers
	// never branch on the mode (a task in a shared cgroup must not inherit
	// the OOMs of an earlier one).
	oomBase uint64
}

func (c *v2Cgroup) Path() string { return c.path }
func (c *v2Cgroup) dir() string  { return c.m.dir(c.path) }

// cpuWeight converts v1 cpu.shares [2, 262144] to cgroup v2's cpu.weight
// [1, 10000] linearly, with the formula of runc and crun, so that the
// weights agree with those of containers other tools start on the same
// host. Only the ratio between siblings matters to the scheduler.
func cpuWeight(shares uint64) uint64 {
	return 1 + ((shares-minCPUShares)*9999)/(maxCPUShares-minCPUShares)
}

// v2Files are the four files a Spec is written to, in the order written.
var v2Files = []string{"cpu.weight", "cpu.max", "memory.low", "memory.max"}

// v2Values maps spec to the contents of v2Files. Zero values are the
// kernel's defaults, so that Update with a smaller spec really removes
// what a larger one set:
//
//   - cpu.weight 100 without shares;
//   - cpu.max "max <period>" without a quota or with Unlimited; the period
//     is written either way, in the same write as the quota, so the two
//     never disagree in between (v1 needs an ordering dance for that);
//   - memory.low 0 without a request; Unlimited (which v1 writes as -1,
//     "never above its soft limit, reclaimed last") is "max", full
//     protection;
//   - memory.max "max" without a limit or with Unlimited.
//
// memory.low protects only as far as the protection of every ancestor
// reaches (the kernel bounds a cgroup's effective protection by its
// parent's): the tasks' requests count only under an agent root cgroup
// whose own request is Unlimited, or the sum of theirs.
func v2Values(spec Spec) []string {
	weight := uint64(100)
	if spec.CPUShares != 0 {
		weight = cpuWeight(spec.CPUShares)
	}
	quota := "max"
	if spec.CPUQuotaMicros > 0 {
		quota = strconv.FormatInt(spec.CPUQuotaMicros, 10)
	}
	low := "0"
	switch {
	case spec.MemorySoftBytes == Unlimited:
		low = "max"
	case spec.MemorySoftBytes > 0:
		low = strconv.FormatInt(spec.MemorySoftBytes, 10)
	}
	limit := "max"
	if spec.MemoryLimitBytes > 0 {
		limit = strconv.FormatInt(spec.MemoryLimitBytes, 10)
	}
	return []string{
		strconv.FormatUint(weight, 10),
		quota + " " + strconv.FormatUint(spec.period(), 10),
		low,
		limit,
	}
}

// write sets every field of spec. The kernel accepts anything checkV1Spec
// passed: a memory.max below the usage makes it reclaim and, failing
// that, OOM-kill in the cgroup rather than refuse the write, as v1 does.
func (c *v2Cgroup) write(spec Spec) error {
	for i, value := range v2Values(spec) {
		if err := c.writeFile(v2Files[i], value); err != nil {
			return err
		}
	}
	return nil
}

func (c *v2Cgroup) Update(spec Spec) error {
	if err := checkV1Spec(c.path, spec); err != nil {
		return err
	}
	return c.update(spec)
}

// update writes spec and, when the kernel refuses part of it, writes back
// what the files held before (each file reads back in the format it is
// written in), so that a refused spec changes nothing.
func (c *v2Cgroup) update(spec Spec) error {
	old := make([]string, len(v2Files))
	for i, file := range v2Files {
		path := filepath.Join(c.dir(), file)
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("cgroup %s: read %s: %w", c.path, path, unwrapPathError(err))
		}
		old[i] = strings.TrimSpace(string(b))
	}
	err := c.write(spec)
	if err == nil {
		return nil
	}
	for i, value := range old {
		if restoreErr := c.writeFile(v2Files[i], value); restoreErr != nil {
			return errors.Join(err, fmt.Errorf("cgroup %s: restore the previous limits: %w", c.path, restoreErr))
		}
	}
	return err
}

func (c *v2Cgroup) writeFile(file, value string) error {
	path := filepath.Join(c.dir(), file)
	if err := c.m.kernel.WriteFile(path, value); err != nil {
		return fmt.Errorf("cgroup %s: write %s to %s: %w", c.path, value, path, err)
	}
	return nil
}

// Start starts cmd through clone3(CLONE_INTO_CGROUP) with a descriptor of
// the cgroup's directory (SysProcAttr.UseCgroupFD), so the child is in
// the cgroup from its first instruction and nothing of agentd ever joins
// the cgroup (v1 has to move a thread in and out). Other SysProcAttr
// fields of cmd are kept; cmd's struct is copied, not changed.
//
// The kernel refuses with EBUSY a cgroup that has controllers enabled for
// children (cgroup v2 keeps processes in leaves only), and clone3 without
// CLONE_INTO_CGROUP (before Linux 5.7) cannot start into a cgroup at all.
func (c *v2Cgroup) Start(cmd *exec.Cmd) error {
	if cmd.Process != nil {
		return fmt.Errorf("cgroup %s: start %s: already started", c.path, cmd.Path)
	}
	if m := c.m; m.major != 0 && (m.major < 5 || m.major == 5 && m.minor < 7) {
		return fmt.Errorf("cgroup %s: start %s: starting a process inside a cgroup v2 needs Linux 5.7 or later (clone3 CLONE_INTO_CGROUP); this kernel is %s",
			c.path, cmd.Path, m.release)
	}
	fd, err := unix.Open(c.dir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			err = ErrNotExist
		}
		return fmt.Errorf("cgroup %s: start %s: open %s: %w", c.path, cmd.Path, c.dir(), err)
	}
	// The kernel resolves the descriptor during clone3, inside cmd.Start.
	defer unix.Close(fd)
	attr := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		attr = *cmd.SysProcAttr
	}
	attr.UseCgroupFD, attr.CgroupFD = true, fd
	cmd.SysProcAttr = &attr
	if err := cmd.Start(); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("cgroup %s: start %s: %w (the cgroup has controllers enabled for children in cgroup.subtree_control, and cgroup v2 keeps processes out of such cgroups)",
				c.path, cmd.Path, err)
		}
		return fmt.Errorf("cgroup %s: start %s: %w", c.path, cmd.Path, err)
	}
	return nil
}

// Pids lists the processes in this cgroup and its descendants: the
// union of their cgroup.procs. A process that has exited is not listed,
// even before its parent reaps it (the kernel skips dead leaders).
func (c *v2Cgroup) Pids() ([]int, error) {
	pids, err := treePids(c.dir())
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: list processes: %w", c.path, err)
	}
	return pids, nil
}

// Signal sends sig to every process in this cgroup and its descendants.
//
// A pid read from cgroup.procs may have exited and been reused by an
// unrelated process before it is signalled. So each pid is pinned first
// with a pidfd, then the cgroup is listed again, and only pidfds whose pid
// is still listed are signalled: the process that held the pid when its
// pidfd was opened either is that listed process (ours) or has exited
// since, and then the signal fails with ESRCH and reaches nobody. A process
// that joins between the two lists is left for the next call.
func (c *v2Cgroup) Signal(sig syscall.Signal) error {
	_, err := c.signalAll(sig)
	return err
}

// signalAll returns how many processes it signalled.
func (c *v2Cgroup) signalAll(sig syscall.Signal) (int, error) {
	pids, err := c.Pids()
	if err != nil || len(pids) == 0 {
		return 0, err
	}
	pidfds := make(map[int]int, len(pids))
	defer func() {
		for _, fd := range pidfds {
			unix.Close(fd)
		}
	}()
	var errs []error
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup %s: signal %d: pidfd: %w", c.path, pid, err))
			continue
		}
		pidfds[pid] = fd
	}
	still, err := c.Pids()
	if err != nil {
		return 0, errors.Join(append(errs, err)...)
	}
	signalled := 0
	for _, pid := range still {
		fd, ok := pidfds[pid]
		if !ok {
			continue
		}
		err := unix.PidfdSendSignal(fd, sig, nil, 0)
		switch {
		case err == nil:
			signalled++
		case !errors.Is(err, unix.ESRCH):
			errs = append(errs, fmt.Errorf("cgroup %s: signal %d with %v: %w", c.path, pid, sig, err))
		}
	}
	return signalled, errors.Join(errs...)
}

// KillAll writes "1" to cgroup.kill (Linux 5.14+): the kernel kills every
// process of the subtree, and a fork racing with it cannot escape (the
// child is killed too). It waits until cgroup.procs is empty in the whole
// subtree and writes cgroup.kill again each round, for a process moved in
// from outside meanwhile. Without cgroup.kill it freezes, kills and thaws
// (killByFreezing). A cgroup that does not exist has nothing to kill.
func (c *v2Cgroup) KillAll() error {
	if _, err := os.Stat(c.dir()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Stat(filepath.Join(c.dir(), "cgroup.kill")); errors.Is(err, fs.ErrNotExist) {
		return c.killByFreezing()
	}
	deadline := time.Now().Add(v2KillTimeout)
	for {
		if err := c.writeFile("cgroup.kill", "1"); err != nil {
			if _, statErr := os.Stat(c.dir()); errors.Is(statErr, fs.ErrNotExist) {
				return nil // deleted meanwhile
			}
			return err
		}
		left, err := waitNoPids(c.Pids, roundEnd(deadline))
		if err != nil || len(left) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: kill all: %d processes still there after %v: %v", c.path, len(left), v2KillTimeout, left)
		}
	}
}

// killByFreezing is KillAll for kernels without cgroup.kill: it freezes
// the subtree (cgroup.freeze, Linux 5.2+), so that no process forks while
// the pids are read and signalled, sends SIGKILL to each (fatal signals
// reach frozen processes), thaws, and repeats until none is left. A
// freeze that does not complete within a round (a process in
// uninterruptible sleep) does not stop it: the round kills what it found.
func (c *v2Cgroup) killByFreezing() error {
	freezable := true
	if _, err := os.Stat(filepath.Join(c.dir(), "cgroup.freeze")); errors.Is(err, fs.ErrNotExist) {
		freezable = false
	}
	deadline := time.Now().Add(v2KillTimeout)
	for {
		if freezable {
			if err := c.writeFile("cgroup.freeze", "1"); err != nil {
				return err
			}
			if err := c.waitFrozen(roundEnd(deadline)); err != nil {
				return errors.Join(err, c.thaw())
			}
		}
		_, killErr := c.signalAll(unix.SIGKILL)
		// Thawed whatever happened: a process started later into a
		// cgroup left frozen would never run.
		var thawErr error
		if freezable {
			thawErr = c.thaw()
		}
		if err := errors.Join(killErr, thawErr); err != nil {
			return err
		}
		left, err := waitNoPids(c.Pids, roundEnd(deadline))
		if err != nil || len(left) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: kill all: %d processes still there after %v: %v", c.path, len(left), v2KillTimeout, left)
		}
	}
}

func (c *v2Cgroup) thaw() error { return c.writeFile("cgroup.freeze", "0") }

// waitFrozen waits until cgroup.events says "frozen 1", or deadline; not
// getting there is no error (see killByFreezing).
func (c *v2Cgroup) waitFrozen(deadline time.Time) error {
	path := filepath.Join(c.dir(), "cgroup.events")
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", c.path, err)
		}
		events, err := parseFlatKeyed(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("cgroup %s: %s: %w", c.path, path, err)
		}
		if events["frozen"] == 1 || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(pause)
	}
}

// Delete removes the cgroup and its descendants, deepest first. It kills
// nothing: a cgroup with processes left stays, with an error naming them.
func (c *v2Cgroup) Delete() error {
	var dirs []string
	err := filepath.WalkDir(c.dir(), func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete cgroup %s: %w", c.path, err)
	}
	// WalkDir lists parents before their children.
	for _, dir := range slices.Backward(dirs) {
		if err := c.removeDir(dir); err != nil {
			return fmt.Errorf("delete cgroup %s: rmdir %s: %w", c.path, dir, err)
		}
	}
	return nil
}

// removeDir removes one cgroup directory (see removeWhenEmpty) through the
// kernel seam, which tests fake.
func (c *v2Cgroup) removeDir(dir string) error {
	return removeWhenEmpty(dir, c.m.kernel.Rmdir, v2RemoveWait)
}

// Stats reads cpu.stat usage_usec, memory.current, memory.peak (Linux
// 5.19+; 0 before) and memory.events oom_kill, which the kernel counts in
// the victim's cgroup and all its ancestors, so it covers the descendants.
// LimitOOMs: see ownOOMs.
func (c *v2Cgroup) Stats() (Stats, error) {
	var s Stats
	cpu, err := c.readFlatKeyed("cpu.stat")
	if err != nil {
		return Stats{}, err
	}
	usage, ok := cpu["usage_usec"]
	if !ok {
		return Stats{}, fmt.Errorf("cgroup %s: cpu.stat has no usage_usec", c.path)
	}
	s.CPUUsageNanos = usage * 1000
	if s.MemoryUsageBytes, err = c.readUint("memory.current"); err != nil {
		return Stats{}, err
	}
	if s.MemoryMaxBytes, err = c.readUint("memory.peak"); errors.Is(err, fs.ErrNotExist) {
		s.MemoryMaxBytes = 0
	} else if err != nil {
		return Stats{}, err
	}
	events, err := c.readFlatKeyed("memory.events")
	if err != nil {
		return Stats{}, err
	}
	s.OOMKills = events["oom_kill"]
	own, err := c.ownOOMs()
	if err != nil {
		return Stats{}, err
	}
	if own > c.oomBase {
		s.LimitOOMs = own - c.oomBase
	}
	return s, nil
}

// ownOOMs counts the times this cgroup ran out of memory at its own
// memory.max: the "oom" of memory.events.local (Linux 5.2+), else of
// memory.events.
//
// The kernel raises "oom" (memcg_memory_event(MEMCG_OOM)) on the cgroup
// whose limit the failed charge hit, not on the cgroup of the allocating
// task: a task whose parent runs out charges the parent's counter, and the
// parent's events count it. The ".local" file holds exactly the events
// raised on this cgroup. memory.events is hierarchical: the kernel adds
// each event to the cgroup and to all its ancestors (events propagate
// upward, never down), so there "oom" also counts the OOMs at the limits
// of descendants, never those of ancestors. The fallback is therefore
// exact for a leaf cgroup, the cgroup of a task; for an executor cgroup
// with nested task cgroups it would also count its tasks' own OOMs, but
// kernels without memory.events.local (before 5.2) cannot start tasks in
// cgroup v2 anyway (Start needs 5.7). A node-wide OOM raises "oom" in no
// cgroup: it shows in oom_kill only.
func (c *v2Cgroup) ownOOMs() (uint64, error) {
	events, err := c.readFlatKeyed("memory.events.local")
	if errors.Is(err, fs.ErrNotExist) {
		events, err = c.readFlatKeyed("memory.events")
	}
	if err != nil {
		return 0, err
	}
	return events["oom"], nil
}

// openOOMBaseline records the OOM count LimitOOMs starts from. A cgroup
// without the memory controller (a hierarchy without it, only used for
// processes) has none to count.
func (c *v2Cgroup) openOOMBaseline() error {
	n, err := c.ownOOMs()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	c.oomBase = n
	return nil
}

// readFlatKeyed reads a flat keyed file of the cgroup. A missing file is
// an error that errors.Is fs.ErrNotExist.
func (c *v2Cgroup) readFlatKeyed(file string) (map[string]uint64, error) {
	path := filepath.Join(c.dir(), file)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	defer f.Close()
	values, err := parseFlatKeyed(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %s: %w", c.path, path, err)
	}
	return values, nil
}

func (c *v2Cgroup) readUint(file string) (uint64, error) {
	path := filepath.Join(c.dir(), file)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	defer f.Close()
	v, err := parseV1Uint(f)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %s: %w", c.path, path, err)
	}
	return v, nil
}

// roundEnd is the end of one wait round of KillAll: v2RoundWait from now,
// or deadline if that comes first.
func roundEnd(deadline time.Time) time.Time {
	if end := time.Now().Add(v2RoundWait); end.Before(deadline) {
		return end
	}
	return deadline
}
