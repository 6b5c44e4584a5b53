package master

import (
	"fmt"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// TestQuotaRescinds: setting a quota rescinds exactly the offers the dry run
// (RescindsForQuota) counted just before, by the rules of Mesos's quota
// handler.
func TestQuotaRescinds(t *testing.T) {
	cases := []struct {
		name string
		// guarantee is the quota set on role eng.
		guarantee api.Resources
		// engFrameworks subscribe to eng (suppressed, so offers go to the
		// other framework).
		engFrameworks int
		want          int
	}{
		// Enough agents to cover the guarantee: 3 cpus takes two agents
		// of 2 cpus.
		{"resources", api.Resources{"cpus": 3}, 0, 2},
		// At least as many agents as the role has frameworks, though one
		// agent would cover the guarantee.
		{"frameworks", api.Resources{"cpus": 1}, 2, 2},
		// Everything.
		{"all", api.Resources{"cpus": 6, "mem": 3000}, 0, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			for i := range c.engFrameworks {
				eng := h.subscribe(fwInfo(fmt.Sprintf("eng-%d", i), "eng"))
				eng.mustCall(api.Call{Type: api.CallSuppress})
			}
			var agents []*simAgent
			for i := range 3 {
				agents = append(agents, h.registerAgent(fmt.Sprintf("node-%d", i), api.Resources{"cpus": 2, "mem": 1024}))
			}
			fw := h.subscribe(fwInfo("web", "*"))
			for _, ag := range agents {
				fw.offerOn(ag.id)
			}
			if n := h.m().OffersOutstanding(); n != 3 {
				t.Fatalf("%d offers outstanding, want 3", n)
			}

			q := api.Quota{Role: "eng", Guarantees: c.guarantee}
			dry := h.m().RescindsForQuota(q)
			if dry != c.want {
				t.Fatalf("dry run: %d rescinds, want %d", dry, c.want)
			}
			before := h.m().Offers()
			h.write(&raftstore.QuotaSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()}, Role: "eng", Guarantees: c.guarantee})
			// h.write returns once the master followed the write: the
			// rescinds are queued by now, and nothing else rescinds
			// (offers do not expire in this test).
			rescinds := fw.queued(isEvent(api.EventRescind))
			if len(rescinds) != dry {
				t.Fatalf("%d offers rescinded, the dry run said %d", len(rescinds), dry)
			}
			// Rescinded in the order they were made.
			for i, r := range rescinds {
				if r.Rescind.OfferID != before[i].ID {
					t.Fatalf("rescind %d is of %s, want %s", i, r.Rescind.OfferID, before[i].ID)
				}
			}
			// Again, on whatever offers are outstanding now (some of the
			// rescinded resources may have been offered again). SUPPRESS
			// stops new offers and two cycles let one under way finish, so
			// the book stays as it is between the dry run and the write.
			fw.mustCall(api.Call{Type: api.CallSuppress})
			h.waitCycles(2)
			dry = h.m().RescindsForQuota(q)
			rescindedBefore := len(fw.queued(isEvent(api.EventRescind)))
			h.write(&raftstore.QuotaSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()}, Role: "eng", Guarantees: c.guarantee})
			if got := len(fw.queued(isEvent(api.EventRescind))) - rescindedBefore; got != dry {
				t.Fatalf("second write: %d offers rescinded, the dry run said %d", got, dry)
			}
		})
	}
}
