package allocator

import (
	"fmt"
	"slices"

	"github.com/allot/allot/masterd/api"
)

// allocation is what one framework holds on one agent for one role from one
// pool (the unreserved resources, or one role's reservation).
type allocation struct {
	agent *agent
	fr    *fwRole
	pool  *role // nil: unreserved
	// offered is in outstanding offers, used is held by launched tasks.
	offered, used vec
	agIndex       int
	fwIndex       int
	// inline backs offered and used when there are few kinds, sparing two
	// allocations per record in the cycle's hot path.
	inline [2 * inlineKinds]int64
}

const inlineKinds = 4

// recordSlab is how many records are allocated at once: a cycle that
// offers a whole cluster makes one per agent, and one allocation per record
// cost it more than the rest of making the record.
const recordSlab = 256

// newRecord hands out a zeroed record: one forgotten before, or the next of
// a slab. Reusing forgotten records bounds what the slabs hold to the most
// records ever held at once.
func (a *Allocator) newRecord() *allocation {
	if n := len(a.freeRecords); n > 0 {
		rec := a.freeRecords[n-1]
		a.freeRecords[n-1] = nil
		a.freeRecords = a.freeRecords[:n-1]
		return rec
	}
	if len(a.recordSlab) == 0 {
		a.recordSlab = make([]allocation, recordSlab)
	}
	rec := &a.recordSlab[0]
	a.recordSlab = a.recordSlab[1:]
	return rec
}

func (a *Allocator) record(ag *agent, fr *fwRole, pool *role) *allocation {
	for _, rec := range ag.records {
		if rec.fr == fr && rec.pool == pool {
			return rec
		}
	}
	var rec *allocation
	if !ag.record0Used {
		// Most agents hold one record at a time: it lives in the agent.
		rec, ag.record0Used = &ag.record0, true
	} else {
		rec = a.newRecord()
	}
	*rec = allocation{agent: ag, fr: fr, pool: pool, agIndex: len(ag.records), fwIndex: len(fr.fw.records)}
	if nk := len(a.kindNames); nk <= inlineKinds {
		rec.offered = rec.inline[:nk:inlineKinds]
		rec.used = rec.inline[inlineKinds : inlineKinds+nk : 2*inlineKinds]
	}
	ag.records = append(ag.records, rec)
	fr.fw.records = append(fr.fw.records, rec)
	fr.records++
	if pool != nil {
		pool.refs++
		if ag.reservationOf(pool) == nil {
			// Tasks reported on a reservation the allocator no longer
			// knows: track their pool so releasing them balances.
			pool.refs++
			ag.reservations = append(ag.reservations, &reservation{role: pool})
		}
	}
	return rec
}

// forgetRecord unlinks an empty record.
func (a *Allocator) forgetRecord(rec *allocation) {
	ag, fw := rec.agent, rec.fr.fw
	last := ag.records[len(ag.records)-1]
	ag.records[rec.agIndex] = last
	last.agIndex = rec.agIndex
	ag.records[len(ag.records)-1] = nil
	ag.records = ag.records[:len(ag.records)-1]
	last = fw.records[len(fw.records)-1]
	fw.records[rec.fwIndex] = last
	last.fwIndex = rec.fwIndex
	fw.records[len(fw.records)-1] = nil
	fw.records = fw.records[:len(fw.records)-1]
	fr, pool := rec.fr, rec.pool
	// Nothing refers to the record any more: it is zeroed (so that nothing
	// it pointed to is kept alive) and reused.
	*rec = allocation{}
	if rec == &ag.record0 {
		ag.record0Used = false
	} else {
		a.freeRecords = append(a.freeRecords, rec)
	}
	fr.records--
	if pool != nil {
		pool.refs--
		a.dropIdleReservations(ag)
		a.gcRole(pool)
	}
	a.dropFwRoleIfUnused(fr)
}

// dropRecord frees everything a record holds; the record is forgotten once
// empty.
func (a *Allocator) dropRecord(rec *allocation) {
	if rec.offered.isZero() && rec.used.isZero() {
		a.forgetRecord(rec)
		return
	}
	if !rec.offered.isZero() {
		a.adjust(rec, false, rec.offered.clone(), -1)
	}
	if !rec.used.isZero() {
		a.adjust(rec, true, rec.used.clone(), -1)
	}
}

