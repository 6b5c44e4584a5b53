package allocator

import (
	"maps"
	"slices"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// The sim's revocable checks: every figure comes from the sim's books and
// the definitions, never from the allocator's own.

// free is what the agent has free of regular allocations (negative where it
// shrank under its tasks).
func (s *sim) free(l *ledger, agent string) api.Resources {
	return s.agents[agent].total.Clone().Subtract(l.agentAllocated(agent))
}

// idleLendable is what lender's reservation on the agent can lend in all:
// its part not allocated to its subtree, no more than the agent has free.
func (s *sim) idleLendable(l *ledger, agent, lender string) api.Resources {
	idle := s.agents[agent].reserved[lender].Clone().Subtract(l.poolAllocated(agent, lender))
	free := s.free(l, agent)
	out := api.Resources{}
	for _, k := range s.kinds {
		out[k] = max(0, min(idle[k], free[k]))
	}
	return out
}

// lendingLimit is the cap on what a role lends in kind k; ok false: none.
func (s *sim) lendingLimit(role, k string) (float64, bool) {
	limit, ok := s.lending[role]
	return limit[k], ok
}

func allocatableRes(r api.Resources) bool {
	return covers(r, api.Resources{"cpus": 0.01}) || covers(r, api.Resources{"mem": 32})
}

// checkRevocableOffer checks one offer of a cycle against the rules of the
// revocable stage.
func (s *sim) checkRevocableOffer(o Offer) {
	t := s.t
	t.Helper()
	first := o.Pieces[0]
	for _, p := range o.Pieces {
		if p.Revocable != first.Revocable || p.Throttleable != first.Throttleable {
			t.Fatalf("offer mixes kinds: %+v", o)
		}
	}
	if !first.Revocable {
		return
	}
	if f := s.frameworks[o.FrameworkID]; !f.revocable {
		t.Fatalf("revocable offer to %s, which does not take revocable resources: %+v", o.FrameworkID, o)
	}
	for _, p := range o.Pieces {
		switch {
		case p.Throttleable && p.Role != api.DefaultRole:
			t.Fatalf("throttleable piece of a reservation: %+v", o)
		case !p.Throttleable && p.Role == api.DefaultRole:
			t.Fatalf("lent piece without its lender: %+v", o)
		case !p.Throttleable && inSubtree(o.Role, p.Role):
			t.Fatalf("role %q lent its own (or an ancestor's) reservation %q: %+v", o.Role, p.Role, o)
		}
	}
}

// checkLending: a cycle never lends past what agents can lend or past a
// lending limit; what was past them already may stay, not grow.
func (s *sim) checkLending(before, after *ledger) {
	t := s.t
	t.Helper()
	for id, ag := range s.agents {
		slackNow, slackBefore := after.loan(id, api.DefaultRole), before.loan(id, api.DefaultRole)
		for k, v := range slackNow {
			if v > ag.slack[k]+1e-6 && v > slackBefore[k]+1e-6 {
				t.Fatalf("agent %s: %v of slack lent, estimate %v (was %v)", id, slackNow, ag.slack, slackBefore)
			}
		}
		sumNow, sumBefore := api.Resources{}, api.Resources{}
		for _, r := range after.lenders(id) {
			now, was, limit := after.loan(id, r), before.loan(id, r), s.idleLendable(after, id, r)
			sumNow.Add(now)
			sumBefore.Add(was)
			for k, v := range now {
				if v > limit[k]+1e-6 && v > was[k]+1e-6 {
					t.Fatalf("agent %s: %s lends %v of an idle %v (was %v)", id, r, now, limit, was)
				}
			}
		}
		free := s.free(after, id)
		for k, v := range sumNow {
			if v > max(0, free[k])+1e-6 && v > sumBefore[k]+1e-6 {
				t.Fatalf("agent %s: %v lent with %v free (was %v)", id, sumNow, free, sumBefore)
			}
		}
	}
	for r := range s.lending {
		now, was := after.lent[r].Clone().Add(nil), before.lent[r].Clone().Add(nil)
		for k, v := range now {
			limit, _ := s.lendingLimit(r, k)
			if v > limit+1e-6 && v > was[k]+1e-6 {
				t.Fatalf("role %s lends %v past its lending limit %v (was %v)", r, now, s.lending[r], was)
			}
		}
	}
}

// checkOverlent holds the allocator's Overlent to the definitions: slack
// loans over the estimate exactly; a lender's loans over its idle
// reservation at least, and all loans on an agent over what it has free; a
// lender past its limit by at least the excess across the cluster, and
// nothing reported beyond those.
func (s *sim) checkOverlent(l *ledger, when string) {
	t := s.t
	t.Helper()
	reported := map[[2]string]api.Resources{}
	for i, o := range s.a.Overlent() {
		key := [2]string{o.AgentID, o.Role}
		if _, dup := reported[key]; dup || o.Resources.IsZero() {
			t.Fatalf("%s: overlent entry %d duplicated or empty: %+v", when, i, o)
		}
		if o.Throttleable != (o.Role == api.DefaultRole) {
			t.Fatalf("%s: overlent kind and role disagree: %+v", when, o)
		}
		if !covers(l.loan(o.AgentID, o.Role), o.Resources) {
			t.Fatalf("%s: %+v over-lent beyond its loans %v", when, o, l.loan(o.AgentID, o.Role))
		}
		reported[key] = o.Resources
	}
	// lower and upper bounds, per role, of what is reported across agents.
	localByRole := map[string]api.Resources{}
	var physical api.Resources // over what agents have free beyond the local excess
	for id, ag := range s.agents {
		slackOver := clamp0(l.loan(id, api.DefaultRole).Subtract(ag.slack))
		if got := reported[[2]string{id, api.DefaultRole}]; !sameResources(got, slackOver) {
			t.Fatalf("%s: agent %s: slack over-lent %v, books say %v", when, id, got, slackOver)
		}
		local, within, sumReported := api.Resources{}, api.Resources{}, api.Resources{}
		for _, r := range l.lenders(id) {
			loan := l.loan(id, r)
			over := clamp0(loan.Clone().Subtract(s.idleLendable(l, id, r)))
			got := reported[[2]string{id, r}]
			if !covers(got, over) {
				t.Fatalf("%s: agent %s: %s over-lent %v, at least %v", when, id, r, got, over)
			}
			local.Add(over)
			within.Add(loan.Subtract(over))
			sumReported.Add(got)
			localByRole[r] = localByRole[r].Add(over)
		}
		phys := clamp0(within.Clone().Subtract(clamp0(s.free(l, id))))
		if !covers(sumReported, local.Clone().Add(phys)) {
			t.Fatalf("%s: agent %s: %v over-lent, at least %v locally and %v over its free resources", when, id, sumReported, local, phys)
		}
		physical = physical.Add(phys)
	}
	var upper api.Resources
	for _, r := range slices.Sorted(maps.Keys(l.lent)) {
		got := api.Resources{}
		for key, v := range reported {
			if key[1] == r {
				got.Add(v)
			}
		}
		least := localByRole[r].Clone().Add(nil)
		most := least.Clone()
		if _, ok := s.lending[r]; ok {
			for _, k := range s.kinds {
				limit, _ := s.lendingLimit(r, k)
				excess := l.lent[r][k] - limit
				least[k] = max(least[k], excess)
				most[k] = max(most[k], excess)
			}
		}
		if !covers(got, least) {
			t.Fatalf("%s: role %s: %v over-lent across the cluster, at least %v (lent %v, limit %v)", when, r, got, least, l.lent[r], s.lending[r])
		}
		upper = upper.Add(most)
	}
	upper.Add(physical)
	all := api.Resources{}
	for key, v := range reported {
		if key[1] != api.DefaultRole {
			all.Add(v)
		}
	}
	if !covers(upper, all) {
		t.Fatalf("%s: %v over-lent in all, at most %v", when, all, upper)
	}
}

// rescindOverlent plays the leader: for each over-lent entry it rescinds
// the offers RescindRevocable picks, checking they are the fewest of that
// agent, kind and lender that cover it, until no entry gets any; then
// whatever is still over is held by tasks, for the agent to evict.
func (s *sim) rescindOverlent() {
	t := s.t
	for round := 0; ; round++ {
		if round > len(s.offers)+1 {
			t.Fatalf("rescinding does not settle")
		}
		rescinded := false
		for _, over := range s.a.Overlent() {
			picked := RescindRevocable(s.offers, over)
			s.checkPicks(over, picked)
			if s.seen != nil {
				s.seen.rescinds += len(picked)
			}
			for i := len(picked) - 1; i >= 0; i-- {
				o := s.offers[picked[i]]
				must(t, s.a.Recover(o.FrameworkID, o.AgentID, o.Role, o.Pieces))
				s.offers = slices.Delete(s.offers, picked[i], picked[i]+1)
				s.freed(o.AgentID)
				rescinded = true
			}
		}
		if !rescinded {
			break
		}
	}
	l := s.ledger()
	for _, over := range s.a.Overlent() {
		used := l.loansUsed[[2]string{over.AgentID, over.Role}]
		if !covers(used, over.Resources) {
			t.Fatalf("%+v over-lent with no offer left to rescind, but tasks hold only %v", over, used)
		}
	}
}

// checkPicks holds RescindRevocable to its contract on the sim's offers.
func (s *sim) checkPicks(over Overlent, picked []int) {
	t := s.t
	t.Helper()
	if !slices.IsSorted(picked) {
		t.Fatalf("picks %v not ascending", picked)
	}
	part := func(o Offer) api.Resources {
		out := api.Resources{}
		for _, p := range o.Pieces {
			if p.Revocable && p.Throttleable == over.Throttleable && p.Role == over.Role {
				out.Add(p.Resources)
			}
		}
		return out
	}
	var cands []int
	for i, o := range s.offers {
		if o.AgentID != over.AgentID {
			continue
		}
		v := part(o)
		for k, x := range over.Resources {
			if x > 0 && v[k] > 0 {
				cands = append(cands, i)
				break
			}
		}
	}
	sum := func(set []int) api.Resources {
		out := api.Resources{}
		for _, i := range set {
			out.Add(part(s.offers[i]))
		}
		return out
	}
	for _, i := range picked {
		if !slices.Contains(cands, i) {
			t.Fatalf("%+v: picked offer %d, which holds none of it: %+v", over, i, s.offers[i])
		}
	}
	if !covers(sum(cands), over.Resources) {
		if !slices.Equal(picked, cands) {
			t.Fatalf("%+v: the offers cannot cover it, all of %v should go, picked %v", over, cands, picked)
		}
		return
	}
	if !covers(sum(picked), over.Resources) {
		t.Fatalf("%+v: picks %v hold only %v", over, picked, sum(picked))
	}
	if len(cands) > 10 {
		return
	}
	for mask := 1; mask < 1<<len(cands); mask++ {
		var set []int
		for j, i := range cands {
			if mask&(1<<j) != 0 {
				set = append(set, i)
			}
		}
		if len(set) < len(picked) && covers(sum(set), over.Resources) {
			t.Fatalf("%+v: %v cover it with fewer offers than %v", over, set, picked)
		}
	}
}

// checkRevocableBooks compares the allocator's revocable figures with the
// sim's books.
func (s *sim) checkRevocableBooks(l *ledger, when string) {
	t := s.t
	t.Helper()
	for id, ag := range s.agents {
		st, _ := s.a.Agent(id)
		if !sameResources(st.RevocableAllocated, l.revAgent[id]) {
			t.Fatalf("%s: agent %s: revocable allocated %v, books %v", when, id, st.RevocableAllocated, l.revAgent[id])
		}
		// What the agent can lend now: its slack, plus each reservation's
		// idle part within what its role may still lend, at most what is
		// free in all.
		lend := api.Resources{}
		for r := range ag.reserved {
			idle := s.idleLendable(l, id, r)
			for _, k := range s.kinds {
				x := idle[k]
				if limit, ok := s.lendingLimit(r, k); ok {
					x = min(x, l.loan(id, r)[k]+max(0, limit-l.lent[r][k]))
				}
				lend[k] = api.RoundScalar(lend[k] + x)
			}
		}
		free := s.free(l, id)
		want := ag.slack.Clone().Add(nil)
		for _, k := range s.kinds {
			want[k] = api.RoundScalar(want[k] + min(lend[k], max(0, free[k])))
		}
		if !ag.active {
			want = api.Resources{} // a disconnected agent lends nothing now
		}
		if !sameResources(st.Revocable, clamp0(want)) {
			t.Fatalf("%s: agent %s: revocable %v, books %v", when, id, st.Revocable, want)
		}
	}
	for _, r := range s.knownRoles() {
		rs, _ := s.a.Role(r)
		if !sameResources(rs.Lent, l.lent[r]) || !sameResources(rs.RevocableAllocated, l.borrowed[r]) {
			t.Fatalf("%s: role %s: lent %v borrowed %v, books %v %v", when, r, rs.Lent, rs.RevocableAllocated, l.lent[r], l.borrowed[r])
		}
	}
	s.checkOverlent(l, when)
}

// checkRevocableLiveness: after a cycle, slack nobody holds is not left
// unoffered while a framework could take it, nor a reservation, the only
// one on its agent with something to lend, idle.
func (s *sim) checkRevocableLiveness() {
	l := s.ledger()
	for id, ag := range s.agents {
		if !ag.active {
			continue
		}
		// takers: active frameworks taking revocable resources, in an
		// unsuppressed role, with no filter on the agent.
		var takers []string // their roles
		for fid, f := range s.frameworks {
			if flt, ok := s.filters[[2]string{fid, id}]; !f.active || !f.revocable || ok && s.now.Before(flt.until) {
				continue
			}
			for _, r := range f.roles {
				if !f.suppressed[r] {
					takers = append(takers, r)
				}
			}
		}
		if len(takers) == 0 {
			continue
		}
		if left := clamp0(ag.slack.Clone().Subtract(l.loan(id, api.DefaultRole))); allocatableRes(left) {
			s.t.Fatalf("agent %s keeps %v of slack unlent though a framework could take it", id, left)
		}
		free := s.free(l, id)
		spare := api.Resources{}
		for _, k := range s.kinds {
			spare[k] = free[k]
			for _, r := range l.lenders(id) {
				spare[k] -= l.loan(id, r)[k]
			}
		}
		var pools []string
		avail := map[string]api.Resources{}
		for r, amount := range ag.reserved {
			v := api.Resources{}
			for _, k := range s.kinds {
				x := amount[k] - l.poolAllocated(id, r)[k] - l.loan(id, r)[k]
				x = min(x, spare[k])
				if limit, ok := s.lendingLimit(r, k); ok {
					x = min(x, limit-l.lent[r][k])
				}
				v[k] = max(0, x)
			}
			if !clamp0(v).IsZero() {
				pools = append(pools, r)
				avail[r] = v
			}
		}
		if len(pools) != 1 || !allocatableRes(avail[pools[0]]) {
			continue
		}
		for _, r := range takers {
			if !inSubtree(r, pools[0]) {
				s.t.Fatalf("agent %s keeps %v of %s's reservation unlent though role %s could take it", id, avail[pools[0]], pools[0], r)
			}
		}
	}
}

// revocableSeen counts, across TestProperties' clusters, the revocable
// situations its checks judged: were one never reached (a change to the
// sim's events, say), those checks would pass without judging anything.
type revocableSeen struct {
	slackOffers, lentOffers   int // outstanding after a cycle
	overSlack, overLent       int // Overlent entries after a cycle
	rescinds                  int // offers RescindRevocable picked
	revocableTasks, pastLimit int // running revocable tasks; roles lending past their limit
}

// countRevocable counts what the cycle just left.
func (s *sim) countRevocable() {
	if s.seen == nil {
		return
	}
	for _, o := range s.offers {
		switch p := o.Pieces[0]; {
		case p.Throttleable:
			s.seen.slackOffers++
		case p.Revocable:
			s.seen.lentOffers++
		}
	}
	for _, o := range s.a.Overlent() {
		if o.Throttleable {
			s.seen.overSlack++
		} else {
			s.seen.overLent++
		}
	}
	for _, tk := range s.tasks {
		if tk.Pieces[0].Revocable {
			s.seen.revocableTasks++
		}
	}
	l := s.ledger()
	for r := range s.lending {
		for k, v := range l.lent[r] {
			if limit, _ := s.lendingLimit(r, k); v > limit+1e-6 {
				s.seen.pastLimit++
			}
		}
	}
}

func (c *revocableSeen) check(t *testing.T) {
	t.Helper()
	for what, n := range map[string]int{
		"slack offers": c.slackOffers, "lent offers": c.lentOffers,
		"over-lent slack": c.overSlack, "over-lent reservations": c.overLent,
		"rescinded revocable offers": c.rescinds, "revocable tasks": c.revocableTasks,
		"roles lending past a lowered limit": c.pastLimit,
	} {
		if n == 0 {
			t.Errorf("the property test never reached %s: its revocable checks judged nothing there", what)
		}
	}
	t.Logf("revocable situations judged: %+v", *c)
}
