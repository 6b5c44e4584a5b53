package master

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/ratelimit/fakeclock"
	"github.com/allot/allot/raftstore"
)

// The shared setup of this package's tests: a real single-server Raft store
// in memory, a Master on it wired to the FSM as masterd wires it, and
// simulated agents and frameworks that call the Master directly (no HTTP).
//
// The Master runs on a fake clock: its time stands still until a test moves
// it, so timeouts pass exactly when a test says and never because the
// machine is slow. One exception keeps tests about events free of time:
// while a test waits for something, the harness lets the pause between two
// kicked allocation cycles pass whenever the loop waits it out (passGap).

// waitTimeout is how long a test waits for a condition before it fails. It
// is generous because the machine is shared; tests never assert on time.
// It is the only real time the tests read.
const waitTimeout = 20 * time.Second

// nodeStore is the replicated state as a Master reads and writes it, the
// same adapter masterd uses.
type nodeStore struct{ node *raftstore.Node }

func (s nodeStore) Read(fn func(st *raftstore.State)) { s.node.FSM().Read(fn) }

func (s nodeStore) TryRead(fn func(st *raftstore.State)) bool { return s.node.FSM().TryRead(fn) }

func (s nodeStore) Apply(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error) {
	return s.node.Apply(ctx, cmd)
}

// harness is one Raft server and the Master of its current term.
type harness struct {
	t       *testing.T
	node    *raftstore.Node
	opts    Options
	clock   *fakeclock.Clock // every term's Master runs on it
	current atomic.Pointer[Master]
}

// testOptions are masterd's allocation interval and long timeouts for
// everything a test does not exercise, so that the time a test lets pass
// does not disconnect an agent or expire an offer by the way.
func testOptions() Options {
	return Options{
		AllocationInterval:   time.Second,
		OfferTimeout:         time.Hour,
		AgentPingTimeout:     time.Hour,
		AgentRemovalTimeout:  time.Hour,
		RecoveryTimeout:      time.Hour,
		HeartbeatInterval:    time.Hour,
		DefaultRefuseSeconds: 5,
		Seed:                 1,
	}
}

// newHarness starts a leader with a Master; tweak changes testOptions.
func newHarness(t *testing.T, tweak ...func(*Options)) *harness {
	t.Helper()
	node, err := raftstore.Open(raftstore.Config{ID: "t", InMemory: true, RaftAddr: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Shutdown() })
	if err := node.Bootstrap(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the single server to lead", node.Ready)
	h := &harness{t: t, node: node, opts: testOptions(), clock: fakeclock.New()}
	for _, f := range tweak {
		f(&h.opts)
	}
	// As masterd's engine does: every applied command goes to the current
	// term's Master.
	node.FSM().OnApply(func(cmd raftstore.Command, res raftstore.Result) {
		if m := h.current.Load(); m != nil {
			m.Applied(cmd, res)
		}
	})
	h.startTerm()
	return h
}

// startTerm builds a new Master on the replicated state, as a new leadership
// term does, and closes the previous one.
func (h *harness) startTerm() *Master {
	opts := h.opts
	opts.Clock = h.clock
	m := New(nodeStore{h.node}, opts)
	if old := h.current.Swap(m); old != nil {
		old.Close()
	}
	h.t.Cleanup(m.Close) // runs before the node shuts down (LIFO)
	return m
}

func (h *harness) m() *Master { return h.current.Load() }

// write replicates cmd, fails the test if it is refused, and waits until
// the current term's Master follows it (Applied only queues it).
func (h *harness) write(cmd raftstore.Command) raftstore.Result {
	h.t.Helper()
	res, err := h.node.Apply(context.Background(), cmd)
	if err != nil {
		h.t.Fatalf("apply %T: %v", cmd, err)
	}
	if res.Err != nil {
		h.t.Fatalf("apply %T: refused: %v", cmd, res.Err)
	}
	if !h.m().caughtUp(res.Index) {
		h.t.Fatalf("apply %T: the term ended before its Master followed the write", cmd)
	}
	return res
}

func (h *harness) read(fn func(st *raftstore.State)) { h.node.FSM().Read(fn) }

// waitCycles lets n allocation intervals pass, each ending in a tick the
// loop has finished, so that whatever it would offer has been offered
// before a test checks that nothing was.
func (h *harness) waitCycles(n int) {
	h.t.Helper()
	for range n {
		h.pass(h.opts.AllocationInterval)
	}
}

// pass moves the clock on by d and waits until the loop has done what was
// due by then: the periodic checks (timeouts), the allocation cycle and
// what follows them (removing frameworks whose failover timeout passed),
// all at the new time. Then a test can check what did not happen too.
func (h *harness) pass(d time.Duration) {
	h.t.Helper()
	h.clock.Advance(d)
	m := h.m()
	// Advance has fired the ticks; the last one the loop takes reads the
	// clock after the last of them fired. A tick left waiting behind the
	// pause between kicked cycles gets that pause passed.
	h.waitFor("the loop to take its ticks", func() bool { return len(m.ticks.c) == 0 })
	// The loop does one thing at a time, and with the clock standing still
	// a kick after a tick waits out the pause between cycles on a timer:
	// once that timer is there, the tick is done.
	waitFor(h.t, "the loop to finish its tick", func() bool {
		if h.clock.Pending() > 1 {
			return true
		}
		m.trigger() // again if the kick was served at once (no cycle ran yet)
		return false
	})
}

// passGap lets the pause between two kicked allocation cycles pass if the
// loop waits it out: its ticker is one pending timer, the pause a second.
// With time standing still the second cycle would never come.
func (h *harness) passGap() {
	if h.clock.Pending() > 1 {
		h.clock.Advance(h.m().cycleGap())
	}
}

// waitFor waits until cond holds, letting kicked cycles run meanwhile.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	h.waitForOr(what, cond, nil)
}

