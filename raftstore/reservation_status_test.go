package raftstore

import (
	"bytes"
	"testing"

	"github.com/allot/allot/masterd/api"
)

func forced(c *ReservationSet) *ReservationSet {
	c.Force = true
	return c
}

func wantStatus(t *testing.T, s *State, name, status string) {
	t.Helper()
	r, ok := s.Reservation(name)
	if !ok || r.Status != status {
		t.Fatalf("reservation %s: %+v (present %v), want status %s", name, r, ok, status)
	}
	for _, r := range s.Reservations() {
		if r.Name == name && r.Status != status {
			t.Fatalf("Reservations lists %s as %s, Reservation as %s", name, r.Status, status)
		}
	}
}

// TestReservationForcedBeforeItsAgentExists: Terraform may reserve on a node
// before the node's agent is admitted. Forced, the reservation is stored
// pending; it turns active when the agent is admitted with room for it, and
// follows the agent from then on, with no write of its own.
func TestReservationForcedBeforeItsAgentExists(t *testing.T) {
	s := NewState()
	unforced := applyNext(t, s, reserve("db", "node-1", "db", api.Resources{"cpus": 4}))
	wantCode(t, unforced, api.CodeConflict)
	if unforced.Err.Details["reason"] != "agent_not_admitted" || unforced.Err.Details["agent"] != "node-1" {
		t.Fatalf("unforced: details %v, want the reason and the agent", unforced.Err.Details)
	}

	res := mustApply(t, s, forced(reserve("db", "node-1", "db", api.Resources{"cpus": 4})))
	if r := res.Object.(api.Reservation); r.Status != api.ReservationPending {
		t.Fatalf("the forced write answers %+v, want pending", r)
	}
	wantStatus(t, s, "db", api.ReservationPending)
	version := mustReservation(t, s, "db").Version

	// Too small an agent: still pending.
	mustApply(t, s, admit("node-1", api.Resources{"cpus": 2}))
	wantStatus(t, s, "db", api.ReservationPending)
	// The agent comes back bigger: active, and the reservation itself was
	// not written again.
	mustApply(t, s, admit("node-1", api.Resources{"cpus": 8}))
	wantStatus(t, s, "db", api.ReservationActive)
	if v := mustReservation(t, s, "db").Version; v != version {
		t.Fatalf("the reservation's version moved from %d to %d without a write to it", version, v)
	}
	checkInvariants(t, s)

	// What a snapshot holds reads back the same, status included.
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, restored, "db", api.ReservationActive)

	// The agent is removed: pending again.
	mustApply(t, s, &AgentRemove{WriteMeta: meta(), ID: "id-node-1"})
	wantStatus(t, s, "db", api.ReservationPending)
	checkInvariants(t, s)
}

func mustReservation(t *testing.T, s *State, name string) api.Reservation {
	t.Helper()
	r, ok := s.Reservation(name)
	if !ok {
		t.Fatalf("no reservation %s", name)
	}
	return r
}
