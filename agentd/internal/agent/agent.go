// Package agent is agentd's core: it keeps the node registered with the
// leading master (api.AgentClient), runs the tasks the master sends through
// the containerizer, reports every state change at least once, and
// checkpoints all of it so that a restarted agentd re-attaches to its tasks
// and re-registers with the same agent id.
package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/allot/allot/agentd/internal/atomicfile"
	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/agentd/internal/estimator"
	"github.com/allot/allot/agentd/internal/qos"
	"github.com/allot/allot/masterd/api"
)

// Config configures an Agent.
type Config struct {
	Masters []string
	Token   string
	// TLS, when set, is how the agent verifies the masters (and presents
	// its client certificate): agentd's -tls-ca, -tls-cert, -tls-key.
	TLS *tls.Config
	// Info describes the node; the agent adds its capabilities.
	Info    api.AgentInfo
	WorkDir string
	// Containerizer is the containerizer's configuration; the agent sets its
	// WorkDir and OnExit.
	Containerizer containerizer.Config
	// UpdateRetryInterval is how long an unacknowledged update waits before
	// it is sent again (the client's default when zero).
	UpdateRetryInterval time.Duration
	// SandboxMaxAge is how long the sandbox of an ended task is kept (0:
	// forever).
	SandboxMaxAge time.Duration
	// Estimator chooses the usage slack estimator (-estimator; noop by
	// default); its estimate is reported every OversubscribedInterval
	// (DefaultOversubscribedInterval when zero).
	Estimator              estimator.Config
	OversubscribedInterval time.Duration
	// QoS chooses the QoS controller (-qos; noop by default), consulted
	// every QoSInterval (DefaultQoSInterval when zero) and, for the
	// pressure controller, at once when the root cgroup's memory reaches
	// its memory fraction.
	QoS         qos.Config
	QoSInterval time.Duration
	Logger      hclog.Logger
}

// Agent runs one node's tasks. Its methods are safe for concurrent use.
type Agent struct {
	cfg    Config
	log    hclog.Logger
	client *api.AgentClient
	ctz    *containerizer.Containerizer
	ckpt   *checkpoints
	locks  []*os.File // flocks on the work dir and the cgroup root
	stats  agentStats

	mu        sync.Mutex
	agentID   string
	tasks     map[taskKey]*task
	byID      map[string]*task // by container id
	executors map[taskKey]*executor
	// waiting are the launches that wait for evicted tasks to be gone,
	// oldest first (admission.go).
	waiting []*launchUnit
	// slack is the estimator's latest estimate.
	slack api.Resources

	estimator estimator.Estimator
	qos       qos.Controller
	// qosNow asks for a QoS round at once (root memory near its limit).
	qosNow chan struct{}
}

type taskKey struct{ frameworkID, id string }

// task is a task the agent runs or ran and has not settled (its final
// update is not acknowledged yet).
type task struct {
	rec taskRecord
	// launching: Launch has not returned; an exit that comes meanwhile
	// waits in exit.
	launching bool
	exit      *containerizer.ExitStatus
}

func (t *task) key() taskKey { return taskKey{t.rec.Task.FrameworkID, t.rec.Task.Task.TaskID} }

// executor is the executor of a task group: a cgroup its tasks share or
// nest in.
type executor struct {
	rec executorRecord
}

func (e *executor) key() taskKey {
	return taskKey{e.rec.Executor.FrameworkID, e.rec.Executor.ExecutorID}
}

