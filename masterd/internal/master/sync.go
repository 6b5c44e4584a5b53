package master

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
	"github.com/allot/allot/raftstore"
)

// Applied queues a change of the replicated state (cmd nil: a snapshot was
// restored) for the master to follow, and returns at once. It runs in the
// FSM's goroutine, which applies every write: waiting there for m.mu, which
// an allocation cycle holds for its whole length, would make every write
// wait for the cycle. The follower goroutine (follow) brings the live state
// in step as soon as m.mu is free; the master's own writes wait for it
// (caughtUp) before they go on, as they did when Applied followed at once.
func (m *Master) Applied(cmd raftstore.Command, res raftstore.Result) {
	if res.Err != nil {
		return
	}
	q := &m.applied
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.queue = append(q.queue, appliedCommand{cmd: cmd, index: res.Index})
	q.queued++
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// appliedQueue is what Applied queued and the follower has not followed
// yet, and how far the follower got.
type appliedQueue struct {
	ready chan struct{} // one pending wake-up of the follower

	mu     sync.Mutex
	closed bool // the term ended: nothing more is queued
	queue  []appliedCommand
	// following is the batch the follower took and has not finished.
	following []appliedCommand
	// queued counts the commands ever queued, followed those the follower
	// took; index is the Raft index the live state follows up to.
	queued, followed uint64
	index            uint64
	// advanced is closed, and replaced, each time the follower finishes a
	// batch.
	advanced chan struct{}
}

type appliedCommand struct {
	cmd   raftstore.Command
	index uint64
}

// follow is the follower goroutine: it follows what Applied queues.
func (m *Master) follow() {
	defer m.wg.Done()
	for {
		select {
		case <-m.done:
			return
		case <-m.applied.ready:
		}
		m.followQueued()
	}
}

// followQueued follows every queued command in one batch, under m.mu and
// the state's read lock, never waiting for one of them while it holds the
// other: a handler may hold the state's read lock while it waits for m.mu,
// and a write waiting behind that handler (RWMutex) would block a plain Read
// here while the handler waited on us. So it takes m.mu and tries the state;
// failing that (a write holds it or waits), it waits for the state and tries
// m.mu; and so on.
func (m *Master) followQueued() {
	for {
		m.mu.Lock()
		ran := m.store.TryRead(m.followLocked)
		m.mu.Unlock()
		if ran {
			break
		}
		m.store.Read(func(st *raftstore.State) {
			if m.mu.TryLock() {
				m.followLocked(st)
				m.mu.Unlock()
				ran = true
			}
		})
		if ran {
			break
		}
	}
	m.trigger()
}

// followLocked takes the queue and follows it; m.mu is held and the state
// read-locked.
func (m *Master) followLocked(st *raftstore.State) {
	q := &m.applied
	q.mu.Lock()
	batch, queued := q.queue, q.queued
	q.queue, q.following = nil, batch
	q.mu.Unlock()
	if !m.closed {
		m.followBatch(st, batch)
	}
	q.mu.Lock()
	q.followed, q.following = queued, nil
	for _, a := range batch {
		q.index = max(q.index, a.index)
	}
	close(q.advanced)
	q.advanced = make(chan struct{})
	q.mu.Unlock()
}

// Followed waits until the live state follows cmd, applied at index, when
// the write's acknowledgement waits for that (ackAfterFollowed); cmd nil
// waits for every command applied before the call that the master follows.
// It returns at once when the term ends first: the next term starts from
// the state.
func (m *Master) Followed(cmd raftstore.Command, index uint64) {
	switch {
	case cmd == nil:
		m.followedAll()
	case ackAfterFollowed(cmd):
		m.caughtUp(index)
	}
}

// ackAfterFollowed reports whether a write is acknowledged only once the
// master has followed it: every write it follows but quotas (ackedEarly).
func ackAfterFollowed(cmd raftstore.Command) bool {
	return !unfollowed(cmd) && !ackedEarly(cmd)
}

// ackedEarly reports whether cmd is a write the master follows but
// acknowledges before it does: a quota. Following the writes acknowledged
// after takes back what was handed out or changes what an agent offers (a
// 200 for a deleted reservation promises its offers are rescinded; a
// lowered lending limit's evictions are under way). Following a quota sets
// the allocator's figures for the cycles to come and rescinds outstanding
// offers to make room for a guarantee, as any cycle makes and takes back
// offers: waiting for that would make every quota PUT that arrives during
// an allocation cycle wait for the rest of it. The master follows it at the
// end of the cycle under way, and a read of live figures waits for that
// (FollowedEarlyAcks), so a client still sees its own write.
func ackedEarly(cmd raftstore.Command) bool {
	switch cmd.(type) {
	case *raftstore.QuotaSet, *raftstore.QuotaDelete:
		return true
	}
	return false
}

// FollowedEarlyAcks waits until the live state follows the writes applied
// before the call that were acknowledged before the master followed them
// (ackedEarly). A read of live figures calls it, so that a client sees its
// own writes there; every other write it saw acknowledged was followed
// first. It returns at once when no such write is queued.
func (m *Master) FollowedEarlyAcks() {
	m.followedAllIf(ackedEarly)
}

// unfollowed reports whether cmd is a write the master has nothing to
// follow of: rate limits live in the state alone.
func unfollowed(cmd raftstore.Command) bool {
	switch cmd.(type) {
	case *raftstore.RateLimitSet, *raftstore.RateLimitDelete, *raftstore.RateLimitDefaultSet,
		*raftstore.RateLimitDefaultDelete, *raftstore.RateLimitConfigReplace:
		return true
	}
	return false
}

// followedAll waits until the live state follows every command queued
// before the call that the master follows (a restore included); false
// means the term ended first.
func (m *Master) followedAll() bool {
	return m.followedAllIf(func(cmd raftstore.Command) bool { return cmd == nil || !unfollowed(cmd) })
}

// followedAllIf is followedAll when a command queued or being followed
// matters (matters(cmd)); otherwise it returns at once.
func (m *Master) followedAllIf(matters func(raftstore.Command) bool) bool {
	q := &m.applied
	q.mu.Lock()
	target := q.queued
	pending := slices.ContainsFunc(q.following, func(a appliedCommand) bool { return matters(a.cmd) }) ||
		slices.ContainsFunc(q.queue, func(a appliedCommand) bool { return matters(a.cmd) })
	q.mu.Unlock()
	if !pending {
		return true
	}
	return m.waitFollower(func(q *appliedQueue) bool { return q.followed >= target })
}

// caughtUp waits until the live state follows the command applied at index;
// false means the term ended first.
func (m *Master) caughtUp(index uint64) bool {
	return m.waitFollower(func(q *appliedQueue) bool { return q.index >= index })
}

// waitFollower waits until reached, asked under the queue's lock each time
// the follower finishes a batch, holds; false means the term ended first.
func (m *Master) waitFollower(reached func(q *appliedQueue) bool) bool {
	q := &m.applied
	for {
		q.mu.Lock()
		done, advanced := reached(q), q.advanced
		q.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-advanced:
		case <-m.done:
			return false
		}
	}
}

