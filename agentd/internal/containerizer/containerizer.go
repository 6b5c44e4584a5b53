// Package containerizer runs agentd's tasks: each in its own cgroup under
// the agent's root cgroup, each watched by a monitor process that outlives
// agentd, each with a sandbox directory in the work dir.
//
// A launch, in order: agentd writes the container's launch record and
// creates its cgroup; it hands the records directory to a monitor (one of
// the spares started ahead, see spare.go); the monitor opens the cgroup,
// takes the task's oom_score_adj for the moment of the fork, starts the
// task inside the cgroup (cgroups.Cgroup.Start), records itself and tells
// agentd the task's pid. Launch returns then. The monitor, the task's
// parent in a session of its own, waits for the task, kills what is left
// of it, and records its end with the cgroup's own OOM accounting;
// agentd, watching the monitor through a pidfd, reads that record, deletes
// the cgroup and calls OnExit. After agentd's restart, Recover finds each
// monitor again from its record (pid and start time) or, when that is
// damaged, by its cwd, the records directory. The on-disk layout is in
// records.go.
package containerizer

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/agentd/internal/cgroups"
)

// Config configures a Containerizer.
type Config struct {
	// WorkDir is agentd's work dir; sandboxes live in WorkDir/sandboxes/<id>.
	WorkDir string
	// CgroupRoot is the agent's root cgroup name ("allot" → "/allot").
	CgroupRoot string
	Cgroups    cgroups.Manager
	// Root is what the root cgroup enforces: the node's allocatable memory
	// as its hard limit, its cpus as shares (kubelet's kubepods).
	Root cgroups.Spec
	// NodeMemoryBytes is the agent's -resources mem, for oom_score_adj =
	// 1000 − 1000 × memRequest / NodeMemoryBytes.
	NodeMemoryBytes int64
	// MonitorCommand is the argv prefix that starts a monitor process,
	// normally {os.Executable(), "monitor"}; the containerizer appends its
	// own arguments. agentd's main dispatches it to RunMonitor.
	MonitorCommand []string
	// OnExit is called once per launched or recovered container when its
	// process has ended, from the containerizer's own goroutine; by then the
	// container's cgroup is deleted and no process of it is left.
	OnExit func(containerID string, status ExitStatus)
	// OnRootMemoryHigh, when set, is called each time the working set of
	// the agent's root cgroup (RootMemory) reaches RootMemoryHighFraction
	// of its memory limit from below, with that working set and the
	// limit, so that the agent can evict before the kernel reclaims hard
	// or its OOM killer acts. A kernel threshold on the root cgroup's
	// usage drives it (see memory.go): about a millisecond after the
	// crossing on v1 (measured: BenchmarkRootMemoryHighLatency), within
	// cgroups.V2MemoryPollInterval on v2, and within 100 ms when page
	// cache kept the usage above the threshold already. It is
	// called from a goroutine of the containerizer, one call at a time,
	// and should not block: a call under way delays the next reading. It
	// is not called while the working set stays high; RootMemory tells
	// how it goes on. Never called when Root has no memory limit.
	OnRootMemoryHigh func(usedBytes, limitBytes int64)
	// RootMemoryHighFraction is the share of the root cgroup's memory
	// limit, in (0, 1], at which OnRootMemoryHigh is called; 0 means
	// DefaultRootMemoryHighFraction (0.9).
	RootMemoryHighFraction float64
	Logger                 hclog.Logger
}

// LaunchSpec is one task to start.
type LaunchSpec struct {
	// ContainerID names the container: its sandbox dir and cgroup
	// (/<root>/<id>, or /<root>/<group>/<id> when nested). The agent
	// generates it; it is a safe path component.
	ContainerID string
	// Group is the executor container of a task group ("" for a lone task).
	// With OwnCgroup false the task runs in the group's cgroup itself
	// (share_cgroups: true) and Resources is ignored.
	Group     string
	OwnCgroup bool
	Resources cgroups.Spec
	// MemoryRequestBytes gives oom_score_adj and the request an OOM under
	// node pressure is judged against. A task with its own cgroup whose
	// Resources.MemoryLimitBytes is above it (or none) gets oom_score_adj
	// 1000 while its cgroup's usage is at or above it, the formula's value
	// below it (see memory.go).
	MemoryRequestBytes int64
	// Program is what runs, looked up in the PATH of Env; "" means
	// Argv[0]. Argv is its whole argv, Argv[0] included.
	Program string
	Argv    []string
	Env     []string // "K=V", exactly the task's environment
}

