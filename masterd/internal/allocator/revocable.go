package allocator

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/allot/allot/masterd/api"
)

// Revocable resources are of two kinds, each lent by its owner and taken back
// when the owner needs it:
//   - usage slack (throttleable): what an agent's estimator reports its tasks
//     hold but do not use. Pieces of it have Role "*".
//   - lent reservations: what is reserved for a role on an agent and not
//     allocated to the role's subtree, within the role's lending limit.
//     Pieces of it have Role set to the lender.
//
// A loan is one framework's revocable allocation on one agent, for one of its
// roles, of one kind (and lender). Loans are books of their own: they never
// touch the agent's free resources (what is lent stays the lender's), quota
// consumption, headroom or the regular DRF shares.

// loan is a framework role's revocable allocation on one agent from one
// lender (nil: the agent's usage slack).
type loan struct {
	agent  *agent
	fr     *fwRole
	lender *role
	// offered is in outstanding offers, used is held by launched tasks.
	offered, used vec
	agIndex       int
	fwIndex       int
	// inline backs offered and used when there are few kinds, as in
	// allocation.
	inline [2 * inlineKinds]int64
}

// SetLendingLimit caps what a role's idle reservations lend as revocable
// resources across the cluster: what of them is offered or in use as
// revocable never grows past limit. It caps the role's own reservations; a
// child role's have a limit of their own. nil means no cap; a non-nil limit caps
// every kind, a kind it does not name at zero, so an empty one lends nothing.
// Lowering it below what is lent now takes nothing back by itself: Overlent
// reports the excess.
func (a *Allocator) SetLendingLimit(roleName string, limit api.Resources) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := validatePolicyRole(roleName); err != nil {
		return err
	}
	var l vec
	if limit != nil {
		var err error
		if l, err = a.toVec(limit, fmt.Sprintf("role %q: lending limit", roleName)); err != nil {
			return err
		}
	}
	r := a.roleNode(roleName)
	r.hasLendingLimit = limit != nil
	r.lendingLimit = l
	// Which agents have something to lend depends on the lenders' limits;
	// a limit changes seldom, so every agent is looked at again.
	for _, ag := range a.agents {
		if ag.reservationOf(r) != nil {
			a.refreshLendable(ag)
		}
	}
	a.gcRole(r)
	return nil
}

// UpdateSlack replaces an agent's usage slack: its resource estimator's
// estimate of what its tasks hold and do not use, which the revocable stage
// offers as throttleable resources. Lowering it below what is lent of it
// takes nothing back by itself: Overlent reports the excess.
func (a *Allocator) UpdateSlack(agentID string, slack api.Resources) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[agentID]
	if !ok {
		return fmt.Errorf("agent %q: %w", agentID, ErrUnknownAgent)
	}
	v, err := a.toVec(slack, fmt.Sprintf("agent %q: slack", agentID))
	if err != nil {
		return err
	}
	// Copied into the agent's own storage, which the cycle has at hand.
	ag.slack = ag.slack.zeroed(len(v))
	copy(ag.slack, v)
	a.refreshLendable(ag)
	return nil
}

// Overlent is an agent whose revocable allocations of one kind and lender
// (offered or in use) exceed what it can lend now: the lender's subtree was
// allocated its reservation, the estimator's slack fell, a lending limit was
// lowered, a reservation shrank or the agent came back smaller. The leader
// rescinds outstanding revocable offers to cover Resources (RescindRevocable
// picks them); what tasks hold beyond them the agent evicts (lent
// reservations) or its QoS controller kills (slack).
type Overlent struct {
	AgentID      string
	Throttleable bool
	// Role is the lender whose reservation is over-lent, "*" for usage
	// slack: the Role of the pieces that hold it.
	Role      string
	Resources api.Resources
}

// overlentShare is one lender's loans on one agent while Overlent adds up
// what of them is over.
type overlentShare struct {
	ag   *agent
	res  *reservation
	over vec
}