// followBatch follows the commands of one batch in the order they were
// applied. Each re-reads the objects it concerns from the state rather than
// applying a delta, so a command followed after later ones were applied is
// followed as if it were seen twice (harmless), and of several commands on
// the same object only the last need be followed: a batch gathered during a
// long cycle does the work once.
func (m *Master) followBatch(st *raftstore.State, batch []appliedCommand) {
	var last map[string]int // object → the position of its last command
	if len(batch) > 1 {
		last = make(map[string]int, len(batch))
		for i, a := range batch {
			if k := followKey(a.cmd); k != "" {
				last[k] = i
			}
		}
	}
	for i, a := range batch {
		if k := followKey(a.cmd); k != "" && last != nil && last[k] != i {
			continue
		}
		m.followCommand(st, a.cmd)
	}
}

// followKey names the object a command concerns, by command type ("": not
// one to coalesce).
func followKey(cmd raftstore.Command) string {
	switch c := cmd.(type) {
	case *raftstore.AgentAdmit:
		return "agent-admit\x00" + c.Name
	case *raftstore.ReservationSet:
		return "reservation-set\x00" + c.Name
	case *raftstore.ReservationDelete:
		return "reservation-delete\x00" + c.Name
	case *raftstore.QuotaSet:
		return "quota-set\x00" + c.Role
	case *raftstore.QuotaDelete:
		return "quota-delete\x00" + c.Role
	case *raftstore.RoleSet:
		return "role-set\x00" + c.Role
	case *raftstore.RoleDelete:
		return "role-delete\x00" + c.Role
	}
	return ""
}