// Container is a running container as the local API shows it.
type Container struct {
	ID         string
	Group      string
	Cgroup     string // path relative to the hierarchy, "/allot/<id>"
	Sandbox    string // absolute path
	Pid        int    // the task's process
	MonitorPid int
	// OOMScoreAdj is the value the task's processes hold now: 1000 while
	// the task's memory usage is at or above its request, else
	// 1000 − 1000 × request / node memory.
	OOMScoreAdj int
	StartedAt   time.Time
}

// ExitStatus is why a container's process ended, from its monitor's record
// and the cgroup's own OOM accounting, never from guessing at exit codes.
type ExitStatus struct {
	// StartError is set when the command could not start (no such file,
	// not executable): nothing ran.
	StartError string
	ExitCode   int            // valid when Signal == 0 and StartError == ""
	Signal     syscall.Signal // the signal that ended the process, if any
	// OOMKilled: the kernel OOM killer killed a process of the container.
	// LimitOOM: the container's own cgroup (or its group's) hit its memory
	// limit; with OOMKilled and not LimitOOM, the agent's root cgroup ran
	// out of memory (node pressure).
	OOMKilled bool
	LimitOOM  bool
	// MemoryPeakBytes is the container's peak memory use (0 if unknown).
	MemoryPeakBytes uint64
	// Lost is set when the container could not be accounted for at
	// recovery (no monitor, no exit record): it was killed.
	Lost bool
}

// ErrNotFound is returned for a container or group the containerizer does
// not run.
var ErrNotFound = errors.New("no such container")

// launchTimeout bounds how long Launch waits for a monitor to report. A
// healthy monitor answers in milliseconds; one that does not answer in
// this time is stuck (a process in uninterruptible sleep, a frozen cgroup)
// and is killed rather than hanging the launch forever.
const launchTimeout = time.Minute

// Containerizer runs containers. Its methods are safe for concurrent use.
type Containerizer struct {
	cfg  Config
	log  hclog.Logger
	root cgroups.Cgroup

	mu         sync.Mutex
	containers map[string]*container // live ones, and those being launched
	groups     map[string]cgroups.Cgroup
	closed     bool
	// watchers are the pidfds of the monitors being watched; Close closes
	// them to stop watching.
	watchers map[*os.File]struct{}
	// rootMemory drives OnRootMemoryHigh; nil without it.
	rootMemory *rootMemoryWatch
	// oomScoreAdjSet, when set (by tests, before any launch), is called
	// after each oom_score_adj a memory watch wrote.
	oomScoreAdjSet func(containerID string, adj int)
	// memWatches counts memory watches being registered; Close waits.
	memWatches sync.WaitGroup
	// spares are monitors started ahead of need (see spare.go).
	spares         []*monitorProcess
	sparesStarting int
	refills        sync.WaitGroup
}

// container is one live container.
type container struct {
	info Container
	// cg is where the task runs: its own cgroup, or its group's when it
	// shares it (then own is false, and signals go to the task's process
	// group instead of the whole cgroup). nil when not known (a damaged
	// record at recovery).
	cg        cgroups.Cgroup
	own       bool
	launching bool
	killing   bool
	ended     chan struct{} // closed once its monitor exited
	// memWatch moves oom_score_adj with the memory usage (memory.go);
	// nil when the task has none, or while it is being registered.
	// memWatching: the task has one, or will; memStopped: the container
	// is done with it (a registration finishing later closes it).
	memWatch    cgroups.MemoryWatch
	memWatching bool
	memStopped  bool
}

