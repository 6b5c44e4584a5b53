package master

import (
	"testing"
	"time"

	"github.com/allot/allot/raftstore"
)

// A quota check waits for the master to follow only the writes that may
// change the role's consumption: a quota of a role beside it does not, one
// above or below it does, and so does anything the table does not name.
func TestChangesConsumption(t *testing.T) {
	for _, c := range []struct {
		cmd  raftstore.Command
		role string
		want bool
	}{
		{&raftstore.QuotaSet{Role: "eng/ml"}, "eng/ml", true},
		{&raftstore.QuotaSet{Role: "eng"}, "eng/ml", true},
		{&raftstore.QuotaSet{Role: "eng/ml/gpu"}, "eng/ml", true},
		{&raftstore.QuotaSet{Role: "eng/web"}, "eng/ml", false},
		{&raftstore.QuotaSet{Role: "eng/m"}, "eng/ml", false},
		{&raftstore.QuotaDelete{Role: "eng/ml"}, "eng/ml", false},
		{&raftstore.RateLimitSet{}, "eng/ml", false},
		{&raftstore.ReservationDelete{Name: "db-1"}, "eng/ml", true},
		{&raftstore.AgentAdmit{Name: "node-1"}, "eng/ml", true},
		{&raftstore.RoleSet{Role: "ops"}, "eng/ml", true},
		{&raftstore.FrameworkSet{}, "eng/ml", true},
		{&raftstore.ACLTokenSet{}, "eng/ml", true},
		{nil, "eng/ml", true}, // a restored snapshot
	} {
		if got := changesConsumption(c.cmd, c.role); got != c.want {
			t.Errorf("changesConsumption(%T %+v, %q) = %v, want %v", c.cmd, c.cmd, c.role, got, c.want)
		}
	}
}

// The roles Consumption was asked for are forgotten after a window even
// when no cycle runs to forget them (a long recovery holds cycles back):
// every quota PUT asks for its role.
func TestConsumptionForgetsOldRolesWithoutCycles(t *testing.T) {
	h := newHarness(t)
	m := h.m()
	m.Consumption("eng")
	h.clock.Advance(consumptionWindow + time.Second)
	m.Consumption("ops")
	m.consumption.mu.Lock()
	defer m.consumption.mu.Unlock()
	if _, ok := m.consumption.asked["eng"]; ok || len(m.consumption.asked) != 1 {
		t.Fatalf("roles asked for: %v, want only ops", m.consumption.asked)
	}
}
