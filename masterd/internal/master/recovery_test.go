package master

import (
	"fmt"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// recoveryCluster admits n agents and sets a quota in a first term, so that
// the next term starts in recovery.
func recoveryCluster(t *testing.T, h *harness, n int) []*simAgent {
	t.Helper()
	var agents []*simAgent
	for i := range n {
		agents = append(agents, h.registerAgent(fmt.Sprintf("node-%d", i), api.Resources{"cpus": 2, "mem": 1024}))
	}
	h.write(&raftstore.QuotaSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()}, Role: "eng",
		Guarantees: api.Resources{"cpus": 1}})
	return agents
}

// noOffersDuringRecovery runs a cycle and checks it offered nothing. Recovery
// only ever ends, so still being active after the cycle means it was active
// during it.
func noOffersDuringRecovery(t *testing.T, m *Master) {
	t.Helper()
	m.allocate(m.clock.Now())
	n := m.OffersOutstanding()
	if m.Recovery().Active && n > 0 {
		t.Fatalf("%d offers made during recovery: %+v", n, m.Offers())
	}
}

// TestRecoveryWaitsForAgents: after a leader change with quotas set, offers
// wait until ceil(ratio × admitted agents) agents re-registered.
func TestRecoveryWaitsForAgents(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.RecoveryAgentRatio = 0.5 })
	agents := recoveryCluster(t, h, 3)
	if h.m().Recovery().Active {
		t.Fatal("the first term, started on an empty state, is in recovery")
	}

	m := h.startTerm()
	r := m.Recovery()
	if !r.Active || r.Expected != 2 || r.Reregistered != 0 || r.Deadline == nil {
		t.Fatalf("recovery: %+v, want active, expecting 2 (ceil(0.5×3))", r)
	}
	for _, ag := range agents {
		if !ag.ended() {
			t.Fatalf("agent %s's session survived the end of the term", ag.info.Name)
		}
	}
	fw := h.subscribe(fwInfo("web", "*"))
	agents[0].reregister(nil, nil)
	if r := m.Recovery(); !r.Active || r.Reregistered != 1 {
		t.Fatalf("recovery after one agent: %+v", r)
	}
	noOffersDuringRecovery(t, m)
	fw.none("an offer during recovery", isEvent(api.EventOffers))

	// A task on an agent that has not re-registered yet is not declared
	// lost: the agent may still report it.
	fw.mustCall(api.Call{Type: api.CallReconcile, Reconcile: &api.Reconcile{Tasks: []api.ReconcileTask{
		{TaskID: "maybe", AgentID: agents[2].id}, {TaskID: "gone", AgentID: agents[0].id}}}})
	fw.expectStatus("gone", api.TaskLost, api.ReasonReconciliation)
	fw.none("an answer about a task of an agent not yet back", func(e api.Event) bool {
		return e.Type == api.EventUpdate && e.Update.Status.TaskID == "maybe"
	})

	agents[1].reregister(nil, nil)
	if r := m.Recovery(); r.Active || r.Reregistered != 2 || r.Deadline != nil {
		t.Fatalf("recovery after two agents: %+v", r)
	}
	fw.offerOn(agents[0].id)
	fw.offerOn(agents[1].id)
	h.waitCycles(3)
	fw.none("an offer of an agent that has not re-registered", func(e api.Event) bool {
		return e.Type == api.EventOffers && e.Offers.Offers[0].AgentID == agents[2].id
	})
}

// TestRecoveryTimeout: offers resume when the recovery timeout passes, however
// few agents came back.
func TestRecoveryTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.RecoveryAgentRatio = 1
		o.RecoveryTimeout = 10 * time.Minute
	})
	agents := recoveryCluster(t, h, 3)

	started := h.clock.Now()
	m := h.startTerm()
	if r := m.Recovery(); !r.Active || r.Deadline == nil || !r.Deadline.Equal(started.Add(h.opts.RecoveryTimeout)) {
		t.Fatalf("recovery: %+v, want active until %v", r, started.Add(h.opts.RecoveryTimeout))
	}
	fw := h.subscribe(fwInfo("web", "*"))
	agents[0].reregister(nil, nil)

	// A second before the deadline, with 1 of 3 agents back: no offers.
	h.pass(h.opts.RecoveryTimeout - time.Second)
	if r := m.Recovery(); !r.Active {
		t.Fatalf("recovery ended before its timeout: %+v", r)
	}
	noOffersDuringRecovery(t, m)
	fw.none("an offer during recovery", isEvent(api.EventOffers))

	h.clock.Advance(time.Second)
	fw.offerOn(agents[0].id)
	if r := m.Recovery(); r.Active {
		t.Fatalf("offers during recovery: %+v", r)
	}
}

// TestNoRecovery: without quotas, or with a zero ratio, a new term offers at
// once.
func TestNoRecovery(t *testing.T) {
	t.Run("no quota", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.RecoveryAgentRatio = 1 })
		agents := []*simAgent{h.registerAgent("node-0", smallAgent), h.registerAgent("node-1", smallAgent)}
		m := h.startTerm()
		if r := m.Recovery(); r.Active {
			t.Fatalf("recovery without quotas: %+v", r)
		}
		fw := h.subscribe(fwInfo("web", "*"))
		agents[0].reregister(nil, nil)
		fw.offerOn(agents[0].id)
	})
	t.Run("zero ratio", func(t *testing.T) {
		h := newHarness(t)
		agents := recoveryCluster(t, h, 2)
		m := h.startTerm()
		if r := m.Recovery(); r.Active {
			t.Fatalf("recovery with a zero ratio: %+v", r)
		}
		fw := h.subscribe(fwInfo("web", "*"))
		agents[0].reregister(nil, nil)
		fw.offerOn(agents[0].id)
	})
}

// TestRecoveryAdoptsReportedTasks: a new term learns tasks from the agents
// that re-register, counts their resources, and hands them to their
// framework when it subscribes again.
func TestRecoveryAdoptsReportedTasks(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 4096})
	fw := h.subscribe(fwInfo("web", "*"))
	rt := fw.launchRunning(ag, "t1", api.Resources{"cpus": 1, "mem": 256})

	h.startTerm()
	if !fw.ended() {
		t.Fatal("the framework's session survived the end of the term")
	}
	ag.reregister([]api.AgentTask{rt}, nil)
	wantResources(t, "allocated after the agent reported its task", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 256})
	if tasks := h.m().Tasks(); len(tasks) != 1 || tasks[0].TaskID != "t1" || tasks[0].State != api.TaskRunning {
		t.Fatalf("tasks: %+v", tasks)
	}
	again := fw.resubscribe()
	again.mustCall(api.Call{Type: api.CallReconcile})
	again.expectStatus("t1", api.TaskRunning, api.ReasonReconciliation)
	wantResources(t, "offer of the rest", offerTotal(again.offerOn(ag.id)), api.Resources{"cpus": 3, "mem": 3840})
	ag.update(fw.id, "t1", api.TaskFinished)
	again.expectStatus("t1", api.TaskFinished, "")
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after the adopted task ended: %v", u)
	}
}
