package master

import (
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestLaunchUpdateAcknowledge follows one task from an offer to its end: the
// agent is told to launch it with the resources it was given, its updates
// reach the framework with their uuid, acknowledgements reach the agent, and
// its end frees the resources for a new offer.
func TestLaunchUpdateAcknowledge(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 4096})
	fw := h.subscribe(fwInfo("web", "*"))

	o := fw.offerOn(ag.id)
	if o.FrameworkID != fw.id || o.Hostname != ag.info.Hostname {
		t.Fatalf("offer: %+v", o)
	}
	wantResources(t, "first offer", offerTotal(o), api.Resources{"cpus": 4, "mem": 4096})
	if len(h.m().Offers()) != 1 || h.m().OffersOutstanding() != 1 {
		t.Fatalf("offer book: %+v", h.m().Offers())
	}

	// The unused part is filtered by the default refusal: no filter given.
	fw.accept([]string{o.ID}, nil, launchOp(taskInfo("t1", ag.id, api.Resources{"cpus": 1, "mem": 128})))
	launch := ag.nextLaunch("t1")
	if launch.FrameworkID != fw.id || launch.Executor != nil || len(launch.Tasks) != 1 {
		t.Fatalf("launch: %+v", launch)
	}
	lt := launch.Tasks[0]
	if lt.FrameworkID != fw.id || lt.Role != "*" || lt.Task.Command == nil || lt.Task.Command.Value != "sleep 60" {
		t.Fatalf("launched task: %+v", lt)
	}
	if len(lt.Allocation) != 1 || lt.Allocation[0].Role != "*" || lt.Allocation[0].Revocable {
		t.Fatalf("allocation: %+v", lt.Allocation)
	}
	wantResources(t, "allocation", lt.Allocation[0].Scalars, api.Resources{"cpus": 1, "mem": 128})
	wantResources(t, "agent allocated", ag.usage().Allocated, api.Resources{"cpus": 1, "mem": 128})
	if h.m().OffersOutstanding() != 0 {
		t.Fatalf("the accepted offer is still outstanding: %+v", h.m().Offers())
	}
	if tasks := h.m().Tasks(); len(tasks) != 1 || tasks[0].State != api.TaskStaging || tasks[0].AgentID != ag.id {
		t.Fatalf("tasks: %+v", tasks)
	}

	uuid := ag.update(fw.id, "t1", api.TaskRunning)
	st := fw.expectStatus("t1", api.TaskRunning, "")
	if st.UUID != uuid || st.AgentID != ag.id || st.Timestamp.IsZero() {
		t.Fatalf("update: %+v, want uuid %s", st, uuid)
	}
	fw.acknowledge(st)
	ack := ag.next("ACKNOWLEDGE", isAgentEvent(api.AgentEventAcknowledge)).Acknowledge
	if ack.UUID != uuid || ack.TaskID != "t1" || ack.FrameworkID != fw.id {
		t.Fatalf("acknowledge: %+v", ack)
	}
	if tasks := h.m().Tasks(); len(tasks) != 1 || tasks[0].State != api.TaskRunning {
		t.Fatalf("tasks: %+v", tasks)
	}
	if fws := h.m().Frameworks(); len(fws) != 1 || !sameResources(fws[0].Allocated, api.Resources{"cpus": 1, "mem": 128}) {
		t.Fatalf("frameworks: %+v", fws)
	}

	// The end of the task frees its resources: the whole agent is offered
	// again, although the rest of it was refused (the filter only holds
	// while no more is free than was refused).
	ag.update(fw.id, "t1", api.TaskFinished)
	fw.expectStatus("t1", api.TaskFinished, "")
	if !ag.usage().Allocated.IsZero() {
		t.Fatalf("allocated after the task ended: %v", ag.usage().Allocated)
	}
	o2 := fw.offerOn(ag.id)
	if o2.ID == o.ID {
		t.Fatalf("offer id %s used twice", o.ID)
	}
	wantResources(t, "offer after the task ended", offerTotal(o2), api.Resources{"cpus": 4, "mem": 4096})
	if tasks := h.m().Tasks(); len(tasks) != 1 || tasks[0].State != api.TaskFinished {
		t.Fatalf("tasks: %+v", tasks)
	}

	// A repeated update of the ended task (its acknowledgement was lost)
	// still reaches the framework.
	ag.updateWith(fw.id, api.TaskStatus{TaskID: "t1", State: api.TaskFinished, UUID: "again"})
	if st := fw.status("t1"); st.UUID != "again" || st.State != api.TaskFinished {
		t.Fatalf("repeated update: %+v", st)
	}
}

