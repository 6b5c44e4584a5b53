package master

import (
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// Revocable resources through the master: agents' usage slack (reported
// with UPDATE_OVERSUBSCRIBED) and reservations lent while their role leaves
// them idle, offered only to frameworks with REVOCABLE_RESOURCES, taken back
// when their owner needs them.

// oversubscribe reports the agent's usage slack, as its estimator does.
func (a *simAgent) oversubscribe(slack api.Resources) *api.Error {
	return a.call(api.AgentCall{Type: api.AgentCallUpdateOversubscribed,
		UpdateOversubscribed: &api.AgentUpdateOversubscribed{Resources: slack}})
}

func (a *simAgent) mustOversubscribe(slack api.Resources) {
	a.h.t.Helper()
	if e := a.oversubscribe(slack); e != nil {
		a.h.t.Fatalf("agent %s UPDATE_OVERSUBSCRIBED %v: %v", a.info.Name, slack, e)
	}
}

func revocableInfo(name string, roles ...string) api.FrameworkInfo {
	info := fwInfo(name, roles...)
	info.Capabilities = []string{api.CapabilityRevocableResources}
	return info
}

func revocableTask(id, agentID string, res api.Resources) api.TaskInfo {
	t := taskInfo(id, agentID, res)
	t.Revocable = true
	return t
}

func isRevocableOffer(o api.Offer) bool {
	for _, r := range o.Resources {
		if r.Revocable {
			return true
		}
	}
	return false
}

// revocableOfferOn waits for a revocable offer of the agent and checks that
// it holds nothing else: revocable offers are apart from regular ones.
func (f *simFramework) revocableOfferOn(agentID string) api.Offer {
	f.h.t.Helper()
	o := f.next("a revocable offer of agent "+agentID, func(e api.Event) bool {
		return e.Type == api.EventOffers && e.Offers.Offers[0].AgentID == agentID && isRevocableOffer(e.Offers.Offers[0])
	}).Offers.Offers[0]
	for _, r := range o.Resources {
		if !r.Revocable {
			f.h.t.Fatalf("revocable offer %s holds regular resources: %+v", o.ID, o.Resources)
		}
	}
	return o
}

// runningTask has the agent report a launched task running and the
// framework acknowledge it.
func (f *simFramework) running(a *simAgent, taskID string) {
	f.h.t.Helper()
	uuid := a.update(f.id, taskID, api.TaskRunning)
	st := f.expectStatus(taskID, api.TaskRunning, "")
	if st.UUID != uuid {
		f.h.t.Fatalf("task %s: uuid %q, want %q", taskID, st.UUID, uuid)
	}
	f.acknowledge(st)
}

func wantPiece(t *testing.T, what string, r api.OfferResource, role string, throttleable bool, scalars api.Resources) {
	t.Helper()
	if r.Role != role || !r.Revocable || r.Throttleable != throttleable {
		t.Fatalf("%s: piece %+v, want revocable role %s throttleable %v", what, r, role, throttleable)
	}
	wantResources(t, what, r.Scalars, scalars)
}

// TestUsageSlackOfferedOnlyToRevocableFrameworks: an agent's estimate is
// offered as revocable, throttleable resources of role "*", only to a
// framework with REVOCABLE_RESOURCES, in an offer of its own; a task takes
// it only when it is revocable, and it is accounted as revocable, never as
// the role's regular allocation.
func TestUsageSlackOfferedOnlyToRevocableFrameworks(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024}, api.CapabilityRevocableResources)
	plain := h.subscribe(fwInfo("plain", "web"))

	// A regular task fills the agent, so that only slack is left to offer.
	offers := isEvent(api.EventOffers)
	o := plain.offerOn(ag.id)
	if isRevocableOffer(o) {
		t.Fatalf("revocable offer before any estimate: %+v", o)
	}
	plain.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("fill", ag.id, ag.info.Resources)))
	ag.nextLaunch("fill")
	rev := h.subscribe(revocableInfo("rev", "batch"))
	h.waitCycles(2)
	plain.none("an offer of a full agent", offers)
	rev.none("an offer of a full agent without an estimate", offers)

	ag.mustOversubscribe(api.Resources{"cpus": 2, "mem": 256})
	wantResources(t, "agent revocable", ag.usage().Revocable, api.Resources{"cpus": 2, "mem": 256})

	so := rev.revocableOfferOn(ag.id)
	if len(so.Resources) != 1 {
		t.Fatalf("slack offer: %+v", so.Resources)
	}
	wantPiece(t, "slack offer", so.Resources[0], api.DefaultRole, true, api.Resources{"cpus": 2, "mem": 256})
	h.waitCycles(2)
	plain.none("a revocable offer to a framework without REVOCABLE_RESOURCES", offers)
	wantResources(t, "agent revocable_allocated (offered)", ag.usage().RevocableAllocated, api.Resources{"cpus": 2, "mem": 256})

	// A task that did not ask for revocable resources never gets them.
	rev.accept([]string{so.ID}, refuse(0), launchOp(taskInfo("regular", ag.id, api.Resources{"cpus": 1, "mem": 64})))
	if st := rev.expectStatus("regular", api.TaskError, api.ReasonTaskInvalid); !strings.Contains(st.Message, "revocable: true") {
		t.Fatalf("refusal %q does not say why", st.Message)
	}

	so = rev.revocableOfferOn(ag.id)
	rev.accept([]string{so.ID}, refuse(0), launchOp(revocableTask("best-effort", ag.id, api.Resources{"cpus": 1.5, "mem": 128})))
	lt := ag.nextLaunch("best-effort").Tasks[0]
	if len(lt.Allocation) != 1 {
		t.Fatalf("allocation: %+v", lt.Allocation)
	}
	wantPiece(t, "task allocation", lt.Allocation[0], api.DefaultRole, true, api.Resources{"cpus": 1.5, "mem": 128})
	rev.running(ag, "best-effort")

	wantResources(t, "agent revocable_allocated (in use)", ag.usage().RevocableAllocated, api.Resources{"cpus": 1.5, "mem": 128})
	batch := h.m().RoleUsage("batch")
	wantResources(t, "role batch revocable_allocated", batch.RevocableAllocated, api.Resources{"cpus": 1.5, "mem": 128})
	wantResources(t, "role batch allocated", batch.Allocated, nil)
	wantResources(t, "role batch quota consumption", h.m().Consumption("batch"), nil)
	var view api.Task
	for _, tk := range h.m().Tasks() {
		if tk.TaskID == "best-effort" {
			view = tk
		}
	}
	if !view.Revocable {
		t.Fatalf("task view: %+v, want revocable", view)
	}

	// The task ends: its slack goes back.
	ag.update(rev.id, "best-effort", api.TaskFinished)
	rev.expectStatus("best-effort", api.TaskFinished, "")
	h.waitFor("the slack to be free again", func() bool {
		return h.m().RoleUsage("batch").RevocableAllocated.IsZero()
	})
}

