package master

import (
	"slices"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// TestReservationUsedFirst: a task of a role takes from the role's
// reservation before unreserved resources.
func TestReservationUsedFirst(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("db-1", api.Resources{"cpus": 4, "mem": 4096})
	h.write(&raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Name: "db-1-db", Agent: "db-1", Role: "db", Resources: api.Resources{"cpus": 2, "mem": 1024}})
	fw := h.subscribe(fwInfo("pg", "db"))

	o := fw.offerOn(ag.id)
	pieces := map[string]api.Resources{}
	for _, r := range o.Resources {
		pieces[r.Role] = r.Scalars
	}
	wantResources(t, "reserved piece", pieces["db"], api.Resources{"cpus": 2, "mem": 1024})
	wantResources(t, "unreserved piece", pieces["*"], api.Resources{"cpus": 2, "mem": 3072})

	fw.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("pg-1", ag.id, api.Resources{"cpus": 3, "mem": 512})))
	lt := ag.nextLaunch("pg-1").Tasks[0]
	if lt.Role != "db" {
		t.Fatalf("task role %q, want db", lt.Role)
	}
	got := map[string]api.Resources{}
	for _, p := range lt.Allocation {
		if p.Revocable {
			t.Fatalf("revocable piece in %+v", lt.Allocation)
		}
		got[p.Role] = api.Resources(got[p.Role]).Add(p.Scalars)
	}
	// All the reserved cpus and the reserved mem the task needs; only the
	// rest from the unreserved pool.
	wantResources(t, "from the reservation", got["db"], api.Resources{"cpus": 2, "mem": 512})
	wantResources(t, "unreserved", got["*"], api.Resources{"cpus": 1})
	if len(got) != 2 {
		t.Fatalf("allocation: %+v", lt.Allocation)
	}
	wantResources(t, "agent allocated", ag.usage().Allocated, api.Resources{"cpus": 3, "mem": 512})
	ru := h.m().RoleUsage("db")
	wantResources(t, "role db allocated", ru.Allocated, api.Resources{"cpus": 3, "mem": 512})
	if !slices.Equal(ru.Frameworks, []string{fw.id}) {
		t.Fatalf("role db frameworks: %v", ru.Frameworks)
	}
}

// TestDeclineReviveSuppress: a DECLINE filter keeps the agent from the
// framework that declined (and only from it) until it expires or the
// framework revives; SUPPRESS stops offers until REVIVE.
func TestDeclineReviveSuppress(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 2, "mem": 1024})
	a := h.subscribe(fwInfo("a", "*"))
	offers := isEvent(api.EventOffers)

	o := a.offerOn(ag.id)
	a.decline(o.ID, refuse(3600))
	h.waitCycles(3)
	a.none("an offer to a framework that declined for an hour", offers)

	// Another framework still gets the agent.
	b := h.subscribe(fwInfo("b", "*"))
	ob := b.offerOn(ag.id)
	wantResources(t, "offer to b", offerTotal(ob), ag.info.Resources)
	b.decline(ob.ID, refuse(3600))
	h.waitCycles(3)
	a.none("an offer to a (filtered)", offers)
	b.none("an offer to b (filtered)", offers)

	// A zero refusal sets no filter: the agent comes back at once.
	a.mustCall(api.Call{Type: api.CallRevive})
	o = a.offerOn(ag.id)
	a.decline(o.ID, refuse(0))
	o = a.offerOn(ag.id)

	// Suppressed: nothing, even with no filter, until REVIVE.
	a.mustCall(api.Call{Type: api.CallSuppress, Suppress: &api.Suppress{Roles: []string{"*"}}})
	if fws := h.m().Frameworks(); !slices.Equal(fws[slices.IndexFunc(fws, func(f api.Framework) bool { return f.ID == a.id })].Suppressed, []string{"*"}) {
		t.Fatalf("frameworks: %+v", fws)
	}
	a.decline(o.ID, refuse(0))
	h.waitCycles(3)
	a.none("an offer to a suppressed framework", offers)
	b.none("an offer to b (filtered)", offers)
	a.mustCall(api.Call{Type: api.CallRevive, Revive: &api.Revive{Roles: []string{"*"}}})
	a.offerOn(ag.id)
	b.none("an offer to b (filtered)", offers)
}

