package allocator

import (
	"fmt"
	"sort"

	"github.com/allot/allot/masterd/api"
)

type agent struct {
	// The fields a cycle reads or writes for every agent it visits come
	// first, with the storage of their vecs (inline) and of the agent's
	// first record: the agents are visited in a shuffled order, so each
	// costs a trip to memory for every cache line of it the cycle touches,
	// and a cycle touches ten thousand agents. prefetch loads these lines
	// ahead of the agent's turn.
	freePos         int    // index in Allocator.freeAgents, -1 when absent
	filtered        bitset // framework slots with a filter on this agent
	active          bool
	counted         bool // unresFree is included in Allocator.freeUnreserved
	hasReservedFree bool
	record0Used     bool // record0 is one of records
	// free is total minus every allocation. It goes negative in a kind when
	// the agent came back smaller than what its tasks hold.
	free vec
	// unresFree is the unreserved pool's free part: total minus every
	// reservation (or its allocation, when that is larger), minus
	// unreserved allocations, never more than free.
	unresFree      vec
	total          vec
	unresAllocated vec // allocations from the unreserved pool
	offered        vec // every allocation on the agent, for queries
	used           vec
	slack          vec // the estimator's usage slack
	reservations   []*reservation
	records        []*allocation
	// Offers built for this agent in the current cycle.
	cycle        uint64
	cycleOffers  []agentOffer
	revPos       int // index in Allocator.revAgents, -1 when absent
	id, hostname string
	inlineRecs   [2]*allocation
	inlineOffers [2]agentOffer
	record0      allocation
	// inline backs the seven vecs above while there are few kinds, each
	// capped at the number of kinds the agent was added with (a kind
	// interned later moves the vec out). Last, so that the part fewer kinds
	// leave unused is not among the lines a cycle reads.
	inline [7 * inlineKinds]int64

	filters []*filter

	// The revocable side. slackAllocated is the throttleable loans of the
	// usage slack, lent the loans of the agent's reservations (both offered
	// and in use); revOffered and revUsed sum every loan on the agent. None
	// of them touches free: a loan lends what stays the lender's.
	slackAllocated, lent vec
	revOffered, revUsed  vec
	loans                []*loan
	lendingPos           int // index in Allocator.lendingAgents, -1 when absent
	// revInline backs the four revocable vecs as inline backs the others;
	// the revocable stage prefetches it with the rest of the agent.
	revInline [4 * inlineKinds]int64
}

// reservation is one role's reservation on one agent, with what is allocated
// from it. An entry outlives its reservation while allocations remain.
type reservation struct {
	role      *role
	amount    vec
	allocated vec
	// lent is what of the reservation is lent as revocable, offered or in
	// use.
	lent vec
}

func (ag *agent) reservationOf(r *role) *reservation {
	for _, res := range ag.reservations {
		if res.role == r {
			return res
		}
	}
	return nil
}

type parsedReservation struct {
	role   string
	amount vec
}

func (a *Allocator) parseReservations(agentID string, reservations map[string]api.Resources) ([]parsedReservation, error) {
	names := make([]string, 0, len(reservations))
	for name := range reservations {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]parsedReservation, 0, len(names))
	for _, name := range names {
		if err := validatePolicyRole(name); err != nil {
			return nil, fmt.Errorf("agent %q: reservation: %w", agentID, err)
		}
		v, err := a.toVec(reservations[name], fmt.Sprintf("agent %q: reservation for %q", agentID, name))
		if err != nil {
			return nil, err
		}
		out = append(out, parsedReservation{role: name, amount: v})
	}
	return out, nil
}