// waitForOr is waitFor that adds detail() to the failure.
func (h *harness) waitForOr(what string, cond func() bool, detail func() string) {
	h.t.Helper()
	waitUntil(h.t, what, func() bool {
		if cond() {
			return true
		}
		h.passGap()
		return false
	}, detail)
}

// waitFor waits until cond holds, on real time: for the Raft server, and
// under the harness's waits.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitUntil(t, what, cond, nil)
}

func waitUntil(t testing.TB, what string, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			more := ""
			if detail != nil {
				more = "; " + detail()
			}
			t.Fatalf("gave up after %v waiting for %s%s", waitTimeout, what, more)
		}
		time.Sleep(time.Millisecond)
	}
}

// reader reads one session's events. Events a test does not wait for stay
// in a backlog, so that waiting for one event never loses another.
type reader[E any] struct {
	h       *harness
	stream  *Stream[E]
	backlog []E
	split   func(E) []E // optional: one event as several
}

func (r *reader[E]) add(e E) {
	if r.split != nil {
		r.backlog = append(r.backlog, r.split(e)...)
		return
	}
	r.backlog = append(r.backlog, e)
}

// poll moves what the stream holds now into the backlog.
func (r *reader[E]) poll() {
	for _, e := range r.stream.Take() {
		r.add(e)
	}
}

func (r *reader[E]) takeMatch(match func(E) bool) (E, bool) {
	for i, e := range r.backlog {
		if match(e) {
			r.backlog = slices.Delete(r.backlog, i, i+1)
			return e, true
		}
	}
	var zero E
	return zero, false
}

// next waits for the first event match accepts and takes it out of the
// backlog.
func (r *reader[E]) next(what string, match func(E) bool) E {
	r.h.t.Helper()
	var found E
	r.h.waitForOr(what, func() bool {
		// Ended is read first: events queued before the end are taken.
		ended := r.ended()
		r.poll()
		e, ok := r.takeMatch(match)
		if !ok && ended {
			r.h.t.Fatalf("the stream ended while waiting for %s; backlog: %+v", what, r.backlog)
		}
		found = e
		return ok
	}, func() string { return fmt.Sprintf("backlog: %+v", r.backlog) })
	return found
}