// New creates (or takes over) the root cgroup with cfg.Root.
func New(cfg Config) (*Containerizer, error) {
	switch {
	case cfg.WorkDir == "":
		return nil, errors.New("containerizer: no work dir")
	case cfg.Cgroups == nil:
		return nil, errors.New("containerizer: no cgroup manager")
	case len(cfg.MonitorCommand) == 0:
		return nil, errors.New("containerizer: no monitor command")
	case cfg.NodeMemoryBytes <= 0:
		return nil, fmt.Errorf("containerizer: node memory %d bytes: want a positive size", cfg.NodeMemoryBytes)
	}
	if err := checkCgroupRoot(cfg.CgroupRoot); err != nil {
		return nil, err
	}
	if cfg.RootMemoryHighFraction == 0 {
		cfg.RootMemoryHighFraction = DefaultRootMemoryHighFraction
	}
	if err := checkRootMemoryHighFraction(cfg.RootMemoryHighFraction); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	// Monitors get their records directory as an absolute path, and
	// Container.Sandbox is one.
	workDir, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("containerizer: work dir: %w", err)
	}
	cfg.WorkDir = workDir
	if cfg.OnExit == nil {
		cfg.OnExit = func(string, ExitStatus) {}
	}
	for _, dir := range []string{sandboxesDir, recordsDir} {
		if err := os.MkdirAll(filepath.Join(cfg.WorkDir, dir), 0o755); err != nil {
			return nil, fmt.Errorf("containerizer: %w", err)
		}
	}
	root, err := cfg.Cgroups.Create("/"+cfg.CgroupRoot, cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("containerizer: agent root cgroup: %w", err)
	}
	c := &Containerizer{
		cfg:        cfg,
		log:        cfg.Logger,
		root:       root,
		containers: map[string]*container{},
		groups:     map[string]cgroups.Cgroup{},
		watchers:   map[*os.File]struct{}{},
	}
	if c.rootMemory, err = c.watchRootMemory(); err != nil {
		return nil, err
	}
	c.startRefill()
	return c, nil
}

// checkCgroupRoot accepts a relative cgroup path of safe components
// ("allot", "system/allot").
func checkCgroupRoot(root string) error {
	if root == "" || path.Clean(root) != root || strings.HasPrefix(root, "/") {
		return fmt.Errorf("containerizer: cgroup root %q: want a clean relative path such as allot", root)
	}
	for _, part := range strings.Split(root, "/") {
		if err := checkID("cgroup root", part); err != nil {
			return fmt.Errorf("containerizer: %w", err)
		}
	}
	return nil
}

func (c *Containerizer) cgroupPath(parts ...string) string {
	return "/" + path.Join(append([]string{c.cfg.CgroupRoot}, parts...)...)
}

// CreateGroup creates the executor cgroup /<root>/<id> of a task group, or
// rewrites its spec when it exists.
func (c *Containerizer) CreateGroup(id string, spec cgroups.Spec) error {
	if err := checkID("group", id); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, taken := c.containers[id]; taken {
		return fmt.Errorf("group %s: a container has this id", id)
	}
	if cg, ok := c.groups[id]; ok {
		if err := cg.Update(spec); err != nil {
			return fmt.Errorf("group %s: %w", id, err)
		}
		return nil
	}
	// The record comes first: a cgroup is never without one (see
	// records.go), so a crash right after Create leaves nothing that
	// recovery cannot find.
	dir := c.recordsDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("group %s: %w", id, err)
	}
	cgPath := c.cgroupPath(id)
	if err := writeRecord(filepath.Join(dir, groupRecord), groupRecordData{Cgroup: cgPath, CreatedAt: time.Now()}); err != nil {
		return errors.Join(fmt.Errorf("group %s: %w", id, err), os.RemoveAll(dir))
	}
	cg, err := c.cfg.Cgroups.Create(cgPath, spec)
	if err != nil {
		return errors.Join(fmt.Errorf("group %s: %w", id, err), os.RemoveAll(dir))
	}
	c.groups[id] = cg
	return nil
}

// DestroyGroup kills whatever is left in the group's cgroup and removes it.
// Destroying a group that does not exist is not an error.
func (c *Containerizer) DestroyGroup(id string) error {
	if err := checkID("group", id); err != nil {
		return err
	}
	c.mu.Lock()
	cg, ok := c.groups[id]
	c.mu.Unlock()
	if !ok {
		var err error
		cg, err = c.cfg.Cgroups.Load(c.cgroupPath(id))
		if errors.Is(err, cgroups.ErrNotExist) {
			return os.RemoveAll(c.recordsDir(id))
		}
		if err != nil {
			return fmt.Errorf("group %s: %w", id, err)
		}
	}
	// Its tasks first, each through its monitor, which records the end;
	// then whatever is left, once no monitor freezes the cgroup any more.
	c.mu.Lock()
	var members []*container
	for _, ct := range c.containers {
		if ct.info.Group == id && !ct.launching {
			members = append(members, ct)
		}
	}
	c.mu.Unlock()
	for _, ct := range members {
		c.killNow(ct)
	}
	for _, ct := range members {
		select {
		case <-ct.ended:
		case <-time.After(strayMonitorWait):
			c.log.Warn("destroy group: a task's monitor did not end", "group", id, "container_id", ct.info.ID)
		}
	}
	if err := cg.KillAll(); err != nil {
		return fmt.Errorf("group %s: %w", id, err)
	}
	if err := cg.Delete(); err != nil {
		return fmt.Errorf("group %s: %w", id, err)
	}
	c.mu.Lock()
	delete(c.groups, id)
	c.mu.Unlock()
	if err := os.RemoveAll(c.recordsDir(id)); err != nil {
		return fmt.Errorf("group %s: %w", id, err)
	}
	return nil
}