// New recovers the agent from its work dir: the agent id, the tasks it ran
// and their unacknowledged updates; tasks that ended while agentd was down
// are reported with their real exit status, and containers nobody knows
// are killed.
func New(cfg Config) (*Agent, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	a := &Agent{
		cfg:       cfg,
		log:       cfg.Logger,
		tasks:     map[taskKey]*task{},
		byID:      map[string]*task{},
		executors: map[taskKey]*executor{},
		stats:     newAgentStats(),
		qosNow:    make(chan struct{}, 1),
	}
	var err error
	if a.estimator, err = estimator.New(cfg.Estimator); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("create work dir %s: %w", cfg.WorkDir, err)
	}
	ok := false
	defer func() {
		if !ok {
			a.unlock()
		}
	}()
	root := strings.ReplaceAll(cfg.Containerizer.CgroupRoot, "/", "_")
	for _, l := range []struct{ path, what string }{
		{filepath.Join(cfg.WorkDir, "agentd.lock"), "work dir " + cfg.WorkDir},
		// Two agents on one cgroup root would each size it for themselves
		// and kill each other's containers as strays.
		{filepath.Join(lockDir, "cgroup-"+root+".lock"), "cgroup root /" + cfg.Containerizer.CgroupRoot},
	} {
		f, err := lockFile(l.path, l.what)
		if err != nil {
			return nil, err
		}
		a.locks = append(a.locks, f)
	}
	if a.ckpt, err = newCheckpoints(cfg.WorkDir); err != nil {
		return nil, err
	}
	cfg.Info.Capabilities = []string{api.CapabilityTaskResourceLimits}
	if a.client, err = api.NewAgentClient(cfg.Masters, cfg.Token, cfg.Info, handler{a}); err != nil {
		return nil, err
	}
	a.client.UpdateRetryInterval = cfg.UpdateRetryInterval
	if cfg.TLS != nil {
		a.client.SetTLS(cfg.TLS)
	}
	a.client.Logf = func(format string, args ...any) { a.log.Named("client").Info(fmt.Sprintf(format, args...)) }
	a.client.RegisterFailed = a.registrationFailed
	if err := a.recover(); err != nil {
		return nil, err
	}
	ok = true
	return a, nil
}

// lockDir holds the locks of the cgroup roots agents use on this host.
const lockDir = "/run/allot"

// lockWait is how long a lock held by somebody else is waited for before
// agentd gives up.
//
// Why: an agentd killed while it starts a monitor leaves a child between
// fork and exec that shares the lock's open file description until its
// exec closes it (O_CLOEXEC), so the lock briefly outlives the dead agentd.
// A restart at once (kill -9 and restart, or systemd's Restart=) found it
// locked and exited (TestAgentdKilledMidLaunch). A second agentd on the
// same work dir still gets its error, once the wait is over.
const lockWait = 3 * time.Second

