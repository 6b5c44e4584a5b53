package server

import (
	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/raftstore"
)

// liveState is the leader's allocation state: what is neither replicated nor
// policy. The engine provides it; off the leader it reports an idle cluster.
type liveState interface {
	// Consumption is what counts against role's quota: its and its
	// descendants' allocated, offered and reserved resources.
	Consumption(role string) api.Resources
	// ConsumptionAfterWrites is Consumption counting every write applied
	// before the call that changes consumption beyond the next cycle (not
	// quotas: see master.changesConsumption); it may wait for an
	// allocation cycle, so never call it under the state's lock.
	ConsumptionAfterWrites(role string) api.Resources
	// Followed waits until the live state follows the write cmd, applied
	// at index, if the write's acknowledgement waits for that; cmd nil
	// waits for every write applied before the call. It may wait for an
	// allocation cycle, so never call it under the state's lock.
	Followed(cmd raftstore.Command, index uint64)
	// FollowedEarlyAcks waits until the live state follows the writes
	// acknowledged before it followed them (quotas) applied before the
	// call; reads of live figures call it. Never under the state's lock.
	FollowedEarlyAcks()
	// RescindsForQuota is how many outstanding offers setting q rescinds.
	RescindsForQuota(q api.Quota) int
	RoleUsage(role string) master.RoleUsage
	AgentUsage(id string) master.AgentUsage
	Recovery() api.Recovery
	// Usage is the live state summed over the cluster: allocated,
	// offered, revocable and revocable allocated resources.
	Usage() master.ClusterUsage
	// LiveRoles are the roles with subscribed frameworks, allocated or
	// offered resources, sorted.
	LiveRoles() []string
	// LendingEffects is what setting role's lending limit to limit takes
	// back now: how many offers it rescinds and which tasks it evicts.
	LendingEffects(role string, limit api.Resources) (int, []api.Eviction)
}