// TestUpdateOversubscribedValidation: a bad estimate is refused with a clear
// error and changes nothing.
func TestUpdateOversubscribedValidation(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024})
	ag.mustOversubscribe(api.Resources{"cpus": 1})

	cases := map[string]struct {
		call api.AgentCall
		want string
	}{
		"no body":         {api.AgentCall{Type: api.AgentCallUpdateOversubscribed}, "needs an update_oversubscribed body"},
		"negative":        {oversubscribedCall(api.Resources{"cpus": -1}), "negative"},
		"unknown name":    {oversubscribedCall(api.Resources{"gpus": 1}), "has no gpus"},
		"bad name":        {oversubscribedCall(api.Resources{"CPU": 1}), "CPU"},
		"above its total": {oversubscribedCall(api.Resources{"cpus": 5}), "more than agent node-1's total 4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := ag.call(tc.call)
			wantCode(t, name, e, api.CodeInvalidArgument)
			if !strings.Contains(e.Message, tc.want) {
				t.Fatalf("%s: message %q, want it to say %q", name, e.Message, tc.want)
			}
			wantResources(t, "agent revocable after a refused estimate", ag.usage().Revocable, api.Resources{"cpus": 1})
		})
	}
	// An empty estimate withdraws the slack.
	ag.mustOversubscribe(api.Resources{})
	wantResources(t, "agent revocable after an empty estimate", ag.usage().Revocable, nil)
}

func oversubscribedCall(r api.Resources) api.AgentCall {
	return api.AgentCall{Type: api.AgentCallUpdateOversubscribed, UpdateOversubscribed: &api.AgentUpdateOversubscribed{Resources: r}}
}

