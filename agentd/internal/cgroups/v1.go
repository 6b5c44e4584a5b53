//go:build linux

package cgroups

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1Required are the controllers every allot cgroup lives in; v1Optional
// are joined where the host mounts them. The freezer is required because
// KillAll cannot be made race-free against forks without it.
var (
	v1Required = []cgroup1.Name{cgroup1.Cpu, cgroup1.Cpuacct, cgroup1.Memory, cgroup1.Freezer}
	v1Optional = []cgroup1.Name{cgroup1.Cpuset, cgroup1.Pids}
)

// Bounds on waits for the kernel. They are far above what a healthy kernel
// needs (microseconds to milliseconds); they exist so that a process stuck
// in uninterruptible sleep turns into an error instead of a hung agent.
const (
	v1FreezeWait  = time.Second      // per KillAll round, for FREEZING → FROZEN
	v1KillTimeout = 30 * time.Second // for all of KillAll
	v1RemoveWait  = 5 * time.Second  // for rmdir's EBUSY on a dying cgroup
)

// v1Hierarchy is one mounted v1 hierarchy; several controllers may share it
// (cpu,cpuacct on many distributions).
type v1Hierarchy struct {
	mount       string // where it is mounted, e.g. /sys/fs/cgroup/memory
	root        string // the hierarchy's path the mount shows (/ unless bind-mounted)
	controllers []string
}

// dir is the directory of the cgroup at path, a path relative to the mount.
func (h *v1Hierarchy) dir(path string) string { return filepath.Join(h.mount, path) }

