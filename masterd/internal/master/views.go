package master

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// The read side: what GET /v1/frameworks, /v1/tasks, /v1/offers, /v1/roles
// and /v1/agents show of the live state.

// Frameworks lists the registered frameworks, by id.
func (m *Master) Frameworks() []api.Framework {
	m.mu.Lock()
	defer m.mu.Unlock()
	offered := map[string]api.Resources{}
	for _, o := range m.offers {
		offered[o.alloc.FrameworkID] = offered[o.alloc.FrameworkID].Add(sumPieces(o.alloc.Pieces))
	}
	out := make([]api.Framework, 0, len(m.frameworks))
	for _, fw := range m.frameworks {
		f := api.Framework{ID: fw.info.ID, Name: fw.info.Name, Principal: fw.info.Principal, Label: fw.info.Label,
			Roles: fw.info.Roles, Capabilities: fw.info.Capabilities, Connected: fw.connected(),
			Suppressed: []string{}, Allocated: api.Resources{}, Offered: api.Resources{}}
		if f.Capabilities == nil {
			f.Capabilities = []string{}
		}
		for _, t := range fw.tasks {
			if !t.released {
				f.Allocated.Add(t.info.Resources)
			}
		}
		f.Offered.Add(offered[fw.info.ID])
		for r := range fw.suppressed {
			f.Suppressed = append(f.Suppressed, r)
		}
		slices.Sort(f.Suppressed)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b api.Framework) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Tasks lists the live tasks and the most recently ended ones.
func (m *Master) Tasks() []api.Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []api.Task
	for _, ag := range m.agents {
		for _, t := range ag.tasks {
			out = append(out, t.view())
		}
	}
	start := max(0, len(m.completed)-completedKept)
	for _, t := range m.completed[start:] {
		out = append(out, t.view())
	}
	slices.SortStableFunc(out, func(a, b api.Task) int {
		if c := strings.Compare(a.FrameworkID, b.FrameworkID); c != 0 {
			return c
		}
		return strings.Compare(a.TaskID, b.TaskID)
	})
	if out == nil {
		out = []api.Task{}
	}
	return out
}

// Offers lists the outstanding offers in the order they were made.
func (m *Master) Offers() []api.Offer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []api.Offer{}
	for _, o := range m.offersWhere(func(*offer) bool { return true }) {
		out = append(out, o.view())
	}
	return out
}

// OffersOutstanding counts the outstanding offers.
func (m *Master) OffersOutstanding() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.offers)
}

// Consumption is what counts against role's quota. It is asked on the
// write path (a quota PUT refuses a limit below it) and by metric scrapes,
// so it never waits for the loop: it reads the allocator, which keeps the
// figure and locks itself, without m.mu. While the loop calls the
// allocator in bulk (a cycle, which holds the allocator; taking back
// thousands of offers, each of which takes the allocator's lock), it
// answers the figure as it was before, a few milliseconds old: a caller
// that waited for the allocator's lock against the loop would lose to it
// time and again. While offers are taken back, that figure is never below
// the true one (taking them back only lowers it): a limit between the two
// is refused without force, as it would have been a moment earlier. During
// a cycle it leaves out the offers the cycle is making, which the next
// figure counts. Before such work the loop takes the figure of the roles
// asked for within consumptionWindow; a role first asked during it waits
// for the allocator once.
func (m *Master) Consumption(role string) api.Resources {
	c := &m.consumption
	now := m.clock.Now()
	c.mu.Lock()
	if c.asked == nil {
		c.asked = map[string]time.Time{}
	}
	c.asked[role] = now
	// Cycles forget the roles nobody asked for lately; so does this, at
	// most once a window, for the times no cycle runs (a long recovery).
	if now.Sub(c.pruned) > consumptionWindow {
		c.forgetOld(now)
		c.pruned = now
	}
	c.mu.Unlock()
	if before := m.consumption.published.Load(); before != nil {
		if c, ok := (*before)[role]; ok {
			return maps.Clone(c)
		}
	}
	return m.alloc.QuotaConsumed(role)
}

// ConsumptionAfterWrites is Consumption once the live state follows every
// write applied before the call: a quota PUT right after a reservation was
// deleted must not count the reservation still. It may wait for a cycle to
// end, so never call it holding the state's lock, which the follower needs
// (metric scrapes, which do, call Consumption).
func (m *Master) ConsumptionAfterWrites(role string) api.Resources {
	m.followedAllIf(changesConsumption)
	return m.Consumption(role)
}

// changesConsumption reports whether following cmd may change what counts
// against a role's quota for longer than until the next cycle: a restore
// (cmd nil) and the writes acknowledged only once followed, for the reason
// they are (ackAfterFollowed). Not rate limits, which the master does not
// follow, nor quotas: following one rescinds offers, which the next cycle
// makes again and Consumption counts as of the start of the loop's bulk
// work under way anyway.
// So quota writes never wait for a cycle behind one another.
func changesConsumption(cmd raftstore.Command) bool {
	return cmd == nil || ackAfterFollowed(cmd)
}