// lockFile takes an exclusive lock on path, for what it guards.
func lockFile(path, what string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	for deadline := time.Now().Add(lockWait); ; {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s is in use by another agentd (%s is locked): %w", what, path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *Agent) unlock() {
	for _, f := range a.locks {
		f.Close()
	}
	a.locks = nil
}

// recover loads the checkpoints, starts the containerizer and re-attaches
// to the containers they name.
func (a *Agent) recover() error {
	rec, err := a.ckpt.loadAgent()
	if err != nil {
		a.log.Error("agent checkpoint is damaged; the agent id is taken from the task checkpoints", "error", err)
		_ = quarantine(filepath.Join(a.ckpt.dir, "agent.json"))
	}
	if rec.Name != "" && rec.Name != a.cfg.Info.Name {
		return fmt.Errorf("work dir %s belongs to agent %q, not %q: use another -work-dir or the same -name", a.cfg.WorkDir, rec.Name, a.cfg.Info.Name)
	}
	a.agentID = rec.AgentID

	tasks, badTasks, err := a.ckpt.loadTasks()
	if err != nil {
		return err
	}
	var unnamed []string
	for _, bad := range badTasks {
		r, err := a.loadLaunchCopy(bad.containerID)
		if err != nil {
			unnamed = append(unnamed, bad.containerID)
			// Nobody can say whose task this is; it is left running (and
			// shown in the local API) rather than killed, and never reported.
			a.log.Error("task checkpoint is damaged and has no readable launch copy; its container is left running, unreported",
				"container_id", bad.containerID, "error", bad.err, "copy_error", err)
			continue
		}
		a.log.Error("task checkpoint is damaged; rebuilt from its launch copy (unacknowledged updates are sent again as the task's current state)",
			"container_id", bad.containerID, "error", bad.err)
		_ = quarantine(filepath.Join(a.ckpt.tasksDir(), bad.containerID+".json"))
		tasks = append(tasks, r)
	}
	executors, badExecutors, err := a.ckpt.loadExecutors()
	if err != nil {
		return err
	}
	for _, bad := range badExecutors {
		a.log.Error("executor checkpoint is damaged; rebuilt from its tasks", "container_id", bad.containerID, "error", bad.err)
		_ = quarantine(filepath.Join(a.ckpt.executorsDir(), bad.containerID+".json"))
	}

	a.mu.Lock()
	for _, r := range executors {
		a.executors[taskKey{r.Executor.FrameworkID, r.Executor.ExecutorID}] = &executor{rec: *r}
	}
	keep := unnamed // never kill what may still be somebody's task
	for _, r := range tasks {
		t := &task{rec: *r}
		a.tasks[t.key()] = t
		a.byID[r.ContainerID] = t
		if a.agentID == "" {
			a.agentID = r.Task.Task.AgentID
		}
		if r.Group != "" {
			a.adoptGroupLocked(t)
		}
		if !r.Ended && !r.Waiting {
			keep = append(keep, r.ContainerID)
		}
		for _, st := range r.Pending {
			a.client.SendUpdate(r.Task.FrameworkID, st)
		}
	}
	groups := []string{}
	for _, e := range a.executors {
		groups = append(groups, e.rec.ContainerID)
	}
	a.mu.Unlock()

	if a.agentID != "" {
		a.client.SetAgentID(a.agentID)
	}
	cc := a.cfg.Containerizer
	cc.WorkDir = a.cfg.WorkDir
	cc.OnExit = a.containerExited
	if cc.Logger == nil {
		cc.Logger = a.log.Named("containerizer")
	}
	if a.cfg.QoS.Kind == qos.KindPressure && a.cfg.QoS.MemoryFraction > 0 {
		cc.OnRootMemoryHigh = a.rootMemoryHigh
		cc.RootMemoryHighFraction = a.cfg.QoS.MemoryFraction
	}
	if a.ctz, err = containerizer.New(cc); err != nil {
		return err
	}
	// Built once the root cgroup exists: the controller reads its
	// pressure files when the kernel has them.
	if a.qos, err = qos.New(a.cfg.QoS); err != nil {
		_ = a.ctz.Close()
		return err
	}
	if err := a.ctz.Recover(keep, groups); err != nil {
		// Closed, or its root memory watch (goroutine, eventfd) outlives
		// the agent that failed to start.
		_ = a.ctz.Close()
		return fmt.Errorf("recover containers: %w", err)
	}

	// A task whose launch was under way when agentd stopped and whose
	// container runs is running now.
	live := map[string]*containerizer.Container{}
	for _, c := range a.ctz.Containers() {
		live[c.ID] = &c
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.tasks {
		if t.rec.Ended || live[t.rec.ContainerID] == nil {
			continue
		}
		if t.rec.Started.IsZero() {
			t.rec.Started = live[t.rec.ContainerID].StartedAt // a record of an older agentd
		}
		if t.rec.Task.State == api.TaskStaging {
			a.updateLocked(t, api.TaskRunning, "", "running (found at agent recovery)")
		}
		if t.rec.Killing {
			// The kill's grace period ended with the agentd that began it.
			if err := a.ctz.Kill(t.rec.ContainerID, gracePeriod(t.rec.Task.Task)); err != nil {
				a.log.Error("kill task again after recovery", "container_id", t.rec.ContainerID, "error", err)
			}
		}
	}
	if a.agentID != "" && rec.AgentID != a.agentID {
		// Taken from the task checkpoints: written again so that it
		// outlives them.
		if err := a.ckpt.saveAgent(agentRecord{AgentID: a.agentID, Name: a.cfg.Info.Name}); err != nil {
			a.log.Error("checkpoint agent id", "error", err)
		}
	}
	// An executor whose tasks all ended (or that a crash left before its
	// first task was checkpointed) goes now, not at some later launch.
	for _, e := range a.executors {
		a.endGroupIfIdleLocked(e)
	}
	a.recoverWaitingLocked()
	a.log.Info("recovered", "agent_id", a.agentID, "tasks", len(a.tasks), "executors", len(a.executors), "running", len(live))
	return nil
}

// adoptGroupLocked links a recovered task to its executor, rebuilding an
// executor whose record was damaged from what the task says of it.
func (a *Agent) adoptGroupLocked(t *task) {
	k := taskKey{t.rec.Task.FrameworkID, t.rec.Task.ExecutorID}
	if _, ok := a.executors[k]; ok {
		return
	}
	e := &executor{rec: executorRecord{ContainerID: t.rec.Group, ShareCgroups: t.rec.Task.Task.ShareCgroups(),
		Executor: api.AgentExecutor{FrameworkID: t.rec.Task.FrameworkID, ExecutorID: t.rec.Task.ExecutorID, Role: t.rec.Task.Role}}}
	a.executors[k] = e
	if err := a.ckpt.saveExecutor(&e.rec); err != nil {
		a.log.Error("checkpoint executor", "executor_id", k.id, "error", err)
	}
}

// Run keeps the agent registered until ctx ends. Tasks keep running when it
// returns: a restarted agentd takes them over.
func (a *Agent) Run(ctx context.Context) error {
	if a.cfg.SandboxMaxAge > 0 {
		go a.collectSandboxes(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// The noop estimator never lends: no estimate is made, so none is sent
	// (the master takes an agent that says nothing as lending nothing).
	if a.estimator.Name() != estimator.KindNoop {
		wg.Go(func() { a.runEstimator(ctx) })
	}
	if a.qos.Name() != qos.KindNoop {
		wg.Go(func() { a.runQoS(ctx) })
	}
	err := a.client.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Close stops watching the tasks and releases the work dir, for another
// agentd to take over. Tasks keep running.
func (a *Agent) Close() error {
	err := a.ctz.Close()
	a.unlock()
	return err
}

func (a *Agent) collectSandboxes(ctx context.Context) {
	every := min(a.cfg.SandboxMaxAge/4, time.Hour)
	t := time.NewTicker(max(every, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.ctz.GCSandboxes(a.cfg.SandboxMaxAge); err != nil {
				a.log.Warn("sandbox collection", "error", err)
			}
		}
	}
}

// Client is the agent's protocol client.
func (a *Agent) Client() *api.AgentClient { return a.client }

// Containerizer is the agent's containerizer.
func (a *Agent) Containerizer() *containerizer.Containerizer { return a.ctz }

// AgentID is the id of the agent's last registration.
func (a *Agent) AgentID() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.agentID
}

// TaskOf names the task running in a container.
func (a *Agent) TaskOf(containerID string) (api.AgentTask, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.byID[containerID]
	if t == nil {
		return api.AgentTask{}, false
	}
	return t.rec.Task, true
}

// handler is the AgentClient's view of the agent.
type handler struct{ a *Agent }

func (h handler) Tasks() ([]api.AgentTask, []api.AgentExecutor) { return h.a.report() }
func (h handler) Registered(id, previous string)                { h.a.registered(id, previous) }
func (h handler) Launch(l api.AgentLaunch)                      { h.a.launch(l) }
func (h handler) Kill(k api.AgentKill)                          { h.a.kill(k) }
func (h handler) Acknowledged(fw string, st api.TaskStatus)     { h.a.acknowledged(fw, st) }

// report lists the tasks and executors to register with, in a stable order.
func (a *Agent) report() ([]api.AgentTask, []api.AgentExecutor) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tasks := make([]api.AgentTask, 0, len(a.tasks))
	for _, t := range a.tasks {
		tasks = append(tasks, t.rec.Task)
	}
	sort.Slice(tasks, func(i, j int) bool {
		if tasks[i].FrameworkID != tasks[j].FrameworkID {
			return tasks[i].FrameworkID < tasks[j].FrameworkID
		}
		return tasks[i].Task.TaskID < tasks[j].Task.TaskID
	})
	executors := make([]api.AgentExecutor, 0, len(a.executors))
	for _, e := range a.executors {
		executors = append(executors, e.rec.Executor)
	}
	sort.Slice(executors, func(i, j int) bool {
		if executors[i].FrameworkID != executors[j].FrameworkID {
			return executors[i].FrameworkID < executors[j].FrameworkID
		}
		return executors[i].ExecutorID < executors[j].ExecutorID
	})
	return tasks, executors
}

func (a *Agent) registered(id, previous string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if previous != "" && id != previous {
		// The master took this node for a new agent: the old agent's tasks
		// are lost to it and their updates were dropped. Nobody will ask
		// for them again, so they end here.
		a.log.Warn("the master registered this node as a new agent; killing the old agent's tasks", "old_agent_id", previous, "agent_id", id)
		for _, t := range a.tasks {
			if !t.rec.Ended && !t.launching {
				_ = a.ctz.Kill(t.rec.ContainerID, 0)
			}
			t.rec.Killing = true
			t.rec.Pending = nil
			a.forgetLocked(t)
		}
	}
	if id != a.agentID {
		a.agentID = id
		if err := a.ckpt.saveAgent(agentRecord{AgentID: id, Name: a.cfg.Info.Name}); err != nil {
			a.log.Error("checkpoint agent id", "error", err)
		}
	}
	a.stats.registrations.Add(1)
	a.log.Info("registered", "agent_id", id)
}

// launch starts the tasks of a LAUNCH event. Each task is checkpointed
// before it is started; its start runs apart so that later events (kills,
// acknowledgements) are not held up behind it.
func (a *Agent) launch(l api.AgentLaunch) {
	received := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if l.Executor != nil {
		a.launchGroupLocked(l, received)
		return
	}
	for _, at := range l.Tasks {
		t := a.newTaskLocked(l.FrameworkID, at, nil)
		if t == nil {
			continue
		}
		// Checked again: an agent trusts no master with what it runs as root.
		if err := api.ValidateTaskInfo(at.Task, false); err != nil {
			a.refuseLocked(t, err)
			continue
		}
		a.admitLocked(&launchUnit{tasks: []*task{t}, received: received})
	}
}

// newTaskLocked records a task of a LAUNCH; nil when the agent has it
// already (a repeated LAUNCH changes nothing).
func (a *Agent) newTaskLocked(frameworkID string, at api.AgentTask, e *executor) *task {
	at.FrameworkID = frameworkID
	at.State = api.TaskStaging
	if old := a.tasks[taskKey{frameworkID, at.Task.TaskID}]; old != nil {
		if !old.rec.Ended || old.launching {
			a.log.Warn("LAUNCH of a task the agent runs already; ignored", "framework_id", frameworkID, "task_id", at.Task.TaskID, "state", old.rec.Task.State)
			return nil
		}
		// The master has forgotten the ended task and the framework
		// reuses its id: the old task's last updates would now be taken
		// for the new one's.
		a.log.Info("a new task reuses the id of an ended one whose last update is unacknowledged; that update is dropped",
			"framework_id", frameworkID, "task_id", at.Task.TaskID, "old_state", old.rec.Task.State)
		a.client.DropUpdates(frameworkID, at.Task.TaskID)
		old.rec.Pending = nil
		a.forgetLocked(old)
	}
	t := &task{rec: taskRecord{ContainerID: newContainerID(), Task: at}}
	if e != nil {
		t.rec.Group = e.rec.ContainerID
	}
	a.tasks[t.key()] = t
	a.byID[t.rec.ContainerID] = t
	return t
}

// refuseLocked ends a task that will not run with TASK_ERROR.
func (a *Agent) refuseLocked(t *task, why error) {
	t.rec.Ended = true
	a.stats.refused.Add(1)
	a.updateLocked(t, api.TaskError, api.ReasonTaskInvalid, why.Error())
}

// launchGroupLocked launches a task group: all its tasks or none.
func (a *Agent) launchGroupLocked(l api.AgentLaunch, received time.Time) {
	ex := *l.Executor
	ex.FrameworkID = l.FrameworkID
	e := a.executors[taskKey{l.FrameworkID, ex.ExecutorID}]
	problem := func() error {
		if err := api.ValidateName("executor_id", ex.ExecutorID); err != nil {
			return err
		}
		if len(l.Tasks) == 0 {
			return errors.New("a task group needs tasks")
		}
		share := l.Tasks[0].Task.ShareCgroups()
		for _, at := range l.Tasks {
			if err := api.ValidateTaskInfo(at.Task, true); err != nil {
				return fmt.Errorf("task %s: %w", at.Task.TaskID, err)
			}
			if at.Task.ShareCgroups() != share {
				return errors.New("the tasks of one executor must all share its cgroups or all nest their own (share_cgroups)")
			}
		}
		if e != nil && e.rec.ShareCgroups != share {
			return fmt.Errorf("executor %s already runs tasks with share_cgroups: %v", ex.ExecutorID, e.rec.ShareCgroups)
		}
		return nil
	}()
	if e == nil && problem == nil {
		e = &executor{rec: executorRecord{ContainerID: newContainerID(), Executor: ex, ShareCgroups: l.Tasks[0].Task.ShareCgroups()}}
	}
	var tasks []*task
	for _, at := range l.Tasks {
		at.ExecutorID = ex.ExecutorID
		if t := a.newTaskLocked(l.FrameworkID, at, e); t != nil {
			tasks = append(tasks, t)
		}
	}
	if problem != nil {
		for _, t := range tasks {
			a.refuseLocked(t, problem)
		}
		return
	}
	if a.executors[e.key()] == nil {
		a.executors[e.key()] = e
		if err := a.ckpt.saveExecutor(&e.rec); err != nil {
			a.log.Error("checkpoint executor", "executor_id", ex.ExecutorID, "error", err)
		}
	}
	if len(tasks) > 0 {
		a.admitLocked(&launchUnit{tasks: tasks, exec: e, received: received})
	}
}

// groupSpecLocked is what a task group's executor cgroup enforces, for its
// live tasks.
func (a *Agent) groupSpecLocked(e *executor) cgroups.Spec {
	own := api.Resources{}
	for _, piece := range e.rec.Executor.Allocation {
		own.Add(piece.Scalars)
	}
	var tasks []cgroups.TaskResources
	for _, t := range a.tasks {
		if t.rec.Group == e.rec.ContainerID && !t.rec.Ended && !t.rec.Waiting {
			tasks = append(tasks, cgroups.TaskResources{Requests: t.rec.Task.Task.Resources, Limits: t.rec.Task.Task.Limits})
		}
	}
	return cgroups.GroupSpecFor(own, tasks)
}

// startLocked checkpoints a task and starts it in the background; received
// is when its LAUNCH event came, for allot_agent_launch_seconds.
func (a *Agent) startLocked(t *task, spec containerizer.LaunchSpec, received time.Time) {
	ti := t.rec.Task.Task
	t.rec.Started = time.Now().UTC()
	if err := a.ckpt.saveTask(&t.rec); err != nil {
		t.rec.Ended = true
		a.updateLocked(t, api.TaskFailed, api.ReasonCommandExecutorFailed, "the task could not be checkpointed: "+err.Error())
		a.endGroupIfIdleLocked(a.groupOf(t))
		return
	}
	spec.ContainerID = t.rec.ContainerID
	spec.MemoryRequestBytes = int64(ti.Resources["mem"] * (1 << 20))
	spec.Program, spec.Argv = command(ti.Command)
	spec.Env = a.environment(t)
	t.launching = true
	go func() {
		c, err := a.ctz.Launch(spec)
		if err == nil {
			a.stats.observeLaunch(time.Since(received))
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.launched(t, c, err)
		a.startWaitingLocked()
	}()
}

// launched records the outcome of a task's start.
func (a *Agent) launched(t *task, c containerizer.Container, err error) {
	t.launching = false
	if a.byID[t.rec.ContainerID] != t {
		// Forgotten meanwhile: the master registered this node as a new
		// agent, and nobody will ask for this task again.
		if err == nil {
			_ = a.ctz.Kill(t.rec.ContainerID, 0)
		}
		return
	}
	if err != nil {
		t.rec.Ended = true
		a.updateLocked(t, api.TaskFailed, "", "the command could not start: "+err.Error())
		a.endGroupIfIdleLocked(a.groupOf(t))
		return
	}
	if err := a.ckpt.saveLaunchCopy(&t.rec); err != nil {
		a.log.Warn("launch copy of the task checkpoint", "container_id", t.rec.ContainerID, "error", err)
	}
	a.updateLocked(t, api.TaskRunning, "", fmt.Sprintf("running as pid %d in cgroup %s", c.Pid, c.Cgroup))
	switch {
	case t.exit != nil:
		a.endedLocked(t, *t.exit)
	case t.rec.Killing:
		_ = a.ctz.Kill(t.rec.ContainerID, gracePeriod(t.rec.Task.Task))
	}
}

// command is the program and argv of a task's command: /bin/sh -c value,
// or with shell false value run with arguments as its argv (arguments[0]
// is argv[0], as in Mesos; none means argv is just value).
func command(c *api.CommandInfo) (program string, argv []string) {
	switch {
	case c.Shell == nil || *c.Shell:
		return "/bin/sh", []string{"/bin/sh", "-c", c.Value}
	case len(c.Arguments) > 0:
		return c.Value, c.Arguments
	}
	return c.Value, []string{c.Value}
}

// environment is a task's environment: a PATH, where the task is, and then
// the task's own variables, which win.
func (a *Agent) environment(t *task) []string {
	sandbox := filepath.Join(a.cfg.WorkDir, "sandboxes", t.rec.ContainerID)
	env := map[string]string{
		"PATH":                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                    sandbox,
		"ALLOT_SANDBOX_DIRECTORY": sandbox,
		"ALLOT_TASK_ID":           t.rec.Task.Task.TaskID,
		"ALLOT_FRAMEWORK_ID":      t.rec.Task.FrameworkID,
		"ALLOT_AGENT_ID":          a.agentID,
		"ALLOT_CONTAINER_ID":      t.rec.ContainerID,
	}
	if c := t.rec.Task.Task.Command; c != nil {
		for k, v := range c.Environment {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func gracePeriod(ti api.TaskInfo) time.Duration {
	return time.Duration(ti.KillGracePeriodSeconds() * float64(time.Second))
}

func (a *Agent) kill(k api.AgentKill) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tasks[taskKey{k.FrameworkID, k.TaskID}]
	switch {
	case t == nil:
		a.log.Info("KILL of a task this agent does not have; ignored", "framework_id", k.FrameworkID, "task_id", k.TaskID)
		return
	case t.rec.Ended:
		return // its final update is on its way
	case t.rec.Waiting:
		a.killWaitingLocked(t)
		return
	}
	if !t.rec.Killing {
		t.rec.Killing = true
		if err := a.ckpt.saveTask(&t.rec); err != nil {
			a.log.Error("checkpoint task", "task_id", k.TaskID, "error", err)
		}
	}
	if t.launching {
		return // launched() kills it once it runs
	}
	if err := a.ctz.Kill(t.rec.ContainerID, gracePeriod(t.rec.Task.Task)); err != nil {
		a.log.Error("kill task", "task_id", k.TaskID, "container_id", t.rec.ContainerID, "error", err)
	}
}

// containerExited is the containerizer's OnExit.
func (a *Agent) containerExited(containerID string, st containerizer.ExitStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.byID[containerID]
	switch {
	case t == nil:
		a.log.Info("a container nobody owns ended", "container_id", containerID)
	case t.launching:
		t.exit = &st
	case !t.rec.Ended:
		a.endedLocked(t, st)
		a.startWaitingLocked()
	}
}

// endedLocked reports a task's end.
func (a *Agent) endedLocked(t *task, st containerizer.ExitStatus) {
	ti := t.rec.Task.Task
	memLimit := 0.0
	if l, ok := ti.Limits["mem"]; ok && !l.Infinite {
		memLimit = l.Value
	} else if !ok {
		memLimit = ti.Resources["mem"]
	}
	state, reason, message := endStatus(st, t.rec.Killing, ti.Resources["mem"], memLimit)
	if t.rec.Preempted != "" && !st.Lost && st.StartError == "" {
		state, reason, message = api.TaskKilled, api.ReasonContainerPreempted, t.rec.Preempted+"; the task "+howEnded(st)
	}
	t.rec.Ended = true
	a.updateLocked(t, state, reason, message)
	a.endGroupIfIdleLocked(a.groupOf(t))
}

func (a *Agent) groupOf(t *task) *executor {
	if t.rec.Group == "" {
		return nil
	}
	return a.executors[taskKey{t.rec.Task.FrameworkID, t.rec.Task.ExecutorID}]
}

// endGroupIfIdleLocked removes a task group's executor once none of its
// tasks runs.
func (a *Agent) endGroupIfIdleLocked(e *executor) {
	if e == nil {
		return
	}
	for _, t := range a.tasks {
		if t.rec.Group == e.rec.ContainerID && (!t.rec.Ended || t.launching) {
			return
		}
	}
	if err := a.ctz.DestroyGroup(e.rec.ContainerID); err != nil {
		a.log.Error("remove the cgroup of a task group", "executor_id", e.rec.Executor.ExecutorID, "error", err)
		return
	}
	delete(a.executors, e.key())
	if err := a.ckpt.removeExecutor(e.rec.ContainerID); err != nil {
		a.log.Error("remove executor checkpoint", "executor_id", e.rec.Executor.ExecutorID, "error", err)
	}
}

// updateLocked records a new state of a task and sends it, checkpointed
// first so that it survives a restart until acknowledged.
func (a *Agent) updateLocked(t *task, state, reason, message string) {
	st := api.TaskStatus{
		TaskID:    t.rec.Task.Task.TaskID,
		AgentID:   a.agentID,
		State:     state,
		Reason:    reason,
		Message:   message,
		UUID:      newUUID(),
		Timestamp: time.Now().UTC(),
	}
	t.rec.Task.State = state
	t.rec.Pending = append(t.rec.Pending, st)
	if err := a.ckpt.saveTask(&t.rec); err != nil {
		a.log.Error("checkpoint task update", "task_id", st.TaskID, "state", state, "error", err)
	}
	a.stats.updates.Add(1)
	a.log.Info("task update", "framework_id", t.rec.Task.FrameworkID, "task_id", st.TaskID, "state", state, "reason", reason, "message", message)
	a.client.SendUpdate(t.rec.Task.FrameworkID, st)
}

func (a *Agent) acknowledged(frameworkID string, st api.TaskStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tasks[taskKey{frameworkID, st.TaskID}]
	if t == nil {
		return
	}
	i := slices.IndexFunc(t.rec.Pending, func(p api.TaskStatus) bool { return p.UUID == st.UUID })
	if i < 0 {
		return
	}
	// The acknowledgement settles this update and every earlier one.
	t.rec.Pending = slices.Delete(t.rec.Pending, 0, i+1)
	if t.rec.Ended && len(t.rec.Pending) == 0 && !t.launching {
		a.forgetLocked(t)
		return
	}
	if err := a.ckpt.saveTask(&t.rec); err != nil {
		a.log.Error("checkpoint task", "task_id", st.TaskID, "error", err)
	}
}

// forgetLocked drops a settled task.
func (a *Agent) forgetLocked(t *task) {
	a.forgetWaitingLocked(t)
	delete(a.tasks, t.key())
	delete(a.byID, t.rec.ContainerID)
	for _, remove := range []func(string) error{a.ckpt.removeTask, a.ckpt.removeLaunchCopy} {
		if err := remove(t.rec.ContainerID); err != nil {
			a.log.Error("remove task checkpoint", "container_id", t.rec.ContainerID, "error", err)
		}
	}
	a.endGroupIfIdleLocked(a.groupOf(t))
}

// containerIDPattern is what the agent generates; anything else in a file
// name under meta/ is not the agent's.
var containerIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func validContainerID(id string) bool { return containerIDPattern.MatchString(id) }

func newContainerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return strings.Join([]string{h[0:8], h[8:12], h[12:16], h[16:20], h[20:]}, "-")
}

// loadLaunchCopy rebuilds a task record from its launch copy.
func (a *Agent) loadLaunchCopy(containerID string) (*taskRecord, error) {
	r := &taskRecord{}
	if err := atomicfile.ReadJSON(filepath.Join(a.ckpt.dir, "launch", containerID+".json"), r); err != nil {
		return nil, err
	}
	if r.ContainerID != containerID {
		return nil, fmt.Errorf("launch copy names container %q", r.ContainerID)
	}
	return r, nil
}