// relative maps a path as /proc/<pid>/cgroup shows it (relative to the
// hierarchy's root) to one relative to the mount; ok is false when the
// path is outside what the mount shows.
func (h *v1Hierarchy) relative(procPath string) (string, bool) {
	if h.root == "/" {
		return procPath, true
	}
	if procPath == h.root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(procPath, h.root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

type v1Manager struct {
	// hierarchies holds each mounted hierarchy once, in the order of
	// v1Required then v1Optional.
	hierarchies  []*v1Hierarchy
	byController map[string]*v1Hierarchy
	// subsystems are containerd's controllers on the same mounts; Create
	// uses them to make the directories (cpuset needs cpus and mems copied
	// from its parent before it accepts a task).
	subsystems []cgroup1.Subsystem
}

// NewV1 returns the cgroup v1 Manager on this host's hierarchies, found in
// /proc/self/mountinfo. It fails when a required controller (cpu, cpuacct,
// memory, freezer) is not mounted.
func NewV1() (Manager, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cgroup v1: %w", err)
	}
	defer f.Close()
	mounts, err := parseV1Mounts(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup v1: /proc/self/mountinfo: %w", err)
	}
	return newV1Manager(mounts)
}

func newV1Manager(mounts []v1Hierarchy) (*v1Manager, error) {
	m := &v1Manager{byController: map[string]*v1Hierarchy{}}
	found := map[string]*v1Hierarchy{}
	for i := range mounts {
		for _, c := range mounts[i].controllers {
			if _, dup := found[c]; !dup { // the first mount of a hierarchy wins
				found[c] = &mounts[i]
			}
		}
	}
	for _, name := range slices.Concat(v1Required, v1Optional) {
		h, ok := found[string(name)]
		if !ok {
			if slices.Contains(v1Required, name) {
				return nil, fmt.Errorf("cgroup v1: controller %s is not mounted", name)
			}
			continue
		}
		m.byController[string(name)] = h
		if !slices.Contains(m.hierarchies, h) {
			m.hierarchies = append(m.hierarchies, h)
		}
		s, err := v1Subsystem(name, h.mount)
		if err != nil {
			return nil, err
		}
		m.subsystems = append(m.subsystems, s)
	}
	return m, nil
}

// v1Subsystem builds containerd's controller for name. containerd places
// controller name at <dir>/<name>; that holds for a mount named after its
// controller and for co-mounted hierarchies with the usual symlinks
// (/sys/fs/cgroup/cpu → cpu,cpuacct).
func v1Subsystem(name cgroup1.Name, mount string) (cgroup1.Subsystem, error) {
	dir := filepath.Dir(mount)
	if filepath.Base(mount) != string(name) {
		want, err1 := os.Stat(mount)
		got, err2 := os.Stat(filepath.Join(dir, string(name)))
		if err1 != nil || err2 != nil || !os.SameFile(want, got) {
			return nil, fmt.Errorf("cgroup v1: controller %s is mounted at %s but %s is not that mount",
				name, mount, filepath.Join(dir, string(name)))
		}
	}
	switch name {
	case cgroup1.Cpu:
		return cgroup1.NewCpu(dir), nil
	case cgroup1.Cpuacct:
		return cgroup1.NewCpuacct(dir), nil
	case cgroup1.Memory:
		return cgroup1.NewMemory(dir), nil
	case cgroup1.Freezer:
		return cgroup1.NewFreezer(dir), nil
	case cgroup1.Cpuset:
		return cgroup1.NewCpuset(dir), nil
	case cgroup1.Pids:
		return cgroup1.NewPids(dir), nil
	}
	return nil, fmt.Errorf("cgroup v1: controller %s is not supported", name)
}

func (m *v1Manager) Mode() Mode { return V1 }

func (m *v1Manager) hierarchy(controller cgroup1.Name) *v1Hierarchy {
	return m.byController[string(controller)]
}

// checkV1Path refuses paths that are not a clean absolute path below the
// root: the hierarchy root holds the whole host, and Delete or KillAll on
// it must be impossible.
func checkV1Path(path string) error {
	if path == "" || path[0] != '/' || filepath.Clean(path) != path || path == "/" {
		return fmt.Errorf("cgroup path %q: want a clean absolute path below /, like /allot/task", path)
	}
	return nil
}

// checkV1Spec refuses values the kernel would refuse, before anything is
// written, so that bad input changes nothing.
func checkV1Spec(path string, s Spec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("cgroup %s: %s", path, fmt.Sprintf(format, args...))
	}
	if s.CPUShares != 0 && (s.CPUShares < minCPUShares || s.CPUShares > maxCPUShares) {
		return bad("cpu shares %d outside [%d, %d]", s.CPUShares, minCPUShares, maxCPUShares)
	}
	if s.CPUPeriodMicros != 0 && (s.CPUPeriodMicros < 1000 || s.CPUPeriodMicros > 1000000) {
		return bad("cpu period %d µs outside [1000, 1000000]", s.CPUPeriodMicros)
	}
	if q := s.CPUQuotaMicros; q != 0 && q != Unlimited && q < minCPUQuotaMicro {
		return bad("cpu quota %d µs: want at least %d, or Unlimited", q, minCPUQuotaMicro)
	}
	if v := s.MemoryLimitBytes; v < 0 && v != Unlimited {
		return bad("memory limit %d: want bytes, or Unlimited", v)
	}
	if v := s.MemorySoftBytes; v < 0 && v != Unlimited {
		return bad("memory request %d: want bytes, or Unlimited", v)
	}
	return nil
}

func (m *v1Manager) Create(path string, spec Spec) (Cgroup, error) {
	if err := checkV1Path(path); err != nil {
		return nil, err
	}
	if err := checkV1Spec(path, spec); err != nil {
		return nil, err
	}
	existed := false
	for _, h := range m.hierarchies {
		parent := h.dir(filepath.Dir(path))
		if _, err := os.Stat(parent); err != nil {
			return nil, fmt.Errorf("create cgroup %s: parent %s: %w", path, parent, notExist(err))
		}
		if _, err := os.Stat(h.dir(path)); err == nil {
			existed = true
		}
	}
	_, err := cgroup1.New(cgroup1.StaticPath(path), &specs.LinuxResources{},
		cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return m.subsystems, nil }))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create cgroup %s: %w", path, err), m.removeIfNew(path, existed))
	}
	c := &v1Cgroup{m: m, path: path}
	if existed {
		err = c.update(spec)
	} else {
		err = c.write(spec)
	}
	if err == nil {
		err = c.openOOMCounters()
	}
	if err != nil {
		return nil, errors.Join(err, m.removeIfNew(path, existed))
	}
	return c, nil
}

