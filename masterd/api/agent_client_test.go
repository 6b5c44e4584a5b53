package api_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/agentsim/fakemaster"
	"github.com/allot/allot/masterd/api"
)

// recorder is an AgentHandler that remembers what it was told.
type recorder struct {
	mu         sync.Mutex
	tasks      []api.AgentTask
	executors  []api.AgentExecutor
	registered [][2]string // {agentID, previousID}
	launches   []api.AgentLaunch
	kills      []api.AgentKill
	acked      []api.TaskStatus
	changed    chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) Tasks() ([]api.AgentTask, []api.AgentExecutor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tasks, r.executors
}

func (r *recorder) Registered(id, previous string) {
	r.update(func() { r.registered = append(r.registered, [2]string{id, previous}) })
}
func (r *recorder) Launch(l api.AgentLaunch) { r.update(func() { r.launches = append(r.launches, l) }) }
func (r *recorder) Kill(k api.AgentKill)     { r.update(func() { r.kills = append(r.kills, k) }) }
func (r *recorder) Acknowledged(fw string, s api.TaskStatus) {
	r.update(func() { r.acked = append(r.acked, s) })
}

func (r *recorder) update(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
	close(r.changed)
	r.changed = make(chan struct{})
}

// waitFor waits until cond, called with r.mu held, is true.
func (r *recorder) waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for {
		r.mu.Lock()
		ok, changed := cond(), r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-changed:
		}
	}
}

func newAgentClient(t *testing.T, h api.AgentHandler, addrs ...string) *api.AgentClient {
	t.Helper()
	info := api.AgentInfo{Name: "node-1", Hostname: "host-1", Resources: api.Resources{"cpus": 2, "mem": 1024}}
	c, err := api.NewAgentClient(addrs, "", info, h)
	if err != nil {
		t.Fatal(err)
	}
	c.ReconnectDelay = time.Millisecond
	c.Logf = t.Logf
	return c
}

// run runs c until the test ends.
func run(t *testing.T, c *api.AgentClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
}

func waitRegistered(t *testing.T, ctx context.Context, c *api.AgentClient, n int) {
	t.Helper()
	if err := c.WaitRegistered(ctx, n); err != nil {
		t.Fatalf("waiting for registration %d: %v", n, err)
	}
}

func waitCalls(t *testing.T, ctx context.Context, m *fakemaster.Master, n int, match func(fakemaster.Call) bool) []fakemaster.Call {
	t.Helper()
	calls, err := m.WaitCalls(ctx, n, match)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

func heartbeatOn(streamID string) func(fakemaster.Call) bool {
	return func(c fakemaster.Call) bool {
		return c.StreamID == streamID && c.Agent.Type == api.AgentCallHeartbeat
	}
}

func updateWith(uuid string) func(fakemaster.Call) bool {
	return func(c fakemaster.Call) bool {
		return c.Agent.Type == api.AgentCallUpdate && c.Agent.Update.Status.UUID == uuid
	}
}

func TestAgentRegistersThroughAFollowerAndHeartbeats(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{HeartbeatIntervalSeconds: 0.01})
	follower := newMaster(t, fakemaster.Options{})
	follower.Redirect(leader.URL)
	h := newRecorder()
	h.tasks = []api.AgentTask{{FrameworkID: "fw", Role: "*", Task: api.TaskInfo{TaskID: "t1"}, State: api.TaskRunning}}
	c := newAgentClient(t, h, follower.URL)
	run(t, c)

	waitRegistered(t, ctx, c, 1)
	st := leader.Streams(api.AgentProtocolPath)[0]
	if c.AgentID() != st.AgentID || !c.Connected() {
		t.Fatalf("agent id %q (connected %v), the leader gave %q", c.AgentID(), c.Connected(), st.AgentID)
	}
	reg := st.Register
	if reg.AgentID != "" || reg.Register.AgentInfo.Name != "node-1" || !reflect.DeepEqual(reg.Register.Tasks, h.tasks) {
		t.Fatalf("first REGISTER %+v", reg)
	}
	h.waitFor(t, ctx, "Registered", func() bool { return len(h.registered) == 1 })
	if h.registered[0] != [2]string{st.AgentID, ""} {
		t.Fatalf("Registered(%q, %q)", h.registered[0][0], h.registered[0][1])
	}
	// Heartbeats go to the leader on the stream; the fake master refuses
	// them with any other stream or agent id.
	waitCalls(t, ctx, leader, 2, heartbeatOn(st.ID))
	if len(follower.Calls(nil)) != 0 {
		t.Fatal("a call went to the follower")
	}
}

