package master

import (
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// A task given up as TASK_GONE is killed, not handed back, when its agent
// returns with it: its framework may have replaced it already.
func TestGoneTaskIsKilledWhenItsAgentReturns(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.AgentRemovalTimeout = 200 * time.Millisecond })
	ag, fw, rt, _ := runningWithOffer(t, h)
	ag.disconnect()
	fw.expectStatus("t1", api.TaskUnreachable, api.ReasonAgentDisconnected)
	fw.expectStatus("t1", api.TaskGone, api.ReasonAgentRemoved)

	ag.reregister([]api.AgentTask{rt}, nil)
	ag.nextKill("t1")
	// Until it ends it holds its resources; then they are free again.
	wantResources(t, "allocated while it is being killed", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 256})
	ag.update(fw.id, "t1", api.TaskKilled)
	fw.expectStatus("t1", api.TaskKilled, "")
	waitFor(t, "the killed task's resources to be free", func() bool { return ag.usage().Allocated.IsZero() })
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
	h.waitCycles(10)
	if !registered(h, fw.id) {
		t.Fatal("the framework was removed at once")
	}
}