// removeIfNew undoes a failed Create of a cgroup that did not exist before,
// so that a refused spec leaves nothing behind.
func (m *v1Manager) removeIfNew(path string, existed bool) error {
	if existed {
		return nil
	}
	return (&v1Cgroup{m: m, path: path}).remove()
}

func (m *v1Manager) Load(path string) (Cgroup, error) {
	if err := checkV1Path(path); err != nil {
		return nil, err
	}
	// A cgroup present in some hierarchies only (a Create or Delete cut
	// short) still loads, so that it can be killed and deleted.
	found := false
	for _, h := range m.hierarchies {
		if _, err := os.Stat(h.dir(path)); err == nil {
			found = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("load cgroup %s: %w", path, err)
		}
	}
	if !found {
		return nil, fmt.Errorf("load cgroup %s: %w", path, ErrNotExist)
	}
	c := &v1Cgroup{m: m, path: path}
	if _, err := os.Stat(c.dir(cgroup1.Memory)); err == nil {
		if err := c.openOOMCounters(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func notExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotExist
	}
	return err
}

type v1Cgroup struct {
	m    *v1Manager
	path string

	// OOM notifications (memory.oom_control eventfds) of this cgroup and
	// of its parent since this handle was opened; see Stats.
	mu                   sync.Mutex
	oomEvents, parentOOM *os.File // parentOOM is nil when the parent is the root
	oomCount, parentOOMs uint64
}

func (c *v1Cgroup) Path() string { return c.path }

func (c *v1Cgroup) dir(controller cgroup1.Name) string {
	return c.m.hierarchy(controller).dir(c.path)
}

func (c *v1Cgroup) Update(spec Spec) error {
	if err := checkV1Spec(c.path, spec); err != nil {
		return err
	}
	return c.update(spec)
}

// update writes spec, and when the kernel refuses part of it (a memory
// limit below what it cannot reclaim, a quota above the parent's) writes
// back what was there, so that a refused spec changes nothing.
func (c *v1Cgroup) update(spec Spec) error {
	old, err := c.readSpec()
	if err != nil {
		return err
	}
	err = c.write(spec)
	if err == nil {
		return nil
	}
	if restoreErr := c.write(old); restoreErr != nil {
		return errors.Join(err, fmt.Errorf("cgroup %s: restore the previous limits: %w", c.path, restoreErr))
	}
	return err
}

// readSpec reads what the cgroup enforces now.
func (c *v1Cgroup) readSpec() (Spec, error) {
	var s Spec
	cpu, memory := c.dir(cgroup1.Cpu), c.dir(cgroup1.Memory)
	var err error
	if s.CPUShares, err = c.readUint(cpu, "cpu.shares"); err != nil {
		return Spec{}, err
	}
	if s.CPUPeriodMicros, err = c.readUint(cpu, "cpu.cfs_period_us"); err != nil {
		return Spec{}, err
	}
	if s.CPUQuotaMicros, err = c.readInt(cpu, "cpu.cfs_quota_us"); err != nil {
		return Spec{}, err
	}
	if s.CPUQuotaMicros < 0 {
		s.CPUQuotaMicros = Unlimited
	}
	// "No limit" reads as the largest multiple of the page size.
	for file, field := range map[string]*int64{
		"memory.limit_in_bytes":      &s.MemoryLimitBytes,
		"memory.soft_limit_in_bytes": &s.MemorySoftBytes,
	} {
		v, err := c.readUint(memory, file)
		if err != nil {
			return Spec{}, err
		}
		if v > math.MaxInt64/2 {
			*field = Unlimited
		} else {
			*field = int64(v)
		}
	}
	return s, nil
}

// write sets every field of spec, zero values as the kernel's defaults, so
// that Update with a smaller spec really removes what a larger one set.
func (c *v1Cgroup) write(spec Spec) error {
	cpu := c.dir(cgroup1.Cpu)
	shares := spec.CPUShares
	if shares == 0 {
		shares = defaultCPUShares
	}
	if err := c.writeFile(cpu, "cpu.shares", strconv.FormatUint(shares, 10)); err != nil {
		return err
	}
	quota := spec.CPUQuotaMicros
	if quota == 0 {
		quota = Unlimited
	}
	period := spec.period()
	current, err := c.readUint(cpu, "cpu.cfs_period_us")
	if err != nil {
		return err
	}
	if current != period {
		// The kernel checks a new period against the quota in place (and
		// a quota against the period in place) and refuses a ratio above
		// the parent's quota. Passing through "no quota" first makes the
		// change valid in any order: -1 is always accepted.
		if err := c.writeFile(cpu, "cpu.cfs_quota_us", "-1"); err != nil {
			return err
		}
		if err := c.writeFile(cpu, "cpu.cfs_period_us", strconv.FormatUint(period, 10)); err != nil {
			return err
		}
	}
	if err := c.writeFile(cpu, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
		return err
	}

	memory := c.dir(cgroup1.Memory)
	// Kernels since 5.16 always account hierarchically and show 1; older
	// ones start at 0, where a child's usage does not count against the
	// agent's root cgroup. It can only be set while the cgroup has no
	// children, which holds right after Create.
	hierarchical, err := c.readUint(memory, "memory.use_hierarchy")
	if err != nil {
		return err
	}
	if hierarchical != 1 {
		if err := c.writeFile(memory, "memory.use_hierarchy", "1"); err != nil {
			return err
		}
	}
	limit := spec.MemoryLimitBytes
	if limit == 0 {
		limit = Unlimited
	}
	if err := c.writeFile(memory, "memory.limit_in_bytes", strconv.FormatInt(limit, 10)); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w (the cgroup uses more than the new limit and the kernel could not reclaim it)", err)
		}
		return err
	}
	soft := spec.MemorySoftBytes
	if soft == 0 {
		soft = Unlimited
	}
	return c.writeFile(memory, "memory.soft_limit_in_bytes", strconv.FormatInt(soft, 10))
}

