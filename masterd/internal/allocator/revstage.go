package allocator

// The revocable stage, the third of a cycle (the seed's option 1): what
// agents can lend after the first two stages is offered, as revocable, to
// the frameworks that take revocable resources, in a DRF order of its own.

// revocableStage offers every agent's usage slack and idle lendable
// reservations. It is skipped at once while no framework takes revocable
// resources or no agent has anything to lend.
func (a *Allocator) revocableStage() {
	if a.revEligibleCount == 0 || len(a.revAgents) == 0 {
		return
	}
	cands := append(a.revCands[:0], a.revAgents...)
	a.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for i, ag := range cands {
		prefetchAllAhead(cands, i)
		a.serveRevocable(ag)
	}
	clear(cands)
	a.revCands = cands[:0]
}

// serveRevocable offers one agent's usage slack, whole, to the first
// framework in revocable DRF order that can take it, then its lendable
// reservations to the first that can take some of them, the rest to the
// next, and so on. A framework's filter on the agent holds for revocable
// offers as for regular ones (until it expires, or the agent frees more
// regular resources than were refused).
func (a *Allocator) serveRevocable(ag *agent) {
	if ag.filtered != nil && a.revEligible.subsetOf(ag.filtered) {
		return
	}
	// The agent's place among those with something to lend is settled once
	// it has been served, not at every loan.
	a.deferLendable = true
	defer func() {
		a.deferLendable = false
		a.refreshLendable(ag)
	}()
	if !ag.slack.isZero() && a.allocatable(a.slackAvailable(ag)) {
		a.revKind = offerSlack
		a.stamp++
		a.visitRevocable(a.root, ag)
	}
	if len(ag.reservations) > 0 && a.lendPools(ag) {
		a.revKind = offerLent
		a.stamp++
		for a.npools > 0 && a.visitRevocable(a.root, ag) {
		}
	}
}

// visitRevocable walks n's subtree in revocable DRF order and grants the
// agent's revocable resources of the current kind to the first role and
// framework that can take some.
func (a *Allocator) visitRevocable(n *role, ag *agent) bool {
	for i := 0; i < len(n.revOrder); i++ {
		c := n.revOrder[i]
		if c == n {
			if a.tryRevocable(n, ag) {
				return true
			}
			continue
		}
		if c.revEligible == 0 {
			continue
		}
		if a.visitRevocable(c, ag) {
			return true
		}
	}
	return false
}

// tryRevocable grants r what it can take of the agent's revocable resources
// of the current kind, if that is worth an offer, to its first framework in
// revocable DRF order that takes revocable resources and has not filtered
// the agent. A role never borrows its own reservations or an ancestor's: it
// can take them as they are.
func (a *Allocator) tryRevocable(r *role, ag *agent) bool {
	if r.ownRevEligible == 0 || r.revTried == a.stamp {
		return false
	}
	r.revTried = a.stamp
	nk := len(a.kindNames)
	total := a.sum.zeroed(nk)
	a.sum = total
	a.ndrafts = 0
	if a.revKind == offerSlack {
		d := a.nextDraft(nk)
		copy(d.amount, a.slackFree)
		d.pool = nil
		a.ndrafts++
		copy(total, a.slackFree)
	} else {
		for i := 0; i < a.npools; i++ {
			p := &a.pools[i]
			if p.pool.isSelfOrAncestorOf(r) {
				continue
			}
			d := a.nextDraft(nk)
			copy(d.amount, p.amount)
			d.pool = p.pool
			a.ndrafts++
			total.addScaled(p.amount, 1)
		}
	}
	if !a.allocatable(total) {
		return false
	}
	for _, fr := range r.revFrameworks {
		if !ag.filtered.has(fr.slot) {
			a.grantRevocable(fr, ag)
			return true
		}
	}
	return false
}

// grantRevocable lends the drafts to fr, adds them to its revocable offer for
// the agent and takes them out of what the agent has left to lend.
func (a *Allocator) grantRevocable(fr *fwRole, ag *agent) {
	oi := a.out.offerFor(a.cycle, fr, ag, a.revKind)
	for i := 0; i < a.ndrafts; i++ {
		d := &a.drafts[i]
		a.out.addPiece(oi, d.pool, d.amount, nil)
		a.adjustLoan(a.loanFor(ag, fr, d.pool), false, d.amount, 1)
	}
	if a.revKind == offerLent {
		kept := 0
		for i := 0; i < a.npools; i++ {
			if !a.pools[i].pool.isSelfOrAncestorOf(fr.role) {
				continue // granted
			}
			a.pools[kept], a.pools[i] = a.pools[i], a.pools[kept]
			kept++
		}
		a.npools = kept
	}
}