// Launch creates the container's sandbox and cgroup and starts its monitor
// and process; it returns once the process runs inside its cgroup, or the
// error that kept it from starting (then nothing is left behind).
func (c *Containerizer) Launch(spec LaunchSpec) (Container, error) {
	if err := checkLaunchSpec(spec); err != nil {
		return Container{}, err
	}
	id := spec.ContainerID
	ct := &container{launching: true, own: spec.Group == "" || spec.OwnCgroup, ended: make(chan struct{})}
	c.mu.Lock()
	var group cgroups.Cgroup
	switch {
	case c.closed:
		c.mu.Unlock()
		return Container{}, fmt.Errorf("container %s: the containerizer is closed", id)
	case c.containers[id] != nil || c.groups[id] != nil:
		c.mu.Unlock()
		return Container{}, fmt.Errorf("container %s: id in use", id)
	case spec.Group != "":
		if group = c.groups[spec.Group]; group == nil {
			c.mu.Unlock()
			return Container{}, fmt.Errorf("container %s: group %s: %w", id, spec.Group, ErrNotFound)
		}
	}
	c.containers[id] = ct
	c.mu.Unlock()

	info, err := c.launch(spec, ct, group)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.containers, id)
		return Container{}, err
	}
	ct.launching = false // the container may have ended already: OnExit follows or came
	return info, nil
}