// consumptionWindow is how long after Consumption last asked for a role
// the loop keeps taking its consumption before its bulk work.
const consumptionWindow = time.Minute

// consumptionBefore is the consumption of the roles asked for, as it was
// before the loop's bulk work under way.
type consumptionBefore struct {
	mu     sync.Mutex
	asked  map[string]time.Time // role → when Consumption last asked for it
	pruned time.Time            // when Consumption last forgot old roles
	// published is the figures while the loop calls the allocator in bulk
	// (nil otherwise).
	published atomic.Pointer[map[string]api.Resources]
}

// forgetOld drops the roles not asked for within consumptionWindow; c.mu
// is held.
func (c *consumptionBefore) forgetOld(now time.Time) {
	for role, at := range c.asked {
		if now.Sub(at) > consumptionWindow {
			delete(c.asked, role)
		}
	}
}

// withConsumptionPublished runs bulk, the loop's work with the allocator
// under m.mu, while Consumption answers the figures of before it (a few
// hundred ns a role asked for within consumptionWindow, nothing when no one
// asked).
func (m *Master) withConsumptionPublished(now time.Time, bulk func()) {
	published := m.publishConsumption(now)
	bulk()
	if published {
		m.consumption.published.Store(nil)
	}
}

// publishConsumption takes the consumption of the roles asked for within
// consumptionWindow, for Consumption to answer; it reports whether it did.
// Call it with m.mu held, and clear consumption.published after.
func (m *Master) publishConsumption(now time.Time) bool {
	c := &m.consumption
	c.mu.Lock()
	c.forgetOld(now)
	roles := slices.Collect(maps.Keys(c.asked))
	c.mu.Unlock()
	if len(roles) == 0 {
		return false
	}
	before := make(map[string]api.Resources, len(roles))
	for _, role := range roles {
		before[role] = m.alloc.QuotaConsumed(role)
	}
	c.published.Store(&before)
	return true
}

// RoleUsage is a role's live allocation. RevocableAllocated is what its
// frameworks hold of revocable resources (offered or in use), Lent what
// other roles hold of its reservations as revocable resources.
type RoleUsage struct {
	Allocated          api.Resources
	Offered            api.Resources
	RevocableAllocated api.Resources
	Lent               api.Resources
	Frameworks         []string
}

func (m *Master) RoleUsage(role string) RoleUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	stats, ok := m.alloc.Role(role)
	if !ok {
		return RoleUsage{}
	}
	return RoleUsage{Allocated: stats.Allocated, Offered: stats.Offered, RevocableAllocated: stats.RevocableAllocated,
		Lent: stats.Lent, Frameworks: stats.Frameworks}
}

// AgentUsage is an agent's live state. Revocable is what it can lend now
// (usage slack and idle reservations within their lending limits),
// RevocableAllocated what of revocable resources is offered or in use on it.
type AgentUsage struct {
	Connected          bool
	Allocated          api.Resources
	Revocable          api.Resources
	RevocableAllocated api.Resources
}

func (m *Master) AgentUsage(id string) AgentUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	var u AgentUsage
	if ag := m.agents[id]; ag != nil {
		u.Connected = ag.connected()
	}
	if stats, ok := m.alloc.Agent(id); ok {
		u.Allocated, u.Revocable, u.RevocableAllocated = stats.Allocated, stats.Revocable, stats.RevocableAllocated
	}
	return u
}

// Allocated is what launched tasks hold of the agents' regular resources,
// the figure GET /v1/cluster reports (revocable resources are lent from
// these or from idle reservations, and shown apart per agent and role).
func (m *Master) Allocated() api.Resources {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.alloc.Cluster().Allocated
}

// ClusterUsage is the live state summed over the cluster: the totals of
// GET /v1/cluster.
type ClusterUsage struct {
	// Allocated and Offered are the agents' regular resources held by
	// launched tasks and by outstanding offers.
	Allocated, Offered api.Resources
	// Revocable is what the agents can lend now, RevocableAllocated the
	// revocable resources offered or in use: the sums of AgentUsage's.
	Revocable, RevocableAllocated api.Resources
}

// Usage sums the live state under one lock, so its figures agree.
func (m *Master) Usage() ClusterUsage {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.alloc.Cluster()
	u := ClusterUsage{Allocated: c.Allocated, Offered: c.Offered, Revocable: api.Resources{}, RevocableAllocated: api.Resources{}}
	for id := range m.agents {
		if stats, ok := m.alloc.Agent(id); ok {
			u.Revocable.Add(stats.Revocable)
			u.RevocableAllocated.Add(stats.RevocableAllocated)
		}
	}
	return u
}

// LiveRoles lists, sorted, the roles that exist only through the live state
// as much as through policy: those a framework is subscribed to, and those
// holding allocated, offered or revocable resources (as Mesos's /roles lists
// them).
func (m *Master) LiveRoles() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.alloc.Roles() {
		if len(r.Frameworks) > 0 || !r.Allocated.IsZero() || !r.Offered.IsZero() || !r.RevocableAllocated.IsZero() {
			out = append(out, r.Role)
		}
	}
	return out
}
