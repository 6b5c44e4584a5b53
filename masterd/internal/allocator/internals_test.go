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
	return nil
}