func (c *Containerizer) launch(spec LaunchSpec, ct *container, group cgroups.Cgroup) (info Container, err error) {
	id := spec.ContainerID
	records, sandbox := c.recordsDir(id), c.sandboxDir(id)
	program, err := lookPath(cmp.Or(spec.Program, spec.Argv[0]), spec.Env)
	if err != nil {
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	// A records directory that exists belongs to an earlier container
	// with this id, whose records must not be mixed with this one's.
	if err := os.Mkdir(records, 0o700); err != nil {
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	cleanup := []func() error{func() error { return os.RemoveAll(records) }}
	defer func() {
		if err != nil {
			var errs []error
			for _, undo := range slices.Backward(cleanup) {
				errs = append(errs, undo())
			}
			if cerr := errors.Join(errs...); cerr != nil {
				c.log.Error("clean up after a failed launch", "container_id", id, "error", cerr)
			}
		}
	}()
	switch err := os.Mkdir(sandbox, 0o755); {
	case err == nil:
		cleanup = append(cleanup, func() error { return os.RemoveAll(sandbox) })
	case !errors.Is(err, fs.ErrExist): // one made for the task beforehand is kept
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}

	rec := launchRecord{
		ID: id, Group: spec.Group, OwnCgroup: ct.own, Sandbox: sandbox,
		Program: program, Argv: spec.Argv, Env: spec.Env,
		MemoryRequestBytes: spec.MemoryRequestBytes,
		MemoryLimitBytes:   spec.Resources.MemoryLimitBytes,
		OOMScoreAdj:        oomScoreAdj(spec.MemoryRequestBytes, c.cfg.NodeMemoryBytes),
		CreatedAt:          time.Now(),
	}
	switch {
	case spec.Group == "":
		rec.Cgroup = c.cgroupPath(id)
		rec.LimitCgroups = []string{rec.Cgroup}
	case ct.own:
		rec.Cgroup = c.cgroupPath(spec.Group, id)
		rec.LimitCgroups = []string{rec.Cgroup, group.Path()}
	default:
		rec.Cgroup = group.Path()
		rec.LimitCgroups = []string{rec.Cgroup}
	}
	if rec.Env == nil {
		rec.Env = []string{} // exactly no variables, not the monitor's
	}
	if err := writeRecord(filepath.Join(records, containerRecord), rec); err != nil {
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	if ct.own {
		cg, err := c.cfg.Cgroups.Create(rec.Cgroup, spec.Resources)
		if err != nil {
			return Container{}, fmt.Errorf("container %s: %w", id, err)
		}
		ct.cg = cg
		cleanup = append(cleanup, cg.Delete)
	} else {
		ct.cg = group
	}

	monitor, err := c.assignMonitor(records)
	if err != nil {
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	pid, err := readReport(monitor.report, records)
	monitor.report.Close()
	if err != nil {
		// The monitor ends by itself after a failed start; one that did
		// not answer is killed. Either way it is reaped before the
		// cgroup goes, so that nothing of the task can be left in it.
		_ = monitor.cmd.Process.Kill()
		_ = monitor.cmd.Wait()
		if ct.own {
			cleanup = append(cleanup, ct.cg.KillAll)
		}
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	info = Container{
		ID: id, Group: spec.Group, Cgroup: rec.Cgroup, Sandbox: sandbox,
		Pid: pid, MonitorPid: monitor.cmd.Process.Pid, OOMScoreAdj: rec.OOMScoreAdj, StartedAt: time.Now(),
	}
	c.mu.Lock()
	ct.info = info // before the watch, which may finish the container at once
	c.mu.Unlock()
	// Before the monitor's watch, whose end of the container stops it.
	c.watchTaskMemory(ct, rec.MemoryRequestBytes, rec.MemoryLimitBytes, rec.OOMScoreAdj, true)
	if err := c.watch(ct, id, monitor.cmd.Process.Pid, func() { _ = monitor.cmd.Wait() }); err != nil {
		// Not watched, the container would never be reported: stop it.
		// Its monitor records the end; a restarted agentd reports it.
		c.log.Error("watch monitor; killing the container", "container_id", id, "error", err)
		c.stopTaskMemory(ct)
		c.killNow(ct)
		_ = monitor.cmd.Wait()
		return Container{}, fmt.Errorf("container %s: %w", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return ct.info, nil
}

// checkLaunchSpec refuses what cannot be launched before anything exists.
func checkLaunchSpec(spec LaunchSpec) error {
	if err := checkID("container", spec.ContainerID); err != nil {
		return err
	}
	if spec.Group != "" {
		if err := checkID("group", spec.Group); err != nil {
			return fmt.Errorf("container %s: %w", spec.ContainerID, err)
		}
	}
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return fmt.Errorf("container %s: no command", spec.ContainerID)
	}
	for _, arg := range spec.Argv {
		if strings.IndexByte(arg, 0) >= 0 {
			return fmt.Errorf("container %s: an argument holds a NUL byte", spec.ContainerID)
		}
	}
	for _, kv := range spec.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("container %s: environment entry %.40q: want NAME=value without NUL bytes", spec.ContainerID, kv)
		}
	}
	if spec.MemoryRequestBytes < 0 {
		return fmt.Errorf("container %s: memory request %d bytes is negative", spec.ContainerID, spec.MemoryRequestBytes)
	}
	return nil
}

// monitorEnv is agentd's environment for its monitors, with one P for the
// Go runtime: a monitor spends its life waiting for one process, and needs
// no parallelism (fewer threads, one mcache). (GOGC makes no difference:
// measured, a monitor never allocates enough to collect.)
func monitorEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	return append(env, "GOMAXPROCS=1")
}

// readReport reads the monitor's one-line report: the task's pid, or why it
// did not start.
func readReport(report *os.File, dir string) (int, error) {
	_ = report.SetReadDeadline(time.Now().Add(launchTimeout))
	line, err := bufio.NewReader(report).ReadString('\n')
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, fmt.Errorf("the monitor did not report within %v", launchTimeout)
		}
		// The monitor ended without a word: its log says why.
		return 0, fmt.Errorf("the monitor ended before starting the task (see %s): %s", filepath.Join(dir, monitorLog), lastLogLine(filepath.Join(dir, monitorLog)))
	}
	kind, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	switch kind {
	case reportStarted:
		pid, err := strconv.Atoi(arg)
		if err != nil || pid <= 0 {
			return 0, fmt.Errorf("the monitor reported %q", line)
		}
		return pid, nil
	case reportError:
		return 0, errors.New(arg)
	}
	return 0, fmt.Errorf("the monitor reported %q", line)
}

func lastLogLine(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}

// Kill sends SIGTERM to every process of the container, and SIGKILL to
// whatever is left after grace. It returns at once; OnExit follows.
func (c *Containerizer) Kill(id string, grace time.Duration) error {
	c.mu.Lock()
	ct := c.containers[id]
	switch {
	case ct == nil:
		c.mu.Unlock()
		return fmt.Errorf("kill container %s: %w", id, ErrNotFound)
	case ct.launching:
		c.mu.Unlock()
		return fmt.Errorf("kill container %s: still launching", id)
	case ct.killing:
		c.mu.Unlock()
		return nil
	}
	ct.killing = true
	c.mu.Unlock()
	log := c.log.With("container_id", id)
	if err := c.signal(ct, syscall.SIGTERM); err != nil {
		log.Warn("SIGTERM", "error", err)
	}
	go func() {
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-ct.ended:
			return
		case <-timer.C:
		}
		c.killNow(ct)
	}()
	return nil
}