// queued lists the events the stream holds now that match accepts (they
// stay in the backlog).
func (r *reader[E]) queued(match func(E) bool) []E {
	r.poll()
	var out []E
	for _, e := range r.backlog {
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

// none fails the test if an event match accepts is queued.
func (r *reader[E]) none(what string, match func(E) bool) {
	r.h.t.Helper()
	if got := r.queued(match); len(got) > 0 {
		r.h.t.Fatalf("unexpected %s: %+v", what, got)
	}
}

func (r *reader[E]) ended() bool { return r.stream.closed() }

// simAgent is an agent as the master sees it through the agent protocol.
type simAgent struct {
	reader[api.AgentEvent]
	id    string
	info  api.AgentInfo
	uuids int
}

func agentInfo(name string, res api.Resources, caps ...string) api.AgentInfo {
	return api.AgentInfo{Name: name, Hostname: name + ".example.net", Resources: res, Capabilities: caps}
}

// registerAgent registers a new agent and waits for REGISTERED.
func (h *harness) registerAgent(name string, res api.Resources, caps ...string) *simAgent {
	h.t.Helper()
	a := &simAgent{reader: reader[api.AgentEvent]{h: h}, info: agentInfo(name, res, caps...)}
	a.register(api.AgentCall{Type: api.AgentCallRegister, Register: &api.AgentRegister{AgentInfo: a.info}})
	return a
}

func (a *simAgent) register(call api.AgentCall) {
	a.h.t.Helper()
	s, e := a.h.m().RegisterAgent(context.Background(), call, "")
	if e != nil {
		a.h.t.Fatalf("register agent %s: %v", a.info.Name, e)
	}
	a.stream, a.backlog = s, nil
	if s.Owner() == "" {
		a.h.t.Fatalf("agent stream has no owner")
	}
	reg := a.next("REGISTERED", isAgentEvent(api.AgentEventRegistered)).Registered
	if reg.AgentID != s.Owner() {
		a.h.t.Fatalf("REGISTERED agent id %s, stream owner %s", reg.AgentID, s.Owner())
	}
	a.id = reg.AgentID
}

// reregister registers again with the agent's id, reporting tasks and
// executors as a restarted agent process does.
func (a *simAgent) reregister(tasks []api.AgentTask, executors []api.AgentExecutor) {
	a.h.t.Helper()
	old := a.id
	a.register(api.AgentCall{AgentID: a.id, Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: a.info, Tasks: tasks, Executors: executors}})
	if a.id != old {
		a.h.t.Fatalf("re-registration changed the agent id from %s to %s", old, a.id)
	}
}

func (a *simAgent) call(c api.AgentCall) *api.Error {
	c.AgentID = a.id
	return a.h.m().AgentCall(c, a.stream.ID())
}

// update sends a status update with a fresh uuid and returns the uuid.
func (a *simAgent) update(frameworkID, taskID, state string) string {
	a.h.t.Helper()
	a.uuids++
	uuid := a.info.Name + "-u" + strconv.Itoa(a.uuids)
	a.updateWith(frameworkID, api.TaskStatus{TaskID: taskID, State: state, UUID: uuid})
	return uuid
}

func (a *simAgent) updateWith(frameworkID string, st api.TaskStatus) {
	a.h.t.Helper()
	if e := a.call(api.AgentCall{Type: api.AgentCallUpdate, Update: &api.AgentUpdate{FrameworkID: frameworkID, Status: st}}); e != nil {
		a.h.t.Fatalf("agent %s UPDATE %s %s: %v", a.info.Name, st.TaskID, st.State, e)
	}
}

// disconnect ends the session as a dropped connection does.
func (a *simAgent) disconnect() { a.h.m().AgentStreamClosed(a.id, a.stream.ID()) }

func (a *simAgent) usage() AgentUsage { return a.h.m().AgentUsage(a.id) }

func isAgentEvent(typ string) func(api.AgentEvent) bool {
	return func(e api.AgentEvent) bool { return e.Type == typ }
}

// nextLaunch waits for the LAUNCH event of the task.
func (a *simAgent) nextLaunch(taskID string) *api.AgentLaunch {
	a.h.t.Helper()
	return a.next("LAUNCH of "+taskID, func(e api.AgentEvent) bool {
		if e.Type != api.AgentEventLaunch {
			return false
		}
		for _, t := range e.Launch.Tasks {
			if t.Task.TaskID == taskID {
				return true
			}
		}
		return false
	}).Launch
}

func (a *simAgent) nextKill(taskID string) *api.AgentKill {
	a.h.t.Helper()
	return a.next("KILL of "+taskID, func(e api.AgentEvent) bool {
		return e.Type == api.AgentEventKill && e.Kill.TaskID == taskID
	}).Kill
}

// simFramework is a scheduler as the master sees it through the scheduler
// API.
type simFramework struct {
	reader[api.Event]
	id   string
	info api.FrameworkInfo
}

func fwInfo(name string, roles ...string) api.FrameworkInfo {
	return api.FrameworkInfo{Name: name, Principal: name, Roles: roles, FailoverTimeoutSeconds: 3600}
}

// subscribe subscribes and waits for SUBSCRIBED.
func (h *harness) subscribe(info api.FrameworkInfo) *simFramework {
	h.t.Helper()
	f, e := h.trySubscribe(info)
	if e != nil {
		h.t.Fatalf("subscribe %s: %v", info.Name, e)
	}
	return f
}

func (h *harness) trySubscribe(info api.FrameworkInfo) (*simFramework, *api.Error) {
	h.t.Helper()
	s, e := h.m().Subscribe(context.Background(), api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: info}})
	if e != nil {
		return nil, e
	}
	f := &simFramework{reader: reader[api.Event]{h: h, stream: s, split: splitOffers}, info: info}
	sub := f.next("SUBSCRIBED", isEvent(api.EventSubscribed)).Subscribed
	if sub.FrameworkID == "" || sub.FrameworkID != s.Owner() {
		h.t.Fatalf("SUBSCRIBED framework id %q, stream owner %q", sub.FrameworkID, s.Owner())
	}
	if info.ID != "" && sub.FrameworkID != info.ID {
		h.t.Fatalf("re-subscribed as %s, want %s", sub.FrameworkID, info.ID)
	}
	f.id = sub.FrameworkID
	f.info.ID = f.id
	return f, nil
}

