package server

import "github.com/allot/allot/masterd/api"

// RoleUsage is a role's live allocation on the leader.
type RoleUsage struct {
	Allocated          api.Resources
	Offered            api.Resources
	RevocableAllocated api.Resources
	Frameworks         []string
}

// AgentUsage is an agent's live state on the leader.
type AgentUsage struct {
	Connected bool
	Allocated api.Resources
	Revocable api.Resources
}

// liveState is the leader's allocation state: what is neither replicated nor
// policy. The engine provides it; off the leader it reports an idle cluster.
type liveState interface {
	// Consumption is what counts against role's quota: its and its
	// descendants' allocated, offered and reserved resources.
	Consumption(role string) api.Resources
	// RescindsForQuota is how many outstanding offers setting q rescinds.
	RescindsForQuota(q api.Quota) int
	RoleUsage(role string) RoleUsage
	AgentUsage(id string) AgentUsage
	Recovery() api.Recovery
}