func TestAgentRegistersAgainWithItsIDAndTasksAfterTheStreamEnds(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	h := newRecorder()
	c := newAgentClient(t, h, leader.URL)
	run(t, c)
	waitRegistered(t, ctx, c, 1)
	id := c.AgentID()

	h.mu.Lock()
	h.tasks = []api.AgentTask{{FrameworkID: "fw", Role: "*", Task: api.TaskInfo{TaskID: "t1", AgentID: id}, State: api.TaskRunning}}
	h.executors = []api.AgentExecutor{{FrameworkID: "fw", ExecutorID: "e1", Role: "*"}}
	h.mu.Unlock()
	leader.Cut(leader.Streams(api.AgentProtocolPath)[0].ID)

	waitRegistered(t, ctx, c, 2)
	second := leader.Streams(api.AgentProtocolPath)[1].Register
	if second.AgentID != id || !reflect.DeepEqual(second.Register.Tasks, h.tasks) ||
		!reflect.DeepEqual(second.Register.Executors, h.executors) {
		t.Fatalf("re-registration %+v, want agent %s with its task and executor", second, id)
	}
	h.waitFor(t, ctx, "second Registered", func() bool { return len(h.registered) == 2 })
	if h.registered[1] != [2]string{id, id} {
		t.Fatalf("Registered(%q, %q), want the same id twice", h.registered[1][0], h.registered[1][1])
	}
}

func TestAgentRegistersAgainWhenAHeartbeatFails(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{HeartbeatIntervalSeconds: 0.01})
	// Heartbeats on the first stream fail, as on a server that forgot it.
	leader.SetCallHook(func(c fakemaster.Call) *api.Error {
		if c.StreamID == leader.Streams(api.AgentProtocolPath)[0].ID {
			return api.Errorf(api.CodeNotFound, "unknown stream")
		}
		return nil
	})
	c := newAgentClient(t, newRecorder(), leader.URL)
	run(t, c)
	waitRegistered(t, ctx, c, 2)
	select {
	case <-leader.Streams(api.AgentProtocolPath)[0].Done():
	case <-ctx.Done():
		t.Fatal("the client kept the stream whose heartbeat failed")
	}
}