func (c *v1Cgroup) writeFile(dir, file, value string) error {
	path := filepath.Join(dir, file)
	err := writeV1File(path, value)
	if err != nil {
		return fmt.Errorf("cgroup %s: write %s to %s: %w", c.path, value, path, err)
	}
	return nil
}

// writeV1File writes value in one write(2), which is what cgroup files
// expect; it never creates a file.
func writeV1File(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return unwrapPathError(err)
	}
	_, err = f.WriteString(value)
	return errors.Join(unwrapPathError(err), unwrapPathError(f.Close()))
}

// unwrapPathError keeps the errno of an *os.PathError, since our own
// messages already name the file.
func unwrapPathError(err error) error {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Err
	}
	return err
}

func (c *v1Cgroup) readInt(dir, file string) (int64, error) {
	path := filepath.Join(dir, file)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: read %s: %w", c.path, path, unwrapPathError(err))
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: read %s: %w", c.path, path, err)
	}
	return v, nil
}

func (c *v1Cgroup) readUint(dir, file string) (uint64, error) {
	path := filepath.Join(dir, file)
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: read %s: %w", c.path, path, unwrapPathError(err))
	}
	defer f.Close()
	v, err := parseV1Uint(f)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: read %s: %w", c.path, path, err)
	}
	return v, nil
}

