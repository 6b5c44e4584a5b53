package master

import (
	"cmp"
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
)

// The offer book: every outstanding offer, by id. An offer leaves the book
// when it is accepted, declined, rescinded or expires; its resources go back
// to the allocator except what an accept launched.
//
// A cycle can make an offer for every agent of a large cluster, so making
// one is kept to a map insert and its event. The index by agent, which
// crowds of agents leaving (a network split) need, is built when first used
// after a cycle and kept up to date as offers leave. Nothing indexes offers
// by framework: the rarer events that need it scan the book.

// sendOffers records a cycle's offers and sends them, one OFFERS event per
// framework. It runs under m.mu in the same hold as the cycle, so every
// agent and framework offered is still active (the allocator offers no
// other, and they are deactivated under m.mu).
//
// What the offers need is allocated once for the cycle rather than once
// per offer: the book's records (an outstanding offer keeps its cycle's
// arrays alive, no longer than the offer timeout), and the offers of the
// events with their resources, each framework's batch a slice of one array
// sized by counting them first.
func (m *Master) sendOffers(offers []allocator.Offer, now time.Time) {
	if len(offers) == 0 {
		return
	}
	var touched []*framework
	to := m.offerFrameworks[:0]
	sent, pieces := 0, 0
	for i := range offers {
		ao := &offers[i]
		fw := m.burstTo(ao.FrameworkID, &touched)
		if fw == nil {
			_ = m.alloc.RecoverOffer(*ao)
		} else {
			sent++
			pieces += len(ao.Pieces)
		}
		to = append(to, fw)
	}
	views := make([]api.Offer, sent)
	for _, fw := range touched {
		fw.batch, views = views[:0:fw.burst], views[fw.burst:]
		fw.burst = 0
	}
	book := make([]offer, sent)
	resources := make([]api.OfferResource, pieces)
	expires := now.Add(m.opts.OfferTimeout)
	for i, fw := range to {
		if fw == nil {
			continue
		}
		o := &book[0]
		book = book[1:]
		*o = offer{id: m.newID("offer"), seq: m.nextID, alloc: &offers[i], expires: expires}
		m.offers[o.id] = o
		n := len(o.alloc.Pieces)
		fw.batch = append(fw.batch, o.viewIn(resources[:0:n]))
		resources = resources[n:]
	}
	clear(to)
	m.offerFrameworks = to[:0]
	m.byAgent = nil
	for _, fw := range touched {
		fw.stream.queueQuietly(api.Event{Type: api.EventOffers, Offers: &api.Offers{Offers: fw.batch}})
		fw.batch = nil
	}
	m.wakeBurst(touched)
}

// wakeBurst wakes the sessions of frameworks an event of a burst was
// queued to: at once if they are a group or fewer, else a group at a time
// by the pacer, behind the bursts it is still waking.
func (m *Master) wakeBurst(fws []*framework) {
	if len(fws) <= wakeGroupSize {
		for _, fw := range fws {
			fw.stream.wake()
		}
		return
	}
	for _, fw := range fws {
		m.sessionWakes.add(fw.stream)
	}
	m.sessionWakes.start()
}

// burstTo is the connected framework an event of a burst goes to, nil if
// there is none; it counts the event in the framework's burst, and lists
// the framework in touched on its first.
func (m *Master) burstTo(frameworkID string, touched *[]*framework) *framework {
	fw := m.frameworks[frameworkID]
	if fw == nil || !fw.connected() {
		return nil
	}
	if fw.burst == 0 {
		*touched = append(*touched, fw)
	}
	fw.burst++
	return fw
}

// frameworkOffer finds one of the framework's outstanding offers.
func (m *Master) frameworkOffer(fw *framework, id string) *offer {
	if o := m.offers[id]; o != nil && o.alloc.FrameworkID == fw.info.ID {
		return o
	}
	return nil
}

// takeOffer removes an offer from the book without returning its resources.
func (m *Master) takeOffer(o *offer) {
	delete(m.offers, o.id)
	if m.byAgent == nil {
		return
	}
	list := m.byAgent[o.alloc.AgentID]
	if i := slices.Index(list, o); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(m.byAgent, o.alloc.AgentID)
	} else {
		m.byAgent[o.alloc.AgentID] = list
	}
}

// agentOffers lists an agent's outstanding offers in the order they were
// made.
func (m *Master) agentOffers(agentID string) []*offer {
	if m.byAgent == nil {
		m.byAgent = map[string][]*offer{}
		for _, o := range m.offersWhere(func(*offer) bool { return true }) {
			m.byAgent[o.alloc.AgentID] = append(m.byAgent[o.alloc.AgentID], o)
		}
	}
	return slices.Clone(m.byAgent[agentID])
}

// rescindAll withdraws outstanding offers, in the order given, and returns
// their resources. Each framework's RESCINDs are counted first, so that its
// stream's queue grows once for them, and its session is woken once, after
// they are all queued (see queueQuietly and wakeBurst).
func (m *Master) rescindAll(offers []*offer) {
	var woken []*framework
	to := m.offerFrameworks[:0]
	for _, o := range offers {
		m.takeOffer(o)
		_ = m.alloc.RecoverOffer(*o.alloc)
		to = append(to, m.burstTo(o.alloc.FrameworkID, &woken))
	}
	for _, fw := range woken {
		fw.stream.reserve(fw.burst)
		fw.burst = 0
	}
	rescinds := make([]api.Rescind, len(offers))
	for i, fw := range to {
		if fw != nil {
			rescinds[i].OfferID = offers[i].id
			fw.stream.queueQuietly(api.Event{Type: api.EventRescind, Rescind: &rescinds[i]})
		}
	}
	clear(to)
	m.offerFrameworks = to[:0]
	m.wakeBurst(woken)
}

func (m *Master) rescindAgentOffers(ag *agent) {
	m.rescindAll(m.agentOffers(ag.id))
}

func (m *Master) rescindFrameworkOffers(fw *framework) {
	m.rescindAll(m.offersWhere(func(o *offer) bool { return o.alloc.FrameworkID == fw.info.ID }))
}

// expireOffers rescinds the offers older than the offer timeout.
func (m *Master) expireOffers(now time.Time) {
	m.rescindAll(m.offersWhere(func(o *offer) bool { return !now.Before(o.expires) }))
}

// offersWhere lists the outstanding offers keep accepts, in the order they
// were made, so that rescinds happen in the same order every time (a dry
// run predicts the real write).
func (m *Master) offersWhere(keep func(*offer) bool) []*offer {
	var out []*offer
	for _, o := range m.offers {
		if keep(o) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b *offer) int { return cmp.Compare(a.seq, b.seq) })
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
	outstanding := m.offersWhere(func(*offer) bool { return true })
	allocs := make([]allocator.Offer, len(outstanding))
	for i, o := range outstanding {
		allocs[i] = *o.alloc
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