// TestTaskValidation: each task that breaks a rule of API.md gets
// TASK_ERROR / REASON_TASK_INVALID, nothing is launched and nothing stays
// allocated.
func TestTaskValidation(t *testing.T) {
	h := newHarness(t)
	lim := h.registerAgent("lim", api.Resources{"cpus": 4, "mem": 4096}, api.CapabilityTaskResourceLimits)
	plain := h.registerAgent("plain", api.Resources{"cpus": 4, "mem": 4096})
	fw := h.subscribe(fwInfo("web", "*"))

	res := api.Resources{"cpus": 1, "mem": 128}
	cases := []struct {
		name  string
		agent *simAgent
		ops   func(agentID string) []api.Operation
		bad   []string // tasks that must get TASK_ERROR
	}{
		{"limit on disk", lim, func(id string) []api.Operation {
			return []api.Operation{launchOp(withLimits(taskInfo("disk", id, res), api.Limits{"disk": {Value: 10}}))}
		}, []string{"disk"}},
		{"limit below request", lim, func(id string) []api.Operation {
			return []api.Operation{launchOp(withLimits(taskInfo("below", id, res), api.Limits{"cpus": {Value: 0.5}}))}
		}, []string{"below"}},
		{"limits without TASK_RESOURCE_LIMITS", plain, func(id string) []api.Operation {
			return []api.Operation{launchOp(withLimits(taskInfo("nocap", id, res), api.Limits{"mem": {Infinite: true}}))}
		}, []string{"nocap"}},
		{"share_cgroups false outside a group", lim, func(id string) []api.Operation {
			return []api.Operation{launchOp(withShareCgroups(taskInfo("share", id, res), false))}
		}, []string{"share"}},
		{"group task with limits sharing cgroups", lim, func(id string) []api.Operation {
			return []api.Operation{groupOp("e1", api.Resources{"cpus": 0.1},
				taskInfo("g-ok", id, res),
				withShareCgroups(withLimits(taskInfo("g-shared", id, res), api.Limits{"cpus": {Value: 2}}), true))}
		}, []string{"g-ok", "g-shared"}},
		{"group task with limits, share_cgroups unset", lim, func(id string) []api.Operation {
			return []api.Operation{groupOp("e2", api.Resources{"cpus": 0.1},
				withLimits(taskInfo("g-unset", id, res), api.Limits{"cpus": {Value: 2}}))}
		}, []string{"g-unset"}},
		{"duplicate task ids in a group", lim, func(id string) []api.Operation {
			return []api.Operation{groupOp("e3", api.Resources{"cpus": 0.1}, taskInfo("twin", id, res), taskInfo("twin", id, res))}
		}, []string{"twin", "twin"}},
		{"more than offered", lim, func(id string) []api.Operation {
			return []api.Operation{launchOp(taskInfo("huge", id, api.Resources{"cpus": 5}))}
		}, []string{"huge"}},
		{"a group more than offered", lim, func(id string) []api.Operation {
			return []api.Operation{groupOp("e4", api.Resources{"cpus": 1}, taskInfo("g-big1", id, api.Resources{"cpus": 2}),
				taskInfo("g-big2", id, api.Resources{"cpus": 2}))}
		}, []string{"g-big1", "g-big2"}},
		{"another agent's id", lim, func(string) []api.Operation {
			return []api.Operation{launchOp(taskInfo("elsewhere", plain.id, res))}
		}, []string{"elsewhere"}},
		{"no command", lim, func(id string) []api.Operation {
			ti := taskInfo("nocmd", id, res)
			ti.Command = nil
			return []api.Operation{launchOp(ti)}
		}, []string{"nocmd"}},
		{"no resources", lim, func(id string) []api.Operation {
			return []api.Operation{launchOp(taskInfo("empty", id, api.Resources{}))}
		}, []string{"empty"}},
	}
	for _, c := range cases {
		o := fw.offerOn(c.agent.id)
		fw.accept([]string{o.ID}, refuse(0), c.ops(c.agent.id)...)
		for _, id := range c.bad {
			fw.expectStatus(id, api.TaskError, api.ReasonTaskInvalid)
		}
		// ACCEPT is served at once: a LAUNCH would be queued by now.
		c.agent.none(c.name+": LAUNCH", isAgentEvent(api.AgentEventLaunch))
		if u := c.agent.usage().Allocated; !u.IsZero() {
			t.Fatalf("%s: agent allocated %v", c.name, u)
		}
		if tasks := h.m().Tasks(); len(tasks) != 0 {
			t.Fatalf("%s: tasks %+v", c.name, tasks)
		}
	}

	// Task ids are unique within the framework: within one ACCEPT and
	// against a task that still runs.
	o := fw.offerOn(lim.id)
	fw.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("dup", lim.id, res), taskInfo("dup", lim.id, res)))
	fw.expectStatus("dup", api.TaskError, api.ReasonTaskInvalid)
	if l := lim.nextLaunch("dup"); len(l.Tasks) != 1 {
		t.Fatalf("launch: %+v", l)
	}
	wantResources(t, "allocated after one dup launched", lim.usage().Allocated, res)
	o = fw.offerOn(lim.id)
	fw.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("dup", lim.id, res)))
	fw.expectStatus("dup", api.TaskError, api.ReasonTaskInvalid)
	lim.none("second LAUNCH of dup", isAgentEvent(api.AgentEventLaunch))
	wantResources(t, "allocated after the second dup", lim.usage().Allocated, res)

	// What the rules allow: limits on an agent that supports them, and a
	// group task with limits in its own cgroup.
	o = fw.offerOn(lim.id)
	fw.accept([]string{o.ID}, refuse(0),
		launchOp(withLimits(taskInfo("limited", lim.id, res), api.Limits{"cpus": {Value: 2}, "mem": {Infinite: true}})),
		groupOp("e5", api.Resources{"cpus": 0.5, "mem": 32},
			withShareCgroups(withLimits(taskInfo("g-own", lim.id, res), api.Limits{"mem": {Value: 256}}), false)))
	if l := lim.nextLaunch("limited"); l.Tasks[0].Task.Limits["mem"] != (api.Limit{Infinite: true}) {
		t.Fatalf("limits not passed on: %+v", l.Tasks[0].Task)
	}
	lim.nextLaunch("g-own")
	wantResources(t, "allocated", lim.usage().Allocated, api.Resources{"cpus": 3.5, "mem": 416})
}

