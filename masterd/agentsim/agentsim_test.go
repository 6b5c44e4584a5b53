package agentsim_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// testContext bounds a test that would otherwise hang on a bug; nothing
// asserts on how long anything takes.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newMaster(t *testing.T, opts fakemaster.Options) *fakemaster.Master {
	t.Helper()
	m := fakemaster.New(opts)
	t.Cleanup(m.Close)
	return m
}

func startAgent(t *testing.T, opts agentsim.Options, addrs ...string) *agentsim.Agent {
	t.Helper()
	opts.Logf = t.Logf
	a, err := agentsim.New(addrs, "", api.AgentInfo{Name: "node-1", Hostname: "host-1",
		Resources: api.Resources{"cpus": 4, "mem": 4096}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	a.Client().ReconnectDelay = time.Millisecond
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	if err := a.Client().WaitRegistered(testContext(t), 1); err != nil {
		t.Fatal(err)
	}
	return a
}

func agentTask(id, command string) api.AgentTask {
	return api.AgentTask{FrameworkID: "fw", Role: "*", Task: api.TaskInfo{
		TaskID: id, Name: id, Resources: api.Resources{"cpus": 1}, Command: &api.CommandInfo{Value: command},
	}}
}

func launch(t *testing.T, m *fakemaster.Master, stream string, executor *api.AgentExecutor, tasks ...api.AgentTask) {
	t.Helper()
	err := m.Send(stream, api.AgentEvent{Type: api.AgentEventLaunch,
		Launch: &api.AgentLaunch{FrameworkID: "fw", Executor: executor, Tasks: tasks}})
	if err != nil {
		t.Fatal(err)
	}
}

func lastStream(m *fakemaster.Master) *fakemaster.Stream {
	streams := m.Streams(api.AgentProtocolPath)
	return streams[len(streams)-1]
}

// statesSent lists the states of the updates the master received for task,
// in order of arrival.
func statesSent(m *fakemaster.Master, task string) []string {
	var out []string
	for _, c := range m.Calls(nil) {
		if c.Agent.Type == api.AgentCallUpdate && c.Agent.Update.Status.TaskID == task {
			out = append(out, c.Agent.Update.Status.State)
		}
	}
	return out
}

func waitState(t *testing.T, ctx context.Context, a *agentsim.Agent, task, state string) {
	t.Helper()
	if err := a.WaitState(ctx, task, state); err != nil {
		t.Fatal(err)
	}
}

func taskIDs(tasks []api.AgentTask) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.Task.TaskID+"="+t.State)
	}
	return out
}

func TestSleepTaskRunsToFinishAndIsSettled(t *testing.T) {
	ctx := testContext(t)
	m := newMaster(t, fakemaster.Options{AutoAcknowledge: true})
	a := startAgent(t, agentsim.Options{}, m.URL)

	launch(t, m, lastStream(m).ID, nil, agentTask("short", "sleep 0.01"), agentTask("long", "serve forever"))
	waitState(t, ctx, a, "short", api.TaskFinished)
	waitState(t, ctx, a, "long", api.TaskRunning)
	// The finished task leaves once its final update is acknowledged.
	if err := a.WaitUntil(ctx, func() bool { return len(a.Tasks()) == 1 }); err != nil {
		t.Fatalf("tasks %v: %v", taskIDs(a.Tasks()), err)
	}
	if got := taskIDs(a.Tasks()); !slices.Equal(got, []string{"long=TASK_RUNNING"}) {
		t.Fatalf("tasks %v", got)
	}
	if got, want := statesSent(m, "short"), []string{api.TaskStarting, api.TaskRunning, api.TaskFinished}; !slices.Equal(got, want) {
		t.Fatalf("updates of the sleep task: %v, want %v", got, want)
	}
	if err := a.Client().WaitUpdatesSettled(ctx); err != nil {
		t.Fatal(err)
	}
	if got := statesSent(m, "long"); !slices.Equal(got, []string{api.TaskStarting, api.TaskRunning}) {
		t.Fatalf("updates of the long task: %v", got)
	}
	if a.Launches("short") != 1 || a.Launches("long") != 1 || a.Launches("never") != 0 {
		t.Fatalf("launch counts %d %d %d", a.Launches("short"), a.Launches("long"), a.Launches("never"))
	}
}

