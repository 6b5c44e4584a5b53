package allocator

import (
	"encoding/binary"
	"slices"
	"time"
	"unsafe"

	"github.com/allot/allot/masterd/api"
)

// stage of a cycle.
type stage int

const (
	// stageQuota serves roles whose allocation lowers the headroom still owed
	// to guarantees, and only up to what they are owed.
	stageQuota stage = iota + 1
	// stageFair shares the rest by weighted DRF, keeping the headroom.
	stageFair
)

// draft is one piece of the offer being computed.
type draft struct {
	pool   *role
	amount vec
}

// Allocate runs one allocation cycle at time now and returns the offers made.
// Their resources count as allocated until handed back with Recover or moved
// to tasks with Launch.
func (a *Allocator) Allocate(now time.Time) []Offer {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireFilters(now)
	if a.sharesDirty {
		a.sortAll()
	}
	a.cycle++
	a.out.reset(len(a.kindNames))
	regular := a.eligibleCount > 0 && len(a.freeAgents) > 0
	// About one offer per agent visited, regular or revocable.
	expected := 0
	if regular {
		expected += len(a.freeAgents)
	}
	if a.revEligibleCount > 0 {
		expected += len(a.revAgents)
	}
	a.out.reserve(expected)
	if regular {
		// Visiting agents in a new order every cycle keeps the first agents
		// from always going to the frameworks first in DRF order.
		cands := append(a.candidates[:0], a.freeAgents...)
		a.deferFree = true
		a.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		for i, ag := range cands {
			if a.root.excessNodes == 0 {
				break
			}
			prefetchAhead(cands, i)
			a.serve(ag, stageQuota)
		}
		for i, ag := range cands {
			prefetchAhead(cands, i)
			a.serve(ag, stageFair)
		}
		a.deferFree = false
		a.compactFreeAgents()
		clear(cands)
		a.candidates = cands[:0]
	}
	a.revocableStage()
	return a.out.build(a)
}

// prefetchDistance is how many agents ahead of the one being served a cycle
// prefetches: far enough for the lines to arrive in time, near enough that
// they are still in the cache when their turn comes.
const prefetchDistance = 4

func prefetchAhead(agents []*agent, i int) {
	if j := i + prefetchDistance; j < len(agents) {
		prefetch(uintptr(unsafe.Pointer(agents[j])))
	}
}

// prefetchAllAhead is prefetchAhead for the revocable stage, which reads
// the revocable books at the end of the agent too.
func prefetchAllAhead(agents []*agent, i int) {
	if j := i + prefetchDistance; j < len(agents) {
		p := uintptr(unsafe.Pointer(agents[j]))
		prefetch(p)
		prefetch(p + unsafe.Offsetof(agents[j].filters))
	}
}

// serve offers one agent's free resources in DRF order until nothing
// allocatable is left or no one can take more.
func (a *Allocator) serve(ag *agent, st stage) {
	if ag.freePos < 0 {
		return
	}
	if ag.filtered != nil && a.eligible.subsetOf(ag.filtered) {
		return
	}
	if !a.takeable(ag) {
		return
	}
	// When the headroom surplus leaves nothing allocatable of the agent's
	// unreserved resources, only roles still owed a guarantee can take any:
	// with none, the agent is laid away as it is and no role need be looked
	// at; otherwise the walk looks at those roles alone.
	onlyExcess := st == stageQuota
	if !onlyExcess && !a.reservedFree && a.guaranteedRoles > 0 && !a.surplusAllocatable(ag) {
		if a.root.excessNodes == 0 {
			return
		}
		onlyExcess = true
	}
	a.stamp++
	for ag.freePos >= 0 && a.visit(a.root, ag, st, false, onlyExcess) && a.takeable(ag) {
	}
}

// takeable reports whether anyone could be offered something of the agent:
// allocatable unreserved resources, or free reservations a role with an
// eligible framework in its subtree can take. Idle reservations of roles
// with none (a lender's, say) keep an agent among the free ones, but are
// nobody's to take: an agent with only those is passed over at once rather
// than walked through every role. It records the second in a.reservedFree.
func (a *Allocator) takeable(ag *agent) bool {
	a.reservedFree = ag.hasReservedFree && a.reservationTaken(ag)
	return a.reservedFree || a.allocatable(ag.unresFree)
}

