package master

import (
	"context"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

var smallAgent = api.Resources{"cpus": 2, "mem": 1024}

// runningWithOffer sets up an agent with one running task and an
// outstanding offer of the rest of it.
func runningWithOffer(t *testing.T, h *harness) (*simAgent, *simFramework, api.AgentTask, api.Offer) {
	t.Helper()
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	rt := fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	o := fw.offerOn(ag.id)
	return ag, fw, rt, o
}

// disconnectEvents checks what the framework hears when the agent of its
// task t1 and offer o is lost.
func disconnectEvents(t *testing.T, fw *simFramework, o api.Offer) {
	t.Helper()
	if r := fw.next("RESCIND", isEvent(api.EventRescind)).Rescind; r.OfferID != o.ID {
		t.Fatalf("rescinded %s, want %s", r.OfferID, o.ID)
	}
	fw.expectStatus("t1", api.TaskUnreachable, api.ReasonAgentDisconnected)
}

// disconnected checks what a lost agent session does: its offers are
// rescinded and its tasks become unreachable, keeping their resources.
func disconnected(t *testing.T, ag *simAgent, fw *simFramework, o api.Offer) {
	t.Helper()
	disconnectEvents(t, fw, o)
	if !ag.ended() {
		t.Fatal("the agent's stream is still open")
	}
	u := ag.usage()
	if u.Connected {
		t.Fatal("the agent is still connected")
	}
	wantResources(t, "allocated while unreachable", u.Allocated, api.Resources{"cpus": 1, "mem": 256})
	if ag.h.m().OffersOutstanding() != 0 {
		t.Fatalf("offers of a disconnected agent: %+v", ag.h.m().Offers())
	}
	// A call on the old session is refused.
	wantCode(t, "HEARTBEAT on a closed session", ag.call(api.AgentCall{Type: api.AgentCallHeartbeat}), api.CodePermissionDenied)
}

func TestAgentDisconnectAndReturnWithTask(t *testing.T) {
	h := newHarness(t)
	ag, fw, rt, o := runningWithOffer(t, h)
	ag.disconnect()
	disconnected(t, ag, fw, o)

	ag.reregister([]api.AgentTask{rt}, nil)
	fw.expectStatus("t1", api.TaskRunning, "")
	if tasks := h.m().Tasks(); len(tasks) != 1 || tasks[0].State != api.TaskRunning {
		t.Fatalf("tasks: %+v", tasks)
	}
	// The task is counted once, not again for being reported.
	wantResources(t, "allocated after re-registering", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 256})
	o2 := fw.offerOn(ag.id)
	wantResources(t, "offer after re-registering", offerTotal(o2), api.Resources{"cpus": 1, "mem": 768})
}

func TestAgentReturnsWithoutTask(t *testing.T) {
	h := newHarness(t)
	ag, fw, _, o := runningWithOffer(t, h)
	ag.disconnect()
	disconnected(t, ag, fw, o)

	ag.reregister(nil, nil)
	fw.expectStatus("t1", api.TaskLost, api.ReasonAgentRestarted)
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after the task was lost: %v", u)
	}
	wantResources(t, "offer", offerTotal(fw.offerOn(ag.id)), smallAgent)
}

func TestAgentPingTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AgentPingTimeout = 15 * time.Second })
	ag, fw, _, o := runningWithOffer(t, h)
	// Heartbeats keep the agent however long it runs: four times 10 s, each
	// under the timeout, 40 s in all.
	for range 4 {
		h.pass(10 * time.Second)
		if e := ag.call(api.AgentCall{Type: api.AgentCallHeartbeat}); e != nil {
			t.Fatalf("HEARTBEAT: %v", e)
		}
	}
	if !ag.usage().Connected {
		t.Fatal("a heartbeating agent was disconnected")
	}
	// Then it goes quiet.
	h.clock.Advance(h.opts.AgentPingTimeout + h.opts.AllocationInterval)
	disconnected(t, ag, fw, o)
}

func TestAgentRemovalTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AgentRemovalTimeout = 10 * time.Minute })
	ag, fw, _, o := runningWithOffer(t, h)
	ag.disconnect()
	disconnected(t, ag, fw, o)
	h.pass(h.opts.AgentRemovalTimeout - time.Minute)
	fw.none("news of t1 before the removal timeout", isEvent(api.EventUpdate))
	wantResources(t, "allocated before the removal timeout", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 256})
	h.clock.Advance(2 * time.Minute)
	fw.expectStatus("t1", api.TaskGone, api.ReasonAgentRemoved)
	if f := fw.next("FAILURE", isEvent(api.EventFailure)).Failure; f.AgentID != ag.id {
		t.Fatalf("failure of %s, want %s", f.AgentID, ag.id)
	}
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after the tasks are gone: %v", u)
	}
	// It may still come back; its task is then news to the master.
	ag.reregister(nil, nil)
	wantResources(t, "offer after coming back", offerTotal(fw.offerOn(ag.id)), smallAgent)
}