// Overlent lists what is over-lent, per agent, kind and lender, sorted by
// agent, lent reservations (by lender) before slack. A lender's loans on an
// agent are over by what exceeds its reservation's idle part there; the
// loans of all reservations on an agent, by what exceeds the agent's free
// resources (counted on its lenders by name); a lender past its lending
// limit, by the rest of its excess, counted on its agents by id, outstanding
// offers first, so that rescinding them is enough where it can be. Slack
// loans are over by what exceeds the agent's estimate.
func (a *Allocator) Overlent() []Overlent {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.lendingAgents) == 0 {
		return nil
	}
	// The leader asks after every cycle and the answer is mostly none: find
	// that out without sorting or allocating.
	limited := a.overLimit()
	if len(limited) == 0 && !slices.ContainsFunc(a.lendingAgents, a.agentOverlent) {
		return nil
	}
	nk := len(a.kindNames)
	agents := slices.Clone(a.lendingAgents)
	slices.SortFunc(agents, func(x, y *agent) int { return cmp.Compare(x.id, y.id) })
	var shares []overlentShare
	byRole := map[*role][]int{}
	held := make(vec, nk) // loans within their reservations' idle parts
	for _, ag := range agents {
		first := len(shares)
		for _, res := range ag.reservations {
			if !res.lent.isZero() {
				shares = append(shares, overlentShare{ag: ag, res: res, over: make(vec, nk)})
			}
		}
		mine := shares[first:]
		slices.SortFunc(mine, func(x, y overlentShare) int { return cmp.Compare(x.res.role.name, y.res.role.name) })
		clear(held)
		for i := range mine {
			sh := &mine[i]
			for k := 0; k < nk; k++ {
				sh.over[k] = max(0, sh.res.lent.get(k)-lendableOf(ag, sh.res, k))
				held[k] += sh.res.lent.get(k) - sh.over[k]
			}
			byRole[sh.res.role] = append(byRole[sh.res.role], first+i)
		}
		for k := 0; k < nk; k++ {
			x := max(0, held[k]-max(0, ag.free.get(k)))
			for i := range mine {
				take := min(x, mine[i].res.lent.get(k)-mine[i].over[k])
				mine[i].over[k] += take
				x -= take
			}
		}
	}
	for _, r := range limited {
		remaining := make(vec, nk)
		for k := 0; k < nk; k++ {
			remaining[k] = r.lent.get(k) - r.lendingLimit.get(k)
			for _, i := range byRole[r] {
				remaining[k] -= shares[i].over[k]
			}
			remaining[k] = max(0, remaining[k])
		}
		// Outstanding offers first, then loans in use.
		for _, inUse := range []bool{false, true} {
			for _, i := range byRole[r] {
				sh := &shares[i]
				var offered vec
				if !inUse {
					for _, ln := range sh.ag.loans {
						if ln.lender == r {
							offered.addScaled(ln.offered, 1)
						}
					}
				}
				for k := 0; k < nk; k++ {
					x := min(remaining[k], sh.res.lent.get(k)-sh.over[k])
					if !inUse {
						x = min(x, offered.get(k))
					}
					sh.over[k] += x
					remaining[k] -= x
				}
			}
		}
	}
	var out []Overlent
	next := 0
	for _, ag := range agents {
		for ; next < len(shares) && shares[next].ag == ag; next++ {
			if sh := shares[next]; !sh.over.isZero() {
				out = append(out, Overlent{AgentID: ag.id, Role: sh.res.role.name, Resources: a.toResources(sh.over)})
			}
		}
		over := make(vec, nk)
		for k := 0; k < nk; k++ {
			over[k] = max(0, ag.slackAllocated.get(k)-ag.slack.get(k))
		}
		if !over.isZero() {
			out = append(out, Overlent{AgentID: ag.id, Throttleable: true, Role: api.DefaultRole, Resources: a.toResources(over)})
		}
	}
	return out
}