// reservationTaken reports whether a reservation on the agent with
// something unallocated has an eligible framework in its role's subtree.
func (a *Allocator) reservationTaken(ag *agent) bool {
	for _, res := range ag.reservations {
		if res.role.eligible == 0 {
			continue
		}
		for k, x := range res.amount {
			if x > res.allocated.get(k) {
				return true
			}
		}
	}
	return false
}

// surplusAllocatable reports whether the agent's unreserved free resources,
// capped by what the headroom can spare, are worth an offer.
func (a *Allocator) surplusAllocatable(ag *agent) bool {
	nk := len(a.kindNames)
	v := a.sum.zeroed(nk)
	for k := 0; k < nk; k++ {
		surplus := a.freeUnreserved.get(k) - a.root.childRequired.get(k)
		v[k] = max(0, min(ag.unresFree.get(k), surplus))
	}
	a.sum = v
	return a.allocatable(v)
}

// visit walks n's subtree in DRF order and grants the agent to the first role
// and framework that can take something. pathExcess says whether n or an
// ancestor has excess (so an allocation below n lowers the headroom owed);
// onlyExcess restricts the walk to such roles.
func (a *Allocator) visit(n *role, ag *agent, st stage, pathExcess, onlyExcess bool) bool {
	for i := 0; i < len(n.order); i++ {
		c := n.order[i]
		if c == n {
			if a.tryRole(n, ag, st, pathExcess, onlyExcess) {
				return true
			}
			continue
		}
		if c.eligible == 0 {
			continue
		}
		pe := pathExcess || c.hasExcess
		if onlyExcess && !pe && c.excessNodes == 0 {
			continue
		}
		if c.limitFull && !a.reservedFree {
			continue
		}
		if a.visit(c, ag, st, pe, onlyExcess) {
			return true
		}
	}
	return false
}

// tryRole makes r's offer for the agent, if it has one, to the first eligible
// framework of r in DRF order that has not filtered the agent. A role is
// tried once per agent and stage: what it could not take now it cannot take
// later in the same pass, since room only shrinks as the pass allocates.
func (a *Allocator) tryRole(r *role, ag *agent, st stage, pathExcess, onlyExcess bool) bool {
	if r.ownEligible == 0 || r.tried == a.stamp {
		return false
	}
	r.tried = a.stamp
	if onlyExcess && !pathExcess {
		return false
	}
	if !a.offerable(r, ag, st) {
		return false
	}
	for _, fr := range r.frameworks {
		if fr.eligible && !ag.filtered.has(fr.slot) {
			a.grant(fr, ag)
			return true
		}
	}
	return false
}

// offerable computes, into a.drafts, what role r can be offered of the agent
// in this stage, and reports whether it is worth an offer:
//   - its reservations and those of its ancestors, within the limits of the
//     roles between the reservation's role and r (reserved resources already
//     count toward the reservation's role and above);
//   - unreserved resources within the limit of r and every ancestor, and
//     leaving enough for the headroom: a unit that lowers what the
//     guarantees are owed (the excess along r's path) costs nothing, others
//     come out of the surplus. In stageQuota the kinds a guarantee names are
//     offered only up to what is owed, as Mesos does.
func (a *Allocator) offerable(r *role, ag *agent, st stage) bool {
	nk := len(a.kindNames)
	a.path = a.path[:0]
	for n := r; n != a.root; n = n.parent {
		a.path = append(a.path, n)
	}
	for len(a.rooms) < len(a.path) {
		a.rooms = append(a.rooms, nil)
	}
	for i, n := range a.path {
		room := a.rooms[i].zeroed(nk)
		for k := range room {
			room[k] = unlimited
			if limit, ok := n.limitAt(k); ok {
				room[k] = max(0, limit-n.consumed.get(k))
			}
		}
		a.rooms[i] = room
	}
	avail := a.avail.zeroed(nk)
	for k := range avail {
		avail[k] = max(0, ag.free.get(k))
	}
	a.avail = avail
	total := a.sum.zeroed(nk)
	a.sum = total
	a.ndrafts = 0

	reserved := false
	for _, res := range ag.reservations {
		below := -1 // path entries strictly below the reservation's role
		for i, n := range a.path {
			if n == res.role {
				below = i
				break
			}
		}
		if below < 0 {
			continue
		}
		d := a.nextDraft(nk)
		nonzero := false
		for k := 0; k < nk; k++ {
			x := min(res.amount.get(k)-res.allocated.get(k), avail[k])
			for i := 0; i < below; i++ {
				x = min(x, a.rooms[i][k])
			}
			x = max(0, x)
			d.amount[k] = x
			if x > 0 {
				nonzero = true
			}
		}
		if !nonzero {
			continue
		}
		for k := 0; k < nk; k++ {
			x := d.amount[k]
			avail[k] -= x
			total[k] += x
			for i := 0; i < below; i++ {
				a.rooms[i][k] -= x
			}
		}
		d.pool = res.role
		a.ndrafts++
		reserved = true
	}

	d := a.nextDraft(nk)
	nonzero, progress := false, false
	for k := 0; k < nk; k++ {
		x := min(ag.unresFree.get(k), avail[k])
		for i := range a.path {
			x = min(x, a.rooms[i][k])
		}
		if x > 0 && a.guaranteedRoles > 0 {
			var owed int64
			named := false
			for _, n := range a.path {
				owed += n.excess.get(k)
				if n.hasGuarantee && n.guarantee.get(k) > 0 {
					named = true
				}
			}
			limit := owed
			if st == stageFair || !named {
				limit += max(0, a.freeUnreserved.get(k)-a.root.childRequired.get(k))
			}
			x = min(x, limit)
			if owed > 0 && x > 0 {
				progress = true
			}
		}
		x = max(0, x)
		d.amount[k] = x
		total[k] += x
		if x > 0 {
			nonzero = true
		}
	}
	if nonzero {
		d.pool = nil
		a.ndrafts++
	}
	if st == stageQuota && !progress && !reserved {
		return false
	}
	return a.allocatable(total)
}