// AddAgent adds a connected agent with its total resources and the
// reservations on it (role → resources).
func (a *Allocator) AddAgent(id, hostname string, total api.Resources, reservations map[string]api.Resources) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id == "" {
		return fmt.Errorf("agent id is empty: %w", ErrInvalid)
	}
	if _, ok := a.agents[id]; ok {
		return fmt.Errorf("agent %q: %w", id, ErrAlreadyExists)
	}
	t, err := a.toVec(total, fmt.Sprintf("agent %q: total", id))
	if err != nil {
		return err
	}
	parsed, err := a.parseReservations(id, reservations)
	if err != nil {
		return err
	}
	nk := len(a.kindNames)
	// Sized up front, so the cycles that allocate on the agent do not.
	ag := &agent{id: id, hostname: hostname, active: true, freePos: -1, revPos: -1, lendingPos: -1, loans: make([]*loan, 0, 1)}
	ag.records, ag.cycleOffers = ag.inlineRecs[:0], ag.inlineOffers[:0]
	if nk <= inlineKinds {
		v := func(i int) vec { return ag.inline[i*nk : (i+1)*nk : (i+1)*nk] }
		ag.free, ag.unresFree, ag.total, ag.unresAllocated = v(0), v(1), v(2), v(3)
		ag.offered, ag.used, ag.slack = v(4), v(5), v(6)
	} else {
		ag.free, ag.unresFree, ag.total = make(vec, nk), make(vec, nk), make(vec, nk)
		ag.unresAllocated, ag.offered, ag.used = make(vec, nk), make(vec, nk), make(vec, nk)
	}
	copy(ag.total, t)
	copy(ag.free, t)
	// The revocable books share one array; each part is capped at nk, so
	// a kind interned later grows it into an array of its own.
	rev := ag.revInline[:]
	if nk > inlineKinds {
		rev = make(vec, 4*nk)
	}
	ag.slackAllocated, ag.lent = rev[:nk:nk], rev[nk:2*nk:2*nk]
	ag.revOffered, ag.revUsed = rev[2*nk:3*nk:3*nk], rev[3*nk:4*nk:4*nk]
	a.agents[id] = ag
	a.total.addScaled(t, 1)
	a.refreshTotals()
	a.setReservations(ag, parsed)
	a.refreshAgent(ag)
	return nil
}

// UpdateAgentTotal changes an agent's total resources, as when it re-registers
// with a different size.
func (a *Allocator) UpdateAgentTotal(id string, total api.Resources) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[id]
	if !ok {
		return fmt.Errorf("agent %q: %w", id, ErrUnknownAgent)
	}
	t, err := a.toVec(total, fmt.Sprintf("agent %q: total", id))
	if err != nil {
		return err
	}
	a.total.addScaled(ag.total, -1)
	a.total.addScaled(t, 1)
	ag.free.addScaled(ag.total, -1)
	ag.free.addScaled(t, 1)
	ag.total = ag.total.zeroed(len(t))
	copy(ag.total, t)
	a.refreshTotals()
	a.refreshAgent(ag)
	a.liftFilters(ag)
	return nil
}

// UpdateAgentHostname changes the hostname later offers of the agent carry.
func (a *Allocator) UpdateAgentHostname(id, hostname string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[id]
	if !ok {
		return fmt.Errorf("agent %q: %w", id, ErrUnknownAgent)
	}
	ag.hostname = hostname
	return nil
}

// UpdateAgentReservations replaces the reservations on an agent. Resources a
// new reservation covers that other roles still use become reserved as they
// are released; nothing allocated is taken back.
func (a *Allocator) UpdateAgentReservations(id string, reservations map[string]api.Resources) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[id]
	if !ok {
		return fmt.Errorf("agent %q: %w", id, ErrUnknownAgent)
	}
	parsed, err := a.parseReservations(id, reservations)
	if err != nil {
		return err
	}
	a.setReservations(ag, parsed)
	a.refreshAgent(ag)
	// A shrunk reservation frees unreserved resources other frameworks may
	// have been refused before.
	a.liftFilters(ag)
	return nil
}

func (a *Allocator) setReservations(ag *agent, parsed []parsedReservation) {
	for _, res := range ag.reservations {
		var amount vec
		for _, p := range parsed {
			if p.role == res.role.name {
				amount = p.amount
			}
		}
		a.withReservation(res, func() { res.amount = amount })
	}
	for _, p := range parsed {
		r := a.roleNode(p.role)
		if ag.reservationOf(r) != nil {
			continue
		}
		res := &reservation{role: r}
		r.refs++
		ag.reservations = append(ag.reservations, res)
		a.withReservation(res, func() { res.amount = p.amount })
	}
	a.dropIdleReservations(ag)
}

// dropIdleReservations forgets entries with neither a reservation nor an
// allocation left.
func (a *Allocator) dropIdleReservations(ag *agent) {
	kept := ag.reservations[:0]
	var dropped []*role
	for _, res := range ag.reservations {
		if res.amount.isZero() && res.allocated.isZero() && res.lent.isZero() {
			res.role.refs--
			dropped = append(dropped, res.role)
			continue
		}
		kept = append(kept, res)
	}
	clear(ag.reservations[len(kept):])
	ag.reservations = kept
	for _, r := range dropped {
		a.gcRole(r)
	}
}