// agentOverlent reports whether the agent's loans are over in some kind by
// the agent's own measures (its slack, its reservations' idle parts, its
// free resources), lending limits aside.
func (a *Allocator) agentOverlent(ag *agent) bool {
	for k := range len(a.kindNames) {
		if ag.slackAllocated.get(k) > ag.slack.get(k) {
			return true
		}
		var held int64
		for _, res := range ag.reservations {
			lent, lendable := res.lent.get(k), lendableOf(ag, res, k)
			if lent > lendable {
				return true
			}
			held += lent
		}
		if held > max(0, ag.free.get(k)) {
			return true
		}
	}
	return false
}

// overLimit lists the roles that lend more than their lending limit, by name.
func (a *Allocator) overLimit() []*role {
	var out []*role
	for _, r := range a.roles {
		if !r.hasLendingLimit {
			continue
		}
		for k, x := range r.lent {
			if x > r.lendingLimit.get(k) {
				out = append(out, r)
				break
			}
		}
	}
	slices.SortFunc(out, func(x, y *role) int { return cmp.Compare(x.name, y.name) })
	return out
}

// lendableOf is what a reservation can lend of kind k in all: its part not
// allocated to its role's subtree, no more than the agent has free.
func lendableOf(ag *agent, res *reservation, k int) int64 {
	return max(0, min(res.amount.get(k)-res.allocated.get(k), ag.free.get(k)))
}

// lendRoom is how much more of kind k the role may lend cluster-wide.
func lendRoom(r *role, k int) int64 {
	if !r.hasLendingLimit {
		return unlimited
	}
	return max(0, r.lendingLimit.get(k)-r.lent.get(k))
}

// lendPools computes, into a.pools, what each reservation on the agent can
// lend beyond what it lends already: its idle part less its loans, within
// the lender's lending limit, and all of them together within what the
// agent has free less every loan of its reservations. It reports whether
// anything can be lent.
func (a *Allocator) lendPools(ag *agent) bool {
	nk := len(a.kindNames)
	spare := a.spare.zeroed(nk)
	for k := range spare {
		spare[k] = max(0, ag.free.get(k)-ag.lent.get(k))
	}
	a.spare = spare
	a.npools = 0
	any := false
	for _, res := range ag.reservations {
		r := res.role
		if r.hasLendingLimit && r.lendingLimit.isZero() {
			continue
		}
		if a.npools == len(a.pools) {
			a.pools = append(a.pools, draft{})
		}
		p := &a.pools[a.npools]
		p.amount = p.amount.zeroed(nk)
		nonzero := false
		for k := 0; k < nk; k++ {
			x := min(res.amount.get(k)-res.allocated.get(k)-res.lent.get(k), spare[k], lendRoom(r, k))
			if x > 0 {
				p.amount[k] = x
				spare[k] -= x
				nonzero = true
			}
		}
		if nonzero {
			p.pool = r
			a.npools++
			any = true
		}
	}
	return any
}

// slackAvailable computes into a.slackFree the agent's usage slack not yet
// lent.
func (a *Allocator) slackAvailable(ag *agent) vec {
	nk := len(a.kindNames)
	v := a.slackFree.zeroed(nk)
	for k := range v {
		v[k] = max(0, ag.slack.get(k)-ag.slackAllocated.get(k))
	}
	a.slackFree = v
	return v
}

// refreshLendable keeps the agent's place in revAgents. Every allocation
// change calls it: an agent with neither reservations nor slack, the most
// common, is done with at a glance.
func (a *Allocator) refreshLendable(ag *agent) {
	if a.deferLendable || ag.revPos < 0 && len(ag.reservations) == 0 && ag.slack.isZero() {
		return
	}
	in := a.hasLendable(ag)
	switch {
	case in && ag.revPos < 0:
		ag.revPos = len(a.revAgents)
		a.revAgents = append(a.revAgents, ag)
	case !in && ag.revPos >= 0:
		last := a.revAgents[len(a.revAgents)-1]
		a.revAgents[ag.revPos] = last
		last.revPos = ag.revPos
		a.revAgents[len(a.revAgents)-1] = nil
		a.revAgents = a.revAgents[:len(a.revAgents)-1]
		ag.revPos = -1
	}
}

