package master

import (
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// Deleting a role's policy gives the role the default weight back, and a
// restored snapshot drops quotas and weights the new state does not have.
func TestPolicyChangesReachTheAllocator(t *testing.T) {
	h := newHarness(t)
	weight := func(role string) float64 {
		stats, ok := h.m().alloc.Role(role)
		if !ok {
			return api.DefaultWeight
		}
		return stats.Weight
	}
	h.write(&raftstore.RoleSet{Role: "eng", Weight: 3})
	if w := weight("eng"); w != 3 {
		t.Fatalf("weight after RoleSet: %v", w)
	}
	h.write(&raftstore.RoleDelete{Role: "eng"})
	if w := weight("eng"); w != api.DefaultWeight {
		t.Fatalf("weight after RoleDelete: %v, want the default %v", w, api.DefaultWeight)
	}

	h.write(&raftstore.RoleSet{Role: "ops", Weight: 2})
	h.write(&raftstore.QuotaSet{Role: "ops", Limits: api.Resources{"cpus": 4}})
	// A snapshot of a state without them, as a restore delivers it.
	m := h.m()
	m.store = emptyStore{}
	m.Applied(nil, raftstore.Result{})
	m.followedAll()
	if stats, ok := m.alloc.Role("ops"); ok && (stats.Weight != api.DefaultWeight || stats.Limits != nil) {
		t.Fatalf("after restoring an empty state: %+v", stats)
	}
}

// emptyStore reads as a state with nothing in it.
type emptyStore struct{ Store }

func (emptyStore) Read(fn func(st *raftstore.State)) { fn(raftstore.NewState()) }

func (emptyStore) TryRead(fn func(st *raftstore.State)) bool {
	fn(raftstore.NewState())
	return true
}