// adjust adds sign*amount to a record's offered or used resources and carries
// the change everywhere it counts: the agent's pools, the role's and
// framework's DRF shares, quota consumption and headroom.
func (a *Allocator) adjust(rec *allocation, used bool, amount vec, sign int64) {
	ag, fr := rec.agent, rec.fr
	r := fr.role
	if used {
		rec.used.addScaled(amount, sign)
		ag.used.addScaled(amount, sign)
	} else {
		rec.offered.addScaled(amount, sign)
		r.offered.addScaled(amount, sign)
		ag.offered.addScaled(amount, sign)
	}
	r.allocated.addScaled(amount, sign)
	fr.allocated.addScaled(amount, sign)
	for n := r; n != a.root; n = n.parent {
		n.subtreeAllocated.addScaled(amount, sign)
	}
	ag.free.addScaled(amount, -sign)
	if rec.pool == nil {
		ag.unresAllocated.addScaled(amount, sign)
	} else {
		res := ag.reservationOf(rec.pool)
		a.withReservation(res, func() { res.allocated.addScaled(amount, sign) })
	}
	a.addConsumed(r, amount, sign)
	a.refreshAgent(ag)
	if sign < 0 {
		a.liftFilters(ag)
	}
	a.reshare(fr)
	if rec.offered.isZero() && rec.used.isZero() {
		a.forgetRecord(rec)
	}
}

type moveKind int

const (
	moveRecover moveKind = iota // offered → free
	moveLaunch                  // offered → used
	moveRelease                 // used → free
	moveAddUsed                 // free → used
)

// Recover hands back offered resources: a declined, rescinded or expired
// offer, or the part of an accepted offer no task used. role is the offer's
// Role, pieces its pieces (or a part of them). Here and in Launch, Release
// and AddUsed, revocable pieces go to the revocable books: a lent
// reservation's by its lender (Role), usage slack's by Role "*".
func (a *Allocator) Recover(frameworkID, agentID, role string, pieces []Piece) error {
	return a.move(moveRecover, frameworkID, agentID, role, pieces)
}

// RecoverOffer hands back a whole offer, as Recover does with its pieces.
// An offer a cycle made, not revocable, is handed back through the records
// the cycle added it to, without looking up its agent, framework, roles or
// resource names: a tick that takes back a whole cluster's offers does
// 10 000 of these. When any of those records no longer holds the offer as
// made (it was emptied and reused, or its agent or framework is gone), it
// goes through Recover, which finds what holds it now or answers why
// nothing does.
func (a *Allocator) RecoverOffer(o Offer) error {
	if h := o.held; h != nil {
		a.mu.Lock()
		held := h.stillHeld()
		if held {
			for _, p := range h.pieces {
				a.adjust(p.rec, false, p.amount, -1)
			}
		}
		a.mu.Unlock()
		if held {
			return nil
		}
	}
	return a.Recover(o.FrameworkID, o.AgentID, o.Role, o.Pieces)
}

// stillHeld reports whether each piece's record is still the one Recover's
// lookups would find for it, and still has the piece offered. A record is
// zeroed when it empties (as every record of a removed agent or framework
// is) and may be reused for another agent, framework role or pool, so it
// must still name the offer's; an agent holds one record per framework
// role and pool, so a record that names them is the one a lookup finds.
func (h *heldOffer) stillHeld() bool {
	for i, p := range h.pieces {
		rec := p.rec
		if rec == nil || rec.agent != h.ag || rec.fr != h.fr || rec.pool != p.pool || !rec.offered.contains(p.amount) {
			return false
		}
		for _, q := range h.pieces[:i] {
			if q.rec == rec { // pieces of one pool are merged: never
				return false
			}
		}
	}
	return true
}

// Launch moves offered resources to launched tasks; they stay allocated until
// Release.
func (a *Allocator) Launch(frameworkID, agentID, role string, pieces []Piece) error {
	return a.move(moveLaunch, frameworkID, agentID, role, pieces)
}

// Release hands back the resources of tasks that ended.
func (a *Allocator) Release(frameworkID, agentID, role string, pieces []Piece) error {
	return a.move(moveRelease, frameworkID, agentID, role, pieces)
}

// AddUsed records resources held by tasks the allocator did not offer: those
// an agent reports when it re-registers with a new leader. The framework need
// not have subscribed yet; it gets offers once it does. Revocable pieces are
// taken however much the agent can lend now: what exceeds it, Overlent
// reports.
func (a *Allocator) AddUsed(frameworkID, agentID, role string, pieces []Piece) error {
	return a.move(moveAddUsed, frameworkID, agentID, role, pieces)
}

type part struct {
	pool      string
	revocable bool
	amount    vec
}

