package raftstore

import (
	"fmt"
	"sync"

	"github.com/allot/allot/masterd/api"
)

// StoreVersion is the newest store version this binary implements. A store
// version names three things that must move together across a cluster: the
// command types a server can decode, the rules Apply judges a write by, and
// the snapshot format.
//
//   - 1: every release before versions existed. Apply re-ran all of a
//     command's rules, input syntax included, and normalized its values;
//     snapshots are format 1.
//   - 2: the leader validates and normalizes a write before proposing it,
//     and Apply judges only what depends on the state the write lands on
//     (preconditions, existence, the quota tree, capacity), so a rule on
//     input tightened in a later release never changes how an older log
//     replays. Server records carry their store version; snapshots are
//     format 2.
//
// A write is stamped (WriteMeta.Rules) with the cluster's version: the
// lowest StoreVersion among the Raft configuration's servers. So a server
// never receives an entry, a command type or a snapshot newer than it can
// read while a rolling upgrade is under way, and every replica replays any
// entry by the rules it was judged with.
//
// Changing an input rule: branch in validate on its rules argument so that
// entries of older versions keep the old behaviour, raise StoreVersion, and
// add a golden log of the release (testdata/golden-vN) so that later
// releases replay it. No state rule has changed yet: the first to change
// must also pass the entry's version to the command's check.
const StoreVersion uint32 = 2

// commandSpec is everything the store knows about one command type: the one
// place a new command is registered.
type commandSpec struct {
	name string
	// since is the store version that introduced the command: the leader
	// refuses to propose it until every server runs that version.
	since uint32
	new   func() Command
	// check judges the command against the state; it returns the object the
	// write would store.
	check func(s *State, c Command) (any, *api.Error)
	// apply stores what check returned and returns the stored object.
	apply func(s *State, index uint64, c Command, obj any) any
}

var registry = map[MessageType]commandSpec{}

// register adds a command type. C is the command's struct, O the object its
// check returns and its apply stores.
func register[C any, PC interface {
	*C
	Command
}, O any](t MessageType, name string, since uint32,
	check func(*State, PC) (O, *api.Error),
	apply func(*State, uint64, PC, O) O) {
	registerAny(t, name, since, check, func(s *State, index uint64, c PC, obj O) any { return apply(s, index, c, obj) })
}

// registerAny is register for a command whose stored object is not the one
// its check returns.
func registerAny[C any, PC interface {
	*C
	Command
}, O any](t MessageType, name string, since uint32,
	check func(*State, PC) (O, *api.Error),
	apply func(*State, uint64, PC, O) any) {
	if _, dup := registry[t]; dup || t == 0 || t&IgnoreUnknownTypeFlag != 0 {
		panic(fmt.Sprintf("raftstore: command type %d (%s) registered twice or out of range", t, name))
	}
	registry[t] = commandSpec{
		name:  name,
		since: since,
		new:   func() Command { return PC(new(C)) },
		check: func(s *State, c Command) (any, *api.Error) { return check(s, c.(PC)) },
		apply: func(s *State, index uint64, c Command, obj any) any {
			return apply(s, index, c.(PC), obj.(O))
		},
	}
}

// versionError refuses a write the cluster cannot take yet.
func versionError(t MessageType, since, cluster uint32) *api.Error {
	return api.Errorf(api.CodeConflict,
		"%s needs store version %d on every server; the cluster runs %d until every server is upgraded (see GET /v1/cluster)",
		t, since, cluster).WithDetails(map[string]any{"needs_store_version": since, "store_version": cluster})
}

// RulesVersion is the newest store version a write applied to this state
// was judged by: once a version-N write is committed the cluster is at N for
// good, and a server below it may no longer join.
func (s *State) RulesVersion() uint32 { return max(s.rulesVersion, 1) }

// serverVersions is what the leader has heard of its servers' store
// versions (GET /v1/health answers them). It is not replicated: a new
// leader asks again, and until it has heard from a server, that server
// counts as version 1.
type serverVersions struct {
	mu    sync.Mutex
	heard map[string]uint32
}

func (v *serverVersions) set(id string, version uint32) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.heard == nil {
		v.heard = map[string]uint32{}
	}
	v.heard[id] = version
}

func (v *serverVersions) get(id string) uint32 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return max(v.heard[id], 1)
}