// followCommand brings the live state in step with one applied command.
func (m *Master) followCommand(st *raftstore.State, cmd raftstore.Command) {
	switch c := cmd.(type) {
	case nil:
		// A restored snapshot: bring everything in step, including the
		// quotas and weights of roles the new state no longer has.
		m.syncAgents(st)
		for _, r := range m.alloc.Roles() {
			if r.Role != api.DefaultRole {
				m.syncQuota(st, r.Role)
				m.syncRolePolicy(st, r.Role)
			}
		}
		for _, q := range st.Quotas() {
			m.syncQuota(st, q.Role)
		}
		for _, p := range st.RolePolicies() {
			m.syncRolePolicy(st, p.Role)
			m.enforceLendingLimit(p.Role, p.LendingLimit)
		}
		m.rescindOverlent()
	case *raftstore.AgentAdmit:
		// Only the agents of that name: a cluster registering ten
		// thousand agents must not sync ten thousand each time.
		m.syncAgentsNamed(st, c.Name)
	case *raftstore.AgentRemove:
		if ag := m.agents[c.ID]; ag != nil {
			m.syncAgentsNamed(st, ag.name)
		}
	case *raftstore.ReservationSet:
		// The agent it is on now and the one it was on before.
		before := m.reservationAgents[c.Name]
		m.syncReservation(st, c.Name)
		m.syncAgentsNamed(st, before, c.Agent)
	case *raftstore.ReservationDelete:
		before := m.reservationAgents[c.Name]
		m.syncReservation(st, c.Name)
		m.syncAgentsNamed(st, before)
	case *raftstore.QuotaSet:
		m.syncQuota(st, c.Role)
		if q, ok := st.Quota(c.Role); ok {
			m.rescindAll(m.quotaRescinds(q))
		}
	case *raftstore.FrameworkRemove:
		// Usually forgotten already by whoever removed it; not when
		// that caller gave up before the write committed.
		if fw := m.frameworks[c.ID]; fw != nil {
			m.forgetFramework(fw)
		}
	case *raftstore.FrameworkSet:
		// A subscription whose caller gave up before the write
		// committed: the framework gets its failover timeout to return.
		if rec, ok := st.Framework(c.ID); ok && m.frameworks[c.ID] == nil {
			m.recoverFramework(rec, m.clock.Now())
		}
	case *raftstore.QuotaDelete:
		m.syncQuota(st, c.Role)
	case *raftstore.RoleSet:
		m.syncRolePolicy(st, c.Role)
		if p, ok := st.RolePolicy(c.Role); ok {
			// A lower limit takes back what the role lends past it.
			m.enforceLendingLimit(c.Role, p.LendingLimit)
			m.rescindOverlent()
		}
	case *raftstore.RoleDelete:
		m.syncRolePolicy(st, c.Role)
	}
}

// The sync functions run with m.mu held and the state read-locked. Their
// allocator errors are not actionable: the state was validated before it was
// stored.

// syncAgents brings every agent in step with the registry.
func (m *Master) syncAgents(st *raftstore.State) {
	for id, ag := range m.agents {
		if _, ok := st.Agent(id); !ok {
			m.dropAgent(st, ag)
		}
	}
	clear(m.reservationAgents)
	for _, r := range st.Reservations() {
		m.reservationAgents[r.Name] = r.Agent
	}
	for _, rec := range st.Agents() {
		m.syncAgent(st, rec)
	}
}

// syncAgentsNamed brings the agents of the given names in step: the one the
// registry has under each name, and any this master knows by that name under
// another id (an earlier incarnation, or one removed).
func (m *Master) syncAgentsNamed(st *raftstore.State, names ...string) {
	for _, name := range names {
		if name == "" {
			continue
		}
		if ag := m.agentNames[name]; ag != nil {
			if _, ok := st.Agent(ag.id); !ok {
				m.dropAgent(st, ag)
			}
		}
		if rec, ok := st.AgentByName(name); ok {
			m.syncAgent(st, rec)
		}
	}
}

// dropAgent forgets an agent the registry no longer has under its id.
func (m *Master) dropAgent(st *raftstore.State, ag *agent) {
	if _, restarted := st.AgentByName(ag.name); restarted {
		m.removeAgent(ag, api.TaskLost, api.ReasonAgentRestarted, "the agent "+ag.name+" registered again as a new agent")
	} else {
		m.removeAgent(ag, api.TaskGone, api.ReasonAgentRemoved, "the agent "+ag.name+" was removed from the registry")
	}
}

// syncReservation records which agent a reservation is on.
func (m *Master) syncReservation(st *raftstore.State, name string) {
	if r, ok := st.Reservation(name); ok {
		m.reservationAgents[name] = r.Agent
	} else {
		delete(m.reservationAgents, name)
	}
}

