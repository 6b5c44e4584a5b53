package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestNoBorrowingOwnReservation: a role never borrows its own reservation or
// an ancestor's, even when a limit keeps it from taking it as it is.
func TestNoBorrowingOwnReservation(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:4;mem:400"), map[string]api.Resources{"db": res(t, "cpus:4;mem:400")}))
	must(t, a.AddFramework(revocableFw("child", "db/child")))
	must(t, a.SetQuota("db/child", nil, res(t, "cpus:0;mem:0")))
	if offers := a.Allocate(t0); len(offers) != 0 {
		t.Fatalf("offers to the lender's own subtree: %+v", offers)
	}
	must(t, a.AddFramework(revocableFw("web", "web")))
	offers := a.Allocate(t0)
	if len(offers) != 1 || offers[0].FrameworkID != "web" || offers[0].Pieces[0].Role != "db" {
		t.Fatalf("offers = %+v, want db's reservation lent to web", offers)
	}
}

// TestLendingLimit: nil caps nothing, an empty limit lends nothing, a limit
// caps what the role lends across agents (a kind it leaves out at zero);
// lowering it below what is lent reports the excess, offers first.
func TestLendingLimit(t *testing.T) {
	setup := func(t *testing.T) *Allocator {
		a := New(Options{Seed: 1, MinAllocatable: []api.Resources{}})
		for _, id := range []string{"n0", "n1", "n2"} {
			must(t, a.AddAgent(id, id, res(t, "cpus:4;mem:400"), map[string]api.Resources{"db": res(t, "cpus:2;mem:200")}))
		}
		must(t, a.AddFramework(revocableFw("web", "web")))
		return a
	}
	lentBy := func(offers []Offer) api.Resources {
		out := api.Resources{}
		for _, o := range offers {
			for _, p := range o.Pieces {
				if p.Revocable {
					out.Add(p.Resources)
				}
			}
		}
		return out
	}
	tests := map[string]struct {
		limit api.Resources
		want  string
	}{
		"no cap":        {nil, "cpus:6;mem:600"},
		"lend nothing":  {api.Resources{}, ""},
		"cap on a kind": {res(t, "cpus:3"), "cpus:3"},
		"cap on both":   {res(t, "cpus:5;mem:100"), "cpus:5;mem:100"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := setup(t)
			must(t, a.SetLendingLimit("db", tc.limit))
			if got := lentBy(a.Allocate(t0)); !sameResources(got, res(t, tc.want)) {
				t.Errorf("lent %v, want %v", got, tc.want)
			}
			rs, _ := a.Role("db")
			if !sameResources(rs.Lent, res(t, tc.want)) {
				t.Errorf("role's lent = %v, want %v", rs.Lent, tc.want)
			}
		})
	}

	t.Run("lowered", func(t *testing.T) {
		a := setup(t)
		offers := offersOf(a.Allocate(t0), "web", true, false)
		if len(offers) != 3 {
			t.Fatalf("offers = %+v", offers)
		}
		// One agent's loan goes to a task, the others stay offered.
		slices.SortFunc(offers, func(x, y Offer) int { return strings.Compare(x.AgentID, y.AgentID) })
		must(t, a.Launch("web", "n0", "web", offers[0].Pieces))
		must(t, a.SetLendingLimit("db", res(t, "cpus:3;mem:300")))
		over := a.Overlent()
		var sum api.Resources
		for _, o := range over {
			if o.AgentID == "n0" || o.Role != "db" || o.Throttleable {
				t.Errorf("over-lent entry %+v: the offers should cover it", o)
			}
			sum = sum.Add(o.Resources)
		}
		if !sameResources(sum, res(t, "cpus:3;mem:300")) {
			t.Errorf("over-lent %v in all, want the excess cpus:3;mem:300 (%+v)", sum, over)
		}
		for _, o := range over {
			for _, i := range RescindRevocable(offers, o) {
				must(t, a.Recover(offers[i].FrameworkID, offers[i].AgentID, offers[i].Role, offers[i].Pieces))
			}
		}
		if over := a.Overlent(); len(over) != 0 {
			t.Errorf("still over-lent: %+v", over)
		}
		// Whole offers freed more than the excess: the room is lent again,
		// within the limit.
		again := a.Allocate(t0)
		if rs, _ := a.Role("db"); !sameResources(rs.Lent, res(t, "cpus:3;mem:300")) {
			t.Errorf("lent %v, want the limit cpus:3;mem:300", rs.Lent)
		}
		for _, o := range again {
			must(t, a.Recover(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
		}
		// Lowered below what tasks hold: the tasks are reported.
		must(t, a.SetLendingLimit("db", res(t, "cpus:1;mem:200")))
		over = a.Overlent()
		if len(over) != 1 || over[0].AgentID != "n0" || !sameResources(over[0].Resources, res(t, "cpus:1")) {
			t.Errorf("over-lent = %+v, want cpus:1 on n0", over)
		}
	})
}

// TestRevocableDRF: the revocable stage shares by revocable DRF with the
// roles' weights, apart from the regular shares.
func TestRevocableDRF(t *testing.T) {
	a := New(Options{Seed: 5})
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("n%02d", i)
		must(t, a.AddAgent(id, id, res(t, "cpus:4;mem:400"), nil))
		must(t, a.UpdateSlack(id, res(t, "cpus:1;mem:100")))
	}
	must(t, a.SetWeight("heavy", 2))
	must(t, a.AddFramework(revocableFw("h", "heavy")))
	must(t, a.AddFramework(revocableFw("l", "light")))
	got := map[string]int{}
	for _, o := range a.Allocate(t0) {
		if o.Pieces[0].Revocable {
			got[o.FrameworkID]++
		}
	}
	// Weight 2 against 1: 20 and 10 agents' slack.
	if got["h"] != 20 || got["l"] != 10 {
		t.Errorf("slack offers per framework = %v, want h:20 l:10", got)
	}
	if rs, _ := a.Role("heavy"); !sameResources(rs.RevocableAllocated, res(t, "cpus:20;mem:2000")) {
		t.Errorf("heavy holds %v", rs.RevocableAllocated)
	}
}

