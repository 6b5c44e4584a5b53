package allocator

import (
	"fmt"
	"slices"
)

// checkInternals recomputes, from scratch, what the allocator maintains
// incrementally (sorted orders and their keys, eligibility and excess
// counters, the free-agent set) and reports the first difference.
func (a *Allocator) checkInternals() error {
	var walk func(r *role) (eligible, excess int, err error)
	walk = func(r *role) (int, int, error) {
		less := a.orderLess(r)
		if !slices.IsSortedFunc(r.order, func(x, y *role) int {
			if less(x, y) {
				return -1
			}
			return 1
		}) {
			return 0, 0, fmt.Errorf("role %q: children out of order", r.name)
		}
		if !slices.IsSortedFunc(r.frameworks, func(x, y *fwRole) int {
			if fwLess(x, y) {
				return -1
			}
			return 1
		}) {
			return 0, 0, fmt.Errorf("role %q: frameworks out of order", r.name)
		}
		eligible, excess := 0, 0
		own := 0
		for _, fr := range r.frameworks {
			want := fr.fw.active && fr.fw.registered && fr.subscribed && !fr.suppressed
			if fr.eligible != want {
				return 0, 0, fmt.Errorf("framework %q in %q: eligible %v, want %v", fr.fw.id, r.name, fr.eligible, want)
			}
			if want {
				own++
			}
			if !a.sharesDirty && fr.share != a.dominant(fr.allocated) {
				return 0, 0, fmt.Errorf("framework %q in %q: share %v, want %v", fr.fw.id, r.name, fr.share, a.dominant(fr.allocated))
			}
		}
		if r != a.root && own != r.ownEligible {
			return 0, 0, fmt.Errorf("role %q: %d own eligible, want %d", r.name, r.ownEligible, own)
		}
		eligible += own
		if r.hasExcess {
			excess++
		}
		for _, c := range r.order {
			if c == r {
				if !a.sharesDirty && r.ownShare != a.dominant(r.allocated)/r.weight {
					return 0, 0, fmt.Errorf("role %q: own share %v, want %v", r.name, r.ownShare, a.dominant(r.allocated)/r.weight)
				}
				continue
			}
			if c.parent != r {
				return 0, 0, fmt.Errorf("role %q listed under %q", c.name, r.name)
			}
			if !a.sharesDirty && c.subtreeShare != a.dominant(c.subtreeAllocated)/c.weight {
				return 0, 0, fmt.Errorf("role %q: share %v, want %v", c.name, c.subtreeShare, a.dominant(c.subtreeAllocated)/c.weight)
			}
			e, x, err := walk(c)
			if err != nil {
				return 0, 0, err
			}
			eligible += e
			excess += x
		}
		if eligible != r.eligible {
			return 0, 0, fmt.Errorf("role %q: %d eligible in subtree, want %d", r.name, r.eligible, eligible)
		}
		if excess != r.excessNodes {
			return 0, 0, fmt.Errorf("role %q: %d excess nodes, want %d", r.name, r.excessNodes, excess)
		}
		return eligible, excess, nil
	}
	if _, _, err := walk(a.root); err != nil {
		return err
	}
	for _, ag := range a.agents {
		want := ag.active && a.allocatable(ag.free)
		if (ag.freePos >= 0) != want || (want && a.freeAgents[ag.freePos] != ag) {
			return fmt.Errorf("agent %q: in free set %v, want %v", ag.id, ag.freePos >= 0, want)
		}
	}
	return a.checkRevocable()
}