// TestLaunchGroupHoldsExecutor: a task group's executor holds its resources
// beside its tasks' until the last task ends.
func TestLaunchGroupHoldsExecutor(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 4096}, api.CapabilityTaskResourceLimits)
	fw := h.subscribe(fwInfo("batch", "*"))
	o := fw.offerOn(ag.id)
	exec := api.Resources{"cpus": 0.5, "mem": 64}
	res := api.Resources{"cpus": 1, "mem": 128}
	fw.accept([]string{o.ID}, refuse(0), groupOp("exec-1", exec,
		withShareCgroups(withLimits(taskInfo("g1", ag.id, res), api.Limits{"cpus": {Value: 2}}), false),
		taskInfo("g2", ag.id, res)))

	launch := ag.nextLaunch("g1")
	if launch.Executor == nil || launch.Executor.ExecutorID != "exec-1" || launch.Executor.FrameworkID != fw.id || len(launch.Tasks) != 2 {
		t.Fatalf("launch: %+v", launch)
	}
	if len(launch.Executor.Allocation) != 1 {
		t.Fatalf("executor allocation: %+v", launch.Executor.Allocation)
	}
	wantResources(t, "executor allocation", launch.Executor.Allocation[0].Scalars, exec)
	for _, lt := range launch.Tasks {
		if lt.ExecutorID != "exec-1" {
			t.Fatalf("task %s runs under %q", lt.Task.TaskID, lt.ExecutorID)
		}
	}
	wantResources(t, "allocated", ag.usage().Allocated, api.Resources{"cpus": 2.5, "mem": 320})

	ag.update(fw.id, "g1", api.TaskFinished)
	fw.expectStatus("g1", api.TaskFinished, "")
	wantResources(t, "allocated after one task ended", ag.usage().Allocated, api.Resources{"cpus": 1.5, "mem": 192})

	// The executor id is taken while the executor runs.
	o = fw.offerOn(ag.id)
	fw.accept([]string{o.ID}, refuse(0), groupOp("exec-1", exec, taskInfo("g3", ag.id, res)))
	fw.expectStatus("g3", api.TaskError, api.ReasonTaskInvalid)

	ag.update(fw.id, "g2", api.TaskFailed)
	fw.expectStatus("g2", api.TaskFailed, "")
	if u := ag.usage().Allocated; !u.IsZero() {
		t.Fatalf("allocated after the last task ended: %v (the executor's resources were kept)", u)
	}
}