// Start starts cmd with its process already in this cgroup in every
// hierarchy. Go forks from the thread that calls cmd.Start, and a child
// inherits the cgroups of that thread (v1 places threads, not just
// processes); so a goroutine locked to its thread moves the thread alone
// into the cgroup (its tid into each hierarchy's tasks file), starts cmd,
// and moves the thread back to where /proc/thread-self/cgroup said it was.
//
// For that moment the thread is a task of the cgroup: kernel memory of the
// fork is charged to it, and an OOM in a cgroup that is already full could
// choose agentd (whose whole memory counts) as its victim, unless agentd
// runs with a low oom_score_adj, as it should. A frozen cgroup would stop
// the thread until it is thawed. Do not set cmd.SysProcAttr.Pdeathsig:
// Linux sends it when the forking thread ends, and that thread is one of
// Start's own (ended at once after a failed move back).
func (c *v1Cgroup) Start(cmd *exec.Cmd) error {
	if cmd.Process != nil {
		return fmt.Errorf("cgroup %s: start %s: already started", c.path, cmd.Path)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		restored, err := c.startOnThisThread(cmd)
		// The thread is unlocked only when it is back in its own cgroups.
		// Otherwise it stays locked: when a locked goroutine exits, the Go
		// runtime ends its thread instead of handing it to other
		// goroutines, which would then run (and fork their own commands)
		// inside this cgroup. This goroutine exits right after, so the
		// thread dies at once.
		if restored {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// startOnThisThread runs on a locked thread. restored reports whether the
// thread is back in the cgroups it started in.
func (c *v1Cgroup) startOnThisThread(cmd *exec.Cmd) (restored bool, err error) {
	tid := strconv.Itoa(unix.Gettid())
	home, err := c.m.threadCgroups()
	if err != nil {
		return true, fmt.Errorf("cgroup %s: start %s: %w", c.path, cmd.Path, err)
	}
	var moved []*v1Hierarchy
	goHome := func() error {
		var errs []error
		for _, h := range moved {
			if err := writeV1File(filepath.Join(home[h], "tasks"), tid); err != nil {
				errs = append(errs, fmt.Errorf("move thread %s back to %s: %w", tid, home[h], err))
			}
		}
		return errors.Join(errs...)
	}
	for _, h := range c.m.hierarchies {
		tasks := filepath.Join(h.dir(c.path), "tasks")
		if err := writeV1File(tasks, tid); err != nil {
			back := goHome()
			return back == nil, errors.Join(fmt.Errorf("cgroup %s: start %s: join %s: %w", c.path, cmd.Path, tasks, err), back)
		}
		moved = append(moved, h)
	}
	startErr := cmd.Start()
	if startErr != nil {
		startErr = fmt.Errorf("cgroup %s: start %s: %w", c.path, cmd.Path, startErr)
	}
	back := goHome()
	if back != nil && startErr != nil {
		return false, errors.Join(startErr, back)
	}
	// When only the move back failed, cmd runs where it should: the error
	// is contained by discarding the thread (see Start), and reporting it
	// would make the caller believe cmd did not start.
	return back == nil, startErr
}

// threadCgroups maps each of our hierarchies to the directory of the
// calling thread's cgroup in it.
func (m *v1Manager) threadCgroups() (map[*v1Hierarchy]string, error) {
	f, err := os.Open("/proc/thread-self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	paths, err := parseProcCgroupV1(f)
	if err != nil {
		return nil, fmt.Errorf("/proc/thread-self/cgroup: %w", err)
	}
	dirs := map[*v1Hierarchy]string{}
	for _, h := range m.hierarchies {
		p, ok := paths[h.controllers[0]]
		if !ok {
			return nil, fmt.Errorf("/proc/thread-self/cgroup: no %s hierarchy", h.controllers[0])
		}
		rel, ok := h.relative(p)
		if !ok {
			return nil, fmt.Errorf("/proc/thread-self/cgroup: %s cgroup %s is outside %s", h.controllers[0], p, h.mount)
		}
		dirs[h] = h.dir(rel)
	}
	return dirs, nil
}

// Pids lists the processes in this cgroup and its descendants in any of
// our hierarchies (normally all agree; a process moved out of one
// hierarchy by someone else is still found).
func (c *v1Cgroup) Pids() ([]int, error) {
	dirs := make([]string, 0, len(c.m.hierarchies))
	for _, h := range c.m.hierarchies {
		dirs = append(dirs, h.dir(c.path))
	}
	pids, err := treePids(dirs...)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: list processes: %w", c.path, err)
	}
	return pids, nil
}

func (c *v1Cgroup) Signal(sig syscall.Signal) error {
	pids, err := c.Pids()
	if err != nil {
		return err
	}
	var errs []error
	for _, pid := range pids {
		if err := c.signalMember(pid, sig); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// signalMember sends sig to pid only if that process is in this cgroup (or
// a descendant). A pid read from cgroup.procs may have exited and been
// reused by an unrelated process by the time we signal it; a pidfd pins
// the process, so the membership check and the signal are about the same
// process. A process that is gone is not an error.
func (c *v1Cgroup) signalMember(pid int, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroup %s: signal %d: pidfd: %w", c.path, pid, err)
	}
	defer unix.Close(fd)
	member, err := c.holds(pid)
	if err != nil || !member {
		return err
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("cgroup %s: signal %d with %v: %w", c.path, pid, sig, err)
	}
	return nil
}

// holds reports whether process pid is in this cgroup or below it in any
// of our hierarchies.
func (c *v1Cgroup) holds(pid int) (bool, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cgroup %s: %w", c.path, err)
	}
	defer f.Close()
	paths, err := parseProcCgroupV1(f)
	if errors.Is(err, unix.ESRCH) { // exited while we read
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cgroup %s: /proc/%d/cgroup: %w", c.path, pid, err)
	}
	for _, h := range c.m.hierarchies {
		rel, ok := h.relative(paths[h.controllers[0]])
		if ok && (rel == c.path || strings.HasPrefix(rel, c.path+"/")) {
			return true, nil
		}
	}
	return false, nil
}

// KillAll freezes the cgroup (and with it its descendants), so that no
// process can fork or exit while the pids are read and signalled, sends
// SIGKILL to each, thaws so that they can die, and repeats until no
// process is left. A freeze that does not complete (a task in
// uninterruptible sleep stays FREEZING) does not stop it: the round goes on
// with whatever froze, and the next round takes the rest.
//
// A cgroup that does not exist has nothing to kill; one missing from the
// freezer hierarchy only (a Create or Delete cut short) is killed without
// freezing.
func (c *v1Cgroup) KillAll() error {
	state := filepath.Join(c.dir(cgroup1.Freezer), "freezer.state")
	freeze := true
	if _, err := os.Stat(state); errors.Is(err, fs.ErrNotExist) {
		freeze = false
	}
	thaw := func() error {
		if !freeze {
			return nil
		}
		return c.thaw(state)
	}
	deadline := time.Now().Add(v1KillTimeout)
	for {
		if freeze {
			if err := c.writeFile(filepath.Dir(state), "freezer.state", "FROZEN"); err != nil {
				return err
			}
			if err := c.waitFreezer(state, "FROZEN", time.Now().Add(v1FreezeWait)); err != nil && !errors.Is(err, errV1Timeout) {
				return errors.Join(err, thaw())
			}
		}
		pids, err := c.Pids()
		if err != nil {
			return errors.Join(err, thaw())
		}
		var errs []error
		for _, pid := range pids {
			if err := c.signalMember(pid, unix.SIGKILL); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(append(errs, thaw())...); err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		// Killed processes leave cgroup.procs once they have exited.
		roundEnd := time.Now().Add(v1FreezeWait)
		if roundEnd.After(deadline) {
			roundEnd = deadline
		}
		left, err := waitNoPids(c.Pids, roundEnd)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: kill all: %d processes still there after %v: %v",
				c.path, len(left), v1KillTimeout, left)
		}
	}
}

var errV1Timeout = errors.New("timed out")

func (c *v1Cgroup) thaw(state string) error {
	if err := c.writeFile(filepath.Dir(state), "freezer.state", "THAWED"); err != nil {
		return err
	}
	return c.waitFreezer(state, "THAWED", time.Now().Add(v1FreezeWait))
}

// waitFreezer waits until freezer.state reads want. The kernel changes it
// as the tasks reach the freezer, without a notification to wait on.
func (c *v1Cgroup) waitFreezer(state, want string, deadline time.Time) error {
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		b, err := os.ReadFile(state)
		if err != nil {
			return fmt.Errorf("cgroup %s: read %s: %w", c.path, state, unwrapPathError(err))
		}
		got := strings.TrimSpace(string(b))
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %s is %s, not %s: %w", c.path, state, got, want, errV1Timeout)
		}
		time.Sleep(pause)
	}
}