// resubscribe subscribes again with the framework's id, as a failed-over
// scheduler does.
func (f *simFramework) resubscribe() *simFramework { return f.h.subscribe(f.info) }

// splitOffers turns an OFFERS event into one event per offer, so a test can
// wait for the offer of one agent without losing the others.
func splitOffers(e api.Event) []api.Event {
	if e.Type != api.EventOffers || e.Offers == nil || len(e.Offers.Offers) <= 1 {
		return []api.Event{e}
	}
	out := make([]api.Event, 0, len(e.Offers.Offers))
	for _, o := range e.Offers.Offers {
		out = append(out, api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: []api.Offer{o}}})
	}
	return out
}

func isEvent(typ string) func(api.Event) bool {
	return func(e api.Event) bool { return e.Type == typ }
}

func (f *simFramework) call(c api.Call) *api.Error {
	c.FrameworkID = f.id
	return f.h.m().Call(context.Background(), c, f.stream.ID())
}

func (f *simFramework) mustCall(c api.Call) {
	f.h.t.Helper()
	if e := f.call(c); e != nil {
		f.h.t.Fatalf("framework %s %s: %v", f.info.Name, c.Type, e)
	}
}

// offerOn waits for an offer of the agent.
func (f *simFramework) offerOn(agentID string) api.Offer {
	f.h.t.Helper()
	return f.next("an offer of agent "+agentID, func(e api.Event) bool {
		return e.Type == api.EventOffers && e.Offers.Offers[0].AgentID == agentID
	}).Offers.Offers[0]
}

// status waits for the task's next status update.
func (f *simFramework) status(taskID string) api.TaskStatus {
	f.h.t.Helper()
	return f.next("an update of "+taskID, func(e api.Event) bool {
		return e.Type == api.EventUpdate && e.Update.Status.TaskID == taskID
	}).Update.Status
}

// expectStatus waits for the task's next update and checks its state and
// (when given) reason.
func (f *simFramework) expectStatus(taskID, state, reason string) api.TaskStatus {
	f.h.t.Helper()
	st := f.status(taskID)
	if st.State != state || (reason != "" && st.Reason != reason) {
		f.h.t.Fatalf("task %s: got %s/%s (%s), want %s/%s", taskID, st.State, st.Reason, st.Message, state, reason)
	}
	return st
}

