package allocator

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/allot/allot/masterd/api"
)

// filter refuses an agent to a framework until a time: a declined offer's
// refuse_seconds. As in Mesos it only holds while the agent has no more free
// than was refused; it is lifted as soon as more is free, since the framework
// has not seen that offer yet.
type filter struct {
	fw      *framework
	ag      *agent
	refused vec // nil: refuse whatever the agent has
	until   time.Time
	index   int // in the heap
	agIndex int // in ag.filters
}

// Decline records a filter: agentID is not offered to frameworkID before
// until, unless the agent gets more free than refused (nil or empty: no matter
// how much). A later Decline for the same pair replaces the filter.
func (a *Allocator) Decline(frameworkID, agentID string, refused api.Resources, until time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fw, ok := a.frameworks[frameworkID]
	if !ok || !fw.registered {
		return fmt.Errorf("framework %q: %w", frameworkID, ErrUnknownFramework)
	}
	ag, ok := a.agents[agentID]
	if !ok {
		return fmt.Errorf("agent %q: %w", agentID, ErrUnknownAgent)
	}
	var v vec
	if len(refused) > 0 {
		var err error
		if v, err = a.toVec(refused, "refused"); err != nil {
			return err
		}
	}
	if f := fw.filters[ag]; f != nil {
		f.refused = v
		f.until = until
		heap.Fix(&a.filters, f.index)
		return nil
	}
	f := &filter{fw: fw, ag: ag, refused: v, until: until, agIndex: len(ag.filters)}
	if fw.filters == nil {
		fw.filters = map[*agent]*filter{}
	}
	fw.filters[ag] = f
	ag.filters = append(ag.filters, f)
	ag.filtered.set(fw.slot)
	heap.Push(&a.filters, f)
	// Declined after the offer was recovered and more was already free:
	// there is an offer the framework has not seen.
	a.liftFilters(ag)
	return nil
}

func (a *Allocator) removeFilter(f *filter) {
	heap.Remove(&a.filters, f.index)
	delete(f.fw.filters, f.ag)
	ag := f.ag
	last := ag.filters[len(ag.filters)-1]
	ag.filters[f.agIndex] = last
	last.agIndex = f.agIndex
	ag.filters[len(ag.filters)-1] = nil
	ag.filters = ag.filters[:len(ag.filters)-1]
	ag.filtered.clear(f.fw.slot)
}

func (a *Allocator) clearFilters(fw *framework) {
	for _, f := range fw.filters {
		a.removeFilter(f)
	}
}

func (a *Allocator) expireFilters(now time.Time) {
	for len(a.filters) > 0 && !a.filters[0].until.After(now) {
		a.removeFilter(a.filters[0])
	}
}

// liftFilters drops the filters an agent's grown free resources outgrew.
func (a *Allocator) liftFilters(ag *agent) {
	for i := 0; i < len(ag.filters); {
		f := ag.filters[i]
		if f.refused != nil && !f.refused.contains(a.freeFor(f.fw, ag)) {
			a.removeFilter(f) // moves the last filter to i
			continue
		}
		i++
	}
}

// freeFor is what the agent has free that the framework could be offered:
// the unreserved pool and the reservations of its roles and their ancestors.
// Other roles' idle reservations must not lift a filter.
func (a *Allocator) freeFor(fw *framework, ag *agent) vec {
	nk := len(a.kindNames)
	v := a.sum.zeroed(nk)
	for k := 0; k < nk; k++ {
		x := ag.unresFree.get(k)
		for _, res := range ag.reservations {
			if a.reservationServes(res.role, fw) {
				x += max(0, res.amount.get(k)-res.allocated.get(k))
			}
		}
		v[k] = min(x, max(0, ag.free.get(k)))
	}
	a.sum = v
	return v
}

func (a *Allocator) reservationServes(pool *role, fw *framework) bool {
	for _, fr := range fw.roles {
		if fr.subscribed && pool.isSelfOrAncestorOf(fr.role) {
			return true
		}
	}
	return false
}

// filterHeap orders filters by expiry.
type filterHeap []*filter

func (h filterHeap) Len() int           { return len(h) }
func (h filterHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h filterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *filterHeap) Push(x any) {
	f := x.(*filter)
	f.index = len(*h)
	*h = append(*h, f)
}
func (h *filterHeap) Pop() any {
	old := *h
	f := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return f
}