// TestDeclineFilterExpires: a filter holds for its refuse_seconds and then
// ends by itself.
func TestDeclineFilterExpires(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 2, "mem": 1024})
	fw := h.subscribe(fwInfo("a", "*"))
	o := fw.offerOn(ag.id)
	fw.decline(o.ID, refuse(60))
	h.pass(50 * time.Second)
	fw.none("an offer while the filter holds", isEvent(api.EventOffers))
	h.clock.Advance(15 * time.Second)
	if o2 := fw.offerOn(ag.id); o2.ID == o.ID {
		t.Fatalf("offer %s made twice", o.ID)
	}
}

// TestOfferTimeout: an offer left alone is rescinded after the offer
// timeout and its resources are offered again.
func TestOfferTimeout(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.OfferTimeout = 30 * time.Second })
	ag := h.registerAgent("node-1", api.Resources{"cpus": 2, "mem": 1024})
	fw := h.subscribe(fwInfo("a", "*"))
	o := fw.offerOn(ag.id)
	h.pass(20 * time.Second)
	fw.none("a RESCIND before the offer timeout", isEvent(api.EventRescind))
	h.clock.Advance(15 * time.Second)
	r := fw.next("RESCIND", isEvent(api.EventRescind)).Rescind
	if r.OfferID != o.ID {
		t.Fatalf("rescinded %s, want %s", r.OfferID, o.ID)
	}
	o2 := fw.offerOn(ag.id)
	if o2.ID == o.ID {
		t.Fatalf("offer %s made twice", o.ID)
	}
	wantResources(t, "offer after the timeout", offerTotal(o2), ag.info.Resources)
	// The rescinded offer cannot be used.
	fw.accept([]string{o.ID}, refuse(0), launchOp(taskInfo("late", ag.id, api.Resources{"cpus": 1})))
	fw.expectStatus("late", api.TaskDropped, api.ReasonInvalidOffers)
}

// TestAgentChangesRescindOffers: a new reservation on an agent, or new
// resources it registers with, withdraw its outstanding offers and offer it
// again as it now is.
func TestAgentChangesRescindOffers(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 4096})
	fw := h.subscribe(fwInfo("pg", "db", "*"))
	o := fw.offerOn(ag.id)

	h.write(&raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Name: "node-1-db", Agent: "node-1", Role: "db", Resources: api.Resources{"cpus": 1, "mem": 512}})
	if r := fw.next("RESCIND", isEvent(api.EventRescind)).Rescind; r.OfferID != o.ID {
		t.Fatalf("rescinded %s, want %s", r.OfferID, o.ID)
	}
	var reserved api.Resources
	h.waitFor("an offer of the reservation", func() bool {
		for _, e := range fw.queued(isEvent(api.EventOffers)) {
			for _, p := range e.Offers.Offers[0].Resources {
				if p.Role == "db" {
					reserved = p.Scalars
				}
			}
		}
		return reserved != nil
	})
	wantResources(t, "reserved piece", reserved, api.Resources{"cpus": 1, "mem": 512})

	// Re-registering with more resources.
	before := h.m().Offers()
	ag.info.Resources = api.Resources{"cpus": 8, "mem": 4096}
	ag.reregister(nil, nil)
	for range before {
		fw.next("RESCIND", isEvent(api.EventRescind))
	}
	h.waitFor("offers of the whole, larger agent", func() bool {
		offered := api.Resources{}
		for _, o := range h.m().Offers() {
			offered.Add(offerTotal(o))
		}
		return sameResources(offered, ag.info.Resources)
	})
}
