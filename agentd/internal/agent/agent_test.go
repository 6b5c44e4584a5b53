package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/cgroups/cgroupstest"
	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// The test binary doubles as the monitor process, as agentd does.
const monitorArg = "agentd-test-monitor"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == monitorArg {
		containerizer.RunMonitor(os.Args[2:])
	}
	os.Exit(m.Run())
}

// testAgent is an Agent on real cgroups under a root of its own, registered
// with a fake master that the test drives.
type testAgent struct {
	*Agent
	t       testing.TB
	master  *fakemaster.Master
	workDir string
	root    string
	cancel  context.CancelFunc
	done    chan struct{}
	logs    *syncWriter
}

func newTestAgent(t testing.TB, master *fakemaster.Master, workDir, root string) *testAgent {
	t.Helper()
	return newTestAgentWith(t, master, workDir, root, api.Resources{"cpus": 2, "mem": 1024})
}

// newTestAgentWith is newTestAgent on a node of res; configure changes
// the agent's configuration before it starts.
func newTestAgentWith(t testing.TB, master *fakemaster.Master, workDir, root string, res api.Resources, configure ...func(*Config)) *testAgent {
	t.Helper()
	mgr := cgroupstest.Manager(t)
	logs := &syncWriter{}
	cfg := Config{
		Masters: []string{master.URL},
		Info:    api.AgentInfo{Name: "test-node", Hostname: "test-node", Resources: res},
		WorkDir: workDir,
		Containerizer: containerizer.Config{
			CgroupRoot:      root,
			Cgroups:         mgr,
			Root:            cgroups.SpecFor(res, nil),
			NodeMemoryBytes: int64(res["mem"]) << 20,
			MonitorCommand:  []string{os.Args[0], monitorArg},
		},
		UpdateRetryInterval: 200 * time.Millisecond,
		Logger:              hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
	}
	for _, c := range configure {
		c(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{Agent: a, t: t, master: master, workDir: workDir, root: root, cancel: cancel, done: make(chan struct{}), logs: logs}
	go func() { defer close(ta.done); _ = a.Run(ctx) }()
	return ta
}

// stop ends agentd's side as a crash would: its tasks and monitors live on.
func (ta *testAgent) stop() {
	ta.cancel()
	<-ta.done
	_ = ta.Close()
}

// stream waits for the agent's session on the fake master.
func (ta *testAgent) stream(n int) *fakemaster.Stream {
	ta.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	streams, err := ta.master.WaitStreams(ctx, api.AgentProtocolPath, n)
	if err != nil {
		ta.t.Fatalf("agent session: %v", err)
	}
	return streams[n-1]
}

// lastUpdate waits until the fake master got an update of task in one of
// states and returns it.
func (ta *testAgent) lastUpdate(taskID string, states ...string) api.TaskStatus {
	ta.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	match := func(c fakemaster.Call) bool {
		return c.Agent != nil && c.Agent.Update != nil && c.Agent.Update.Status.TaskID == taskID &&
			slices.Contains(states, c.Agent.Update.Status.State)
	}
	calls, err := ta.master.WaitCalls(ctx, 1, match)
	if err != nil {
		ta.t.Fatalf("task %s: no update in %v: %v", taskID, states, err)
	}
	return calls[len(calls)-1].Agent.Update.Status
}

func launchEvent(frameworkID string, tasks ...api.TaskInfo) api.AgentEvent {
	l := &api.AgentLaunch{FrameworkID: frameworkID}
	for _, ti := range tasks {
		l.Tasks = append(l.Tasks, api.AgentTask{FrameworkID: frameworkID, Role: "*", Task: ti})
	}
	return api.AgentEvent{Type: api.AgentEventLaunch, Launch: l}
}

func newTaskInfo(id, command string, res api.Resources, limits api.Limits) api.TaskInfo {
	return api.TaskInfo{TaskID: id, Name: id, Resources: res, Limits: limits, Command: &api.CommandInfo{Value: command}}
}

// testEnv starts a fake master and names a cgroup root of the test's own;
// both go when the test ends.
func testEnv(t *testing.T, opts fakemaster.Options) (*fakemaster.Master, string) {
	master := fakemaster.New(opts)
	t.Cleanup(master.Close)
	root := testRoot(t)
	cleanupRoot(t, root)
	return master, root
}

func testRoot(t *testing.T) string {
	return fmt.Sprintf("allot-agent-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// cleanupRoot kills and removes a test's cgroup root when the test ends.
func cleanupRoot(t testing.TB, root string) {
	t.Cleanup(func() {
		mgr, err := cgroups.NewManager(nil)
		if err != nil {
			return
		}
		if cg, err := mgr.Load("/" + root); err == nil {
			_ = cg.KillAll()
			if err := cg.Delete(); err != nil {
				t.Errorf("remove /%s: %v", root, err)
			}
		}
	})
}

// readCgroupFile reads a v1 cgroup file: "memory/memory.limit_in_bytes".
func readCgroupFile(t *testing.T, cgroup, file string) string {
	t.Helper()
	controller, name, _ := strings.Cut(file, "/")
	data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, cgroup, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func TestTaskAndGroupCgroups(t *testing.T) {
	if cgroups.DetectMode() != cgroups.V1 {
		t.Skip("reads cgroup v1 files; the v2 files are checked on a fake hierarchy in package cgroups")
	}
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgent(t, master, t.TempDir(), root)
	defer a.stop()
	s := a.stream(1)

	no := false
	nested := &api.ContainerInfo{LinuxInfo: &api.LinuxInfo{ShareCgroups: &no}}
	lone := newTaskInfo("lone", "sleep 60", api.Resources{"cpus": 0.5, "mem": 128}, api.Limits{"cpus": {Value: 1}, "mem": {Value: 256}})
	unbounded := newTaskInfo("unbounded", "sleep 60", api.Resources{"cpus": 0.25, "mem": 64}, api.Limits{"mem": {Infinite: true}})
	g1 := newTaskInfo("g1", "sleep 60", api.Resources{"cpus": 0.5, "mem": 64}, api.Limits{"mem": {Value: 128}, "cpus": {Value: 1}})
	g1.Container = nested
	g2 := newTaskInfo("g2", "sleep 60", api.Resources{"cpus": 0.5, "mem": 32}, nil)
	g2.Container = nested
	if err := master.Send(s.ID, launchEvent("fw", lone, unbounded)); err != nil {
		t.Fatal(err)
	}
	group := launchEvent("fw", g1, g2)
	group.Launch.Executor = &api.AgentExecutor{FrameworkID: "fw", ExecutorID: "ex", Role: "*",
		Allocation: []api.OfferResource{{Role: "*", Scalars: api.Resources{"cpus": 0.1, "mem": 32}}}}
	if err := master.Send(s.ID, group); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"lone", "unbounded", "g1", "g2"} {
		if st := a.lastUpdate(id, api.TaskRunning, api.TaskFailed, api.TaskError); st.State != api.TaskRunning {
			t.Fatalf("%s: %+v", id, st)
		}
	}
	byTask := map[string]containerizer.Container{}
	for _, c := range a.ctz.Containers() {
		at, _ := a.TaskOf(c.ID)
		byTask[at.Task.TaskID] = c
	}
	const mib = 1 << 20
	want := map[string]map[string]string{
		"lone": {"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "100000", "memory/memory.soft_limit_in_bytes": fmt.Sprint(128 * mib),
			"memory/memory.limit_in_bytes": fmt.Sprint(256 * mib)},
		"unbounded": {"cpu/cpu.shares": "256", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.soft_limit_in_bytes": fmt.Sprint(64 * mib),
			"memory/memory.limit_in_bytes": "9223372036854771712"},
		"g1": {"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "100000", "memory/memory.soft_limit_in_bytes": fmt.Sprint(64 * mib),
			"memory/memory.limit_in_bytes": fmt.Sprint(128 * mib)},
		// No limits: the hard memory limit is the request.
		"g2": {"cpu/cpu.shares": "512", "cpu/cpu.cfs_quota_us": "-1", "memory/memory.soft_limit_in_bytes": fmt.Sprint(32 * mib),
			"memory/memory.limit_in_bytes": fmt.Sprint(32 * mib)},
	}
	for id, files := range want {
		c := byTask[id]
		for file, value := range files {
			if got := readCgroupFile(t, c.Cgroup, file); got != value {
				t.Errorf("%s %s%s = %s, want %s", id, file, c.Cgroup, got, value)
			}
		}
	}
	// The executor's cgroup holds its own resources plus the sums: soft
	// 32+64+32 MiB, hard 32+128+32 MiB; g2 has no cpu limit, so neither has
	// the group.
	groupCgroup := filepath.Dir(byTask["g1"].Cgroup)
	if groupCgroup != filepath.Dir(byTask["g2"].Cgroup) || filepath.Dir(groupCgroup) != "/"+root {
		t.Fatalf("g1 in %s and g2 in %s: want one executor cgroup under /%s", byTask["g1"].Cgroup, byTask["g2"].Cgroup, root)
	}
	for file, value := range map[string]string{
		"cpu/cpu.shares": fmt.Sprint(102 + 512 + 512), "cpu/cpu.cfs_quota_us": "-1",
		"memory/memory.soft_limit_in_bytes": fmt.Sprint(128 * mib), "memory/memory.limit_in_bytes": fmt.Sprint(192 * mib),
	} {
		if got := readCgroupFile(t, groupCgroup, file); got != value {
			t.Errorf("executor %s%s = %s, want %s", file, groupCgroup, got, value)
		}
	}
	// The root holds the node: 1024 MiB hard, 2 cpus as shares.
	if got := readCgroupFile(t, "/"+root, "memory/memory.limit_in_bytes"); got != fmt.Sprint(1024*mib) {
		t.Errorf("root memory.limit_in_bytes = %s", got)
	}
	if got := readCgroupFile(t, "/"+root, "cpu/cpu.shares"); got != "2048" {
		t.Errorf("root cpu.shares = %s", got)
	}
	// oom_score_adj = 1000 − 1000 × request / node memory.
	for id, adj := range map[string]int{"lone": 875, "unbounded": 938, "g1": 938, "g2": 969} {
		if got := byTask[id].OOMScoreAdj; got != adj {
			t.Errorf("%s: oom_score_adj %d, want %d", id, got, adj)
		}
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", byTask[id].Pid))
		if strings.TrimSpace(string(data)) != fmt.Sprint(adj) {
			t.Errorf("%s: /proc/%d/oom_score_adj = %q, want %d", id, byTask[id].Pid, data, adj)
		}
	}

	for _, id := range []string{"lone", "unbounded", "g1", "g2"} {
		if err := master.Send(s.ID, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw", TaskID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"lone", "unbounded", "g1", "g2"} {
		if st := a.lastUpdate(id, api.TaskKilled, api.TaskFailed); st.State != api.TaskKilled {
			t.Errorf("%s: %+v", id, st)
		}
	}
	waitFor(t, "the executor cgroup to go", func() bool {
		_, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", groupCgroup))
		return os.IsNotExist(err)
	})
}

// Tasks crafted to escape the sandbox or the cgroup root get TASK_ERROR
// from the agent itself (the master is not trusted with it), and nothing
// outside the work dir is touched.
func TestHostileTasks(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	base := t.TempDir()
	workDir := filepath.Join(base, "work")
	a := newTestAgent(t, master, workDir, root)
	defer a.stop()
	s := a.stream(1)

	res := api.Resources{"cpus": 0.1, "mem": 16}
	no := false
	hostile := map[string]api.TaskInfo{
		"../escape":   newTaskInfo("../escape", "true", res, nil),
		"/etc/passwd": newTaskInfo("/etc/passwd", "true", res, nil),
		"nul":         newTaskInfo("nul\x00x", "true", res, nil),
		"..":          newTaskInfo("..", "true", res, nil),
		"huge":        newTaskInfo("huge", strings.Repeat("x", 1<<20), res, nil),
		"nul-command": newTaskInfo("nul-command", "echo a\x00b", res, nil),
		"env":         {TaskID: "env", Resources: res, Command: &api.CommandInfo{Value: "true", Environment: map[string]string{"A=B": "x"}}},
		"share":       {TaskID: "share", Resources: res, Command: &api.CommandInfo{Value: "true"}, Container: &api.ContainerInfo{LinuxInfo: &api.LinuxInfo{ShareCgroups: &no}}},
		"limits":      newTaskInfo("limits", "true", res, api.Limits{"mem": {Value: 1}}),
	}
	for _, ti := range hostile {
		if err := master.Send(s.ID, launchEvent("fw", ti)); err != nil {
			t.Fatal(err)
		}
	}
	// An executor id that would climb out of the root.
	group := launchEvent("fw", newTaskInfo("grouped", "true", res, nil))
	group.Launch.Executor = &api.AgentExecutor{FrameworkID: "fw", ExecutorID: "../../x", Role: "*"}
	if err := master.Send(s.ID, group); err != nil {
		t.Fatal(err)
	}
	hostile["grouped"] = api.TaskInfo{TaskID: "grouped"}
	for name, ti := range hostile {
		st := a.lastUpdate(ti.TaskID, api.TaskError, api.TaskRunning, api.TaskFailed)
		if st.State != api.TaskError || st.Reason != api.ReasonTaskInvalid || st.Message == "" {
			t.Errorf("%s: %+v, want TASK_ERROR / REASON_TASK_INVALID with the rule in message", name, st)
		}
	}
	if n := len(a.ctz.Containers()); n != 0 {
		t.Errorf("%d containers run", n)
	}
	entries, _ := os.ReadDir(base)
	if len(entries) != 1 || entries[0].Name() != "work" {
		t.Errorf("the agent wrote outside its work dir: %v", entries)
	}
	if dirs, _ := filepath.Glob("/sys/fs/cgroup/memory/" + root + "/*/"); len(dirs) > 0 {
		t.Errorf("cgroups made for refused tasks: %v", dirs)
	}
}

// A damaged task checkpoint is reported in the log and the task is rebuilt
// from its launch copy: nothing still running is lost.
func TestDamagedCheckpoint(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	workDir := t.TempDir()
	a := newTestAgent(t, master, workDir, root)
	s := a.stream(1)
	res := api.Resources{"cpus": 0.1, "mem": 16}
	if err := master.Send(s.ID, launchEvent("fw", newTaskInfo("t1", "sleep 60", res, nil), newTaskInfo("t2", "sleep 60", res, nil))); err != nil {
		t.Fatal(err)
	}
	a.lastUpdate("t1", api.TaskRunning)
	a.lastUpdate("t2", api.TaskRunning)
	pids := map[string]int{}
	var damagedID string
	for _, c := range a.ctz.Containers() {
		at, _ := a.TaskOf(c.ID)
		pids[at.Task.TaskID] = c.Pid
		if at.Task.TaskID == "t1" {
			damagedID = c.ID
		}
	}
	agentID := a.AgentID()
	waitFor(t, "updates acknowledged", func() bool { return a.client.PendingUpdates() == 0 })
	a.stop()

	// Truncate t1's checkpoint, as a disk that lost its tail would.
	path := filepath.Join(workDir, "meta", "tasks", damagedID+".json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}

	b := newTestAgent(t, master, workDir, root)
	defer b.stop()
	b.stream(2)
	if b.AgentID() != agentID {
		t.Fatalf("agent id %q after restart, want %q", b.AgentID(), agentID)
	}
	if !strings.Contains(b.logs.String(), "task checkpoint is damaged") {
		t.Errorf("no log line about the damaged checkpoint:\n%s", b.logs.String())
	}
	tasks, _ := b.report()
	if len(tasks) != 2 {
		t.Fatalf("recovered %d tasks: %+v", len(tasks), tasks)
	}
	for _, at := range tasks {
		if at.State != api.TaskRunning {
			t.Errorf("%s: %s after recovery", at.Task.TaskID, at.State)
		}
		if !processRunning(pids[at.Task.TaskID]) {
			t.Errorf("%s: pid %d is gone", at.Task.TaskID, pids[at.Task.TaskID])
		}
	}
}

func processRunning(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncWriter lets the agent's logger write from many goroutines.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// A framework may launch a task under the id of one that ended (the master
// forgets ended tasks) before the agent has the old one's last update
// acknowledged: the new task runs, and the old update is not sent again.
func TestTaskIDReusedAfterItsTaskEnded(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{})
	a := newTestAgent(t, master, t.TempDir(), root)
	defer a.stop()
	s := a.stream(1)
	res := api.Resources{"cpus": 0.1, "mem": 16}
	if err := master.Send(s.ID, launchEvent("fw", newTaskInfo("r", "exit 3", res, nil))); err != nil {
		t.Fatal(err)
	}
	firstRun := a.lastUpdate("r", api.TaskRunning)
	a.lastUpdate("r", api.TaskFailed)
	if err := master.Send(s.ID, launchEvent("fw", newTaskInfo("r", "sleep 60", res, nil))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Unacknowledged updates are resent: the new task's is another uuid.
	if _, err := master.WaitCalls(ctx, 1, func(c fakemaster.Call) bool {
		return c.Agent != nil && c.Agent.Update != nil && c.Agent.Update.Status.TaskID == "r" &&
			c.Agent.Update.Status.State == api.TaskRunning && c.Agent.Update.Status.UUID != firstRun.UUID
	}); err != nil {
		t.Fatalf("the second task r did not run: %v", err)
	}
	tasks, _ := a.report()
	if len(tasks) != 1 || tasks[0].State != api.TaskRunning {
		t.Fatalf("the agent reports %+v, want the new task running", tasks)
	}
	waitFor(t, "the old update dropped", func() bool {
		return a.client.PendingUpdates() == 1 // the new task's TASK_RUNNING
	})
}

// Two agents never share a work dir or a cgroup root.
func TestOneAgentPerWorkDirAndCgroupRoot(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	workDir := t.TempDir()
	a := newTestAgent(t, master, workDir, root)
	defer a.stop()
	for name, c := range map[string]struct{ workDir, root string }{
		"same work dir":    {workDir, root + "-other"},
		"same cgroup root": {t.TempDir(), root},
	} {
		cfg := a.cfg
		cfg.WorkDir, cfg.Containerizer.CgroupRoot = c.workDir, c.root
		if b, err := New(cfg); err == nil || !strings.Contains(err.Error(), "in use by another agentd") {
			if b != nil {
				_ = b.Close()
			}
			t.Errorf("%s: a second agent started (%v)", name, err)
		}
	}
}

// A memory hog with a 64 MiB limit is killed at its limit and reported so,
// 20 times out of 20, from the cgroup's own OOM accounting.
func TestMemoryHogReportedAtItsLimit(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	a := newTestAgent(t, master, t.TempDir(), root)
	defer a.stop()
	s := a.stream(1)
	for i := range 20 {
		id := fmt.Sprintf("hog-%d", i)
		// tail keeps the whole newline-free stream in memory.
		hog := newTaskInfo(id, "head -c 512m /dev/zero | tail", api.Resources{"cpus": 0.1, "mem": 32}, api.Limits{"mem": {Value: 64}})
		if err := master.Send(s.ID, launchEvent("fw", hog)); err != nil {
			t.Fatal(err)
		}
		st := a.lastUpdate(id, api.TaskFailed, api.TaskFinished, api.TaskKilled, api.TaskError)
		if st.State != api.TaskFailed || st.Reason != api.ReasonContainerLimitationMemory || !strings.Contains(st.Message, "64 MiB") {
			t.Fatalf("hog %d of 20: %+v", i+1, st)
		}
	}
}

// An executor left without tasks by a crash (checkpointed, its first task
// not) is removed at recovery with its cgroup, not reported forever.
func TestExecutorWithoutTasksRemovedAtRecovery(t *testing.T) {
	master, root := testEnv(t, fakemaster.Options{AutoAcknowledge: true})
	workDir := t.TempDir()
	a := newTestAgent(t, master, workDir, root)
	a.stream(1)
	const group = "0123456789abcdef0123456789abcdef"
	if err := a.ctz.CreateGroup(group, cgroups.Spec{}); err != nil {
		t.Fatal(err)
	}
	if err := a.ckpt.saveExecutor(&executorRecord{ContainerID: group, Executor: api.AgentExecutor{FrameworkID: "fw", ExecutorID: "ex", Role: "*"}}); err != nil {
		t.Fatal(err)
	}
	a.stop()

	b := newTestAgent(t, master, workDir, root)
	defer b.stop()
	b.stream(2)
	if _, executors := b.report(); len(executors) != 0 {
		t.Errorf("executors reported after recovery: %+v", executors)
	}
	if _, err := os.Stat(filepath.Join(workDir, "meta", "executors", group+".json")); !os.IsNotExist(err) {
		t.Errorf("the executor's checkpoint is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", root, group)); !os.IsNotExist(err) {
		t.Errorf("the executor's cgroup is still there (%v)", err)
	}
}
