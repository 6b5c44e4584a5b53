package master

import (
	"testing"
	"time"

	"github.com/allot/allot/raftstore"
)

// A quota check waits for the master to follow only the writes that may
// change a role's consumption for longer than a cycle: not quotas (they only
// rescind offers) nor rate limits; anything else the table does not name.
func TestChangesConsumption(t *testing.T) {
	for _, c := range []struct {
		cmd  raftstore.Command
		want bool
	}{
		{&raftstore.QuotaSet{Role: "eng/ml"}, false},
		{&raftstore.QuotaDelete{Role: "eng/ml"}, false},
		{&raftstore.RateLimitSet{}, false},
		{&raftstore.ReservationDelete{Name: "db-1"}, true},
		{&raftstore.ReservationSet{Name: "db-1"}, true},
		{&raftstore.AgentAdmit{Name: "node-1"}, true},
		{&raftstore.RoleSet{Role: "ops"}, true},
		{&raftstore.FrameworkSet{}, true},
		{&raftstore.ACLTokenSet{}, true},
		{nil, true}, // a restored snapshot
	} {
		if got := changesConsumption(c.cmd); got != c.want {
			t.Errorf("changesConsumption(%T %+v) = %v, want %v", c.cmd, c.cmd, got, c.want)
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