// hasLendable reports whether the agent is active with usage slack to lend,
// or with an idle reservation whose role may lend. Lending limits are left
// to the stage (what a role may still lend changes with other agents'
// loans), but for one that lends nothing.
func (a *Allocator) hasLendable(ag *agent) bool {
	if !ag.active {
		return false
	}
	nk := len(a.kindNames)
	slack := a.candSlack.zeroed(nk)
	lend := a.candLend.zeroed(nk)
	a.candSlack, a.candLend = slack, lend
	for k := 0; k < nk; k++ {
		slack[k] = max(0, ag.slack.get(k)-ag.slackAllocated.get(k))
		for _, res := range ag.reservations {
			r := res.role
			x := res.amount.get(k) - res.allocated.get(k) - res.lent.get(k)
			if r.hasLendingLimit {
				x = min(x, r.lendingLimit.get(k))
			}
			lend[k] += max(0, x)
		}
		lend[k] = min(lend[k], max(0, ag.free.get(k)-ag.lent.get(k)))
	}
	return a.allocatable(slack) || a.allocatable(lend)
}

// lendable is what the agent can lend now, lent or not: its usage slack plus
// each reservation's idle part within what its role may still lend, no more
// in all than the agent has free.
func (a *Allocator) lendable(ag *agent) vec {
	nk := len(a.kindNames)
	out := make(vec, nk)
	for k := 0; k < nk; k++ {
		var lend int64
		for _, res := range ag.reservations {
			x := lendableOf(ag, res, k)
			if room := lendRoom(res.role, k); room != unlimited {
				x = min(x, res.lent.get(k)+room)
			}
			lend += x
		}
		out[k] = ag.slack.get(k) + min(lend, max(0, ag.free.get(k)))
	}
	return out
}

// loanFor returns the framework role's loan on the agent from lender,
// creating it.
func (a *Allocator) loanFor(ag *agent, fr *fwRole, lender *role) *loan {
	for _, ln := range ag.loans {
		if ln.fr == fr && ln.lender == lender {
			return ln
		}
	}
	ln := &loan{agent: ag, fr: fr, lender: lender, agIndex: len(ag.loans), fwIndex: len(fr.fw.loans)}
	if nk := len(a.kindNames); nk <= inlineKinds {
		ln.offered = ln.inline[:nk:inlineKinds]
		ln.used = ln.inline[inlineKinds : inlineKinds+nk : 2*inlineKinds]
	}
	if len(ag.loans) == 0 {
		ag.lendingPos = len(a.lendingAgents)
		a.lendingAgents = append(a.lendingAgents, ag)
	}
	ag.loans = append(ag.loans, ln)
	fr.fw.loans = append(fr.fw.loans, ln)
	fr.loans++
	if lender != nil {
		lender.refs++
		if ag.reservationOf(lender) == nil {
			// Tasks reported on a reservation the agent no longer has:
			// their loan is kept on an empty entry so releasing balances.
			lender.refs++
			ag.reservations = append(ag.reservations, &reservation{role: lender})
		}
	}
	return ln
}

// forgetLoan unlinks an empty loan.
func (a *Allocator) forgetLoan(ln *loan) {
	ag, fw := ln.agent, ln.fr.fw
	last := ag.loans[len(ag.loans)-1]
	ag.loans[ln.agIndex] = last
	last.agIndex = ln.agIndex
	ag.loans[len(ag.loans)-1] = nil
	ag.loans = ag.loans[:len(ag.loans)-1]
	if len(ag.loans) == 0 {
		lastAg := a.lendingAgents[len(a.lendingAgents)-1]
		a.lendingAgents[ag.lendingPos] = lastAg
		lastAg.lendingPos = ag.lendingPos
		a.lendingAgents[len(a.lendingAgents)-1] = nil
		a.lendingAgents = a.lendingAgents[:len(a.lendingAgents)-1]
		ag.lendingPos = -1
	}
	last = fw.loans[len(fw.loans)-1]
	fw.loans[ln.fwIndex] = last
	last.fwIndex = ln.fwIndex
	fw.loans[len(fw.loans)-1] = nil
	fw.loans = fw.loans[:len(fw.loans)-1]
	ln.fr.loans--
	if ln.lender != nil {
		ln.lender.refs--
		a.dropIdleReservations(ag)
		a.gcRole(ln.lender)
	}
	a.dropFwRoleIfUnused(ln.fr)
}