// TestLowerEstimateRescindsSlackOffers: an estimate below what outstanding
// slack offers hold rescinds them.
func TestLowerEstimateRescindsSlackOffers(t *testing.T) {
	h := newHarness(t)
	// All reserved for a role nobody runs, lent to nobody: only slack is
	// offered to the framework.
	ag := h.registerAgent("node-1", api.Resources{"cpus": 2, "mem": 512})
	h.write(&raftstore.RoleSet{Role: "db", Weight: 1, LendingLimit: api.Resources{}})
	h.write(&raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Name: "node-1-db", Agent: "node-1", Role: "db", Resources: api.Resources{"cpus": 2, "mem": 512}})
	rev := h.subscribe(revocableInfo("rev", "batch"))

	ag.mustOversubscribe(api.Resources{"cpus": 1, "mem": 256})
	so := rev.revocableOfferOn(ag.id)
	wantPiece(t, "slack offer", so.Resources[0], api.DefaultRole, true, api.Resources{"cpus": 1, "mem": 256})

	ag.mustOversubscribe(api.Resources{"cpus": 0.5, "mem": 256})
	rescind := rev.next("RESCIND of the slack offer", isEvent(api.EventRescind)).Rescind
	if rescind.OfferID != so.ID {
		t.Fatalf("rescinded %s, want %s", rescind.OfferID, so.ID)
	}
	so = rev.revocableOfferOn(ag.id)
	wantPiece(t, "new slack offer", so.Resources[0], api.DefaultRole, true, api.Resources{"cpus": 0.5, "mem": 256})
}

// lenderSetup is an agent wholly reserved for role db, which nobody runs:
// its reservation is idle and lendable, and a revocable framework of role
// batch is offered it.
func lenderSetup(t *testing.T) (*harness, *simAgent, *simFramework) {
	h := newHarness(t)
	ag := h.registerAgent("db-1", api.Resources{"cpus": 4, "mem": 1024}, api.CapabilityRevocableResources)
	h.write(&raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Name: "db-1-db", Agent: "db-1", Role: "db", Resources: api.Resources{"cpus": 4, "mem": 1024}})
	rev := h.subscribe(revocableInfo("rev", "batch"))
	return h, ag, rev
}

// TestLentReservationOfferedNotThrottleable: an idle reservation is lent as
// revocable resources of its role, not throttleable, only to a framework
// with REVOCABLE_RESOURCES; what tasks hold of it shows as the lender's
// lent and the borrower's revocable_allocated, never as quota consumption.
func TestLentReservationOfferedNotThrottleable(t *testing.T) {
	h, ag, rev := lenderSetup(t)
	plain := h.subscribe(fwInfo("plain", "batch"))

	lo := rev.revocableOfferOn(ag.id)
	if len(lo.Resources) != 1 {
		t.Fatalf("lent offer: %+v", lo.Resources)
	}
	wantPiece(t, "lent offer", lo.Resources[0], "db", false, api.Resources{"cpus": 4, "mem": 1024})
	wantResources(t, "agent revocable", ag.usage().Revocable, api.Resources{"cpus": 4, "mem": 1024})
	h.waitCycles(2)
	plain.none("an offer to a framework without REVOCABLE_RESOURCES", isEvent(api.EventOffers))

	rev.accept([]string{lo.ID}, refuse(0), launchOp(revocableTask("borrower", ag.id, api.Resources{"cpus": 1, "mem": 256})))
	lt := ag.nextLaunch("borrower").Tasks[0]
	if len(lt.Allocation) != 1 {
		t.Fatalf("allocation: %+v", lt.Allocation)
	}
	wantPiece(t, "task allocation", lt.Allocation[0], "db", false, api.Resources{"cpus": 1, "mem": 256})
	rev.running(ag, "borrower")

	wantResources(t, "role db lent", h.m().RoleUsage("db").Lent, api.Resources{"cpus": 1, "mem": 256})
	wantResources(t, "role batch revocable_allocated", h.m().RoleUsage("batch").RevocableAllocated, api.Resources{"cpus": 1, "mem": 256})
	wantResources(t, "role batch allocated", h.m().RoleUsage("batch").Allocated, nil)
	wantResources(t, "role batch quota consumption", h.m().Consumption("batch"), nil)
	wantResources(t, "agent allocated", ag.usage().Allocated, nil)
	if got := ag.usage().RevocableAllocated; !got.Contains(api.Resources{"cpus": 1, "mem": 256}) {
		t.Fatalf("agent revocable_allocated %v, want at least the task's", got)
	}

	ag.update(rev.id, "borrower", api.TaskKilled)
	rev.expectStatus("borrower", api.TaskKilled, "")
	h.waitFor("the loan to be handed back", func() bool { return h.m().RoleUsage("db").Lent["cpus"] < 1 })
}