func TestKillEndsATask(t *testing.T) {
	ctx := testContext(t)
	m := newMaster(t, fakemaster.Options{AutoAcknowledge: true})
	a := startAgent(t, agentsim.Options{}, m.URL)
	stream := lastStream(m).ID

	launch(t, m, stream, nil, agentTask("t1", "sleep 3600"))
	waitState(t, ctx, a, "t1", api.TaskRunning)
	for _, id := range []string{"t1", "ghost"} {
		if err := m.Send(stream, api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: "fw", TaskID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	waitState(t, ctx, a, "t1", api.TaskKilled)
	waitState(t, ctx, a, "ghost", api.TaskLost)
	if err := a.Client().WaitUpdatesSettled(ctx); err != nil {
		t.Fatal(err)
	}
	if got := statesSent(m, "t1"); !slices.Equal(got, []string{api.TaskStarting, api.TaskRunning, api.TaskKilled}) {
		t.Fatalf("updates of t1: %v", got)
	}
	lost := m.Calls(func(c fakemaster.Call) bool {
		return c.Agent.Type == api.AgentCallUpdate && c.Agent.Update.Status.TaskID == "ghost"
	})
	if len(lost) != 1 || lost[0].Agent.Update.Status.Reason != api.ReasonTaskUnknown {
		t.Fatalf("kill of an unknown task answered %+v", lost)
	}
	if len(a.Tasks()) != 0 {
		t.Fatalf("tasks left: %v", taskIDs(a.Tasks()))
	}
}

func TestTasksSurviveFailoverAndAreReportedToTheNewLeader(t *testing.T) {
	ctx := testContext(t)
	oldLeader := newMaster(t, fakemaster.Options{AutoAcknowledge: true})
	newLeader := newMaster(t, fakemaster.Options{AutoAcknowledge: true})
	a := startAgent(t, agentsim.Options{UpdateRetryInterval: time.Hour}, oldLeader.URL, newLeader.URL)
	stream := lastStream(oldLeader).ID
	executor := &api.AgentExecutor{FrameworkID: "fw", ExecutorID: "exec-1", Role: "*"}

	launch(t, oldLeader, stream, nil, agentTask("done", "sleep 0"))
	launch(t, oldLeader, stream, executor, agentTask("grouped", "serve"))
	waitState(t, ctx, a, "grouped", api.TaskRunning)
	if err := a.WaitUntil(ctx, func() bool { return len(a.Tasks()) == 1 }); err != nil {
		t.Fatalf("the finished task was not settled: %v", taskIDs(a.Tasks()))
	}
	// A task that ends while its acknowledgement cannot come stays reported.
	oldLeader.SetAutoAcknowledge(false)
	launch(t, oldLeader, stream, nil, agentTask("unacked", "sleep 0"))
	if _, err := oldLeader.WaitCalls(ctx, 1, func(c fakemaster.Call) bool {
		return c.Agent.Type == api.AgentCallUpdate && c.Agent.Update.Status.TaskID == "unacked" &&
			c.Agent.Update.Status.State == api.TaskFinished
	}); err != nil {
		t.Fatal(err)
	}

	// Failover: the old leader drops the stream and redirects to the new one.
	id := a.AgentID()
	oldLeader.Redirect(newLeader.URL)
	oldLeader.Cut(stream)
	if err := a.Client().WaitRegistered(ctx, 2); err != nil {
		t.Fatal(err)
	}
	reg := lastStream(newLeader).Register
	if reg.AgentID != id {
		t.Fatalf("re-registered as %q, want %q", reg.AgentID, id)
	}
	if got := taskIDs(reg.Register.Tasks); !slices.Equal(got, []string{"grouped=TASK_RUNNING", "unacked=TASK_FINISHED"}) {
		t.Fatalf("re-registration reported %v", got)
	}
	if got := reg.Register.Tasks[0]; got.ExecutorID != "exec-1" || got.Task.Name != "grouped" {
		t.Fatalf("reported task %+v", got)
	}
	if !reflect.DeepEqual(reg.Register.Executors, []api.AgentExecutor{*executor}) {
		t.Fatalf("reported executors %+v", reg.Register.Executors)
	}

	// The new leader gets the pending final update and acknowledges it.
	if err := a.WaitUntil(ctx, func() bool { return len(a.Tasks()) == 1 }); err != nil {
		t.Fatalf("the unacknowledged task was not settled by the new leader: %v", taskIDs(a.Tasks()))
	}
	// None of its updates was acknowledged: all go again, in order.
	if got, want := statesSent(newLeader, "unacked"), []string{api.TaskStarting, api.TaskRunning, api.TaskFinished}; !slices.Equal(got, want) {
		t.Fatalf("new leader got %v for the unacknowledged task", got)
	}
	if a.Launches("grouped") != 1 {
		t.Fatalf("grouped launched %d times", a.Launches("grouped"))
	}

	// Killing the task group's last task frees its executor.
	if err := newLeader.Send(lastStream(newLeader).ID, api.AgentEvent{Type: api.AgentEventKill,
		Kill: &api.AgentKill{FrameworkID: "fw", TaskID: "grouped"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitUntil(ctx, func() bool { return len(a.Tasks()) == 0 }); err != nil {
		t.Fatal(err)
	}
	a.Client().Reregister()
	if err := a.Client().WaitRegistered(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if reg := lastStream(newLeader).Register.Register; len(reg.Tasks) != 0 || len(reg.Executors) != 0 {
		t.Fatalf("after the kill the agent reports %v and %v", taskIDs(reg.Tasks), reg.Executors)
	}
}

func TestDisconnectAndReconnect(t *testing.T) {
	ctx := testContext(t)
	m := newMaster(t, fakemaster.Options{AutoAcknowledge: true})
	a := startAgent(t, agentsim.Options{}, m.URL)
	first := lastStream(m)
	launch(t, m, first.ID, nil, agentTask("t1", "serve"))
	waitState(t, ctx, a, "t1", api.TaskRunning)

	a.Disconnect()
	select {
	case <-first.Done():
	case <-ctx.Done():
		t.Fatal("the stream outlived Disconnect")
	}
	if a.Client().Connected() {
		t.Fatal("connected after Disconnect")
	}
	if err := a.Reconnect(); err != nil {
		t.Fatal(err)
	}
	if err := a.Client().WaitRegistered(ctx, 2); err != nil {
		t.Fatal(err)
	}
	reg := lastStream(m).Register
	if reg.AgentID != first.AgentID || !slices.Equal(taskIDs(reg.Register.Tasks), []string{"t1=TASK_RUNNING"}) {
		t.Fatalf("reconnected as %q with %v", reg.AgentID, taskIDs(reg.Register.Tasks))
	}
}

func TestANewIncarnationForgetsItsTasks(t *testing.T) {
	ctx := testContext(t)
	m := newMaster(t, fakemaster.Options{AutoAcknowledge: true})
	a := startAgent(t, agentsim.Options{}, m.URL)
	launch(t, m, lastStream(m).ID, nil, agentTask("t1", "serve"))
	waitState(t, ctx, a, "t1", api.TaskRunning)

	// The master removed the agent meanwhile and takes it for a new one.
	m.SetAgentIDs(func(string) string { return "agent-reborn" })
	a.Client().Reregister()
	if err := a.Client().WaitRegistered(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitUntil(ctx, func() bool { return len(a.Tasks()) == 0 }); err != nil {
		t.Fatalf("tasks %v kept by a new incarnation", taskIDs(a.Tasks()))
	}
	if a.AgentID() != "agent-reborn" {
		t.Fatalf("agent id %q", a.AgentID())
	}
}

func TestNoHeartbeatsOption(t *testing.T) {
	ctx := testContext(t)
	m := newMaster(t, fakemaster.Options{AutoAcknowledge: true, HeartbeatIntervalSeconds: 0.001})
	a := startAgent(t, agentsim.Options{NoHeartbeats: true}, m.URL)
	isHeartbeat := func(c fakemaster.Call) bool { return c.Agent.Type == api.AgentCallHeartbeat }

	// Many heartbeat intervals pass while tasks run and finish.
	for _, id := range []string{"a", "b", "c"} {
		launch(t, m, lastStream(m).ID, nil, agentTask(id, "sleep 0.005"))
		waitState(t, ctx, a, id, api.TaskFinished)
	}
	if n := len(m.Calls(isHeartbeat)); n != 0 {
		t.Fatalf("%d heartbeats sent with NoHeartbeats", n)
	}
	a.SetHeartbeats(true)
	if _, err := m.WaitCalls(ctx, 1, isHeartbeat); err != nil {
		t.Fatal(err)
	}
}

func TestPresentsTheGivenAgentID(t *testing.T) {
	m := newMaster(t, fakemaster.Options{})
	a := startAgent(t, agentsim.Options{AgentID: "agent-7"}, m.URL)
	if got := lastStream(m).Register.AgentID; got != "agent-7" || a.AgentID() != "agent-7" {
		t.Fatalf("registered presenting %q, agent id %q", got, a.AgentID())
	}
}