// nextDraft returns the next draft slot, zeroed; it is kept only if the
// caller counts it in a.ndrafts.
func (a *Allocator) nextDraft(nk int) *draft {
	if a.ndrafts == len(a.drafts) {
		a.drafts = append(a.drafts, draft{})
	}
	d := &a.drafts[a.ndrafts]
	d.amount = d.amount.zeroed(nk)
	return d
}

// grant allocates the drafts to fr and adds them to its offer for the agent.
func (a *Allocator) grant(fr *fwRole, ag *agent) {
	oi := a.out.offerFor(a.cycle, fr, ag, offerRegular)
	for i := 0; i < a.ndrafts; i++ {
		d := &a.drafts[i]
		rec := a.record(ag, fr, d.pool)
		a.out.addPiece(oi, d.pool, d.amount, rec)
		a.adjust(rec, false, d.amount, 1)
	}
}

// offerBuilder collects a cycle's offers without a map: pieces of an offer
// form a linked list in one slice, amounts live in one arena.
type offerBuilder struct {
	offers []builtOffer
	pieces []builtPiece
	arena  []int64
	nk     int // every amount in the arena has nk entries

	// shared holds resource maps by amount (the amount's bytes as key):
	// offers of one size, as whole agents of one shape are, share one map,
	// in this cycle and the next ones, rather than each making its own,
	// which was a fifth of a busy leader's garbage. Nothing changes an
	// offer's map (see Piece).
	shared map[string]api.Resources
	key    []byte
}

type builtOffer struct {
	fr *fwRole
	ag *agent
	// The agent's id and hostname, copied while the agent is in the cache:
	// build would otherwise go back to memory for each.
	agentID, hostname string
	kind              offerKind
	first, last       int
	n                 int
}

// offerKind: an offer holds one kind of resources, so the leader can rescind
// revocable offers without touching regular ones, and slack without lent
// reservations.
type offerKind uint8

const (
	offerRegular offerKind = iota
	offerSlack             // revocable usage slack, throttleable
	offerLent              // revocable lent reservations
)

type builtPiece struct {
	pool *role
	rec  *allocation // a regular piece's record, for RecoverOffer
	off  int
	next int
}

func (b *offerBuilder) reset(nk int) {
	b.nk = nk
	clear(b.offers)
	b.offers = b.offers[:0]
	clear(b.pieces)
	b.pieces = b.pieces[:0]
	b.arena = b.arena[:0]
}

// reserve makes room for about n offers, so a cycle that hands out a whole
// cluster does not grow its slices step by step.
func (b *offerBuilder) reserve(n int) {
	if cap(b.offers) < n {
		b.offers = make([]builtOffer, 0, n)
		b.pieces = make([]builtPiece, 0, n)
		b.arena = make([]int64, 0, n*b.nk)
	}
}