// TestLenderGetsReservationRescindsRevocableOffers: once the lender's role
// has a framework, the cycle offers it its reservation, and the revocable
// offers of that reservation are rescinded.
func TestLenderGetsReservationRescindsRevocableOffers(t *testing.T) {
	h, ag, rev := lenderSetup(t)
	lo := rev.revocableOfferOn(ag.id)

	lender := h.subscribe(fwInfo("pg", "db"))
	o := lender.offerOn(ag.id)
	wantResources(t, "the lender's offer", offerTotal(o), api.Resources{"cpus": 4, "mem": 1024})
	rescind := rev.next("RESCIND of the lent offer", isEvent(api.EventRescind)).Rescind
	if rescind.OfferID != lo.ID {
		t.Fatalf("rescinded %s, want %s", rescind.OfferID, lo.ID)
	}
	for _, view := range h.m().Offers() {
		if view.ID == lo.ID {
			t.Fatalf("the lent offer is still outstanding: %+v", view)
		}
	}
	wantResources(t, "role db lent after the rescind", h.m().RoleUsage("db").Lent, nil)
}

// TestLoweredLendingLimitEvictsYoungest: lowering a role's lending limit
// below what it lends rescinds the lent offers and kills the youngest
// revocable tasks on its reservations until it fits; the framework learns
// why. The dry run's figure names the same tasks beforehand.
func TestLoweredLendingLimitEvictsYoungest(t *testing.T) {
	h, ag, rev := lenderSetup(t)
	launch := func(id string) {
		t.Helper()
		lo := rev.revocableOfferOn(ag.id)
		rev.accept([]string{lo.ID}, refuse(0), launchOp(revocableTask(id, ag.id, api.Resources{"cpus": 1, "mem": 128})))
		ag.nextLaunch(id)
		rev.running(ag, id)
	}
	launch("old")
	h.clock.Advance(time.Minute)
	launch("middle")
	h.clock.Advance(time.Minute)
	launch("young")
	// What the three tasks leave of the reservation is offered again (the
	// accepts refused nothing); lent counts that offer too.
	rev.revocableOfferOn(ag.id)
	wantResources(t, "role db lent", h.m().RoleUsage("db").Lent, api.Resources{"cpus": 4, "mem": 1024})

	// Room for one task of cpus; mem is capped too.
	limit := api.Resources{"cpus": 1.5, "mem": 1024}
	_, evictions := h.m().LendingEffects("db", limit)
	var ids []string
	for _, e := range evictions {
		ids = append(ids, e.TaskID)
		if e.FrameworkID != rev.id || e.AgentID != ag.id || e.Role != "batch" {
			t.Fatalf("eviction %+v", e)
		}
		wantResources(t, "eviction resources", e.Resources, api.Resources{"cpus": 1, "mem": 128})
	}
	if strings.Join(ids, ",") != "young,middle" {
		t.Fatalf("dry run evicts %v, want young then middle", ids)
	}

	h.write(&raftstore.RoleSet{Role: "db", Weight: 1, LendingLimit: limit})
	for _, id := range []string{"young", "middle"} {
		ag.nextKill(id)
		ag.update(rev.id, id, api.TaskKilled)
		st := rev.expectStatus(id, api.TaskKilled, api.ReasonContainerPreempted)
		if !strings.Contains(st.Message, "role db") || !strings.Contains(st.Message, "cpus:1.5") {
			t.Fatalf("task %s: message %q, want the role and its new limit", id, st.Message)
		}
	}
	h.waitCycles(2)
	ag.none("a kill of the oldest task", func(e api.AgentEvent) bool {
		return e.Type == api.AgentEventKill && e.Kill.TaskID == "old"
	})
	// What it lends now, offered or in use, fits the limit.
	if lent := h.m().RoleUsage("db").Lent; !limit.Contains(lent) {
		t.Fatalf("role db lends %v, past its limit %v", lent, limit)
	}
	if _, ev := h.m().LendingEffects("db", limit); len(ev) != 0 {
		t.Fatalf("within the limit, a dry run still evicts %+v", ev)
	}

	// Lending nothing takes the last one back too.
	h.write(&raftstore.RoleSet{Role: "db", Weight: 1, LendingLimit: api.Resources{}})
	ag.nextKill("old")
}