// TestInvalidOffers: tasks on offers that are not outstanding are dropped,
// and the offers that were valid go back to the allocator.
func TestInvalidOffers(t *testing.T) {
	h := newHarness(t)
	a1 := h.registerAgent("node-1", api.Resources{"cpus": 2, "mem": 1024})
	a2 := h.registerAgent("node-2", api.Resources{"cpus": 2, "mem": 1024})
	fw := h.subscribe(fwInfo("web", "*"))
	res := api.Resources{"cpus": 1}

	dropped := func(taskID string) {
		t.Helper()
		fw.expectStatus(taskID, api.TaskDropped, api.ReasonInvalidOffers)
		a1.none("LAUNCH", isAgentEvent(api.AgentEventLaunch))
		a2.none("LAUNCH", isAgentEvent(api.AgentEventLaunch))
	}

	fw.accept([]string{"offer-unknown"}, nil, launchOp(taskInfo("unknown", a1.id, res)))
	dropped("unknown")

	o1 := fw.offerOn(a1.id)
	o2 := fw.offerOn(a2.id)
	// Two agents in one ACCEPT: nothing launches, both offers go back.
	fw.accept([]string{o1.ID, o2.ID}, refuse(0), launchOp(taskInfo("two-agents", a1.id, res)))
	dropped("two-agents")
	if h.m().OffersOutstanding() != 0 {
		t.Fatalf("offers of a refused ACCEPT still outstanding: %+v", h.m().Offers())
	}
	o1 = fw.offerOn(a1.id)
	o2 = fw.offerOn(a2.id)

	// The same offer twice.
	fw.accept([]string{o1.ID, o1.ID}, refuse(0), launchOp(taskInfo("twice", a1.id, res)))
	dropped("twice")
	o1 = fw.offerOn(a1.id)

	// A used offer.
	fw.accept([]string{o1.ID}, refuse(0), launchOp(taskInfo("ok", a1.id, res)))
	a1.nextLaunch("ok")
	fw.accept([]string{o1.ID}, refuse(0), launchOp(taskInfo("used", a1.id, res)))
	dropped("used")

	// A declined offer.
	fw.decline(o2.ID, refuse(0))
	fw.accept([]string{o2.ID}, refuse(0), launchOp(taskInfo("declined", a2.id, res)))
	dropped("declined")

	// Another framework's offer is not taken from it.
	other := h.subscribe(fwInfo("other", "*"))
	fw.mustCall(api.Call{Type: api.CallSuppress})
	for _, o := range h.m().Offers() {
		if o.FrameworkID == fw.id {
			fw.decline(o.ID, refuse(0))
		}
	}
	var theirs api.Offer
	h.waitFor("an offer to the other framework", func() bool {
		got := other.queued(isEvent(api.EventOffers))
		if len(got) > 0 {
			theirs = got[0].Offers.Offers[0]
		}
		return len(got) > 0
	})
	fw.accept([]string{theirs.ID}, refuse(0), launchOp(taskInfo("theirs", theirs.AgentID, res)))
	dropped("theirs")
	found := false
	for _, o := range h.m().Offers() {
		found = found || o.ID == theirs.ID
	}
	if !found {
		t.Fatalf("the other framework lost offer %s to a foreign ACCEPT", theirs.ID)
	}
	wantResources(t, "node-1 allocated", a1.usage().Allocated, res)
	if !a2.usage().Allocated.IsZero() {
		t.Fatalf("node-2 allocated %v", a2.usage().Allocated)
	}
}