func (m *Master) syncAgent(st *raftstore.State, rec raftstore.AgentRecord) {
	reservations := map[string]api.Resources{}
	for _, r := range st.Reservations() {
		if r.Agent == rec.Name && r.Status == api.ReservationActive {
			reservations[r.Role] = reservations[r.Role].Add(r.Resources)
		}
	}
	ag, known := m.agents[rec.ID]
	if !known {
		ag = &agent{id: rec.ID, tasks: map[taskKey]*task{}, executors: map[execKey]*executor{},
			goneTasks: map[taskKey]bool{}}
		m.agents[rec.ID] = ag
		_ = m.alloc.AddAgent(rec.ID, rec.Hostname, rec.Resources, reservations)
		// Offers wait until the agent registers with this leader: its
		// running tasks are unknown until then.
		_ = m.alloc.DeactivateAgent(rec.ID)
		m.reservations[rec.ID] = reservations
	} else {
		if !maps.Equal(ag.resources, rec.Resources) {
			m.rescindAgentOffers(ag)
			_ = m.alloc.UpdateAgentTotal(rec.ID, rec.Resources)
		}
		if ag.hostname != rec.Hostname {
			m.rescindAgentOffers(ag)
			_ = m.alloc.UpdateAgentHostname(rec.ID, rec.Hostname)
		}
		if !sameReservations(m.reservations[rec.ID], reservations) {
			m.rescindAgentOffers(ag)
			_ = m.alloc.UpdateAgentReservations(rec.ID, reservations)
			m.reservations[rec.ID] = reservations
		}
	}
	if ag.name != rec.Name && m.agentNames[ag.name] == ag {
		delete(m.agentNames, ag.name)
	}
	m.agentNames[rec.Name] = ag
	ag.name, ag.hostname, ag.resources, ag.capabilities = rec.Name, rec.Hostname, rec.Resources, rec.Capabilities
}

func sameReservations(a, b map[string]api.Resources) bool {
	return maps.EqualFunc(a, b, func(x, y api.Resources) bool {
		return maps.Equal(x, y)
	})
}

func (m *Master) syncQuota(st *raftstore.State, role string) {
	if q, ok := st.Quota(role); ok {
		_ = m.alloc.SetQuota(role, q.Guarantees, q.Limits)
	} else {
		m.alloc.RemoveQuota(role)
	}
}

// syncRolePolicy gives the allocator a role's weight and lending limit (nil,
// no cap, when the role has no policy).
func (m *Master) syncRolePolicy(st *raftstore.State, role string) {
	weight := api.DefaultWeight
	var lendingLimit api.Resources
	if p, ok := st.RolePolicy(role); ok {
		weight, lendingLimit = p.Weight, p.LendingLimit
	}
	_ = m.alloc.SetWeight(role, weight)
	_ = m.alloc.SetLendingLimit(role, lendingLimit)
	if lendingLimit == nil {
		delete(m.lendingLimits, role)
	} else {
		m.lendingLimits[role] = lendingLimit
	}
}

// recoverFramework adds a registered framework that is not connected, as at
// the start of a term. It has until its failover timeout after since (but at
// least the agent ping timeout, the time a client needs to notice the old
// leader is gone) to subscribe.
func (m *Master) recoverFramework(rec raftstore.FrameworkRecord, since time.Time) {
	info := frameworkInfo(rec)
	fw := &framework{info: info, tasks: map[string]*task{}, suppressed: map[string]bool{}}
	grace := max(secondsDuration(info.FailoverTimeoutSeconds), m.opts.AgentPingTimeout)
	fw.failoverDeadline = since.Add(grace)
	m.frameworks[info.ID] = fw
	_ = m.alloc.AddFramework(allocatorFramework(info))
	_ = m.alloc.DeactivateFramework(info.ID)
}

func frameworkInfo(rec raftstore.FrameworkRecord) api.FrameworkInfo {
	return api.FrameworkInfo{ID: rec.ID, Name: rec.Name, Principal: rec.Principal, Roles: rec.Roles,
		Capabilities: rec.Capabilities, FailoverTimeoutSeconds: rec.FailoverTimeoutSeconds}
}

func allocatorFramework(info api.FrameworkInfo) allocator.Framework {
	return allocator.Framework{ID: info.ID, Principal: info.Principal, Roles: info.Roles, Capabilities: info.Capabilities}
}