// TestLendingLimitHoldsForAdoptedTasks: a limit lowered while the leader
// does not know the borrowers' tasks (a new term, before their agent
// registers again) is enforced on them once the agent reports them: the
// role never lends past its limit because a leader changed.
func TestLendingLimitHoldsForAdoptedTasks(t *testing.T) {
	h, ag, rev := lenderSetup(t)
	var tasks []api.AgentTask
	for _, id := range []string{"a", "b"} {
		lo := rev.revocableOfferOn(ag.id)
		rev.accept([]string{lo.ID}, refuse(0), launchOp(revocableTask(id, ag.id, api.Resources{"cpus": 1, "mem": 128})))
		lt := ag.nextLaunch(id).Tasks[0]
		rev.running(ag, id)
		lt.State = api.TaskRunning
		tasks = append(tasks, lt)
	}

	h.startTerm()
	rev = rev.resubscribe()
	limit := api.Resources{"cpus": 1, "mem": 1024}
	h.write(&raftstore.RoleSet{Role: "db", Weight: 1, LendingLimit: limit})
	ag.reregister(tasks, nil)
	for _, tk := range tasks { // where each task stands, as the agent reported it
		rev.expectStatus(tk.Task.TaskID, api.TaskRunning, "")
	}

	killed := ag.next("KILL of a borrower past the limit", isAgentEvent(api.AgentEventKill)).Kill
	ag.update(rev.id, killed.TaskID, api.TaskKilled)
	if st := rev.expectStatus(killed.TaskID, api.TaskKilled, api.ReasonContainerPreempted); !strings.Contains(st.Message, "role db") {
		t.Fatalf("task %s: message %q, want the lender named", killed.TaskID, st.Message)
	}
	h.waitCycles(2)
	ag.none("a second kill", isAgentEvent(api.AgentEventKill))
	if lent := h.m().RoleUsage("db").Lent; !limit.Contains(lent) {
		t.Fatalf("role db lends %v, past its limit %v", lent, limit)
	}
}

// TestNewLeaderStartsWithoutSlack: a new term knows no estimate until the
// agent sends one after registering with it; the revocable tasks the agent
// reports are adopted as revocable, not killed.
func TestNewLeaderStartsWithoutSlack(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024}, api.CapabilityRevocableResources)
	plain := h.subscribe(fwInfo("plain", "web"))
	filled := plain.launchRunning(ag, "fill", ag.info.Resources)
	rev := h.subscribe(revocableInfo("rev", "batch"))
	ag.mustOversubscribe(api.Resources{"cpus": 2, "mem": 256})
	wantResources(t, "revocable before the failover", ag.usage().Revocable, api.Resources{"cpus": 2, "mem": 256})
	so := rev.revocableOfferOn(ag.id)
	rev.accept([]string{so.ID}, refuse(0), launchOp(revocableTask("best-effort", ag.id, api.Resources{"cpus": 1, "mem": 128})))
	slackTask := ag.nextLaunch("best-effort").Tasks[0]
	rev.running(ag, "best-effort")
	slackTask.State = api.TaskRunning

	h.startTerm()
	plain = plain.resubscribe()
	rev = rev.resubscribe()
	ag.reregister([]api.AgentTask{filled, slackTask}, nil)
	wantResources(t, "revocable after re-registering", ag.usage().Revocable, nil)
	wantResources(t, "the adopted task's slack", ag.usage().RevocableAllocated, api.Resources{"cpus": 1, "mem": 128})
	wantResources(t, "role batch revocable_allocated", h.m().RoleUsage("batch").RevocableAllocated, api.Resources{"cpus": 1, "mem": 128})
	wantResources(t, "role batch allocated", h.m().RoleUsage("batch").Allocated, nil)

	ag.mustOversubscribe(api.Resources{"cpus": 1.5, "mem": 256})
	wantResources(t, "revocable after the new estimate", ag.usage().Revocable, api.Resources{"cpus": 1.5, "mem": 256})
	// What the adopted task does not hold is offered again.
	so = rev.revocableOfferOn(ag.id)
	wantPiece(t, "slack offer after the failover", so.Resources[0], api.DefaultRole, true, api.Resources{"cpus": 0.5, "mem": 128})
	h.waitCycles(2)
	ag.none("a kill of an adopted task", isAgentEvent(api.AgentEventKill))
}