func TestAgentDeliversLaunchAndKillInOrder(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	h := newRecorder()
	c := newAgentClient(t, h, leader.URL)
	run(t, c)
	waitRegistered(t, ctx, c, 1)
	st := leader.Streams(api.AgentProtocolPath)[0]

	launch := api.AgentLaunch{FrameworkID: "fw", Tasks: []api.AgentTask{{FrameworkID: "fw", Role: "*",
		Task: api.TaskInfo{TaskID: "t1", Command: &api.CommandInfo{Value: "sleep 1"}}}}}
	kill := api.AgentKill{FrameworkID: "fw", TaskID: "t1"}
	for _, ev := range []api.AgentEvent{
		{Type: api.AgentEventLaunch, Launch: &launch},
		{Type: api.AgentEventHeartbeat},
		{Type: api.AgentEventKill, Kill: &kill},
	} {
		if err := leader.Send(st.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	h.waitFor(t, ctx, "the kill", func() bool { return len(h.kills) == 1 })
	if len(h.launches) != 1 || !reflect.DeepEqual(h.launches[0], launch) || h.kills[0] != kill {
		t.Fatalf("handler got launches %+v, kills %+v", h.launches, h.kills)
	}
}

func TestAgentUpdateIsResentUntilAcknowledged(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	h := newRecorder()
	c := newAgentClient(t, h, leader.URL)
	c.UpdateRetryInterval = 5 * time.Millisecond
	run(t, c)
	waitRegistered(t, ctx, c, 1)

	uuid := c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskRunning})
	if uuid == "" {
		t.Fatal("SendUpdate gave no uuid")
	}
	calls := waitCalls(t, ctx, leader, 3, updateWith(uuid))
	for _, call := range calls {
		u := call.Agent.Update
		if u.FrameworkID != "fw" || u.Status.AgentID != c.AgentID() || u.Status.Timestamp.IsZero() || u.Status.State != api.TaskRunning {
			t.Fatalf("update on the wire: %+v", u)
		}
	}
	if c.PendingUpdates() != 1 {
		t.Fatalf("%d pending updates before the acknowledgement", c.PendingUpdates())
	}

	st := leader.Streams(api.AgentProtocolPath)[0]
	if err := leader.Send(st.ID, api.AgentEvent{Type: api.AgentEventAcknowledge,
		Acknowledge: &api.AgentAcknowledge{FrameworkID: "fw", TaskID: "t1", UUID: uuid}}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitUpdatesSettled(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, ctx, "Acknowledged", func() bool { return len(h.acked) == 1 })
	if h.acked[0].UUID != uuid || h.acked[0].TaskID != "t1" {
		t.Fatalf("Acknowledged %+v", h.acked[0])
	}
}

func TestAgentUpdateIsResentAfterReregistration(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	c := newAgentClient(t, newRecorder(), leader.URL)
	c.UpdateRetryInterval = time.Hour // only a new session resends
	run(t, c)
	waitRegistered(t, ctx, c, 1)

	uuid := c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskFinished})
	first := leader.Streams(api.AgentProtocolPath)[0]
	waitCalls(t, ctx, leader, 1, updateWith(uuid))
	leader.Cut(first.ID)

	waitRegistered(t, ctx, c, 2)
	second := leader.Streams(api.AgentProtocolPath)[1]
	waitCalls(t, ctx, leader, 1, func(call fakemaster.Call) bool {
		return updateWith(uuid)(call) && call.StreamID == second.ID
	})
}

func TestAgentUpdatesOfATaskGoInOrderAndAnAckSettlesEarlierOnes(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	h := newRecorder()
	c := newAgentClient(t, h, leader.URL)
	c.UpdateRetryInterval = time.Hour
	run(t, c)
	waitRegistered(t, ctx, c, 1)

	starting := c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskStarting})
	running := c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskRunning})
	other := c.SendUpdate("fw", api.TaskStatus{TaskID: "t2", State: api.TaskRunning})
	calls := waitCalls(t, ctx, leader, 3, func(c fakemaster.Call) bool { return c.Agent.Type == api.AgentCallUpdate })
	if calls[0].Agent.Update.Status.UUID != starting || calls[1].Agent.Update.Status.UUID != running {
		t.Fatalf("t1's updates went out as %s, %s; want STARTING then RUNNING",
			calls[0].Agent.Update.Status.State, calls[1].Agent.Update.Status.State)
	}

	st := leader.Streams(api.AgentProtocolPath)[0]
	if err := leader.Send(st.ID, api.AgentEvent{Type: api.AgentEventAcknowledge,
		Acknowledge: &api.AgentAcknowledge{FrameworkID: "fw", TaskID: "t1", UUID: running}}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, ctx, "t1 settled", func() bool { return len(h.acked) == 2 })
	if h.acked[0].UUID != starting || h.acked[1].UUID != running {
		t.Fatalf("settled %s then %s, want STARTING then RUNNING", h.acked[0].State, h.acked[1].State)
	}
	if c.PendingUpdates() != 1 {
		t.Fatalf("%d pending updates, want t2's (%s) alone", c.PendingUpdates(), other)
	}
}

func TestAgentGivenANewIDDropsTheOldIncarnationsUpdates(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	leader.SetAgentIDs(func(string) string { return "agent-new" })
	h := newRecorder()
	c := newAgentClient(t, h, leader.URL)
	c.SetAgentID("agent-old")
	c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskRunning})
	run(t, c)

	waitRegistered(t, ctx, c, 1)
	if got := leader.Streams(api.AgentProtocolPath)[0].Register.AgentID; got != "agent-old" {
		t.Fatalf("registered presenting %q, want the id it was given", got)
	}
	h.waitFor(t, ctx, "Registered", func() bool { return len(h.registered) == 1 })
	if h.registered[0] != [2]string{"agent-new", "agent-old"} || c.AgentID() != "agent-new" {
		t.Fatalf("Registered(%q, %q), agent id %q", h.registered[0][0], h.registered[0][1], c.AgentID())
	}
	// The update was dropped before the session could send it.
	if c.PendingUpdates() != 0 || len(leader.Calls(func(c fakemaster.Call) bool { return c.Agent.Type == api.AgentCallUpdate })) != 0 {
		t.Fatalf("%d pending updates; the old incarnation's update must go", c.PendingUpdates())
	}
}

