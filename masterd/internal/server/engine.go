package server

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/raftstore"
)

// engine holds the live state of the current leadership term: a
// master.Master while this server leads, nothing otherwise (then it reports
// an idle cluster).
//
// Readers load the master without a lock, so that handlers holding the
// state's read lock never wait on a term change. termMu orders term changes
// and applied commands: a command applied while lead builds a master waits,
// then reaches the new one.
type engine struct {
	store master.Store
	opts  master.Options

	termMu sync.Mutex
	master atomic.Pointer[master.Master]
	closed bool // the server is shutting down: no new term
}

// raftStore is the replicated state as the master reads and writes it.
type raftStore struct{ node *raftstore.Node }

func (r raftStore) Read(fn func(st *raftstore.State)) { r.node.FSM().Read(fn) }

func (r raftStore) TryRead(fn func(st *raftstore.State)) bool { return r.node.FSM().TryRead(fn) }

func (r raftStore) Apply(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error) {
	return r.node.Apply(ctx, cmd)
}

func newEngine(store master.Store, opts master.Options) *engine {
	return &engine{store: store, opts: opts}
}

// lead starts a term; stop ends it.
func (e *engine) lead() {
	e.termMu.Lock()
	if e.closed {
		e.termMu.Unlock()
		return
	}
	old := e.master.Swap(master.New(e.store, e.opts))
	e.termMu.Unlock()
	if old != nil {
		old.Close()
	}
}

func (e *engine) stop() {
	e.termMu.Lock()
	old := e.master.Swap(nil)
	e.termMu.Unlock()
	if old != nil {
		old.Close()
	}
}

// close ends the term for good: the server is shutting down.
func (e *engine) close() {
	e.termMu.Lock()
	e.closed = true
	e.termMu.Unlock()
	e.stop()
}

// current is the term's master, nil while not leading.
func (e *engine) current() *master.Master { return e.master.Load() }

// applied runs in the FSM's goroutine, holding none of the state's locks;
// the master only queues the command (it never waits for an allocation
// cycle).
func (e *engine) applied(cmd raftstore.Command, res raftstore.Result) {
	e.termMu.Lock()
	m := e.master.Load()
	e.termMu.Unlock()
	if m != nil {
		m.Applied(cmd, res)
	}
}

// liveState, answered by the term's master.

func (e *engine) Consumption(role string) api.Resources {
	if m := e.current(); m != nil {
		return m.Consumption(role)
	}
	return api.Resources{}
}

func (e *engine) ConsumptionAfterWrites(role string) api.Resources {
	if m := e.current(); m != nil {
		return m.ConsumptionAfterWrites(role)
	}
	return api.Resources{}
}

func (e *engine) Followed(cmd raftstore.Command, index uint64) {
	if m := e.current(); m != nil {
		m.Followed(cmd, index)
	}
}

func (e *engine) FollowedEarlyAcks() {
	if m := e.current(); m != nil {
		m.FollowedEarlyAcks()
	}
}

func (e *engine) RescindsForQuota(q api.Quota) int {
	if m := e.current(); m != nil {
		return m.RescindsForQuota(q)
	}
	return 0
}

func (e *engine) RoleUsage(role string) master.RoleUsage {
	if m := e.current(); m != nil {
		return m.RoleUsage(role)
	}
	return master.RoleUsage{}
}

func (e *engine) AgentUsage(id string) master.AgentUsage {
	if m := e.current(); m != nil {
		return m.AgentUsage(id)
	}
	return master.AgentUsage{}
}

func (e *engine) Recovery() api.Recovery {
	if m := e.current(); m != nil {
		return m.Recovery()
	}
	return api.Recovery{}
}

func (e *engine) Usage() master.ClusterUsage {
	if m := e.current(); m != nil {
		return m.Usage()
	}
	return master.ClusterUsage{Allocated: api.Resources{}, Offered: api.Resources{}, Revocable: api.Resources{}, RevocableAllocated: api.Resources{}}
}

func (e *engine) LiveRoles() []string {
	if m := e.current(); m != nil {
		return m.LiveRoles()
	}
	return nil
}

func (e *engine) LendingEffects(role string, limit api.Resources) (int, []api.Eviction) {
	if m := e.current(); m != nil {
		return m.LendingEffects(role, limit)
	}
	return 0, nil
}
