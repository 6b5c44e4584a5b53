package server

import (
	"context"
	"sync"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/raftstore"
)

// engine holds the live state of the current leadership term: a
// master.Master while this server leads, nothing otherwise (then it reports
// an idle cluster).
type engine struct {
	store master.Store
	opts  master.Options

	mu     sync.Mutex
	master *master.Master
}

// raftStore is the replicated state as the master reads and writes it.
type raftStore struct{ node *raftstore.Node }

func (r raftStore) Read(fn func(st *raftstore.State)) { r.node.FSM().Read(fn) }

func (r raftStore) Apply(ctx context.Context, cmd raftstore.Command) (raftstore.Result, error) {
	return r.node.Apply(ctx, cmd)
}

func newEngine(store master.Store, opts master.Options) *engine {
	return &engine{store: store, opts: opts}
}

// lead starts a term; stop ends it.
func (e *engine) lead() {
	// Built with e.mu held, so that a command applied while New reads the
	// state waits in applied and then reaches the new master.
	e.mu.Lock()
	old := e.master
	e.master = master.New(e.store, e.opts)
	e.mu.Unlock()
	if old != nil {
		old.Close()
	}
}

func (e *engine) stop() {
	e.mu.Lock()
	m := e.master
	e.master = nil
	e.mu.Unlock()
	if m != nil {
		m.Close()
	}
}

// current is the term's master, nil while not leading.
func (e *engine) current() *master.Master {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.master
}

func (e *engine) applied(cmd raftstore.Command, res raftstore.Result) {
	if m := e.current(); m != nil {
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