func (b *offerBuilder) offerFor(cycle uint64, fr *fwRole, ag *agent, kind offerKind) int {
	if ag.cycle != cycle {
		ag.cycle = cycle
		ag.cycleOffers = ag.cycleOffers[:0]
	}
	for _, o := range ag.cycleOffers {
		if o.fr == fr && o.kind == kind {
			return o.index
		}
	}
	oi := len(b.offers)
	b.offers = append(b.offers, builtOffer{fr: fr, ag: ag, agentID: ag.id, hostname: ag.hostname, kind: kind, first: -1, last: -1})
	ag.cycleOffers = append(ag.cycleOffers, agentOffer{fr: fr, index: oi, kind: kind})
	return oi
}

// agentOffer is an offer built for an agent in the current cycle. It names
// the offer's framework role and kind itself, so that finding it does not
// read the offer, which the revocable stage comes back to long after the
// regular ones built it.
type agentOffer struct {
	fr    *fwRole
	index int // in offerBuilder.offers
	kind  offerKind
}

func (b *offerBuilder) addPiece(oi int, pool *role, amount vec, rec *allocation) {
	o := &b.offers[oi]
	for p := o.first; p >= 0; p = b.pieces[p].next {
		if b.pieces[p].pool == pool {
			off := b.pieces[p].off
			for k, x := range amount {
				b.arena[off+k] += x
			}
			return
		}
	}
	pi := len(b.pieces)
	b.pieces = append(b.pieces, builtPiece{pool: pool, rec: rec, off: len(b.arena), next: -1})
	for k := 0; k < b.nk; k++ {
		b.arena = append(b.arena, amount.get(k))
	}
	if o.last >= 0 {
		b.pieces[o.last].next = pi
	} else {
		o.first = pi
	}
	o.last = pi
	o.n++
}

func (b *offerBuilder) build(a *Allocator) []Offer {
	if len(b.offers) == 0 {
		return nil
	}
	offers := make([]Offer, len(b.offers))
	pieces := make([]Piece, len(b.pieces))
	// What RecoverOffer needs, in three allocations for the cycle: the
	// amounts are copied out of the arena, which the next cycle reuses.
	helds := make([]heldOffer, len(b.offers))
	heldPieces := make([]heldPiece, len(b.pieces))
	amounts := slices.Clone(b.arena)
	next := 0
	for i, o := range b.offers {
		start := next
		for p := o.first; p >= 0; p = b.pieces[p].next {
			bp := b.pieces[p]
			name := api.DefaultRole
			if bp.pool != nil {
				name = bp.pool.name
			}
			amount := b.arena[bp.off : bp.off+b.nk]
			pieces[next] = Piece{
				Role:         name,
				Revocable:    o.kind != offerRegular,
				Throttleable: o.kind == offerSlack,
				Resources:    b.resources(a, amount),
			}
			if o.kind == offerRegular {
				heldPieces[next] = heldPiece{rec: bp.rec, pool: bp.pool,
					amount: vec(amounts[bp.off : bp.off+b.nk : bp.off+b.nk])}
			}
			next++
		}
		offers[i] = Offer{
			FrameworkID: o.fr.fw.id,
			AgentID:     o.agentID,
			Hostname:    o.hostname,
			Role:        o.fr.role.name,
			Pieces:      pieces[start:next:next],
		}
		if o.kind == offerRegular {
			helds[i] = heldOffer{ag: o.ag, fr: o.fr, pieces: heldPieces[start:next:next]}
			offers[i].held = &helds[i]
		}
	}
	// Cleared now, while in the cache, rather than by the next cycle's
	// reset: that would cost an idle cycle after a busy one dearly.
	b.reset(b.nk)
	return offers
}

// maxSharedResources bounds the resource maps a builder keeps: far more
// sizes than a cluster of a few agent shapes offers, few enough that
// partial offers of every size cannot grow it without end.
const maxSharedResources = 1024

// resources is amount as a resource map, shared with other offers of the
// same amount.
func (b *offerBuilder) resources(a *Allocator, amount vec) api.Resources {
	b.key = b.key[:0]
	for _, x := range amount {
		b.key = binary.LittleEndian.AppendUint64(b.key, uint64(x))
	}
	if r, ok := b.shared[string(b.key)]; ok {
		return r
	}
	r := a.toResources(amount)
	if b.shared == nil || len(b.shared) >= maxSharedResources {
		b.shared = map[string]api.Resources{}
	}
	b.shared[string(b.key)] = r
	return r
}