// TestRevocableFiltersAndSuppression: a declined agent, a suppressed role and
// a framework that stops taking revocable resources get no revocable offer.
func TestRevocableFiltersAndSuppression(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:4;mem:400"), nil))
	must(t, a.AddFramework(fw("owner", "r")))
	for _, o := range a.Allocate(t0) {
		must(t, a.Launch(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
	}
	must(t, a.UpdateSlack("n0", res(t, "cpus:2;mem:200")))
	must(t, a.AddFramework(revocableFw("rev", "s")))
	offers := a.Allocate(t0)
	if len(offers) != 1 {
		t.Fatalf("offers = %+v", offers)
	}
	must(t, a.Recover("rev", "n0", "s", offers[0].Pieces))
	must(t, a.Decline("rev", "n0", sumPieces(offers[0].Pieces), t0.Add(time.Minute)))
	if offers := a.Allocate(t0.Add(time.Second)); len(offers) != 0 {
		t.Errorf("offered despite the filter: %+v", offers)
	}
	if offers := a.Allocate(t0.Add(time.Minute)); len(offers) != 1 {
		t.Errorf("not offered again once the filter expired: %+v", offers)
	} else {
		must(t, a.Recover("rev", "n0", "s", offers[0].Pieces))
	}
	must(t, a.Suppress("rev", nil))
	if offers := a.Allocate(t0.Add(time.Minute)); len(offers) != 0 {
		t.Errorf("offered to a suppressed framework: %+v", offers)
	}
	must(t, a.Revive("rev", nil))
	must(t, a.UpdateFramework(fw("rev", "s")))
	if offers := a.Allocate(t0.Add(time.Minute)); len(offers) != 0 {
		t.Errorf("offered to a framework without the capability: %+v", offers)
	}
}

// TestRevocableAccountingTolerance: tasks reported on more than can be lent
// are taken (the agent evicts them), reported over-lent, and the books heal
// as they end; removal forgets every loan.
func TestRevocableAccountingTolerance(t *testing.T) {
	a := New(Options{Seed: 1})
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:4;mem:400"), map[string]api.Resources{"db": res(t, "cpus:1;mem:100")}))
	must(t, a.UpdateSlack("n0", res(t, "cpus:1")))
	lentTask := []Piece{{Role: "db", Revocable: true, Resources: res(t, "cpus:3;mem:100")}}
	slackTask := []Piece{{Role: "*", Revocable: true, Throttleable: true, Resources: res(t, "cpus:2")}}
	must(t, a.AddUsed("rev", "n0", "web", lentTask))
	must(t, a.AddUsed("rev", "n0", "web", slackTask))
	over := a.Overlent()
	want := []Overlent{
		{AgentID: "n0", Role: "db", Resources: res(t, "cpus:2")},
		{AgentID: "n0", Throttleable: true, Role: "*", Resources: res(t, "cpus:1")},
	}
	if len(over) != 2 {
		t.Fatalf("overlent = %+v, want %+v", over, want)
	}
	for i := range want {
		if over[i].AgentID != want[i].AgentID || over[i].Role != want[i].Role || over[i].Throttleable != want[i].Throttleable ||
			!sameResources(over[i].Resources, want[i].Resources) {
			t.Errorf("overlent[%d] = %+v, want %+v", i, over[i], want[i])
		}
	}
	if got := a.QuotaConsumed("web"); !got.IsZero() {
		t.Errorf("web consumed %v: revocable tasks count toward no quota", got)
	}
	as, _ := a.Agent("n0")
	if !sameResources(as.RevocableAllocated, res(t, "cpus:5;mem:100")) || !sameResources(as.Revocable, res(t, "cpus:2;mem:100")) {
		t.Errorf("agent revocable %v allocated %v", as.Revocable, as.RevocableAllocated)
	}
	// Releasing more than held is refused and changes nothing.
	if err := a.Release("rev", "n0", "web", append(slices.Clone(lentTask), lentTask...)); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("double release: %v", err)
	}
	if err := a.Release("rev", "n1", "web", lentTask); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("release on an unknown agent: %v", err)
	}
	if err := a.Release("rev", "n0", "web", []Piece{{Role: "other", Revocable: true, Resources: res(t, "cpus:1")}}); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("release from a lender never lent: %v", err)
	}
	must(t, a.Release("rev", "n0", "web", slackTask))
	must(t, a.Release("rev", "n0", "web", lentTask))
	if over := a.Overlent(); len(over) != 0 {
		t.Errorf("over-lent after the tasks ended: %+v", over)
	}

	// Removal forgets loans, their roles and framework.
	must(t, a.AddUsed("rev", "n0", "web", []Piece{{Role: "gone", Revocable: true, Resources: res(t, "cpus:1")}}))
	must(t, a.RemoveAgent("n0"))
	if roles := a.Roles(); len(roles) != 1 || roles[0].Role != "db" && roles[0].Role != "web" {
		for _, r := range roles {
			if r.Role == "gone" || !r.Lent.IsZero() || !r.RevocableAllocated.IsZero() {
				t.Errorf("role left behind: %+v", r)
			}
		}
	}
	if len(a.lendingAgents) != 0 || len(a.revAgents) != 0 {
		t.Errorf("agents left in the revocable sets: %d lending, %d lendable", len(a.lendingAgents), len(a.revAgents))
	}
}

