package master

import (
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

func registered(h *harness, id string) bool {
	var ok bool
	h.read(func(st *raftstore.State) { _, ok = st.Framework(id) })
	return ok
}

// TestFrameworkFailover: a framework that subscribes again with its id
// within its failover timeout keeps its tasks.
func TestFrameworkFailover(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	fw.offerOn(ag.id)
	oldStream := fw.stream

	fw.disconnect()
	if !oldStream.closed() {
		t.Fatal("the closed subscription's stream is still open")
	}
	if fws := h.m().Frameworks(); len(fws) != 1 || fws[0].Connected {
		t.Fatalf("frameworks: %+v", fws)
	}
	if h.m().OffersOutstanding() != 0 {
		t.Fatalf("offers of a disconnected framework: %+v", h.m().Offers())
	}
	h.waitCycles(3)
	if h.m().OffersOutstanding() != 0 {
		t.Fatalf("offers made to a disconnected framework: %+v", h.m().Offers())
	}

	again := fw.resubscribe()
	wantCode(t, "call on the old stream", again.h.m().Call(t.Context(), api.Call{FrameworkID: fw.id, Type: api.CallRevive}, oldStream.ID()),
		api.CodePermissionDenied)
	again.mustCall(api.Call{Type: api.CallReconcile, Reconcile: &api.Reconcile{}})
	st := again.expectStatus("t1", api.TaskRunning, api.ReasonReconciliation)
	if st.UUID != "" {
		t.Fatalf("a reconciliation update carries uuid %q", st.UUID)
	}
	if fws := h.m().Frameworks(); len(fws) != 1 || !fws[0].Connected || !sameResources(fws[0].Allocated, api.Resources{"cpus": 1, "mem": 256}) {
		t.Fatalf("frameworks: %+v", fws)
	}
	// Offers resume for it.
	again.offerOn(ag.id)
	// Updates of the kept task reach the new subscription.
	ag.update(fw.id, "t1", api.TaskFinished)
	again.expectStatus("t1", api.TaskFinished, "")
}

// removedFramework checks what removing a framework does: its task is killed
// at the agent, it leaves the registry and cannot subscribe with its id.
func removedFramework(t *testing.T, h *harness, ag *simAgent, fw *simFramework) {
	t.Helper()
	if k := ag.nextKill("t1"); k.FrameworkID != fw.id {
		t.Fatalf("kill: %+v", k)
	}
	h.waitFor("the framework to leave the registry", func() bool { return !registered(h, fw.id) })
	h.waitFor("the framework to leave the live state", func() bool { return len(h.m().Frameworks()) == 0 })
	_, e := h.trySubscribe(fw.info)
	wantCode(t, "subscribe with a removed id", e, api.CodeNotFound)
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after the framework was removed: %v", u)
	}
	// The task's last update is acknowledged by the master, the framework
	// being gone.
	uuid := ag.update(fw.id, "t1", api.TaskKilled)
	if a := ag.next("ACKNOWLEDGE", isAgentEvent(api.AgentEventAcknowledge)).Acknowledge; a.UUID != uuid {
		t.Fatalf("acknowledge %+v, want uuid %s", a, uuid)
	}
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after the killed task ended: %v", u)
	}
	// Its resources go to others.
	other := h.subscribe(fwInfo("other", "*"))
	wantResources(t, "offer to another framework", offerTotal(other.offerOn(ag.id)), smallAgent)
}

func TestFrameworkFailoverTimeout(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	info := fwInfo("web", "*")
	info.FailoverTimeoutSeconds = 60
	fw := h.subscribe(info)
	fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	fw.disconnect()
	h.pass(50 * time.Second)
	if !registered(h, fw.id) || len(h.m().Frameworks()) != 1 {
		t.Fatal("the framework was removed before its failover timeout passed")
	}
	ag.none("a KILL before the failover timeout", isAgentEvent(api.AgentEventKill))
	h.clock.Advance(15 * time.Second)
	removedFramework(t, h, ag, fw)
}

func TestFrameworkTeardown(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	fw.offerOn(ag.id)
	fw.mustCall(api.Call{Type: api.CallTeardown, Teardown: &api.Teardown{}})
	if !fw.ended() {
		t.Fatal("a torn down framework's stream is still open")
	}
	if h.m().OffersOutstanding() != 0 {
		t.Fatalf("offers of a torn down framework: %+v", h.m().Offers())
	}
	removedFramework(t, h, ag, fw)
}

// TestFrameworkRemovedWhileAgentAway: the kill of a removed framework's task
// on a disconnected agent is sent when the agent comes back.
func TestFrameworkRemovedWhileAgentAway(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	rt := fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	ag.disconnect()
	fw.expectStatus("t1", api.TaskUnreachable, "")
	fw.mustCall(api.Call{Type: api.CallTeardown})
	h.waitFor("the framework to leave the registry", func() bool { return !registered(h, fw.id) })
	ag.reregister([]api.AgentTask{rt}, nil)
	ag.nextKill("t1")
}

