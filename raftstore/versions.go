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
//     replays. An empty lending limit (lend nothing) is kept apart from
//     none (no cap), which version 1's log encoding made of it: the leader
//     proposes an empty one only once every server runs version 2.
//     Server records carry their store version; snapshots are format 2.
//   - 3: ACL policies and tokens (the acl.* commands) and labeled rate
//     limits, keyed by principal and label (a label on ratelimit.set,
//     ratelimit.delete or an entry of ratelimits.replace, which a version 2
//     server would drop, storing the principal's own limit); snapshots are
//     format 3, which adds the ACL state and the labels.
//
// A write is stamped (WriteMeta.Rules) with the cluster's version: the
// lowest StoreVersion among the Raft configuration's servers, computed
// while no server joins (Node.membership). So a server never receives an
// entry, a command type or a snapshot newer than it can read while a
// rolling upgrade is under way, and every replica replays any entry by the
// rules it was judged with.
//
// Changing a rule: branch on the rules argument that validate, check and
// apply receive (the version the entry was stamped with) so that entries of
// older versions keep the old behaviour, raise StoreVersion, and add a
// golden log of the release (testdata/golden-vN) so that later releases
// replay it. A command whose content, not only its type, needs a newer
// version says so with neededVersion.
const StoreVersion uint32 = 3

// commandSpec is everything the store knows about one command type: the one
// place a new command is registered.
type commandSpec struct {
	name string
	// since is the store version that introduced the command: the leader
	// refuses to propose it until every server runs that version.
	since uint32
	new   func() Command
	// check judges the command against the state by the rules of store
	// version rules; it returns the object the write would store.
	check func(s *State, c Command, rules uint32) (any, *api.Error)
	// apply stores what check returned, by the same rules, and returns the
	// stored object.
	apply func(s *State, index uint64, c Command, obj any, rules uint32) any
}

var registry = map[MessageType]commandSpec{}

// register adds a command type. C is the command's struct, O the object its
// check returns and its apply stores.
func register[C any, PC interface {
	*C
	Command
}, O any](t MessageType, name string, since uint32,
	check func(*State, PC, uint32) (O, *api.Error),
	apply func(*State, uint64, PC, O, uint32) O) {
	registerAny(t, name, since, check, func(s *State, index uint64, c PC, obj O, rules uint32) any {
		return apply(s, index, c, obj, rules)
	})
}

// registerAny is register for a command whose stored object is not the one
// its check returns.
func registerAny[C any, PC interface {
	*C
	Command
}, O any](t MessageType, name string, since uint32,
	check func(*State, PC, uint32) (O, *api.Error),
	apply func(*State, uint64, PC, O, uint32) any) {
	if _, dup := registry[t]; dup || t == 0 || t&IgnoreUnknownTypeFlag != 0 {
		panic(fmt.Sprintf("raftstore: command type %d (%s) registered twice or out of range", t, name))
	}
	registry[t] = commandSpec{
		name:  name,
		since: since,
		new:   func() Command { return PC(new(C)) },
		check: func(s *State, c Command, rules uint32) (any, *api.Error) { return check(s, c.(PC), rules) },
		apply: func(s *State, index uint64, c Command, obj any, rules uint32) any {
			return apply(s, index, c.(PC), obj.(O), rules)
		},
	}
}

// versionError refuses a write the cluster cannot take yet: what names the
// command type, or what in the command needs the newer version.
func versionError(what string, since, cluster uint32) *api.Error {
	return api.Errorf(api.CodeConflict,
		"%s needs store version %d on every server; the cluster runs %d until every server is upgraded (see GET /v1/cluster)",
		what, since, cluster).WithDetails(map[string]any{"needs_store_version": since, "store_version": cluster})
}

// versionedContent is a command whose content, beyond its type, may need a
// store version newer than its type's: what a version 1 server would store
// differently (or not at all).
type versionedContent interface {
	// neededVersion is the store version the command's content needs (1
	// for none), and what in it needs that version.
	neededVersion() (uint32, string)
}

// neededVersion is the store version every server must run before c may be
// proposed, and what needs it.
func neededVersion(c Command) (uint32, string) {
	need, what := registry[c.Type()].since, c.Type().String()
	if vc, ok := c.(versionedContent); ok {
		if v, w := vc.neededVersion(); v > need {
			need, what = v, c.Type().String()+" with "+w
		}
	}
	return need, what
}

// refuseNewer refuses c when it needs a store version above cluster's.
func refuseNewer(c Command, cluster uint32) *api.Error {
	if need, what := neededVersion(c); need > cluster {
		return versionError(what, need, cluster)
	}
	return nil
}

// JoinVersionError refuses a server whose store version is below the one
// writes are stamped with: it could not read the log or the snapshots.
type JoinVersionError struct {
	ID string
	// Version is the joining server's store version, Cluster the cluster's.
	Version, Cluster uint32
}

func (e *JoinVersionError) Error() string {
	return fmt.Sprintf("server %s runs store version %d, but this cluster has moved to version %d", e.ID, e.Version, e.Cluster)
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
