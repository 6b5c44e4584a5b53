package allocator

import (
	"cmp"
	"slices"
	"sort"

	"github.com/allot/allot/masterd/api"
)

// role is a node of the role tree ("eng" is the parent of "eng/ml"). The root
// is a nameless node above the top-level roles and "*".
type role struct {
	// What a cycle reads of every role it walks past comes first, in as
	// few cache lines as it fits: a cycle's agents pass through the cache
	// between two visits of a role, and every line of it read is a wait.

	// ownEligible counts frameworks of this role that may receive offers,
	// eligible those of the whole subtree, so DRF skips idle subtrees.
	ownEligible, eligible int
	excessNodes           int // nodes in the subtree with excess
	hasExcess             bool
	limitFull             bool // the limit leaves room for nothing allocatable
	hasGuarantee          bool
	hasLimit              bool
	tried                 uint64
	// The keys of the role's entries in its own order and in its parent's,
	// already divided by weight. Changed only through rekey, which moves
	// the entry along.
	ownShare, subtreeShare float64
	rank                   int // of name among the roles' names; see nameRanks
	weight                 float64
	parent                 *role

	// order holds the children and the role itself (standing for the
	// frameworks subscribed to the role directly), sorted by weighted
	// dominant share: the order DRF serves them in. An entry is found by
	// binary search on the share it was placed by, so nothing needs to
	// track indices as entries shift.
	order []*role

	// frameworks subscribed to (or holding allocations in) this very role,
	// sorted by dominant share.
	frameworks []*fwRole

	name      string
	guarantee vec
	limit     vec
	limited   []bool

	// Non-revocable allocations (offered and in use) of this role alone.
	allocated vec
	offered   vec
	// reserved is the sum of this role's reservations on every agent,
	// unallocatedReserved the part of them not allocated.
	reserved            vec
	unallocatedReserved vec
	// Subtree sums: subtreeAllocated drives DRF, consumed is the quota
	// consumption (allocations plus unallocated reservations).
	subtreeAllocated vec
	consumed         vec

	// Headroom: required is what the subtree still needs from unreserved
	// resources to meet every guarantee in it, max(unmet guarantee, sum of
	// children's required); childRequired is that sum; excess is the part of
	// required owed to this role's own guarantee. A unit allocated to a role
	// lowers the total required headroom by one as long as the excess along
	// its path (role and ancestors) is positive.
	required, childRequired, excess vec

	// refs counts agent reservation entries and allocation records (and
	// revocable loans) from this role's reservations, which keep the node
	// alive.
	refs int

	// The revocable side, kept apart from the above: revocable allocations
	// never count toward quota, guarantees or the regular DRF shares.
	// revAllocated (offered and in use) is the role's own,
	// revSubtreeAllocated the subtree's. revOrder holds the role itself and
	// the children with a framework taking revocable resources in their
	// subtree (revEligible > 0), revFrameworks the role's frameworks taking
	// them (revEligible), sorted by revocable shares: the order the revocable
	// stage serves them in, with nothing in it the stage would pass over.
	revAllocated, revSubtreeAllocated vec
	revOrder                          []*role
	revFrameworks                     []*fwRole
	ownRevEligible, revEligible       int
	ownRevShare, revSubtreeShare      float64
	revTried                          uint64

	// Lending: lent is what of this role's reservations is allocated as
	// revocable, cluster-wide. With hasLendingLimit, lendingLimit caps it in
	// every kind (a kind the limit does not name is lent not at all).
	lent            vec
	hasLendingLimit bool
	lendingLimit    vec
}

func (r *role) limitAt(k int) (int64, bool) {
	if k < len(r.limited) && r.limited[k] {
		return r.limit[k], true
	}
	return 0, false
}

// isSelfOrAncestorOf reports whether r is n or one of n's ancestors.
func (r *role) isSelfOrAncestorOf(n *role) bool {
	for ; n != nil; n = n.parent {
		if n == r {
			return true
		}
	}
	return false
}

// roleNode returns the node of a validated role name, creating it and its
// ancestors as needed.
func (a *Allocator) roleNode(name string) *role {
	if r, ok := a.roles[name]; ok {
		return r
	}
	parent := a.root
	if p, ok := api.ParentRole(name); ok {
		parent = a.roleNode(p)
	}
	r := &role{name: name, parent: parent, weight: api.DefaultWeight}
	a.roleRanks.add(r)
	r.order = []*role{r}
	parent.order = append(parent.order, r)
	place(parent.order, len(parent.order)-1, a.orderLess(parent))
	r.revOrder = []*role{r}
	a.roles[name] = r
	return r
}

func (r *role) unused() bool {
	return len(r.order) == 1 && len(r.frameworks) == 0 && !r.hasGuarantee && !r.hasLimit &&
		r.weight == api.DefaultWeight && r.refs == 0 && !r.hasLendingLimit
}