// signal sends sig to the container's processes: all of its cgroup, or,
// for a task sharing its group's cgroup, its process group (the monitor
// starts the task as a process group leader).
func (c *Containerizer) signal(ct *container, sig syscall.Signal) error {
	if ct.own && ct.cg != nil {
		return ct.cg.Signal(sig)
	}
	return signalGroup(ct.info.Pid, sig)
}

// killNow kills every process of the container at once, when its monitor
// is alive: a SIGKILL to each process (the task's process group for a task
// sharing its group's cgroup) ends the task, and the monitor, seeing its
// end, kills whatever is left with the cgroup's KillAll. Only one process
// should freeze a cgroup at a time: agentd and the monitor both running
// KillAll on it could thaw each other's freezes.
func (c *Containerizer) killNow(ct *container) {
	if err := c.signal(ct, syscall.SIGKILL); err != nil {
		c.log.Error("kill container", "container_id", ct.info.ID, "error", err)
	}
}

// killOrphaned kills every process of a container whose monitor is gone.
func (c *Containerizer) killOrphaned(ct *container, pid int) {
	var err error
	if ct.own && ct.cg != nil {
		err = ct.cg.KillAll()
	} else {
		err = signalGroup(pid, syscall.SIGKILL)
	}
	if err != nil {
		c.log.Error("kill container", "container_id", ct.info.ID, "error", err)
	}
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return errors.New("no process known")
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", pgid, err)
	}
	return nil
}

// Containers lists the live containers.
func (c *Containerizer) Containers() []Container {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Container, 0, len(c.containers))
	for _, ct := range c.containers {
		if !ct.launching {
			out = append(out, ct.info)
		}
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (c *Containerizer) cgroupOf(id string) (cgroups.Cgroup, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ct := c.containers[id]
	if ct == nil || ct.launching {
		return nil, fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	if ct.cg == nil {
		return nil, fmt.Errorf("container %s: its cgroup is not known (damaged record)", id)
	}
	return ct.cg, nil
}

// Stats are the container's cgroup statistics. For a task that shares its
// group's cgroup they are the group's.
func (c *Containerizer) Stats(id string) (cgroups.Stats, error) {
	cg, err := c.cgroupOf(id)
	if err != nil {
		return cgroups.Stats{}, err
	}
	return cg.Stats()
}

// Pids lists the processes of the container's cgroup. For a task that
// shares its group's cgroup they are the group's.
func (c *Containerizer) Pids(id string) ([]int, error) {
	cg, err := c.cgroupOf(id)
	if err != nil {
		return nil, err
	}
	return cg.Pids()
}

// Close stops watching: monitors and tasks keep running, and OnExit is not
// called any more. A new Containerizer's Recover takes them over. It is
// what agentd's end looks like to the containers, minus the process exit.
func (c *Containerizer) Close() error {
	c.mu.Lock()
	c.closed = true
	for f := range c.watchers {
		f.Close()
	}
	clear(c.watchers)
	live := make([]*container, 0, len(c.containers))
	for _, ct := range c.containers {
		live = append(live, ct)
	}
	c.mu.Unlock()
	// The tasks keep the oom_score_adj they hold; a new Containerizer's
	// Recover watches them again.
	for _, ct := range live {
		c.stopTaskMemory(ct)
	}
	c.memWatches.Wait()
	c.rootMemory.close()
	c.refills.Wait()
	return c.discardSpares()
}

// oomScoreAdj is 1000 − 1000 × memRequest / node memory, clamped to
// [0, 1000], as the kubelet does for burstable pods: the more of the node a
// task was promised, the later the OOM killer picks it.
func oomScoreAdj(memRequest, nodeMemory int64) int {
	if nodeMemory <= 0 {
		return 1000
	}
	memRequest = min(max(memRequest, 0), nodeMemory)
	return int(1000 - 1000*memRequest/nodeMemory)
}
