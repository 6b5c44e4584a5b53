package allocator

import (
	"errors"
	"slices"
	"testing"

	"github.com/allot/allot/masterd/api"
)

func revocableFw(id string, roles ...string) Framework {
	f := fw(id, roles...)
	f.Capabilities = []string{CapabilityRevocableResources}
	return f
}

// offersOf splits a cycle's offers by framework and kind.
func offersOf(offers []Offer, frameworkID string, revocable, throttleable bool) []Offer {
	var out []Offer
	for _, o := range offers {
		if o.FrameworkID != frameworkID || len(o.Pieces) == 0 {
			continue
		}
		if o.Pieces[0].Revocable == revocable && o.Pieces[0].Throttleable == throttleable {
			out = append(out, o)
		}
	}
	return out
}

// TestLendIdleReservation: a reservation nobody in its role takes is lent, as
// revocable, to a framework that takes revocable resources and to no other;
// it never counts toward the borrower's quota.
func TestLendIdleReservation(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:8;mem:800"), map[string]api.Resources{"lender": res(t, "cpus:4;mem:400")}))
	must(t, a.AddFramework(fw("plain", "tenant")))
	must(t, a.AddFramework(revocableFw("rev", "tenant")))
	must(t, a.Suppress("plain", nil))
	must(t, a.SetQuota("tenant", nil, res(t, "cpus:100;mem:10000")))

	offers := a.Allocate(t0)
	regular := offersOf(offers, "rev", false, false)
	lent := offersOf(offers, "rev", true, false)
	if len(regular) != 1 || !sameResources(sumPieces(regular[0].Pieces), res(t, "cpus:4;mem:400")) {
		t.Fatalf("regular offers = %+v, want the unreserved half", regular)
	}
	if len(lent) != 1 || len(lent[0].Pieces) != 1 {
		t.Fatalf("lent offers = %+v, want one", lent)
	}
	p := lent[0].Pieces[0]
	if p.Role != "lender" || !p.Revocable || p.Throttleable || !sameResources(p.Resources, res(t, "cpus:4;mem:400")) {
		t.Errorf("lent piece = %+v", p)
	}
	if lent[0].Role != "tenant" {
		t.Errorf("lent offer's role = %q, want the borrower's", lent[0].Role)
	}
	if got := a.QuotaConsumed("tenant"); !sameResources(got, res(t, "cpus:4;mem:400")) {
		t.Errorf("tenant consumed %v, want only the regular offer", got)
	}
	if got := a.QuotaConsumed("lender"); !sameResources(got, res(t, "cpus:4;mem:400")) {
		t.Errorf("lender consumed %v, want its whole reservation", got)
	}
	rs, _ := a.Role("lender")
	if !sameResources(rs.Lent, res(t, "cpus:4;mem:400")) {
		t.Errorf("lender lent %v", rs.Lent)
	}
	ts, _ := a.Role("tenant")
	if !sameResources(ts.RevocableAllocated, res(t, "cpus:4;mem:400")) || !sameResources(ts.Offered, res(t, "cpus:4;mem:400")) {
		t.Errorf("tenant = %+v", ts)
	}
	as, _ := a.Agent("n0")
	if !sameResources(as.Revocable, res(t, "cpus:4;mem:400")) || !sameResources(as.RevocableAllocated, res(t, "cpus:4;mem:400")) {
		t.Errorf("agent revocable %v allocated %v", as.Revocable, as.RevocableAllocated)
	}
	if !sameResources(as.Offered, res(t, "cpus:4;mem:400")) {
		t.Errorf("agent offered %v: revocable must stay out of it", as.Offered)
	}

	// Launch part, hand back the rest; release: the books come back empty.
	half := []Piece{{Role: "lender", Revocable: true, Resources: res(t, "cpus:1;mem:100")}}
	rest := []Piece{{Role: "lender", Revocable: true, Resources: res(t, "cpus:3;mem:300")}}
	must(t, a.Launch("rev", "n0", "tenant", half))
	must(t, a.Recover("rev", "n0", "tenant", rest))
	if err := a.Release("rev", "n0", "tenant", rest); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("release of more than in use: %v", err)
	}
	if err := a.Release("rev", "n0", "tenant", []Piece{{Role: "lender", Resources: res(t, "cpus:1")}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("release of the loan as the lender's own resources: %v", err)
	}
	must(t, a.Release("rev", "n0", "tenant", half))
	rs, _ = a.Role("lender")
	as, _ = a.Agent("n0")
	if !rs.Lent.IsZero() || !as.RevocableAllocated.IsZero() {
		t.Errorf("after release: lent %v, agent revocable allocated %v", rs.Lent, as.RevocableAllocated)
	}
}