// gcRole drops r and then its ancestors while nothing refers to them, so a
// long-lived leader does not accumulate every role a framework ever named.
// A node already dropped (its last reservation entry went first) is left
// alone.
func (a *Allocator) gcRole(r *role) {
	for r != nil && r != a.root && a.roles[r.name] == r && r.unused() {
		p := r.parent
		i := find(p.order, r, a.orderLess(p))
		p.order = slices.Delete(p.order, i, i+1)
		delete(a.roles, r.name)
		a.roleRanks.remove(r)
		r = p
	}
}

func orderKey(owner, e *role) float64 {
	if e == owner {
		return owner.ownShare
	}
	return e.subtreeShare
}

// orderLess orders owner.order. Ties break by name, so the order is
// deterministic; the role's own entry sorts before its children ("eng" <
// "eng/ml").
func (a *Allocator) orderLess(owner *role) func(x, y *role) bool {
	return func(x, y *role) bool { return orderBefore(owner, x, y) }
}

func orderBefore(owner, x, y *role) bool {
	kx, ky := orderKey(owner, x), orderKey(owner, y)
	if kx != ky {
		return kx < ky
	}
	return x.rank < y.rank // by name
}

func fwLess(x, y *fwRole) bool {
	if x.share != y.share {
		return x.share < y.share
	}
	return x.rank < y.rank // by id
}

// find returns the index of e in a list sorted by less.
func find[T comparable](list []T, e T, less func(x, y T) bool) int {
	i := sort.Search(len(list), func(j int) bool { return !less(list[j], e) })
	if i < len(list) && list[i] == e {
		return i
	}
	// Unreachable while every key change goes through rekey; a linear scan
	// keeps a broken order from becoming a crash.
	return slices.Index(list, e)
}

// place moves list[i], the only entry out of order, to where it belongs: a
// binary search finds the spot and one copy shifts the entries in between.
// A grant moves its role past most others, so this is the cycle's hot path.
func place[T any](list []T, i int, less func(x, y T) bool) {
	e := list[i]
	switch {
	case i > 0 && less(e, list[i-1]):
		j := sort.Search(i, func(j int) bool { return less(e, list[j]) })
		copy(list[j+1:i+1], list[j:i])
		list[j] = e
	case i+1 < len(list) && less(list[i+1], e):
		j := i + sort.Search(len(list)-i-1, func(k int) bool { return !less(list[i+1+k], e) })
		copy(list[i:j], list[i+1:j+1])
		list[j] = e
	}
}

// rekeyRole changes the key of e in owner.order and moves it accordingly.
func (a *Allocator) rekeyRole(owner, e *role, key float64) {
	if orderKey(owner, e) == key {
		return
	}
	list := owner.order
	// Every grant moves its role and each ancestor, so the search and the
	// move are spelled out here with the comparison inlined: through find
	// and place's func value they cost a grant more than the rest of
	// reordering. They do what find and place do.
	lo, hi := 0, len(list)
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); orderBefore(owner, list[m], e) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo
	if i >= len(list) || list[i] != e {
		i = slices.Index(list, e) // unreachable, as in find
	}
	if e == owner {
		owner.ownShare = key
	} else {
		e.subtreeShare = key
	}
	switch {
	case i > 0 && orderBefore(owner, e, list[i-1]):
		lo, hi := 0, i
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); orderBefore(owner, e, list[m]) {
				hi = m
			} else {
				lo = m + 1
			}
		}
		copy(list[lo+1:i+1], list[lo:i])
		list[lo] = e
	case i+1 < len(list) && orderBefore(owner, list[i+1], e):
		lo, hi := i+1, len(list)
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); orderBefore(owner, list[m], e) {
				lo = m + 1
			} else {
				hi = m
			}
		}
		copy(list[i:lo-1], list[i+1:lo])
		list[lo-1] = e
	}
}

// rekeyFramework changes fr's share and moves it in its role's frameworks,
// spelled out as rekeyRole is.
func (a *Allocator) rekeyFramework(fr *fwRole, share float64) {
	if fr.share == share {
		return
	}
	list := fr.role.frameworks
	lo, hi := 0, len(list)
	for lo < hi {
		if m := int(uint(lo+hi) >> 1); fwLess(list[m], fr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo
	if i >= len(list) || list[i] != fr {
		i = slices.Index(list, fr) // unreachable, as in find
	}
	fr.share = share
	switch {
	case i > 0 && fwLess(fr, list[i-1]):
		lo, hi := 0, i
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); fwLess(fr, list[m]) {
				hi = m
			} else {
				lo = m + 1
			}
		}
		copy(list[lo+1:i+1], list[lo:i])
		list[lo] = fr
	case i+1 < len(list) && fwLess(list[i+1], fr):
		lo, hi := i+1, len(list)
		for lo < hi {
			if m := int(uint(lo+hi) >> 1); fwLess(list[m], fr) {
				lo = m + 1
			} else {
				hi = m
			}
		}
		copy(list[i:lo-1], list[i+1:lo])
		list[lo-1] = fr
	}
}

func (a *Allocator) dominant(v vec) float64 {
	var d float64
	for k, x := range v {
		if s := float64(x) * a.invTotal[k]; s > d {
			d = s
		}
	}
	return d
}

