package master

import (
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
)

// The offer book: every outstanding offer, by id, on its framework and agent.
// An offer leaves the book when it is accepted, declined, rescinded or
// expires; its resources go back to the allocator except what an accept
// launched.

// sendOffers records a cycle's offers and sends them, one OFFERS event per
// framework. An offer for a framework or agent that went away since the
// cycle is handed back at once.
func (m *Master) sendOffers(offers []allocator.Offer, now time.Time) {
	batches := map[string][]api.Offer{}
	var order []string
	for _, ao := range offers {
		fw, agOK := m.frameworks[ao.FrameworkID], false
		if ag, ok := m.agents[ao.AgentID]; ok && ag.connected() {
			agOK = true
		}
		if fw == nil || !fw.connected() || !agOK {
			_ = m.alloc.Recover(ao.FrameworkID, ao.AgentID, ao.Role, ao.Pieces)
			continue
		}
		o := &offer{id: m.newID("offer"), seq: m.nextID, alloc: ao, expires: now.Add(m.opts.OfferTimeout)}
		m.offers[o.id] = o
		fw.offers[o.id] = o
		m.agents[ao.AgentID].offers[o.id] = o
		if _, ok := batches[fw.info.ID]; !ok {
			order = append(order, fw.info.ID)
		}
		batches[fw.info.ID] = append(batches[fw.info.ID], o.view())
	}
	for _, id := range order {
		m.frameworks[id].send(api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: batches[id]}})
	}
}

// takeOffer removes an offer from the book without returning its resources.
func (m *Master) takeOffer(o *offer) {
	delete(m.offers, o.id)
	if fw := m.frameworks[o.alloc.FrameworkID]; fw != nil {
		delete(fw.offers, o.id)
	}
	if ag := m.agents[o.alloc.AgentID]; ag != nil {
		delete(ag.offers, o.id)
	}
}

// rescind withdraws an outstanding offer and returns its resources.
func (m *Master) rescind(o *offer) {
	m.takeOffer(o)
	_ = m.alloc.Recover(o.alloc.FrameworkID, o.alloc.AgentID, o.alloc.Role, o.alloc.Pieces)
	if fw := m.frameworks[o.alloc.FrameworkID]; fw != nil {
		fw.send(api.Event{Type: api.EventRescind, Rescind: &api.Rescind{OfferID: o.id}})
	}
}

func (m *Master) rescindAgentOffers(ag *agent) {
	for _, o := range m.sortedOffers(ag.offers) {
		m.rescind(o)
	}
}

func (m *Master) rescindFrameworkOffers(fw *framework) {
	for _, o := range m.sortedOffers(fw.offers) {
		m.rescind(o)
	}
}

// expireOffers rescinds the offers older than the offer timeout.
func (m *Master) expireOffers(now time.Time) {
	for _, o := range m.sortedOffers(m.offers) {
		if !now.Before(o.expires) {
			m.rescind(o)
		}
	}
}

// sortedOffers lists offers in the order they were made, so that rescinds
// happen in the same order every time (a dry run predicts the real write).
func (m *Master) sortedOffers(set map[string]*offer) []*offer {
	out := make([]*offer, 0, len(set))
	for _, o := range set {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *offer) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out
}

// quotaRescinds picks the offers setting q rescinds, by the rules of Mesos's
// quota handler (allocator.RescindForQuota), for what of the guarantee the
// role does not yet consume.
func (m *Master) quotaRescinds(q api.Quota) []*offer {
	unmet := api.Resources{}
	consumed := m.alloc.QuotaConsumed(q.Role)
	for name, g := range q.Guarantees {
		if d := api.RoundScalar(g - consumed[name]); d > 0 {
			unmet[name] = d
		}
	}
	if len(unmet) == 0 || len(m.offers) == 0 {
		return nil
	}
	outstanding := m.sortedOffers(m.offers)
	allocs := make([]allocator.Offer, len(outstanding))
	for i, o := range outstanding {
		allocs[i] = o.alloc
	}
	frameworks := 0
	if stats, ok := m.alloc.Role(q.Role); ok {
		frameworks = len(stats.Frameworks)
	}
	var out []*offer
	for _, i := range allocator.RescindForQuota(allocs, unmet, frameworks) {
		out = append(out, outstanding[i])
	}
	return out
}

// RescindsForQuota is how many offers setting q would rescind now.
func (m *Master) RescindsForQuota(q api.Quota) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.quotaRescinds(q))
}
