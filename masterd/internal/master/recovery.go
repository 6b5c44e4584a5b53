package master

import (
	"math"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// recovery holds back offers after a leader change while quotas exist:
// guarantees cannot be judged on part of the cluster, so the new leader waits
// until a share of the admitted agents re-registered or a timeout passed.
type recovery struct {
	active       bool
	expected     int
	reregistered map[string]bool
	deadline     time.Time
}

func (m *Master) startRecovery(st *raftstore.State) {
	admitted := len(st.Agents())
	m.recovery = recovery{reregistered: map[string]bool{}}
	if len(st.Quotas()) == 0 || admitted == 0 {
		return
	}
	expected := int(math.Ceil(m.opts.RecoveryAgentRatio * float64(admitted)))
	if expected == 0 {
		// A zero ratio waits for no agent: offers go out at once, and
		// GET /v1/cluster must not report a recovery until the first tick.
		return
	}
	m.recovery.active = true
	m.recovery.expected = expected
	m.recovery.deadline = m.started.Add(m.opts.RecoveryTimeout)
	m.log.Info("recovery: offers wait for agents to re-register",
		"expected", m.recovery.expected, "admitted", admitted, "deadline", m.recovery.deadline)
}

func (m *Master) noteReregistered(agentID string, now time.Time) {
	m.recovery.reregistered[agentID] = true
	m.checkRecovery(now)
}

func (m *Master) forgetReregistered(agentID string) {
	delete(m.recovery.reregistered, agentID)
}

// checkRecovery ends recovery once enough agents are back or time is up.
func (m *Master) checkRecovery(now time.Time) {
	r := &m.recovery
	if !r.active {
		return
	}
	switch {
	case len(r.reregistered) >= r.expected:
		m.log.Info("recovery: enough agents re-registered; offers resume", "reregistered", len(r.reregistered))
	case !now.Before(r.deadline):
		m.log.Warn("recovery: timeout passed; offers resume", "reregistered", len(r.reregistered), "expected", r.expected)
	default:
		return
	}
	r.active = false
	m.trigger()
}

// Recovery reports the recovery state for GET /v1/cluster.
func (m *Master) Recovery() api.Recovery {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recovery
	out := api.Recovery{Active: r.active, Reregistered: len(r.reregistered), Expected: r.expected}
	if r.active {
		d := r.deadline.UTC()
		out.Deadline = &d
	}
	return out
}
