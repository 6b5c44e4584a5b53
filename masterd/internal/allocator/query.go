package allocator

import (
	"sort"

	"github.com/allot/allot/masterd/api"
)

// RoleStats is a role's policy and live allocation as the allocator sees it.
// Allocated, Offered and Reserved are the role's own; Consumed covers its
// subtree.
type RoleStats struct {
	Role   string
	Weight float64
	// Guarantees and Limits are nil when the role has no quota.
	Guarantees api.Resources
	Limits     api.Resources
	// Allocated is held by launched tasks, Offered by outstanding offers.
	Allocated api.Resources
	Offered   api.Resources
	// Reserved is the sum of the role's reservations on every agent.
	Reserved api.Resources
	// Consumed is the quota consumption of the role and its descendants:
	// what is allocated or offered to them plus their unallocated
	// reservations. A limit below it would be exceeded.
	Consumed api.Resources
	// Frameworks subscribed to the role itself, sorted.
	Frameworks []string
	// RevocableAllocated is the revocable resources the role's own
	// frameworks hold, offered or in use; Lent is the revocable allocations
	// of the role's reservations, whoever holds them. Neither counts toward
	// quota.
	RevocableAllocated api.Resources
	Lent               api.Resources
}

// ClusterStats sums up the cluster.
type ClusterStats struct {
	Total     api.Resources
	Allocated api.Resources // held by launched tasks
	Offered   api.Resources
	// HeadroomRequired is what unmet guarantees are still owed from
	// unreserved resources; HeadroomAvailable is the unreserved resources
	// free on connected agents. While available covers required, every
	// guarantee can be met.
	HeadroomRequired  api.Resources
	HeadroomAvailable api.Resources
}

// AgentStats is an agent's resources as the allocator sees them.
type AgentStats struct {
	ID        string
	Hostname  string
	Active    bool
	Total     api.Resources
	Reserved  api.Resources // every role's reservations on the agent, summed
	Allocated api.Resources // held by launched tasks
	Offered   api.Resources
	Free      api.Resources
	// Revocable is what the agent can lend now, lent or not: its usage
	// slack plus its reservations' idle parts within their roles' lending
	// limits; nothing while the agent is inactive (disconnected).
	// RevocableAllocated is its revocable resources offered or in use; it
	// exceeds Revocable while the agent is over-lent.
	Revocable          api.Resources
	RevocableAllocated api.Resources
}

// Role reports one role; false when the allocator does not know it (no
// framework, quota, weight, reservation or allocation names it).
func (a *Allocator) Role(name string) (RoleStats, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.roles[name]
	if !ok {
		return RoleStats{}, false
	}
	return a.roleStats(r), true
}

// Roles reports every role the allocator knows, sorted by name.
func (a *Allocator) Roles() []RoleStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	names := make([]string, 0, len(a.roles))
	for name := range a.roles {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]RoleStats, len(names))
	for i, name := range names {
		out[i] = a.roleStats(a.roles[name])
	}
	return out
}

func (a *Allocator) roleStats(r *role) RoleStats {
	s := RoleStats{
		Role:               r.name,
		Weight:             r.weight,
		Offered:            a.toResources(r.offered),
		Reserved:           a.toResources(r.reserved),
		Consumed:           a.toResources(r.consumed),
		RevocableAllocated: a.toResources(r.revAllocated),
		Lent:               a.toResources(r.lent),
	}
	used := r.allocated.clone()
	used.addScaled(r.offered, -1)
	s.Allocated = a.toResources(used)
	if r.hasGuarantee || r.hasLimit {
		s.Guarantees = a.toResources(r.guarantee)
		s.Limits = api.Resources{}
		for k, limited := range r.limited {
			if limited {
				s.Limits[a.kindNames[k]] = float64(r.limit.get(k)) / milli
			}
		}
	}
	for _, fr := range r.frameworks {
		if fr.subscribed {
			s.Frameworks = append(s.Frameworks, fr.fw.id)
		}
	}
	sort.Strings(s.Frameworks)
	return s
}

// QuotaConsumed is the quota consumption of a role and its descendants
// (allocated, offered and unallocated reserved resources), the figure a limit
// is checked against and allot_quota_consumed exports. Empty for an unknown
// role.
func (a *Allocator) QuotaConsumed(role string) api.Resources {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.roles[role]
	if !ok {
		return api.Resources{}
	}
	return a.toResources(r.consumed)
}

// Cluster reports cluster-wide sums and the quota headroom.
func (a *Allocator) Cluster() ClusterStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	var offered, used vec
	for _, ag := range a.agents {
		offered.addScaled(ag.offered, 1)
		used.addScaled(ag.used, 1)
	}
	return ClusterStats{
		Total:             a.toResources(a.total),
		Allocated:         a.toResources(used),
		Offered:           a.toResources(offered),
		HeadroomRequired:  a.toResources(a.root.childRequired),
		HeadroomAvailable: a.toResources(a.freeUnreserved),
	}
}

// Agent reports one agent.
func (a *Allocator) Agent(id string) (AgentStats, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ag, ok := a.agents[id]
	if !ok {
		return AgentStats{}, false
	}
	var reserved vec
	for _, res := range ag.reservations {
		reserved.addScaled(res.amount, 1)
	}
	free := make(vec, len(ag.free))
	for k, x := range ag.free {
		free[k] = max(0, x)
	}
	revAllocated := ag.revOffered.clone()
	revAllocated.addScaled(ag.revUsed, 1)
	// A disconnected agent lends nothing now, as the revocable stage skips
	// it (hasLendable): its idle reservations and slack come back with it.
	var revocable vec
	if ag.active {
		revocable = a.lendable(ag)
	}
	return AgentStats{
		ID:                 ag.id,
		Hostname:           ag.hostname,
		Active:             ag.active,
		Total:              a.toResources(ag.total),
		Reserved:           a.toResources(reserved),
		Allocated:          a.toResources(ag.used),
		Offered:            a.toResources(ag.offered),
		Free:               a.toResources(free),
		Revocable:          a.toResources(revocable),
		RevocableAllocated: a.toResources(revAllocated),
	}, true
}