// TestRevocableTaskTakesRevocableFirst: in one ACCEPT of a regular and a
// revocable offer, a revocable task takes the revocable resources before the
// regular ones, and a task that is not revocable only regular ones; a task
// group's executor runs on revocable resources only when all its tasks may.
func TestRevocableTaskTakesRevocableFirst(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024}, api.CapabilityRevocableResources)
	ag.mustOversubscribe(api.Resources{"cpus": 2, "mem": 256})
	rev := h.subscribe(revocableInfo("rev", "batch"))
	regular := rev.next("a regular offer", func(e api.Event) bool {
		return e.Type == api.EventOffers && !isRevocableOffer(e.Offers.Offers[0])
	}).Offers.Offers[0]
	slack := rev.revocableOfferOn(ag.id)

	rev.accept([]string{regular.ID, slack.ID}, refuse(0), launchOp(
		revocableTask("small", ag.id, api.Resources{"cpus": 1, "mem": 64}),
		revocableTask("large", ag.id, api.Resources{"cpus": 2, "mem": 64}),
		taskInfo("plain", ag.id, api.Resources{"cpus": 1, "mem": 64}),
	))
	pieces := map[string][]api.OfferResource{}
	for _, id := range []string{"small", "large", "plain"} {
		pieces[id] = ag.nextLaunch(id).Tasks[0].Allocation
	}
	if p := pieces["small"]; len(p) != 1 || !p[0].Throttleable {
		t.Fatalf("small: %+v, want only slack", p)
	}
	wantResources(t, "small", pieces["small"][0].Scalars, api.Resources{"cpus": 1, "mem": 64})
	got := map[bool]api.Resources{}
	for _, p := range pieces["large"] {
		got[p.Revocable] = got[p.Revocable].Add(p.Scalars)
	}
	wantResources(t, "large, revocable", got[true], api.Resources{"cpus": 1, "mem": 64})
	wantResources(t, "large, regular", got[false], api.Resources{"cpus": 1})
	if p := pieces["plain"]; len(p) != 1 || p[0].Revocable {
		t.Fatalf("plain: %+v, want only regular resources", p)
	}

	// A group with a task that is not revocable: its executor may not
	// take the slack, though its revocable task does.
	regular = rev.next("a regular offer", func(e api.Event) bool {
		return e.Type == api.EventOffers && !isRevocableOffer(e.Offers.Offers[0])
	}).Offers.Offers[0]
	slack = rev.revocableOfferOn(ag.id)
	wantResources(t, "regular left", offerTotal(regular), api.Resources{"cpus": 2, "mem": 960})
	wantResources(t, "slack left", offerTotal(slack), api.Resources{"mem": 128})
	rev.accept([]string{regular.ID, slack.ID}, refuse(0), groupOp("exec-mixed", api.Resources{"mem": 128},
		revocableTask("g1", ag.id, api.Resources{"cpus": 0.5, "mem": 64}),
		taskInfo("g2", ag.id, api.Resources{"cpus": 0.5, "mem": 64})))
	group := ag.nextLaunch("g1")
	if isRevocablePieces(group.Executor.Allocation) {
		t.Fatalf("executor of a mixed group on revocable resources: %+v", group.Executor.Allocation)
	}
	for _, tk := range group.Tasks {
		if tk.Task.Revocable != isRevocablePieces(tk.Allocation) {
			t.Fatalf("task %s (revocable %v) got %+v", tk.Task.TaskID, tk.Task.Revocable, tk.Allocation)
		}
	}
}

func isRevocablePieces(rs []api.OfferResource) bool {
	for _, r := range rs {
		if r.Revocable {
			return true
		}
	}
	return false
}