// TestOverlentShrunkAgent: an agent back smaller than its reservations' loans
// is over-lent by what its free resources no longer hold.
func TestOverlentShrunkAgent(t *testing.T) {
	a := New(Options{Seed: 1})
	reserved := map[string]api.Resources{"a": res(t, "cpus:2;mem:100"), "b": res(t, "cpus:2;mem:100")}
	must(t, a.AddAgent("n0", "h0", res(t, "cpus:4;mem:200"), reserved))
	must(t, a.AddFramework(revocableFw("rev", "web")))
	offers := a.Allocate(t0)
	if len(offers) != 1 || !sameResources(sumPieces(offers[0].Pieces), res(t, "cpus:4;mem:200")) {
		t.Fatalf("offers = %+v", offers)
	}
	must(t, a.Launch("rev", "n0", "web", offers[0].Pieces))
	must(t, a.UpdateAgentTotal("n0", res(t, "cpus:3;mem:200")))
	var sum api.Resources
	for _, o := range a.Overlent() {
		sum = sum.Add(o.Resources)
	}
	if !sameResources(sum, res(t, "cpus:1")) {
		t.Errorf("over-lent %v, want cpus:1", sum)
	}
}

func TestRescindRevocable(t *testing.T) {
	lent := func(agent, lender, r string) Offer {
		return Offer{AgentID: agent, Pieces: []Piece{{Role: lender, Revocable: true, Resources: res(t, r)}}}
	}
	slack := func(agent, r string) Offer {
		return Offer{AgentID: agent, Pieces: []Piece{{Role: "*", Revocable: true, Throttleable: true, Resources: res(t, r)}}}
	}
	regular := Offer{AgentID: "n0", Pieces: []Piece{{Role: "*", Resources: res(t, "cpus:100")}}}
	tests := map[string]struct {
		outstanding []Offer
		over        Overlent
		want        []int
	}{
		"one large beats two small": {
			[]Offer{lent("n0", "db", "cpus:1"), lent("n0", "db", "cpus:1"), lent("n0", "db", "cpus:3")},
			Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:2")},
			[]int{2},
		},
		"earliest among as few": {
			[]Offer{lent("n0", "db", "cpus:1"), lent("n0", "db", "cpus:2"), lent("n0", "db", "cpus:2")},
			Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:2")},
			[]int{1},
		},
		"two kinds need two offers": {
			[]Offer{lent("n0", "db", "cpus:2"), lent("n0", "db", "mem:200"), lent("n0", "db", "cpus:1;mem:10")},
			Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:1;mem:100")},
			[]int{0, 1},
		},
		"other agents, lenders, kinds and regular offers are left alone": {
			[]Offer{regular, lent("n1", "db", "cpus:9"), lent("n0", "web", "cpus:9"), slack("n0", "cpus:9"), lent("n0", "db", "cpus:1")},
			Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:1")},
			[]int{4},
		},
		"not enough: all of them": {
			[]Offer{lent("n0", "db", "cpus:1"), regular, lent("n0", "db", "cpus:1")},
			Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:5")},
			[]int{0, 2},
		},
		"slack": {
			[]Offer{lent("n0", "db", "cpus:9"), slack("n0", "cpus:1"), slack("n0", "cpus:2")},
			Overlent{AgentID: "n0", Throttleable: true, Role: "*", Resources: res(t, "cpus:2")},
			[]int{2},
		},
		"any lender when none is named": {
			[]Offer{lent("n0", "db", "cpus:1"), lent("n0", "web", "cpus:1")},
			Overlent{AgentID: "n0", Resources: res(t, "cpus:2")},
			[]int{0, 1},
		},
		"nothing outstanding": {nil, Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:1")}, nil},
		// Past the exhaustive search, greedy takes the half-and-half offer
		// first, then needs both others, which make it redundant.
		"greedy, pruned": {
			append([]Offer{lent("n0", "db", "cpus:1;mem:1"), lent("n0", "db", "cpus:2"), lent("n0", "db", "mem:2")},
				slices.Repeat([]Offer{lent("n0", "db", "cpus:0.001")}, exactRescindLimit)...),
			Overlent{AgentID: "n0", Role: "db", Resources: res(t, "cpus:2;mem:2")},
			[]int{1, 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RescindRevocable(tc.outstanding, tc.over); !slices.Equal(got, tc.want) {
				t.Errorf("picked %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRescindRevocableFewest: on random offers, the picks cover what is over
// with as few offers as any set does, whether found exhaustively or, for
// many offers, greedily (then at least covering, with no pick to spare).
func TestRescindRevocableFewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"cpus", "mem", "disk"}
	random := func(scale int) api.Resources {
		r := api.Resources{}
		for _, k := range kinds {
			if rng.IntN(3) != 0 {
				r[k] = float64(rng.IntN(scale))
			}
		}
		return r
	}
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(10)
		if round%10 == 0 {
			n = exactRescindLimit + 1 + rng.IntN(8)
		}
		var offers []Offer
		for i := 0; i < n; i++ {
			offers = append(offers, Offer{AgentID: "n0", Pieces: []Piece{{Role: "db", Revocable: true, Resources: random(5)}}})
		}
		over := Overlent{AgentID: "n0", Role: "db", Resources: random(8)}
		picked := RescindRevocable(offers, over)
		sum := func(set []int) api.Resources {
			out := api.Resources{}
			for _, i := range set {
				out.Add(offers[i].Pieces[0].Resources)
			}
			return out
		}
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		if !covers(sum(all), over.Resources) {
			continue // the fallback is in TestRescindRevocable
		}
		if !covers(sum(picked), over.Resources) {
			t.Fatalf("round %d: picks %v do not cover %v", round, picked, over.Resources)
		}
		for i := range picked {
			if covers(sum(slices.Delete(slices.Clone(picked), i, i+1)), over.Resources) {
				t.Fatalf("round %d: pick %d of %v is not needed", round, picked[i], picked)
			}
		}
		if n > exactRescindLimit {
			continue
		}
		for mask := 1; mask < 1<<n; mask++ {
			var set []int
			for i := 0; i < n; i++ {
				if mask&(1<<i) != 0 {
					set = append(set, i)
				}
			}
			if len(set) < len(picked) && covers(sum(set), over.Resources) {
				t.Fatalf("round %d: %v cover %v with fewer than %v", round, set, over.Resources, picked)
			}
		}
	}
}