func TestAgentHeartbeatsCanBeTurnedOff(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{HeartbeatIntervalSeconds: 0.001})
	c := newAgentClient(t, newRecorder(), leader.URL)
	c.SetHeartbeats(false)
	c.UpdateRetryInterval = 10 * time.Millisecond
	run(t, c)
	waitRegistered(t, ctx, c, 1)

	// Many heartbeat intervals pass while an update is resent five times.
	uuid := c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskRunning})
	waitCalls(t, ctx, leader, 5, updateWith(uuid))
	if n := len(leader.Calls(func(c fakemaster.Call) bool { return c.Agent.Type == api.AgentCallHeartbeat })); n != 0 {
		t.Fatalf("%d heartbeats sent while turned off", n)
	}
	c.SetHeartbeats(true)
	waitCalls(t, ctx, leader, 1, func(c fakemaster.Call) bool { return c.Agent.Type == api.AgentCallHeartbeat })
}

func TestAgentRunsOnlyOnce(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{})
	c := newAgentClient(t, newRecorder(), leader.URL)
	run(t, c)
	waitRegistered(t, ctx, c, 1)
	if err := c.Run(ctx); err == nil {
		t.Fatal("a second Run was accepted")
	}
}

func TestAgentRegistersAgainWhenTheServerRefusesTheSessionsUpdate(t *testing.T) {
	ctx := testContext(t)
	// No heartbeat comes to end the session: the refused update must.
	leader := newMaster(t, fakemaster.Options{HeartbeatIntervalSeconds: 3600})
	c := newAgentClient(t, newRecorder(), leader.URL)
	c.UpdateRetryInterval = time.Hour // only a new session resends
	run(t, c)
	waitRegistered(t, ctx, c, 1)
	first := leader.Streams(api.AgentProtocolPath)[0]
	// As the master answers when another session replaced this one.
	leader.SetCallHook(func(call fakemaster.Call) *api.Error {
		if call.StreamID == first.ID && call.Agent.Type == api.AgentCallUpdate {
			return api.Errorf(api.CodePermissionDenied, "not the agent's current session; register again")
		}
		return nil
	})

	uuid := c.SendUpdate("fw", api.TaskStatus{TaskID: "t1", State: api.TaskRunning})
	waitRegistered(t, ctx, c, 2)
	second := leader.Streams(api.AgentProtocolPath)[1]
	waitCalls(t, ctx, leader, 1, func(call fakemaster.Call) bool {
		return updateWith(uuid)(call) && call.StreamID == second.ID
	})
}

