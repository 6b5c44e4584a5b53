package server

import (
	"sync"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
	"github.com/allot/allot/raftstore"
)

// engine is the leader's allocation state: an allocator kept in step with
// the replicated agents, reservations, quotas and weights. It exists only
// while this server leads; elsewhere it reports an idle cluster.
//
// Every update re-reads the object it concerns from the state rather than
// applying a delta, so an event seen twice (once while the allocator was built
// from the state, once through OnApply) is harmless.
//
// Locks are always taken in one order: the FSM's read lock, then e.mu, then
// the allocator's own mutex; the API handlers read the state first and ask
// the engine inside, and so does the engine.
type engine struct {
	fsm *raftstore.FSM

	mu     sync.Mutex
	alloc  *allocator.Allocator // nil while not leading
	agents map[string]bool      // ids of the agents the allocator holds
}

func newEngine(fsm *raftstore.FSM) *engine { return &engine{fsm: fsm} }

// lead builds the allocator from the state; stop drops it.
func (e *engine) lead() {
	e.fsm.Read(func(st *raftstore.State) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.alloc = allocator.New(allocator.Options{})
		e.agents = map[string]bool{}
		e.syncAgents(st)
		for _, q := range st.Quotas() {
			e.syncQuota(st, q.Role)
		}
		for _, p := range st.RolePolicies() {
			e.syncWeight(st, p.Role)
		}
	})
}

func (e *engine) stop() {
	e.mu.Lock()
	e.alloc, e.agents = nil, nil
	e.mu.Unlock()
}

func (e *engine) leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.alloc != nil
}

// applied follows a change of the replicated state (nil: a snapshot restore).
func (e *engine) applied(cmd raftstore.Command, res raftstore.Result) {
	if res.Err != nil || !e.leading() {
		return
	}
	if cmd == nil {
		e.lead()
		return
	}
	e.fsm.Read(func(st *raftstore.State) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.alloc == nil {
			return
		}
		switch c := cmd.(type) {
		case *raftstore.AgentAdmit, *raftstore.AgentRemove, *raftstore.ReservationSet, *raftstore.ReservationDelete:
			// Agents change ids and reservations move between agents:
			// bringing every agent in step is simpler than tracking both ends.
			e.syncAgents(st)
		case *raftstore.QuotaSet:
			e.syncQuota(st, c.Role)
		case *raftstore.QuotaDelete:
			e.syncQuota(st, c.Role)
		case *raftstore.RoleSet:
			e.syncWeight(st, c.Role)
		case *raftstore.RoleDelete:
			e.syncWeight(st, c.Role)
		}
	})
}

// syncAgents removes agents the registry no longer has and syncs the others.
func (e *engine) syncAgents(st *raftstore.State) {
	for id := range e.agents {
		if _, ok := st.Agent(id); !ok {
			e.alloc.RemoveAgent(id)
			delete(e.agents, id)
		}
	}
	for _, a := range st.Agents() {
		e.syncAgent(st, a.Name)
	}
}

// The sync functions run with e.mu held and the state read-locked. Their
// errors are not actionable: the state was validated before it was stored.

func (e *engine) syncAgent(st *raftstore.State, name string) {
	a, ok := st.AgentByName(name)
	if !ok {
		return
	}
	reservations := map[string]api.Resources{}
	for _, r := range st.Reservations() {
		if r.Agent == name && r.Status == api.ReservationActive {
			reservations[r.Role] = reservations[r.Role].Add(r.Resources)
		}
	}
	if !e.agents[a.ID] {
		e.alloc.AddAgent(a.ID, a.Hostname, a.Resources, reservations)
		e.agents[a.ID] = true
		return
	}
	e.alloc.UpdateAgentTotal(a.ID, a.Resources)
	e.alloc.UpdateAgentReservations(a.ID, reservations)
}

func (e *engine) syncQuota(st *raftstore.State, role string) {
	if q, ok := st.Quota(role); ok {
		e.alloc.SetQuota(role, q.Guarantees, q.Limits)
	} else {
		e.alloc.RemoveQuota(role)
	}
}

func (e *engine) syncWeight(st *raftstore.State, role string) {
	p, _ := st.RolePolicy(role)
	e.alloc.SetWeight(role, p.Weight)
}

// liveState, answered from the allocator while leading.

func (e *engine) Consumption(role string) api.Resources {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.alloc == nil {
		return api.Resources{}
	}
	return e.alloc.QuotaConsumed(role)
}

// RescindsForQuota is 0 until offers are sent.
func (e *engine) RescindsForQuota(api.Quota) int { return 0 }

func (e *engine) RoleUsage(role string) RoleUsage {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.alloc == nil {
		return RoleUsage{}
	}
	stats, ok := e.alloc.Role(role)
	if !ok {
		return RoleUsage{}
	}
	return RoleUsage{Allocated: stats.Allocated, Offered: stats.Offered, Frameworks: stats.Frameworks}
}

func (e *engine) AgentUsage(id string) AgentUsage {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.alloc == nil {
		return AgentUsage{}
	}
	stats, ok := e.alloc.Agent(id)
	if !ok {
		return AgentUsage{}
	}
	return AgentUsage{Allocated: stats.Allocated}
}

func (e *engine) Recovery() api.Recovery { return api.Recovery{} }
