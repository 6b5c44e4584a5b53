package master

import (
	"context"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// A task given up as TASK_GONE is killed, not handed back, when its agent
// returns with it: its framework may have replaced it already.
func TestGoneTaskIsKilledWhenItsAgentReturns(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AgentRemovalTimeout = 10 * time.Minute })
	ag, fw, rt, _ := runningWithOffer(t, h)
	ag.disconnect()
	fw.expectStatus("t1", api.TaskUnreachable, api.ReasonAgentDisconnected)
	h.clock.Advance(h.opts.AgentRemovalTimeout + h.opts.AllocationInterval)
	fw.expectStatus("t1", api.TaskGone, api.ReasonAgentRemoved)

	ag.reregister([]api.AgentTask{rt}, nil)
	ag.nextKill("t1")
	// Until it ends it holds its resources; then they are free again.
	wantResources(t, "allocated while it is being killed", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 256})
	ag.update(fw.id, "t1", api.TaskKilled)
	fw.expectStatus("t1", api.TaskKilled, "")
	h.waitFor("the killed task's resources to be free", func() bool { return ag.usage().Allocated.IsZero() })
}

// A task of a framework that is gone is killed every time its agent
// registers, until it ends: a KILL lost with a connection is sent again.
func TestKillOfRemovedFrameworkIsRepeated(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	rt := fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})
	fw.mustCall(api.Call{Type: api.CallTeardown})
	ag.nextKill("t1") // lost: the agent never acts on it
	ag.disconnect()
	ag.reregister([]api.AgentTask{rt}, nil)
	ag.nextKill("t1")
}

// An agent given a new id (a new incarnation) drops what it ran, so the
// master adopts none of what it reported.
func TestNewIncarnationAdoptsNothing(t *testing.T) {
	h := newHarness(t)
	ag, fw, rt, _ := runningWithOffer(t, h)
	ag.disconnect()
	fw.expectStatus("t1", api.TaskUnreachable, api.ReasonAgentDisconnected)
	ag.register(api.AgentCall{AgentID: "agent-unknown-to-the-master", Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: ag.info, Tasks: []api.AgentTask{rt}}})
	fw.expectStatus("t1", api.TaskLost, api.ReasonAgentRestarted)
	if tasks := h.m().Tasks(); len(tasks) != 1 || tasks[0].State != api.TaskLost {
		t.Fatalf("tasks: %+v", tasks)
	}
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated on the new incarnation: %v", u)
	}
}

// An executor reported only with tasks that already ended holds nothing.
func TestExecutorWithOnlyEndedTasksIsFreed(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	ex := api.AgentExecutor{FrameworkID: fw.id, ExecutorID: "e1", Role: "*",
		Allocation: []api.OfferResource{{Role: "*", Scalars: api.Resources{"cpus": 0.5, "mem": 64}}}}
	done := api.AgentTask{FrameworkID: fw.id, Role: "*", ExecutorID: "e1", State: api.TaskFinished,
		Task:       api.TaskInfo{TaskID: "t1", AgentID: ag.id, Resources: api.Resources{"cpus": 0.5}},
		Allocation: []api.OfferResource{{Role: "*", Scalars: api.Resources{"cpus": 0.5}}}}
	ag.disconnect()
	ag.reregister([]api.AgentTask{done}, []api.AgentExecutor{ex})
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated for an executor with no live task: %v", u)
	}
}

// A failover timeout too large for a time.Duration is forever, not "now".
func TestHugeFailoverTimeoutKeepsTheFramework(t *testing.T) {
	h := newHarness(t)
	info := fwInfo("web", "*")
	info.FailoverTimeoutSeconds = 1e12
	fw := h.subscribe(info)
	fw.disconnect()
	h.pass(24 * time.Hour)
	if !registered(h, fw.id) {
		t.Fatal("the framework was removed within a day")
	}
}

// An agent the operator removed gets a new id when it comes back, and what
// it reports under the old one is not adopted.
func TestRemovedAgentComesBackAsNew(t *testing.T) {
	h := newHarness(t)
	ag, fw, rt, _ := runningWithOffer(t, h)
	oldID := ag.id
	h.write(&raftstore.AgentRemove{ID: oldID})
	fw.expectStatus("t1", api.TaskGone, api.ReasonAgentRemoved)

	ag.register(api.AgentCall{AgentID: oldID, Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: ag.info, Tasks: []api.AgentTask{rt}}})
	if ag.id == oldID {
		t.Fatalf("the removed agent got its id %s back", oldID)
	}
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated on the returning agent: %v", u)
	}
	fw.none("news of t1", func(e api.Event) bool { return e.Type == api.EventUpdate && e.Update.Status.TaskID == "t1" })
}

// A new incarnation without an id adopts nothing either.
func TestNewIncarnationWithoutIDAdoptsNothing(t *testing.T) {
	h := newHarness(t)
	ag, fw, rt, _ := runningWithOffer(t, h)
	ag.register(api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: ag.info, Tasks: []api.AgentTask{rt}}})
	fw.expectStatus("t1", api.TaskLost, api.ReasonAgentRestarted)
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated on the new incarnation: %v", u)
	}
	fw.none("t1 back", func(e api.Event) bool { return e.Type == api.EventUpdate && e.Update.Status.TaskID == "t1" })
}

// A new hostname rescinds the agent's offers; later offers carry it.
func TestHostnameChangeReachesOffers(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", smallAgent)
	fw := h.subscribe(fwInfo("web", "*"))
	o := fw.offerOn(ag.id)
	ag.info.Hostname = "renamed.example.net"
	ag.reregister(nil, nil)
	if r := fw.next("RESCIND", isEvent(api.EventRescind)).Rescind; r.OfferID != o.ID {
		t.Fatalf("rescinded %s, want %s", r.OfferID, o.ID)
	}
	if got := fw.offerOn(ag.id).Hostname; got != "renamed.example.net" {
		t.Fatalf("offer hostname %q", got)
	}
}

// TEARDOWN from a caller that hangs up still removes the framework: the
// write is not cut short.
func TestTeardownOfACallerThatHangsUp(t *testing.T) {
	h := newHarness(t)
	fw := h.subscribe(fwInfo("web", "*"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if e := h.m().Call(ctx, api.Call{FrameworkID: fw.id, Type: api.CallTeardown}, fw.stream.ID()); e != nil {
		t.Fatalf("TEARDOWN: %v", e)
	}
	if registered(h, fw.id) {
		t.Fatal("still in the registry")
	}
	if len(h.m().Frameworks()) != 0 {
		t.Fatalf("still live: %+v", h.m().Frameworks())
	}
}
