package allocator

import (
	"testing"

	"github.com/allot/allot/masterd/api"
)

// TestInactiveAgentLendsNothing: a disconnected agent reports nothing
// revocable and the revocable stage offers nothing of it, neither its idle
// reservation nor its usage slack; both come back when it reconnects.
func TestInactiveAgentLendsNothing(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:8;mem:800"), map[string]api.Resources{"lender": res(t, "cpus:4;mem:400")}))
	must(t, a.UpdateSlack("n0", res(t, "cpus:1")))
	must(t, a.AddFramework(revocableFw("rev", "tenant")))
	lendable := res(t, "cpus:5;mem:400") // the slack and the idle reservation

	if as, _ := a.Agent("n0"); !sameResources(as.Revocable, lendable) {
		t.Fatalf("active agent's revocable = %v, want %v", as.Revocable, lendable)
	}
	must(t, a.DeactivateAgent("n0"))
	as, _ := a.Agent("n0")
	if as.Active || !as.Revocable.IsZero() {
		t.Errorf("inactive agent: active %v, revocable %v, want nothing", as.Active, as.Revocable)
	}
	if offers := a.Allocate(t0); len(offers) != 0 {
		t.Errorf("offers of an inactive agent: %+v", offers)
	}
	if rs, _ := a.Role("lender"); !rs.Lent.IsZero() {
		t.Errorf("lender lent %v from an inactive agent", rs.Lent)
	}

	must(t, a.ActivateAgent("n0"))
	if as, _ := a.Agent("n0"); !sameResources(as.Revocable, lendable) {
		t.Errorf("reconnected agent's revocable = %v, want %v", as.Revocable, lendable)
	}
	var lent api.Resources
	for _, o := range offersOf(a.Allocate(t0), "rev", true, false) {
		lent = lent.Add(sumPieces(o.Pieces))
	}
	if !sameResources(lent, res(t, "cpus:4;mem:400")) {
		t.Errorf("lent offers after reconnection = %v, want the idle reservation", lent)
	}
	if err := a.checkInternals(); err != nil {
		t.Error(err)
	}
}