func (a *Allocator) move(kind moveKind, frameworkID, agentID, roleName string, pieces []Piece) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[agentID]
	if !ok {
		return fmt.Errorf("agent %q: %w", agentID, ErrUnknownAgent)
	}
	if err := validateRoleName(roleName); err != nil {
		return err
	}
	// Pieces of one pool are merged so a bucket is checked against their sum.
	var parts []part
	for _, p := range pieces {
		if err := validateRevocablePiece(p); err != nil {
			return err
		}
		if p.Role != api.DefaultRole {
			if err := validatePolicyRole(p.Role); err != nil {
				return err
			}
			// A lent reservation goes to roles outside the lender's subtree;
			// only reserved resources proper are the subtree's alone.
			if !p.Revocable && p.Role != roleName && !api.IsDescendant(roleName, p.Role) {
				return fmt.Errorf("role %q cannot hold resources reserved for %q: %w", roleName, p.Role, ErrInvalid)
			}
		}
		v, err := a.toVec(p.Resources, "resources")
		if err != nil {
			return err
		}
		i := slices.IndexFunc(parts, func(x part) bool { return x.pool == p.Role && x.revocable == p.Revocable })
		if i < 0 {
			parts = append(parts, part{pool: p.Role, revocable: p.Revocable, amount: v})
		} else {
			parts[i].amount.addScaled(v, 1)
		}
	}
	if kind == moveAddUsed {
		return a.addUsed(ag, frameworkID, roleName, parts)
	}

	fw, ok := a.frameworks[frameworkID]
	if !ok {
		return fmt.Errorf("framework %q: %w", frameworkID, ErrUnknownFramework)
	}
	var fr *fwRole
	if r, ok := a.roles[roleName]; ok {
		fr = fw.roleEntry(r)
	}
	recs := make([]*allocation, len(parts))
	loans := make([]*loan, len(parts))
	for i, p := range parts {
		var pool *role
		known := p.pool == api.DefaultRole
		if !known {
			pool = a.roles[p.pool]
			known = pool != nil
		}
		var offered, used vec
		if fr != nil && known {
			if p.revocable {
				for _, ln := range ag.loans {
					if ln.fr == fr && ln.lender == pool {
						loans[i] = ln
						offered, used = ln.offered, ln.used
					}
				}
			} else {
				for _, x := range ag.records {
					if x.fr == fr && x.pool == pool {
						recs[i] = x
						offered, used = x.offered, x.used
					}
				}
			}
		}
		held := offered
		if kind == moveRelease {
			held = used
		}
		if !held.contains(p.amount) {
			what := "pool"
			if p.revocable {
				what = "revocable pool"
			}
			return fmt.Errorf("framework %q, agent %q, role %q, %s %q: %v: %w",
				frameworkID, agentID, roleName, what, p.pool, a.toResources(p.amount), ErrNotAllocated)
		}
	}
	for i, p := range parts {
		if ln := loans[i]; ln != nil {
			a.moveLoan(kind, ln, p.amount)
			continue
		}
		rec := recs[i]
		if rec == nil { // nothing asked of this pool
			continue
		}
		switch kind {
		case moveRecover:
			a.adjust(rec, false, p.amount, -1)
		case moveRelease:
			a.adjust(rec, true, p.amount, -1)
		case moveLaunch:
			// The allocation stays the same size: nothing but the split
			// between offered and used changes.
			rec.offered.addScaled(p.amount, -1)
			rec.used.addScaled(p.amount, 1)
			fr.role.offered.addScaled(p.amount, -1)
			ag.offered.addScaled(p.amount, -1)
			ag.used.addScaled(p.amount, 1)
		}
	}
	return nil
}

func (a *Allocator) addUsed(ag *agent, frameworkID, roleName string, parts []part) error {
	if frameworkID == "" {
		return fmt.Errorf("framework id is empty: %w", ErrInvalid)
	}
	// Revocable tasks are taken as they are, however much: what they hold
	// beyond what the agent can lend, Overlent reports and the agent evicts.
	var sum vec
	for _, p := range parts {
		if !p.revocable {
			sum.addScaled(p.amount, 1)
		}
	}
	if !ag.free.contains(sum) {
		return fmt.Errorf("agent %q: %v in use: %w", ag.id, a.toResources(sum), ErrInsufficient)
	}
	fw, ok := a.frameworks[frameworkID]
	if !ok {
		fw = a.newFramework(frameworkID)
	}
	r := a.roleNode(roleName)
	fr := fw.roleEntry(r)
	if fr == nil {
		fr = a.newFwRole(fw, r)
	}
	for _, p := range parts {
		var pool *role
		if p.pool != api.DefaultRole {
			pool = a.roleNode(p.pool)
		}
		if p.revocable {
			a.adjustLoan(a.loanFor(ag, fr, pool), true, p.amount, 1)
			continue
		}
		a.adjust(a.record(ag, fr, pool), true, p.amount, 1)
	}
	// A placeholder membership with nothing recorded would linger.
	a.dropFwRoleIfUnused(fr)
	return nil
}