// Delete removes the cgroup and its descendants, deepest first, from every
// hierarchy. It kills nothing: a cgroup with processes left stays, with an
// error naming it.
func (c *v1Cgroup) Delete() error {
	err := c.remove()
	if err == nil {
		c.closeOOMCounters()
	}
	return err
}

func (c *v1Cgroup) remove() error {
	var errs []error
	for _, h := range c.m.hierarchies {
		var dirs []string
		err := filepath.WalkDir(h.dir(c.path), func(dir string, d fs.DirEntry, err error) error {
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
			errs = append(errs, fmt.Errorf("delete cgroup %s: %w", c.path, err))
			continue
		}
		// WalkDir lists parents before their children.
		for _, dir := range slices.Backward(dirs) {
			if err := removeV1Dir(dir); err != nil {
				errs = append(errs, fmt.Errorf("delete cgroup %s: rmdir %s: %w", c.path, dir, err))
				break // its parents cannot go either
			}
		}
	}
	return errors.Join(errs...)
}

// removeV1Dir removes one cgroup directory (see removeWhenEmpty).
func removeV1Dir(dir string) error { return removeWhenEmpty(dir, unix.Rmdir, v1RemoveWait) }

// Stats reads the cgroup's accounting. OOMKills adds up memory.oom_control
// oom_kill over the cgroup and its descendants, since v1 counts a kill only
// in the victim's own cgroup.
//
// LimitOOMs is the number of OOM notifications on this cgroup's
// memory.oom_control eventfd minus those on its parent's, since this handle
// was opened (by Create or Load: hold one handle from before the task
// starts until after it ends). The rule rests on how the kernel notifies
// (mem_cgroup_oom_notify): when a memory cgroup hits its limit and cannot
// reclaim, every eventfd of that cgroup AND of all its descendants is
// signalled. So each OOM of the parent or of any ancestor reaches this
// cgroup and its parent alike, and the difference counts exactly the OOMs
// at this cgroup's own limit; a node-wide OOM notifies no cgroup at all.
// Measured on this kernel (6.x, v1): a parent with a 96 MiB limit and two
// children without limits, one child hogging memory: parent, both children
// notified once each, the hog's cgroup alone counts oom_kill 1.
//
// Why not memory.failcnt, which stays 0 in a cgroup whose charges failed at
// an ancestor's counter: it counts every charge that hit this cgroup's
// limit, also those that reclaim then satisfied. A task that reads more
// file data than its limit raises failcnt by thousands without any OOM
// (measured: 1946 after reading 200 MiB under a 64 MiB limit), and if its
// parent then runs out and kills it, failcnt would call that kill its own.
//
// The eventfds are read in the order cgroup, then parent: the kernel
// signals an ancestor before its descendants, so an OOM landing between
// the two reads shows in the parent's count first and can only make the
// difference too small for a moment, never too large. For the same reason
// the parent's eventfd is registered before this cgroup's.
func (c *v1Cgroup) Stats() (Stats, error) {
	var s Stats
	var err error
	if s.CPUUsageNanos, err = c.readUint(c.dir(cgroup1.Cpuacct), "cpuacct.usage"); err != nil {
		return Stats{}, err
	}
	memory := c.dir(cgroup1.Memory)
	if s.MemoryUsageBytes, err = c.readUint(memory, "memory.usage_in_bytes"); err != nil {
		return Stats{}, err
	}
	if s.MemoryMaxBytes, err = c.readUint(memory, "memory.max_usage_in_bytes"); err != nil {
		return Stats{}, err
	}
	if s.OOMKills, err = c.oomKills(); err != nil {
		return Stats{}, err
	}
	if s.LimitOOMs, err = c.limitOOMs(); err != nil {
		return Stats{}, err
	}
	return s, nil
}

func (c *v1Cgroup) oomKills() (uint64, error) {
	var kills uint64
	err := filepath.WalkDir(c.dir(cgroup1.Memory), func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && dir != c.dir(cgroup1.Memory) { // a descendant went away
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		f, err := os.Open(filepath.Join(dir, "memory.oom_control"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && dir != c.dir(cgroup1.Memory) {
				return nil
			}
			return err
		}
		defer f.Close()
		oc, err := parseOOMControl(f)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		kills += oc.OOMKills
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: read oom kills: %w", c.path, err)
	}
	return kills, nil
}

func (c *v1Cgroup) limitOOMs() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oomEvents == nil {
		return 0, fmt.Errorf("cgroup %s: no OOM counters: deleted, or not in the memory hierarchy when loaded", c.path)
	}
	n, err := drainEventfd(c.oomEvents)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: read oom events: %w", c.path, err)
	}
	c.oomCount += n
	if c.parentOOM != nil {
		n, err := drainEventfd(c.parentOOM)
		if err != nil {
			return 0, fmt.Errorf("cgroup %s: read parent's oom events: %w", c.path, err)
		}
		c.parentOOMs += n
	}
	if c.oomCount < c.parentOOMs {
		return 0, nil
	}
	return c.oomCount - c.parentOOMs, nil
}

// openOOMCounters registers the eventfds Stats counts OOMs with: the
// parent's first (see Stats). The parent is skipped when it is the
// hierarchy's root, which has no limit and never has a cgroup OOM.
func (c *v1Cgroup) openOOMCounters() error {
	memoryOnly := cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) {
		for _, s := range c.m.subsystems {
			if s.Name() == cgroup1.Memory {
				return []cgroup1.Subsystem{s}, nil
			}
		}
		return nil, errors.New("no memory controller")
	})
	open := func(path string) (*os.File, error) {
		cg, err := cgroup1.Load(cgroup1.StaticPath(path), memoryOnly)
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: watch OOMs of %s: %w", c.path, path, err)
		}
		fd, err := cg.OOMEventFD()
		if err != nil {
			return nil, fmt.Errorf("cgroup %s: watch OOMs of %s: %w", c.path, path, err)
		}
		// Non-blocking: Stats takes whatever count is there, or none.
		if err := unix.SetNonblock(int(fd), true); err != nil {
			unix.Close(int(fd))
			return nil, fmt.Errorf("cgroup %s: watch OOMs of %s: %w", c.path, path, err)
		}
		// An *os.File closes the eventfd when a handle is dropped without
		// Delete.
		return os.NewFile(fd, "oom eventfd of "+path), nil
	}
	var parent *os.File
	if p := filepath.Dir(c.path); p != "/" {
		var err error
		if parent, err = open(p); err != nil {
			return err
		}
	}
	own, err := open(c.path)
	if err != nil {
		if parent != nil {
			parent.Close()
		}
		return err
	}
	c.mu.Lock()
	c.oomEvents, c.parentOOM = own, parent
	c.mu.Unlock()
	return nil
}

func (c *v1Cgroup) closeOOMCounters() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range []*os.File{c.oomEvents, c.parentOOM} {
		if f != nil {
			f.Close()
		}
	}
	c.oomEvents, c.parentOOM = nil, nil
}

// drainEventfd returns the eventfd's count and resets it; 0 when nothing
// was signalled.
func drainEventfd(f *os.File) (uint64, error) {
	var buf [8]byte
	conn, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var readErr error
	if err := conn.Read(func(fd uintptr) bool {
		n, readErr = unix.Read(int(fd), buf[:])
		return true // never wait: an empty count is an answer
	}); err != nil {
		return 0, err
	}
	if errors.Is(readErr, unix.EAGAIN) {
		return 0, nil
	}
	if readErr != nil {
		return 0, readErr
	}
	if n != len(buf) {
		return 0, fmt.Errorf("eventfd read %d bytes", n)
	}
	return binary.NativeEndian.Uint64(buf[:]), nil
}