// TestSlackOffers: the estimator's slack goes, as throttleable, to frameworks
// that take revocable resources, in its own offer.
func TestSlackOffers(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:8;mem:800"), nil))
	must(t, a.AddFramework(fw("plain", "r")))
	for _, o := range a.Allocate(t0) {
		must(t, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
	}
	must(t, a.UpdateSlack("n0", res(t, "cpus:3")))
	if offers := a.Allocate(t0); len(offers) != 0 {
		t.Fatalf("offers with no framework taking revocable: %+v", offers)
	}
	must(t, a.AddFramework(revocableFw("rev", "s")))
	offers := a.Allocate(t0)
	slack := offersOf(offers, "rev", true, true)
	if len(offers) != 1 || len(slack) != 1 {
		t.Fatalf("offers = %+v, want one slack offer", offers)
	}
	if p := slack[0].Pieces[0]; p.Role != "*" || !sameResources(p.Resources, res(t, "cpus:3")) {
		t.Errorf("slack piece = %+v", p)
	}
	// The estimate falls under what is lent: over-lent, throttleable.
	must(t, a.UpdateSlack("n0", res(t, "cpus:1")))
	over := a.Overlent()
	want := []Overlent{{AgentID: "n0", Throttleable: true, Resources: res(t, "cpus:2")}}
	if len(over) != 1 || over[0].AgentID != "n0" || !over[0].Throttleable || !sameResources(over[0].Resources, want[0].Resources) {
		t.Fatalf("overlent = %+v, want %+v", over, want)
	}
	if got := RescindRevocable(offers, over[0]); !slices.Equal(got, []int{0}) {
		t.Errorf("rescind = %v", got)
	}
	must(t, a.Recover("rev", "n0", "s", slack[0].Pieces))
	if over := a.Overlent(); len(over) != 0 {
		t.Errorf("overlent after the rescind: %+v", over)
	}
}

// TestLenderTakesBack: when the lender's framework comes, stage two gives it
// its reservation and the loan is reported over-lent; handing the loan back
// heals the books.
func TestLenderTakesBack(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:4;mem:400"), map[string]api.Resources{"lender": res(t, "cpus:4;mem:400")}))
	must(t, a.AddFramework(revocableFw("rev", "tenant")))
	offers := a.Allocate(t0)
	if len(offers) != 1 {
		t.Fatalf("offers = %+v", offers)
	}
	must(t, a.Launch("rev", "n0", "tenant", offers[0].Pieces))
	must(t, a.AddFramework(fw("owner", "lender")))
	owner := a.Allocate(t0)
	if len(owner) != 1 || owner[0].FrameworkID != "owner" || !sameResources(sumPieces(owner[0].Pieces), res(t, "cpus:4;mem:400")) {
		t.Fatalf("owner's offers = %+v", owner)
	}
	over := a.Overlent()
	if len(over) != 1 || over[0].Throttleable || !sameResources(over[0].Resources, res(t, "cpus:4;mem:400")) {
		t.Fatalf("overlent = %+v", over)
	}
	// Nothing outstanding to rescind: the tasks hold it, the agent evicts.
	if got := RescindRevocable(nil, over[0]); len(got) != 0 {
		t.Errorf("rescind from nothing = %v", got)
	}
	if offers := a.Allocate(t0); len(offers) != 0 {
		t.Errorf("lent again while over-lent: %+v", offers)
	}
	must(t, a.Release("rev", "n0", "tenant", offers[0].Pieces))
	if over := a.Overlent(); len(over) != 0 {
		t.Errorf("overlent after the eviction: %+v", over)
	}
}