// An agent that no master answers says so in its log while it keeps trying.
func TestAgentThatReachesNoMasterSaysSo(t *testing.T) {
	m := fakemaster.New(fakemaster.Options{})
	url := m.URL
	m.Close() // nothing listens there any more
	c, err := api.NewAgentClient([]string{url}, "", api.AgentInfo{Name: "lonely"}, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	c.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		said := strings.Join(lines, "\n")
		mu.Unlock()
		if strings.Contains(said, "no master takes the registration yet") && strings.Contains(said, "connection refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing said about the unreachable master; log:\n%s", said)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

func oversubscribedOn(streamID string) func(fakemaster.Call) bool {
	return func(c fakemaster.Call) bool {
		return c.StreamID == streamID && c.Agent.Type == api.AgentCallUpdateOversubscribed
	}
}

// The estimate is sent when it changes, not when it is set again unchanged,
// and again after every REGISTERED; an agent that never sets one sends none.
func TestAgentSendsOversubscribedWhenItChangesAndAfterEveryRegistration(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{HeartbeatIntervalSeconds: 3600})
	c := newAgentClient(t, newRecorder(), leader.URL)
	run(t, c)
	waitRegistered(t, ctx, c, 1)
	first := leader.Streams(api.AgentProtocolPath)[0]
	if _, sent := c.Oversubscribed(); sent {
		t.Fatal("an estimate was sent before any was set")
	}

	c.SetOversubscribed(api.Resources{"cpus": 1.5})
	if err := c.WaitOversubscribed(ctx, api.Resources{"cpus": 1.5}); err != nil {
		t.Fatal(err)
	}
	c.SetOversubscribed(api.Resources{"cpus": 1.5, "mem": 0}) // the same estimate
	c.SetOversubscribed(api.Resources{"cpus": 0.5})
	if err := c.WaitOversubscribed(ctx, api.Resources{"cpus": 0.5}); err != nil {
		t.Fatal(err)
	}
	calls := leader.Calls(oversubscribedOn(first.ID))
	var got []string
	for _, call := range calls {
		got = append(got, call.Agent.UpdateOversubscribed.Resources.String())
	}
	if strings.Join(got, " ") != "cpus:1.5 cpus:0.5" {
		t.Fatalf("UPDATE_OVERSUBSCRIBED calls %v, want cpus:1.5 then cpus:0.5", got)
	}

	leader.Cut(first.ID)
	waitRegistered(t, ctx, c, 2)
	second := leader.Streams(api.AgentProtocolPath)[1]
	call := waitCalls(t, ctx, leader, 1, oversubscribedOn(second.ID))[0]
	if s := call.Agent.UpdateOversubscribed.Resources.String(); s != "cpus:0.5" || call.Agent.AgentID != second.AgentID {
		t.Fatalf("after re-registration: %+v", call.Agent)
	}
	// An empty estimate withdraws the slack: it is sent too.
	c.SetOversubscribed(api.Resources{})
	if err := c.WaitOversubscribed(ctx, api.Resources{}); err != nil {
		t.Fatal(err)
	}
	if n := len(leader.Calls(oversubscribedOn(second.ID))); n != 2 {
		t.Fatalf("%d UPDATE_OVERSUBSCRIBED calls on the second session, want 2", n)
	}
}

// A master that refuses an estimate for a while (rate limited) gets it
// again; one that says it is invalid does not, until it changes.
func TestAgentOversubscribedRetriedUnlessInvalid(t *testing.T) {
	ctx := testContext(t)
	leader := newMaster(t, fakemaster.Options{HeartbeatIntervalSeconds: 3600})
	var mu sync.Mutex
	refusals := 1
	leader.SetCallHook(func(call fakemaster.Call) *api.Error {
		mu.Lock()
		defer mu.Unlock()
		if call.Agent.Type != api.AgentCallUpdateOversubscribed {
			return nil
		}
		if call.Agent.UpdateOversubscribed.Resources["cpus"] > 100 {
			return api.Errorf(api.CodeInvalidArgument, "more cpus than the agent has")
		}
		if refusals > 0 {
			refusals--
			return api.Errorf(api.CodeInternal, "not now")
		}
		return nil
	})
	c := newAgentClient(t, newRecorder(), leader.URL)
	run(t, c)
	waitRegistered(t, ctx, c, 1)
	st := leader.Streams(api.AgentProtocolPath)[0]
	c.SetOversubscribed(api.Resources{"cpus": 1})
	waitCalls(t, ctx, leader, 2, oversubscribedOn(st.ID))
	if err := c.WaitOversubscribed(ctx, api.Resources{"cpus": 1}); err != nil {
		t.Fatal(err)
	}
	c.SetOversubscribed(api.Resources{"cpus": 1000})
	waitCalls(t, ctx, leader, 3, oversubscribedOn(st.ID))
	c.SetOversubscribed(api.Resources{"cpus": 2})
	if err := c.WaitOversubscribed(ctx, api.Resources{"cpus": 2}); err != nil {
		t.Fatal(err)
	}
	if n := len(leader.Calls(oversubscribedOn(st.ID))); n != 4 {
		t.Fatalf("%d UPDATE_OVERSUBSCRIBED calls, want 4 (refused, sent, invalid once, sent)", n)
	}
}
