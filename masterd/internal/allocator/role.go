package allocator

import (
	"cmp"
	"slices"

	"github.com/allot/allot/masterd/api"
)

// role is a node of the role tree ("eng" is the parent of "eng/ml"). The root
// is a nameless node above the top-level roles and "*".
type role struct {
	name   string
	parent *role

	// order holds the children and the role itself (standing for the
	// frameworks subscribed to the role directly), sorted by weighted
	// dominant share: the order DRF serves them in.
	order   []*role
	pos     int // index in parent.order
	selfPos int // index of the role's own entry in order

	// frameworks subscribed to (or holding allocations in) this very role,
	// sorted by dominant share.
	frameworks []*fwRole
	// ownEligible counts frameworks of this role that may receive offers,
	// eligible those of the whole subtree, so DRF skips idle subtrees.
	ownEligible, eligible int

	weight       float64
	hasGuarantee bool
	hasLimit     bool
	guarantee    vec
	limit        vec
	limited      []bool

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

	ownShare, subtreeShare float64 // already divided by weight

	// Headroom: required is what the subtree still needs from unreserved
	// resources to meet every guarantee in it, max(unmet guarantee, sum of
	// children's required); childRequired is that sum; excess is the part of
	// required owed to this role's own guarantee. A unit allocated to a role
	// lowers the total required headroom by one as long as the excess along
	// its path (role and ancestors) is positive.
	required, childRequired, excess vec
	hasExcess                       bool
	excessNodes                     int // nodes in the subtree with excess

	// refs counts agent reservation entries and allocation records from
	// this role's reservations, which keep the node alive.
	refs  int
	tried uint64
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
	r.order = []*role{r}
	r.pos = len(parent.order)
	parent.order = append(parent.order, r)
	a.roles[name] = r
	// A new role has no share yet; it belongs near the front, which the next
	// cycle's sort takes care of.
	a.sharesDirty = true
	return r
}

func (r *role) unused() bool {
	return len(r.order) == 1 && len(r.frameworks) == 0 && !r.hasGuarantee && !r.hasLimit &&
		r.weight == api.DefaultWeight && r.refs == 0
}

// gcRole drops r and then its ancestors while nothing refers to them, so a
// long-lived leader does not accumulate every role a framework ever named.
func (a *Allocator) gcRole(r *role) {
	for r != nil && r != a.root && r.unused() {
		p := r.parent
		p.order = slices.Delete(p.order, r.pos, r.pos+1)
		for i := r.pos; i < len(p.order); i++ {
			a.setOrderPos(p, i)
		}
		delete(a.roles, r.name)
		r = p
	}
}

func (a *Allocator) orderKey(owner, e *role) float64 {
	if e == owner {
		return owner.ownShare
	}
	return e.subtreeShare
}

// orderLess breaks ties by name, so the order is deterministic; the role's own
// entry sorts before its children ("eng" < "eng/ml").
func (a *Allocator) orderLess(owner, x, y *role) bool {
	kx, ky := a.orderKey(owner, x), a.orderKey(owner, y)
	if kx != ky {
		return kx < ky
	}
	return x.name < y.name
}

func (a *Allocator) setOrderPos(owner *role, i int) {
	if e := owner.order[i]; e == owner {
		owner.selfPos = i
	} else {
		e.pos = i
	}
}

// reposition moves owner.order[i] to its place after its key changed: one
// insertion step, cheaper than a sort since only one entry moved.
func (a *Allocator) reposition(owner *role, i int) {
	o := owner.order
	for i > 0 && a.orderLess(owner, o[i], o[i-1]) {
		o[i], o[i-1] = o[i-1], o[i]
		a.setOrderPos(owner, i)
		i--
	}
	for i+1 < len(o) && a.orderLess(owner, o[i+1], o[i]) {
		o[i], o[i+1] = o[i+1], o[i]
		a.setOrderPos(owner, i)
		i++
	}
	a.setOrderPos(owner, i)
}

func fwLess(x, y *fwRole) bool {
	if x.share != y.share {
		return x.share < y.share
	}
	return x.fw.id < y.fw.id
}

func (a *Allocator) repositionFramework(r *role, i int) {
	f := r.frameworks
	for i > 0 && fwLess(f[i], f[i-1]) {
		f[i], f[i-1] = f[i-1], f[i]
		f[i].pos = i
		i--
	}
	for i+1 < len(f) && fwLess(f[i+1], f[i]) {
		f[i], f[i+1] = f[i+1], f[i]
		f[i].pos = i
		i++
	}
	f[i].pos = i
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
	fr.share = a.dominant(fr.allocated)
	r := fr.role
	a.repositionFramework(r, fr.pos)
	r.ownShare = a.dominant(r.allocated) / r.weight
	a.reposition(r, r.selfPos)
	for n := r; n != a.root; n = n.parent {
		n.subtreeShare = a.dominant(n.subtreeAllocated) / n.weight
		a.reposition(n.parent, n.pos)
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
	slices.SortFunc(r.order, func(x, y *role) int {
		if a.orderLess(r, x, y) {
			return -1
		}
		if a.orderLess(r, y, x) {
			return 1
		}
		return 0
	})
	for i := range r.order {
		a.setOrderPos(r, i)
	}
	for _, fr := range r.frameworks {
		fr.share = a.dominant(fr.allocated)
	}
	slices.SortFunc(r.frameworks, func(x, y *fwRole) int {
		if c := cmp.Compare(x.share, y.share); c != 0 {
			return c
		}
		return cmp.Compare(x.fw.id, y.fw.id)
	})
	for i, fr := range r.frameworks {
		fr.pos = i
	}
}

// addConsumed adds sign*d to the quota consumption of r and its ancestors.
func (a *Allocator) addConsumed(r *role, d vec, sign int64) {
	for n := r; n != a.root; n = n.parent {
		n.consumed.addScaled(d, sign)
	}
	if a.guaranteedRoles > 0 {
		a.updateRequired(r)
	}
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