// TestTeardownKillsEveryTaskOfAnID: two agents may run tasks of one id (a
// framework reused the id while the agent that runs the first had not
// re-registered with this leader). A KILL naming an agent kills the task
// there; a teardown kills both and leaves neither counted as allocated.
func TestTeardownKillsEveryTaskOfAnID(t *testing.T) {
	h := newHarness(t)
	a := h.registerAgent("node-a", smallAgent)
	b := h.registerAgent("node-b", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	rt := fw.launchRunning(b, "t1", api.Resources{"cpus": 1, "mem": 256})
	a.disconnect() // its offers rescinded: what it reports fits
	same := rt
	same.Task.AgentID = a.id
	a.reregister([]api.AgentTask{same}, nil)
	for _, ag := range []*simAgent{a, b} {
		wantResources(t, ag.info.Name+" allocated before the teardown", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 256})
	}
	// A KILL naming the agent reaches the task there.
	fw.mustCall(api.Call{Type: api.CallKill, Kill: &api.Kill{TaskID: "t1", AgentID: b.id}})
	b.nextKill("t1")
	fw.mustCall(api.Call{Type: api.CallTeardown})
	for _, ag := range []*simAgent{a, b} {
		if k := ag.nextKill("t1"); k.FrameworkID != fw.id {
			t.Fatalf("%s: kill %+v", ag.info.Name, k)
		}
	}
	h.waitFor("the framework to leave the live state", func() bool { return len(h.m().Frameworks()) == 0 })
	m := h.m()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ag := range m.agents {
		for _, task := range ag.tasks {
			if !task.released {
				t.Errorf("task %s on %s still counts as allocated after the teardown", task.info.TaskID, ag.name)
			}
		}
		if stats, _ := m.alloc.Agent(ag.id); !stats.Allocated.IsZero() {
			t.Errorf("%s: the allocator counts %v allocated after the teardown", ag.name, stats.Allocated)
		}
	}
}

// TestFrameworkSubscribeTakesOver: a second SUBSCRIBE with the id of a
// connected framework replaces its session.
func TestFrameworkSubscribeTakesOver(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	o := fw.offerOn(ag.id)
	again := fw.resubscribe()
	if e := fw.next("ERROR", isEvent(api.EventError)).Error; e.Message == "" {
		t.Fatal("ERROR without a message")
	}
	if !fw.ended() {
		t.Fatal("the replaced session's stream is still open")
	}
	o2 := again.offerOn(ag.id)
	if o2.ID == o.ID {
		t.Fatal("the old session's offer was not rescinded")
	}
	again.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("old-offer", ag.id, api.Resources{"cpus": 1})))
	again.expectStatus("old-offer", api.TaskDropped, api.ReasonInvalidOffers)
}

// TestReconcile: explicit reconciliation answers with each named task's
// state (TASK_LOST for tasks the master does not know), implicit with every
// task of the framework.
func TestReconcile(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 4096})
	fw := h.subscribe(fwInfo("web", "*"))
	fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	o := fw.offerOn(ag.id)
	fw.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("t2", ag.id, api.Resources{"cpus": 1, "mem": 256})))
	ag.nextLaunch("t2")

	fw.mustCall(api.Call{Type: api.CallReconcile, Reconcile: &api.Reconcile{Tasks: []api.ReconcileTask{
		{TaskID: "t1", AgentID: ag.id}, {TaskID: "nope", AgentID: ag.id}, {TaskID: "nowhere"}}}})
	st := fw.expectStatus("t1", api.TaskRunning, api.ReasonReconciliation)
	if st.AgentID != ag.id || st.UUID != "" {
		t.Fatalf("reconciled t1: %+v", st)
	}
	fw.expectStatus("nope", api.TaskLost, api.ReasonReconciliation)
	fw.expectStatus("nowhere", api.TaskLost, api.ReasonReconciliation)
	fw.none("an update of a task that was not named", isEvent(api.EventUpdate))

	fw.mustCall(api.Call{Type: api.CallReconcile})
	fw.expectStatus("t1", api.TaskRunning, api.ReasonReconciliation)
	fw.expectStatus("t2", api.TaskStaging, api.ReasonReconciliation)
	fw.none("a third update of implicit reconciliation", isEvent(api.EventUpdate))

	// A KILL of an unknown task answers TASK_LOST; of a known one reaches
	// the agent.
	fw.mustCall(api.Call{Type: api.CallKill, Kill: &api.Kill{TaskID: "ghost"}})
	fw.expectStatus("ghost", api.TaskLost, "")
	fw.mustCall(api.Call{Type: api.CallKill, Kill: &api.Kill{TaskID: "t2", AgentID: ag.id}})
	ag.nextKill("t2")
	ag.update(fw.id, "t2", api.TaskKilled)
	fw.expectStatus("t2", api.TaskKilled, "")
	fw.mustCall(api.Call{Type: api.CallReconcile})
	fw.expectStatus("t1", api.TaskRunning, api.ReasonReconciliation)
	fw.none("an update of an ended task in implicit reconciliation", isEvent(api.EventUpdate))
}