// withReservation applies mutate to res and carries the change of its
// unallocated part into the role's reserved totals and quota consumption.
func (a *Allocator) withReservation(res *reservation, mutate func()) {
	nk := len(a.kindNames)
	d := a.delta.zeroed(nk)
	oldAmount := res.amount
	for k := 0; k < nk; k++ {
		d[k] = -max(0, res.amount.get(k)-res.allocated.get(k))
	}
	res.role.reserved.addScaled(oldAmount, -1)
	mutate()
	res.role.reserved.addScaled(res.amount, 1)
	for k := 0; k < nk; k++ {
		d[k] += max(0, res.amount.get(k)-res.allocated.get(k))
	}
	a.delta = d
	if !d.isZero() {
		res.role.unallocatedReserved.addScaled(d, 1)
		a.addConsumed(res.role, d, 1)
	}
}

// RemoveAgent forgets an agent with everything allocated and reserved on it;
// the caller has rescinded its offers and counts its tasks lost.
func (a *Allocator) RemoveAgent(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[id]
	if !ok {
		return fmt.Errorf("agent %q: %w", id, ErrUnknownAgent)
	}
	ag.active = false
	a.refreshAgent(ag)
	for len(ag.records) > 0 {
		a.dropRecord(ag.records[len(ag.records)-1])
	}
	for len(ag.loans) > 0 {
		a.dropLoan(ag.loans[len(ag.loans)-1])
	}
	for len(ag.filters) > 0 {
		a.removeFilter(ag.filters[len(ag.filters)-1])
	}
	for _, res := range ag.reservations {
		a.withReservation(res, func() { res.amount = nil })
	}
	a.dropIdleReservations(ag)
	a.total.addScaled(ag.total, -1)
	a.refreshTotals()
	delete(a.agents, id)
	return nil
}

// ActivateAgent makes a reconnected agent's resources offerable again.
func (a *Allocator) ActivateAgent(id string) error {
	return a.setAgentActive(id, true)
}

// DeactivateAgent stops offering a disconnected agent's resources; what is
// allocated on it stays allocated.
func (a *Allocator) DeactivateAgent(id string) error {
	return a.setAgentActive(id, false)
}

func (a *Allocator) setAgentActive(id string, active bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[id]
	if !ok {
		return fmt.Errorf("agent %q: %w", id, ErrUnknownAgent)
	}
	ag.active = active
	a.refreshAgent(ag)
	return nil
}

// refreshAgent recomputes what the agent has free per pool and keeps the
// cluster-wide free unreserved sum and the set of agents with free resources
// in step.
func (a *Allocator) refreshAgent(ag *agent) {
	nk := len(a.kindNames)
	ag.unresFree.grow(nk)
	a.freeUnreserved.grow(nk)
	reservedFree := false
	for k := 0; k < nk; k++ {
		free := ag.free.get(k)
		unres := ag.total.get(k) - ag.unresAllocated.get(k)
		for _, res := range ag.reservations {
			amount, allocated := res.amount.get(k), res.allocated.get(k)
			unres -= max(amount, allocated)
			if amount > allocated && free > 0 {
				reservedFree = true
			}
		}
		unres = max(0, min(unres, free))
		if ag.counted {
			a.freeUnreserved[k] -= ag.unresFree[k]
		}
		ag.unresFree[k] = unres
		if ag.active {
			a.freeUnreserved[k] += unres
		}
	}
	ag.counted = ag.active
	ag.hasReservedFree = reservedFree

	in := ag.active && a.allocatable(ag.free)
	switch {
	case in && ag.freePos < 0:
		ag.freePos = len(a.freeAgents)
		a.freeAgents = append(a.freeAgents, ag)
	case !in && ag.freePos >= 0 && a.deferFree:
		a.freeAgents[ag.freePos] = nil
		ag.freePos = -1
		a.freeHoles++
	case !in && ag.freePos >= 0:
		last := a.freeAgents[len(a.freeAgents)-1]
		a.freeAgents[ag.freePos] = last
		last.freePos = ag.freePos
		a.freeAgents[len(a.freeAgents)-1] = nil
		a.freeAgents = a.freeAgents[:len(a.freeAgents)-1]
		ag.freePos = -1
	}
	a.refreshLendable(ag)
}

// compactFreeAgents closes the holes agents left in freeAgents while
// deferFree was set.
func (a *Allocator) compactFreeAgents() {
	if a.freeHoles == 0 {
		return
	}
	kept := a.freeAgents[:0]
	for _, ag := range a.freeAgents {
		if ag != nil {
			ag.freePos = len(kept)
			kept = append(kept, ag)
		}
	}
	clear(a.freeAgents[len(kept):])
	a.freeAgents = kept
	a.freeHoles = 0
}