// reshare recomputes the shares fr's allocation change touched and moves the
// framework, its role and every ancestor to their new places.
func (a *Allocator) reshare(fr *fwRole) {
	r := fr.role
	a.rekeyFramework(fr, a.dominant(fr.allocated))
	a.rekeyRole(r, r, a.dominant(r.allocated)/r.weight)
	for n := r; n != a.root; n = n.parent {
		a.rekeyRole(n.parent, n, a.dominant(n.subtreeAllocated)/n.weight)
	}
}

func (a *Allocator) refreshTotals() {
	for k := range a.invTotal {
		if t := a.total.get(k); t > 0 {
			a.invTotal[k] = 1 / float64(t)
		} else {
			a.invTotal[k] = 0
		}
	}
	a.sharesDirty = true
}

// sortAll recomputes every share and sorts every list: needed when the cluster
// total or a weight changed, which moves every share at once.
func (a *Allocator) sortAll() {
	a.sortSubtree(a.root)
	a.sharesDirty = false
}

func (a *Allocator) sortSubtree(r *role) {
	for _, e := range r.order {
		if e == r {
			r.ownShare = a.dominant(r.allocated) / r.weight
			continue
		}
		e.subtreeShare = a.dominant(e.subtreeAllocated) / e.weight
		a.sortSubtree(e)
	}
	less := a.orderLess(r)
	slices.SortFunc(r.order, roleCmp(less))
	for _, fr := range r.frameworks {
		fr.share = a.dominant(fr.allocated)
	}
	slices.SortFunc(r.frameworks, func(x, y *fwRole) int {
		if c := cmp.Compare(x.share, y.share); c != 0 {
			return c
		}
		return cmp.Compare(x.rank, y.rank) // by id
	})
	a.sortRevocable(r)
}

// addConsumed adds sign*d to the quota consumption of r and its ancestors.
func (a *Allocator) addConsumed(r *role, d vec, sign int64) {
	for n := r; n != a.root; n = n.parent {
		n.consumed.addScaled(d, sign)
		if n.hasLimit {
			a.refreshLimitFull(n)
		}
	}
	if a.guaranteedRoles > 0 {
		a.updateRequired(r)
	}
}

// refreshLimitFull records whether n's limit leaves room for nothing
// allocatable, so DRF skips the whole subtree at a glance.
func (a *Allocator) refreshLimitFull(n *role) {
	nk := len(a.kindNames)
	room := a.room.zeroed(nk)
	for k := range room {
		room[k] = unlimited
		if limit, ok := n.limitAt(k); ok {
			room[k] = max(0, limit-n.consumed.get(k))
		}
	}
	a.room = room
	n.limitFull = n.hasLimit && !a.allocatable(room)
}

// updateRequired recomputes the headroom bookkeeping on r's path after the
// consumption or guarantee of r (and so of its ancestors) changed.
func (a *Allocator) updateRequired(r *role) {
	nk := len(a.kindNames)
	for n := r; n != a.root; n = n.parent {
		n.required.grow(nk)
		n.excess.grow(nk)
		n.parent.childRequired.grow(nk)
		hasExcess := false
		for k := 0; k < nk; k++ {
			need := n.childRequired.get(k)
			if n.hasGuarantee {
				if unmet := n.guarantee.get(k) - n.consumed.get(k); unmet > need {
					need = unmet
				}
			}
			n.parent.childRequired[k] += need - n.required[k]
			n.required[k] = need
			n.excess[k] = need - n.childRequired.get(k)
			if n.excess[k] > 0 {
				hasExcess = true
			}
		}
		if hasExcess != n.hasExcess {
			n.hasExcess = hasExcess
			d := 1
			if !hasExcess {
				d = -1
			}
			for m := n; m != nil; m = m.parent {
				m.excessNodes += d
			}
		}
	}
}

// setEligible recomputes whether fr may receive offers and updates the
// counters DRF uses to skip subtrees and agents.
func (a *Allocator) setEligible(fr *fwRole) {
	want := fr.fw.active && fr.fw.registered && fr.subscribed && !fr.suppressed
	a.setRevEligible(fr, want && fr.fw.revocable)
	if want == fr.eligible {
		return
	}
	fr.eligible = want
	d := 1
	if !want {
		d = -1
	}
	fr.role.ownEligible += d
	for n := fr.role; n != nil; n = n.parent {
		n.eligible += d
	}
	fw := fr.fw
	fw.eligibleRoles += d
	switch {
	case want && fw.eligibleRoles == 1:
		a.eligible.set(fw.slot)
		a.eligibleCount++
	case !want && fw.eligibleRoles == 0:
		a.eligible.clear(fw.slot)
		a.eligibleCount--
	}
}

// roleCmp turns a strict order on roles into the three-way comparison
// slices.SortFunc takes; both the regular and the revocable order use it.
func roleCmp(less func(x, y *role) bool) func(x, y *role) int {
	return func(x, y *role) int {
		if less(x, y) {
			return -1
		}
		if less(y, x) {
			return 1
		}
		return 0
	}
}