// checkRevocable recomputes the revocable side: the revocable orders and
// their keys and counters, every loan sum, and the sets of agents with
// something to lend and with loans.
func (a *Allocator) checkRevocable() error {
	var walk func(r *role) (int, error)
	walk = func(r *role) (int, error) {
		less := revOrderLess(r)
		if !slices.IsSortedFunc(r.revOrder, func(x, y *role) int {
			if less(x, y) {
				return -1
			}
			return 1
		}) {
			return 0, fmt.Errorf("role %q: revocable order out of order", r.name)
		}
		if !slices.IsSortedFunc(r.revFrameworks, func(x, y *fwRole) int {
			if revFwLess(x, y) {
				return -1
			}
			return 1
		}) {
			return 0, fmt.Errorf("role %q: revocable frameworks out of order", r.name)
		}
		// The revocable lists hold exactly what the stage may serve.
		own := 0
		for _, fr := range r.frameworks {
			want := fr.eligible && fr.fw.revocable
			if fr.revEligible != want || slices.Contains(r.revFrameworks, fr) != want {
				return 0, fmt.Errorf("framework %q in %q: revocable eligible %v, listed %v, want %v",
					fr.fw.id, r.name, fr.revEligible, slices.Contains(r.revFrameworks, fr), want)
			}
			if want {
				own++
			}
			if !a.sharesDirty && fr.revShare != a.dominant(fr.revAllocated) {
				return 0, fmt.Errorf("framework %q in %q: revocable share %v, want %v", fr.fw.id, r.name, fr.revShare, a.dominant(fr.revAllocated))
			}
		}
		if len(r.revFrameworks) != own {
			return 0, fmt.Errorf("role %q: %d revocable frameworks listed, %d may take them", r.name, len(r.revFrameworks), own)
		}
		listed := 0
		if r != a.root {
			listed = 1 // the role's own frameworks
		}
		for _, c := range r.order {
			if c != r && c.revEligible > 0 {
				listed++
				if !slices.Contains(r.revOrder, c) {
					return 0, fmt.Errorf("role %q: child %q with revocable frameworks not in its revocable order", r.name, c.name)
				}
			}
			if c != r && c.revEligible == 0 && !a.sharesDirty && c.revSubtreeShare != a.dominant(c.revSubtreeAllocated)/c.weight {
				return 0, fmt.Errorf("role %q: unlisted revocable share %v", c.name, c.revSubtreeShare)
			}
		}
		if len(r.revOrder) != listed || r != a.root && !slices.Contains(r.revOrder, r) {
			return 0, fmt.Errorf("role %q: %d entries in its revocable order, want %d", r.name, len(r.revOrder), listed)
		}
		if r != a.root && own != r.ownRevEligible {
			return 0, fmt.Errorf("role %q: %d own revocable eligible, want %d", r.name, r.ownRevEligible, own)
		}
		eligible := own
		for _, c := range r.revOrder {
			if c == r {
				if !a.sharesDirty && r.ownRevShare != a.dominant(r.revAllocated)/r.weight {
					return 0, fmt.Errorf("role %q: own revocable share %v", r.name, r.ownRevShare)
				}
				continue
			}
			if c.parent != r {
				return 0, fmt.Errorf("role %q in %q's revocable order", c.name, r.name)
			}
			if !a.sharesDirty && c.revSubtreeShare != a.dominant(c.revSubtreeAllocated)/c.weight {
				return 0, fmt.Errorf("role %q: revocable share %v", c.name, c.revSubtreeShare)
			}
			e, err := walk(c)
			if err != nil {
				return 0, err
			}
			eligible += e
		}
		if eligible != r.revEligible {
			return 0, fmt.Errorf("role %q: %d revocable eligible in subtree, want %d", r.name, r.revEligible, eligible)
		}
		return eligible, nil
	}
	if _, err := walk(a.root); err != nil {
		return err
	}

	// Every sum, from the loans alone.
	lent := map[*role]vec{}
	roleOwn := map[*role]vec{}
	subtree := map[*role]vec{}
	fwRoleSum := map[*fwRole]vec{}
	fwRoleLoans := map[*fwRole]int{}
	for _, ag := range a.agents {
		var slack, lentHere, offered, used vec
		resLent := map[*reservation]vec{}
		for i, ln := range ag.loans {
			if ln.agIndex != i || ln.agent != ag || ln.fr.fw.loans[ln.fwIndex] != ln {
				return fmt.Errorf("agent %q: loan %d misindexed", ag.id, i)
			}
			if ln.offered.isZero() && ln.used.isZero() {
				return fmt.Errorf("agent %q: empty loan of %q kept", ag.id, ln.fr.fw.id)
			}
			all := ln.offered.clone()
			all.addScaled(ln.used, 1)
			offered.addScaled(ln.offered, 1)
			used.addScaled(ln.used, 1)
			if ln.lender == nil {
				slack.addScaled(all, 1)
			} else {
				res := ag.reservationOf(ln.lender)
				if res == nil {
					return fmt.Errorf("agent %q: loan of %q's reservation without an entry", ag.id, ln.lender.name)
				}
				v := resLent[res]
				v.addScaled(all, 1)
				resLent[res] = v
				lentHere.addScaled(all, 1)
				v = lent[ln.lender]
				v.addScaled(all, 1)
				lent[ln.lender] = v
			}
			r := ln.fr.role
			v := roleOwn[r]
			v.addScaled(all, 1)
			roleOwn[r] = v
			for n := r; n != a.root; n = n.parent {
				v := subtree[n]
				v.addScaled(all, 1)
				subtree[n] = v
			}
			v = fwRoleSum[ln.fr]
			v.addScaled(all, 1)
			fwRoleSum[ln.fr] = v
			fwRoleLoans[ln.fr]++
		}
		for _, c := range []struct {
			name      string
			got, want vec
		}{
			{"slack allocated", ag.slackAllocated, slack},
			{"lent", ag.lent, lentHere},
			{"revocable offered", ag.revOffered, offered},
			{"revocable used", ag.revUsed, used},
		} {
			if !sameVec(c.got, c.want) {
				return fmt.Errorf("agent %q: %s %v, loans say %v", ag.id, c.name, c.got, c.want)
			}
		}
		for _, res := range ag.reservations {
			if !sameVec(res.lent, resLent[res]) {
				return fmt.Errorf("agent %q: reservation of %q lends %v, loans say %v", ag.id, res.role.name, res.lent, resLent[res])
			}
		}
		if (ag.lendingPos >= 0) != (len(ag.loans) > 0) || (ag.lendingPos >= 0 && a.lendingAgents[ag.lendingPos] != ag) {
			return fmt.Errorf("agent %q: in lending set %v with %d loans", ag.id, ag.lendingPos >= 0, len(ag.loans))
		}
		want := a.hasLendable(ag)
		if (ag.revPos >= 0) != want || (want && a.revAgents[ag.revPos] != ag) {
			return fmt.Errorf("agent %q: in lendable set %v, want %v", ag.id, ag.revPos >= 0, want)
		}
	}
	for _, r := range a.roles {
		for _, c := range []struct {
			name      string
			got, want vec
		}{
			{"lent", r.lent, lent[r]},
			{"revocable allocated", r.revAllocated, roleOwn[r]},
			{"revocable subtree", r.revSubtreeAllocated, subtree[r]},
		} {
			if !sameVec(c.got, c.want) {
				return fmt.Errorf("role %q: %s %v, loans say %v", r.name, c.name, c.got, c.want)
			}
		}
		for _, fr := range r.frameworks {
			if !sameVec(fr.revAllocated, fwRoleSum[fr]) || fr.loans != fwRoleLoans[fr] {
				return fmt.Errorf("framework %q in %q: revocable %v in %d loans, loans say %v in %d",
					fr.fw.id, r.name, fr.revAllocated, fr.loans, fwRoleSum[fr], fwRoleLoans[fr])
			}
		}
	}
	eligible := 0
	for _, fw := range a.frameworks {
		if a.revEligible.has(fw.slot) != (fw.revEligibleRoles > 0) {
			return fmt.Errorf("framework %q: revocable eligible bit %v with %d roles", fw.id, a.revEligible.has(fw.slot), fw.revEligibleRoles)
		}
		if fw.revEligibleRoles > 0 {
			eligible++
		}
	}
	if eligible != a.revEligibleCount {
		return fmt.Errorf("%d revocable eligible frameworks, counted %d", eligible, a.revEligibleCount)
	}
	return nil
}

// sameVec compares ignoring a missing tail of zeros.
func sameVec(x, y vec) bool {
	for k := 0; k < max(len(x), len(y)); k++ {
		if x.get(k) != y.get(k) {
			return false
		}
	}
	return true
}