// dropLoan frees everything a loan holds; the loan is forgotten once empty.
func (a *Allocator) dropLoan(ln *loan) {
	if ln.offered.isZero() && ln.used.isZero() {
		a.forgetLoan(ln)
		return
	}
	if !ln.offered.isZero() {
		a.adjustLoan(ln, false, ln.offered.clone(), -1)
	}
	if !ln.used.isZero() {
		a.adjustLoan(ln, true, ln.used.clone(), -1)
	}
}

// adjustLoan adds sign*amount to a loan's offered or used resources and
// carries the change to the revocable books: the borrower's revocable shares,
// the lender's lent total and the agent's.
func (a *Allocator) adjustLoan(ln *loan, used bool, amount vec, sign int64) {
	ag, fr := ln.agent, ln.fr
	r := fr.role
	if used {
		ln.used.addScaled(amount, sign)
		ag.revUsed.addScaled(amount, sign)
	} else {
		ln.offered.addScaled(amount, sign)
		ag.revOffered.addScaled(amount, sign)
	}
	fr.revAllocated.addScaled(amount, sign)
	r.revAllocated.addScaled(amount, sign)
	for n := r; n != a.root; n = n.parent {
		n.revSubtreeAllocated.addScaled(amount, sign)
	}
	if ln.lender == nil {
		ag.slackAllocated.addScaled(amount, sign)
	} else {
		ln.lender.lent.addScaled(amount, sign)
		ag.lent.addScaled(amount, sign)
		ag.reservationOf(ln.lender).lent.addScaled(amount, sign)
	}
	a.refreshLendable(ag)
	a.revReshare(fr)
	if ln.offered.isZero() && ln.used.isZero() {
		a.forgetLoan(ln)
	}
}

// moveLoan carries a move of revocable resources out to the framework role's
// loan on the agent; checked says the amounts were found held.
func (a *Allocator) moveLoan(kind moveKind, ln *loan, amount vec) {
	switch kind {
	case moveRecover:
		a.adjustLoan(ln, false, amount, -1)
	case moveRelease:
		a.adjustLoan(ln, true, amount, -1)
	case moveLaunch:
		ln.offered.addScaled(amount, -1)
		ln.used.addScaled(amount, 1)
		ln.agent.revOffered.addScaled(amount, -1)
		ln.agent.revUsed.addScaled(amount, 1)
	}
}

// The revocable DRF order: the role tree by revocable subtree share divided
// by weight, a role's frameworks by revocable share. Shares are of the
// cluster's total, as the regular ones: what can be lent changes with every
// cycle and estimate, and a denominator that moved with it would reorder
// every role each cycle.

func revOrderKey(owner, e *role) float64 {
	if e == owner {
		return owner.ownRevShare
	}
	return e.revSubtreeShare
}

func revOrderLess(owner *role) func(x, y *role) bool {
	return func(x, y *role) bool {
		kx, ky := revOrderKey(owner, x), revOrderKey(owner, y)
		if kx != ky {
			return kx < ky
		}
		return x.rank < y.rank // by name
	}
}

func revFwLess(x, y *fwRole) bool {
	if x.revShare != y.revShare {
		return x.revShare < y.revShare
	}
	return x.rank < y.rank // by id
}

func (a *Allocator) rekeyRevRole(owner, e *role, key float64) {
	if revOrderKey(owner, e) == key {
		return
	}
	if e != owner && e.revEligible == 0 { // not listed
		e.revSubtreeShare = key
		return
	}
	less := revOrderLess(owner)
	i := find(owner.revOrder, e, less)
	if e == owner {
		owner.ownRevShare = key
	} else {
		e.revSubtreeShare = key
	}
	place(owner.revOrder, i, less)
}

