package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/cgroups/cgroupstest"
	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/tools/freeaddr"
)

// The end-to-end tests run real masterd servers (masterd/testcluster), real
// agentd processes on this machine's cgroups and a framework written with
// the Go scheduler client.

var buildOnce struct {
	sync.Once
	path string
	err  error
}

// agentdBinary builds agentd once per test binary.
func agentdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := testcluster.ModuleRoot("")
		if err != nil {
			buildOnce.err = err
			return
		}
		dir, err := os.MkdirTemp("", "agentd-e2e-bin-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.path = filepath.Join(dir, "agentd")
		cmd := exec.Command("go", "build", "-o", buildOnce.path, "./agentd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildOnce.err = fmt.Errorf("go build ./agentd: %v\n%s", err, out)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.path
}

// agentProcess is one agentd process; restartable with the same arguments.
type agentProcess struct {
	t       testing.TB
	bin     string
	args    []string
	http    string
	logPath string
	root    string // cgroup root name
	workDir string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// startAgent starts agentd named name against masters, with its own work
// dir and cgroup root.
func startAgent(t testing.TB, masters []string, name, resources string, extra ...string) *agentProcess {
	t.Helper()
	cgroupstest.Manager(t)
	dir := t.TempDir()
	a := &agentProcess{
		t:       t,
		bin:     agentdBinary(t),
		http:    freeAddr(t),
		logPath: filepath.Join(dir, "agentd.log"),
		root:    fmt.Sprintf("allot-e2e-%d-%s", os.Getpid(), name),
		workDir: filepath.Join(dir, "work"),
	}
	a.args = []string{"-master", strings.Join(masters, ","), "-name", name, "-work-dir", a.workDir,
		"-http", a.http, "-resources", resources, "-cgroup-root", a.root, "-log-level", "debug"}
	a.args = append(a.args, extra...)
	a.start()
	t.Cleanup(func() {
		a.kill()
		if t.Failed() {
			data, _ := os.ReadFile(a.logPath)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) > 80 {
				lines = lines[len(lines)-80:]
			}
			t.Logf("agentd %s log (last lines):\n%s", name, strings.Join(lines, "\n"))
		}
		removeCgroupTree(t, a.root)
	})
	return a
}

func (a *agentProcess) start() {
	a.t.Helper()
	log, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.t.Fatal(err)
	}
	defer log.Close()
	a.cmd = exec.Command(a.bin, a.args...)
	a.cmd.Stdout, a.cmd.Stderr = log, log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(a.cmd, a.exited)
	eventually(a.t, "agentd's local API answers", 30*time.Second, func() error {
		select {
		case <-a.exited:
			return fmt.Errorf("agentd exited: %s", a.cmd.ProcessState)
		default:
		}
		resp, err := http.Get("http://" + a.http + "/v1/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
}

// kill9 kills agentd with SIGKILL, as a crash does; its tasks live on.
func (a *agentProcess) kill9() {
	a.t.Helper()
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.exited
}

// kill stops agentd (SIGTERM); its tasks live on.
func (a *agentProcess) kill() {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
	}
}

// containers reads the agent's GET /v1/containers.
func (a *agentProcess) containers() ([]api.Container, error) {
	resp, err := http.Get("http://" + a.http + "/v1/containers")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/containers: %s", resp.Status)
	}
	var list api.ContainerList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list.Containers, nil
}

// logLines returns the lines of the agent's log that contain s.
func (a *agentProcess) logLines(s string) []string {
	f, err := os.Open(a.logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// removeCgroupTree removes a test's cgroup root, killing what is left: a
// test must not leave anything behind, even when it fails.
func removeCgroupTree(t testing.TB, root string) {
	m, err := cgroups.NewManager(nil)
	if err != nil {
		return
	}
	cg, err := m.Load("/" + root)
	if err != nil {
		return
	}
	_ = cg.KillAll()
	if err := cg.Delete(); err != nil {
		t.Logf("remove cgroup /%s: %v", root, err)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeaddr.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// eventually retries check until it passes or timeout ends.
func eventually(t testing.TB, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// queueFramework launches the tasks queued with add on the first offer
// that fits each, acknowledges every update and records it, and
// re-subscribes with its id when its stream ends (a leader change).
type queueFramework struct {
	t testing.TB
	// reconcile asks the master for its tasks' states after re-subscribing.
	reconcile bool

	mu       sync.Mutex
	session  *api.SchedulerSession
	queue    []api.TaskInfo
	launches map[string]int              // ACCEPTs that carried the task
	updates  map[string][]api.TaskStatus // per task, distinct uuids, in order
	uuids    map[string]bool
	// firstEnd is the first terminal update of each task, whoever made it:
	// the one a framework acts on.
	firstEnd map[string]api.TaskStatus
	// received is every update of each task as it came: repeats and the
	// master's own (unreachable, lost, reconciliation answers) included.
	received map[string][]api.TaskStatus
	changed  chan struct{}
}

func startQueueFramework(t testing.TB, ctx context.Context, masters []string, name string) *queueFramework {
	t.Helper()
	return startQueueFrameworkAs(t, ctx, masters, api.FrameworkInfo{Name: name, Roles: []string{"*"}, FailoverTimeoutSeconds: 3600})
}

// startQueueFrameworkAs is startQueueFramework subscribed as info.
func startQueueFrameworkAs(t testing.TB, ctx context.Context, masters []string, info api.FrameworkInfo) *queueFramework {
	t.Helper()
	f := newQueueFramework(t, ctx, masters, info)
	f.reconcile = true
	go f.run(ctx, f.session)
	return f
}

// newQueueFramework subscribes a queueFramework as info; it handles no
// event until run.
func newQueueFramework(t testing.TB, ctx context.Context, masters []string, info api.FrameworkInfo) *queueFramework {
	t.Helper()
	cl, err := api.NewSchedulerClient(masters, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Subscribe(ctx, info)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	f := &queueFramework{t: t, session: s, launches: map[string]int{}, updates: map[string][]api.TaskStatus{},
		uuids: map[string]bool{}, firstEnd: map[string]api.TaskStatus{}, received: map[string][]api.TaskStatus{},
		changed: make(chan struct{})}
	return f
}

func (f *queueFramework) run(ctx context.Context, s *api.SchedulerSession) {
	for {
		for e := range s.Events() {
			f.handle(ctx, s, e)
		}
		if ctx.Err() != nil {
			return
		}
		next, err := s.Resubscribe(ctx)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.session = next
		f.mu.Unlock()
		s = next
		if f.reconcile {
			_ = s.Reconcile(ctx)
		}
	}
}

func (f *queueFramework) handle(ctx context.Context, s *api.SchedulerSession, e api.Event) {
	switch e.Type {
	case api.EventOffers:
		for _, o := range e.Offers.Offers {
			tasks := f.take(o)
			if len(tasks) == 0 {
				refuse := 0.1
				_ = s.Decline(ctx, []string{o.ID}, &api.Filters{RefuseSeconds: &refuse})
				continue
			}
			op := api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: tasks}}
			if err := s.Accept(ctx, []string{o.ID}, []api.Operation{op}, nil); err != nil {
				f.t.Logf("accept: %v", err)
			}
		}
	case api.EventUpdate:
		st := e.Update.Status
		f.mu.Lock()
		f.received[st.TaskID] = append(f.received[st.TaskID], st)
		if _, seen := f.firstEnd[st.TaskID]; !seen && api.IsTerminal(st.State) {
			f.firstEnd[st.TaskID] = st
		}
		// Only the agents' updates are recorded: the master's own
		// (reconciliation answers) carry no uuid.
		if st.UUID != "" && !f.uuids[st.UUID] {
			f.uuids[st.UUID] = true
			f.updates[st.TaskID] = append(f.updates[st.TaskID], st)
			close(f.changed)
			f.changed = make(chan struct{})
		}
		f.mu.Unlock()
		_ = s.AcknowledgeStatus(ctx, st)
	}
}

// take removes from the queue the tasks that fit in the offer: revocable
// tasks in its revocable pieces, the others in its regular ones.
func (f *queueFramework) take(o api.Offer) []api.TaskInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	free := map[bool]api.Resources{false: {}, true: {}}
	for _, r := range o.Resources {
		free[r.Revocable].Add(r.Scalars)
	}
	var out, rest []api.TaskInfo
	for _, ti := range f.queue {
		if free[ti.Revocable].Contains(ti.Resources) {
			free[ti.Revocable].Subtract(ti.Resources)
			ti.AgentID = o.AgentID
			f.launches[ti.TaskID]++
			out = append(out, ti)
		} else {
			rest = append(rest, ti)
		}
	}
	f.queue = rest
	return out
}

// add queues tasks and revives offers.
func (f *queueFramework) add(ctx context.Context, tasks ...api.TaskInfo) {
	f.mu.Lock()
	f.queue = append(f.queue, tasks...)
	s := f.session
	f.mu.Unlock()
	_ = s.Revive(ctx)
}

func (f *queueFramework) kill(ctx context.Context, taskID string) {
	f.t.Helper()
	f.mu.Lock()
	s := f.session
	f.mu.Unlock()
	if err := s.Kill(ctx, taskID, ""); err != nil {
		f.t.Fatalf("kill %s: %v", taskID, err)
	}
}

// last is the latest update of a task.
func (f *queueFramework) last(taskID string) api.TaskStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.updates[taskID]
	if len(u) == 0 {
		return api.TaskStatus{}
	}
	return u[len(u)-1]
}

// states lists the distinct updates of a task, in order.
func (f *queueFramework) states(taskID string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, u := range f.updates[taskID] {
		out = append(out, u.State)
	}
	return out
}

// waitState waits until a task's latest update is in state.
func (f *queueFramework) waitState(ctx context.Context, taskID, state string, timeout time.Duration) api.TaskStatus {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		f.mu.Lock()
		changed := f.changed
		f.mu.Unlock()
		if st := f.last(taskID); st.State == state {
			return st
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("task %s: waiting for %s, updates so far %v (last: %+v)", taskID, state, f.states(taskID), f.last(taskID))
		case <-changed:
		}
	}
}

// sleepTask is a task running sh -c command with requests res.
func sleepTask(id, command string, res api.Resources, limits api.Limits) api.TaskInfo {
	return api.TaskInfo{TaskID: id, Name: id, Resources: res, Limits: limits, Command: &api.CommandInfo{Value: command}}
}

// processAlive reports whether pid runs (and is not a zombie).
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