// TestAgentNewIncarnation: an agent known by name registering without its id
// is a new agent; the old one's tasks are lost.
func TestAgentNewIncarnation(t *testing.T) {
	h := newHarness(t)
	ag, fw, _, o := runningWithOffer(t, h)
	oldID, oldStream := ag.id, ag.stream

	ag.register(api.AgentCall{Type: api.AgentCallRegister, Register: &api.AgentRegister{AgentInfo: ag.info}})
	if ag.id == oldID {
		t.Fatalf("the new incarnation kept id %s", oldID)
	}
	if !oldStream.closed() {
		t.Fatal("the old incarnation's stream is still open")
	}
	if r := fw.next("RESCIND", isEvent(api.EventRescind)).Rescind; r.OfferID != o.ID {
		t.Fatalf("rescinded %s, want %s", r.OfferID, o.ID)
	}
	fw.expectStatus("t1", api.TaskLost, api.ReasonAgentRestarted)
	h.read(func(st *raftstore.State) {
		if _, ok := st.Agent(oldID); ok {
			t.Error("the old incarnation is still admitted")
		}
		if rec, ok := st.AgentByName("node-1"); !ok || rec.ID != ag.id {
			t.Errorf("node-1 is %+v, want id %s", rec, ag.id)
		}
	})
	h.m().mu.Lock()
	_, known := h.m().alloc.Agent(oldID)
	h.m().mu.Unlock()
	if known {
		t.Fatal("the allocator still has the old incarnation")
	}
	wantResources(t, "offer of the new incarnation", offerTotal(fw.offerOn(ag.id)), smallAgent)
	// The old id is no longer an agent of this leader.
	wantCode(t, "UPDATE from the old incarnation",
		h.m().AgentCall(api.AgentCall{AgentID: oldID, Type: api.AgentCallHeartbeat}, oldStream.ID()), api.CodeNotFound)
}

// TestAgentRemovedFromRegistry: an agent the registry drops loses its
// tasks (TASK_GONE) and its session.
func TestAgentRemovedFromRegistry(t *testing.T) {
	h := newHarness(t)
	ag, fw, _, _ := runningWithOffer(t, h)
	h.write(&raftstore.AgentRemove{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()}, ID: ag.id})
	fw.expectStatus("t1", api.TaskGone, api.ReasonAgentRemoved)
	if !ag.ended() {
		t.Fatal("the removed agent's stream is still open")
	}
	if h.m().OffersOutstanding() != 0 {
		t.Fatalf("offers of a removed agent: %+v", h.m().Offers())
	}
	_, e := h.m().RegisterAgent(context.Background(), api.AgentCall{AgentID: ag.id, Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: ag.info}}, "")
	if e != nil {
		t.Fatalf("re-admission: %v", e)
	}
}

// TestReportedTasksBeyondAgent: an agent that comes back smaller than the
// tasks it reports (its resources were lowered while they ran) is never
// counted as over-allocated, and the end of a task the allocator could not
// count does not free what another task still holds.
func TestReportedTasksBeyondAgent(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024})
	fw := h.subscribe(fwInfo("web", "*"))
	res := api.Resources{"cpus": 2, "mem": 256}
	t1 := fw.launchRunning(ag, "t1", res)
	t2 := fw.launchRunning(ag, "t2", res)

	h.startTerm()
	ag.info.Resources = api.Resources{"cpus": 2, "mem": 1024}
	ag.reregister([]api.AgentTask{t1, t2}, nil)
	wantResources(t, "allocated", ag.usage().Allocated, res)
	again := fw.resubscribe()

	// Whichever task the allocator could not count ends first: the other
	// still holds the agent's cpus, so nothing with cpus is offered.
	ag.update(fw.id, "t2", api.TaskFinished)
	again.expectStatus("t2", api.TaskFinished, "")
	ag.update(fw.id, "t1", api.TaskRunning)
	again.expectStatus("t1", api.TaskRunning, "")
	wantResources(t, "allocated after one task ended", ag.usage().Allocated, res)
	h.waitCycles(3)
	for _, e := range again.queued(isEvent(api.EventOffers)) {
		if offerTotal(e.Offers.Offers[0])["cpus"] > 0 {
			t.Fatalf("cpus offered while a running task holds all of them: %+v", e.Offers.Offers[0])
		}
	}
	ag.update(fw.id, "t1", api.TaskFinished)
	again.expectStatus("t1", api.TaskFinished, "")
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after both tasks ended: %v", u)
	}
	h.waitFor("the whole agent to be offered", func() bool {
		offered := api.Resources{}
		for _, o := range h.m().Offers() {
			offered.Add(offerTotal(o))
		}
		return sameResources(offered, ag.info.Resources)
	})
}