// revReshare moves fr, its role and every ancestor to their new places in
// the revocable order after fr's revocable allocation changed.
func (a *Allocator) revReshare(fr *fwRole) {
	r := fr.role
	if share := a.dominant(fr.revAllocated); share != fr.revShare {
		if !fr.revEligible { // not listed
			fr.revShare = share
		} else {
			i := find(r.revFrameworks, fr, revFwLess)
			fr.revShare = share
			place(r.revFrameworks, i, revFwLess)
		}
	}
	a.rekeyRevRole(r, r, a.dominant(r.revAllocated)/r.weight)
	for n := r; n != a.root; n = n.parent {
		a.rekeyRevRole(n.parent, n, a.dominant(n.revSubtreeAllocated)/n.weight)
	}
}

// sortRevocable recomputes the revocable keys of r and its children, listed
// or not, and sorts r's revocable lists.
func (a *Allocator) sortRevocable(r *role) {
	for _, e := range r.order {
		if e == r {
			r.ownRevShare = a.dominant(r.revAllocated) / r.weight
		} else {
			e.revSubtreeShare = a.dominant(e.revSubtreeAllocated) / e.weight
		}
	}
	less := revOrderLess(r)
	slices.SortFunc(r.revOrder, roleCmp(less))
	for _, fr := range r.frameworks {
		fr.revShare = a.dominant(fr.revAllocated)
	}
	slices.SortFunc(r.revFrameworks, func(x, y *fwRole) int {
		if c := cmp.Compare(x.revShare, y.revShare); c != 0 {
			return c
		}
		return cmp.Compare(x.rank, y.rank) // by id
	})
}

// setRevEligible records whether fr may receive revocable offers and keeps
// the revocable lists and counters in step: fr is listed in its role's
// revFrameworks while it may, a role in its parent's revOrder while its
// subtree has such a framework.
func (a *Allocator) setRevEligible(fr *fwRole, want bool) {
	if want == fr.revEligible {
		return
	}
	r := fr.role
	if want {
		fr.revEligible = true
		r.revFrameworks = append(r.revFrameworks, fr)
		place(r.revFrameworks, len(r.revFrameworks)-1, revFwLess)
	} else {
		i := find(r.revFrameworks, fr, revFwLess)
		r.revFrameworks = slices.Delete(r.revFrameworks, i, i+1)
		fr.revEligible = false
	}
	d := 1
	if !want {
		d = -1
	}
	r.ownRevEligible += d
	for n := r; n != nil; n = n.parent {
		n.revEligible += d
		if n == a.root {
			continue
		}
		p := n.parent
		switch {
		case want && n.revEligible == 1:
			p.revOrder = append(p.revOrder, n)
			place(p.revOrder, len(p.revOrder)-1, revOrderLess(p))
		case !want && n.revEligible == 0:
			i := find(p.revOrder, n, revOrderLess(p))
			p.revOrder = slices.Delete(p.revOrder, i, i+1)
		}
	}
	fw := fr.fw
	fw.revEligibleRoles += d
	switch {
	case want && fw.revEligibleRoles == 1:
		a.revEligible.set(fw.slot)
		a.revEligibleCount++
	case !want && fw.revEligibleRoles == 0:
		a.revEligible.clear(fw.slot)
		a.revEligibleCount--
	}
}

// validateRevocablePiece checks the kind a piece claims: usage slack is
// unreserved ("*") and throttleable; a lent reservation names its lender and
// is not. A revocable piece of "*" is slack whether or not it says so.
func validateRevocablePiece(p Piece) error {
	if p.Throttleable && !p.Revocable {
		return fmt.Errorf("throttleable resources must be revocable: %w", ErrInvalid)
	}
	if p.Throttleable && p.Role != api.DefaultRole {
		return fmt.Errorf("throttleable resources are usage slack, not reserved for %q: %w", p.Role, ErrInvalid)
	}
	return nil
}