func (f *simFramework) accept(offerIDs []string, filters *api.Filters, ops ...api.Operation) {
	f.h.t.Helper()
	f.mustCall(api.Call{Type: api.CallAccept, Accept: &api.Accept{OfferIDs: offerIDs, Operations: ops, Filters: filters}})
}

func (f *simFramework) decline(offerID string, filters *api.Filters) {
	f.h.t.Helper()
	f.mustCall(api.Call{Type: api.CallDecline, Decline: &api.Decline{OfferIDs: []string{offerID}, Filters: filters}})
}

func (f *simFramework) acknowledge(st api.TaskStatus) {
	f.h.t.Helper()
	f.mustCall(api.Call{Type: api.CallAcknowledge, Acknowledge: &api.Acknowledge{AgentID: st.AgentID, TaskID: st.TaskID, UUID: st.UUID}})
}

// disconnect ends the subscription as a dropped connection does.
func (f *simFramework) disconnect() { f.h.m().FrameworkStreamClosed(f.id, f.stream.ID()) }

// launchRunning launches one task on a fresh offer of the agent, has the
// agent report it running and acknowledges that.
func (f *simFramework) launchRunning(a *simAgent, taskID string, res api.Resources) api.AgentTask {
	f.h.t.Helper()
	o := f.offerOn(a.id)
	f.accept([]string{o.ID}, refuse(0), launchOp(taskInfo(taskID, a.id, res)))
	launch := a.nextLaunch(taskID)
	uuid := a.update(f.id, taskID, api.TaskRunning)
	st := f.expectStatus(taskID, api.TaskRunning, "")
	if st.UUID != uuid {
		f.h.t.Fatalf("task %s: update uuid %q, want %q", taskID, st.UUID, uuid)
	}
	f.acknowledge(st)
	a.next("ACKNOWLEDGE of "+taskID, func(e api.AgentEvent) bool {
		return e.Type == api.AgentEventAcknowledge && e.Acknowledge.UUID == uuid
	})
	for _, t := range launch.Tasks {
		if t.Task.TaskID == taskID {
			t.State = api.TaskRunning
			return t
		}
	}
	f.h.t.Fatalf("LAUNCH without %s", taskID)
	return api.AgentTask{}
}

// Builders.

func taskInfo(id, agentID string, res api.Resources) api.TaskInfo {
	return api.TaskInfo{TaskID: id, Name: id, AgentID: agentID, Resources: res, Command: &api.CommandInfo{Value: "sleep 60"}}
}

func launchOp(tasks ...api.TaskInfo) api.Operation {
	return api.Operation{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: tasks}}
}

func groupOp(executorID string, executorRes api.Resources, tasks ...api.TaskInfo) api.Operation {
	return api.Operation{Type: api.OperationLaunchGroup, LaunchGroup: &api.LaunchGroup{
		Executor: api.ExecutorInfo{ExecutorID: executorID, Resources: executorRes}, Tasks: tasks}}
}

func withLimits(t api.TaskInfo, limits api.Limits) api.TaskInfo {
	t.Limits = limits
	return t
}

func withShareCgroups(t api.TaskInfo, share bool) api.TaskInfo {
	t.Container = &api.ContainerInfo{LinuxInfo: &api.LinuxInfo{ShareCgroups: &share}}
	return t
}

func refuse(seconds float64) *api.Filters { return &api.Filters{RefuseSeconds: &seconds} }

func offerTotal(o api.Offer) api.Resources {
	total := api.Resources{}
	for _, r := range o.Resources {
		total.Add(r.Scalars)
	}
	return total
}

// sameResources compares resource maps, a missing entry counting as zero.
func sameResources(a, b api.Resources) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

func wantResources(t testing.TB, what string, got, want api.Resources) {
	t.Helper()
	if !sameResources(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func wantCode(t testing.TB, what string, e *api.Error, code string) {
	t.Helper()
	if e == nil || e.Code != code {
		t.Fatalf("%s: got %v, want a %s error", what, e, code)
	}
}
