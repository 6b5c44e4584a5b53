package master

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
)

// Lending limits, as the master enforces them when one is lowered.
//
// The allocator never lends a role's reservations past its lending limit,
// but a limit lowered below what the role lends now leaves revocable
// offers and tasks on its reservations that the new limit does not allow.
// The master takes them back at once rather than wait for them to end: it
// rescinds the outstanding offers of the role's lent reservations, then
// kills the youngest revocable tasks on them, one at a time, until what
// the role lends fits the limit; and again when an agent reports borrowers
// this leader did not know of (a new term). Youngest first because they
// have done the least work; tasks already being killed count as gone. A
// killed task ends
// TASK_KILLED with REASON_CONTAINER_PREEMPTED and a message naming the role
// and its new limit. A dry run of the change names the same tasks (Effects
// .Evictions), which is what a Terraform plan shows.

// pastLendingLimit is what lent holds beyond limit, as the allocator caps
// lending: nil caps nothing; otherwise every resource is capped, at zero
// when limit leaves it out (so an empty limit lends nothing).
func pastLendingLimit(lent, limit api.Resources) api.Resources {
	over := api.Resources{}
	if limit == nil {
		return over
	}
	for name, v := range lent {
		if d := api.RoundScalar(v - limit[name]); d > 0 {
			over[name] = d
		}
	}
	return over
}

// lentOf is what pieces hold of role's reservations as lent (revocable, not
// throttleable) resources.
func lentOf(pieces []allocator.Piece, role string) api.Resources {
	out := api.Resources{}
	for _, p := range pieces {
		if p.Revocable && !p.Throttleable && p.Role == role {
			out.Add(p.Resources)
		}
	}
	return out
}

// lendingTakeback is what lowering a role's lending limit takes back.
type lendingTakeback struct {
	offers []*offer
	tasks  []*task
}

// lendingTakeback picks the offers to rescind and the tasks to kill so that
// what role lends fits limit. It changes nothing.
func (m *Master) lendingTakeback(role string, limit api.Resources) lendingTakeback {
	var out lendingTakeback
	// The allocator's books hold every loan this leader knows of, tasks
	// being killed included: within the limit there, nothing is past it,
	// and no task need be looked at (as after most registrations and
	// writes).
	if stats, ok := m.alloc.Role(role); !ok || pastLendingLimit(stats.Lent, limit).IsZero() {
		return out
	}
	lent := api.Resources{}
	var offers []*offer
	for _, o := range m.offersWhere(func(o *offer) bool { return !lentOf(o.alloc.Pieces, role).IsZero() }) {
		offers = append(offers, o)
		lent.Add(lentOf(o.alloc.Pieces, role))
	}
	// An executor's lent resources go with its last task that is not
	// already being killed.
	var tasks []*task
	remaining := map[*executor]int{}
	for _, ag := range m.agents {
		for _, t := range ag.tasks {
			if t.released || t.killRequested {
				continue
			}
			if ex := ag.executors[execKey{t.frameworkID, t.executorID}]; t.executorID != "" && ex != nil {
				if remaining[ex]++; remaining[ex] == 1 {
					lent.Add(lentOf(ex.allocation, role))
				}
			}
			if l := lentOf(t.allocation, role); !l.IsZero() {
				lent.Add(l)
				tasks = append(tasks, t)
			}
		}
	}
	if pastLendingLimit(lent, limit).IsZero() {
		return out
	}
	out.offers = offers
	for _, o := range offers {
		lent.Subtract(lentOf(o.alloc.Pieces, role))
	}
	slices.SortFunc(tasks, func(a, b *task) int {
		if c := b.launched.Compare(a.launched); c != 0 {
			return c // youngest first
		}
		return cmp.Or(strings.Compare(a.frameworkID, b.frameworkID), strings.Compare(a.info.TaskID, b.info.TaskID))
	})
	for _, t := range tasks {
		if pastLendingLimit(lent, limit).IsZero() {
			break
		}
		out.tasks = append(out.tasks, t)
		lent.Subtract(lentOf(t.allocation, role))
		ag := m.agents[t.agentID]
		if ex := ag.executors[execKey{t.frameworkID, t.executorID}]; t.executorID != "" && ex != nil {
			if remaining[ex]--; remaining[ex] == 0 {
				lent.Subtract(lentOf(ex.allocation, role))
			}
		}
	}
	return out
}

// enforceLendingLimit takes back what role lends past its new limit.
func (m *Master) enforceLendingLimit(role string, limit api.Resources) {
	tb := m.lendingTakeback(role, limit)
	m.rescindAll(tb.offers)
	why := lendingPreemption(role, limit)
	for _, t := range tb.tasks {
		m.log.Info("evicting a revocable task past its lender's lending limit", "task", t.info.TaskID,
			"framework", t.frameworkID, "agent", t.agentID, "lender", role)
		t.preempted = why
		t.killRequested = true
		if ag := m.agents[t.agentID]; ag != nil && ag.stream != nil {
			ag.stream.send(api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: t.frameworkID, TaskID: t.info.TaskID}})
		}
	}
}

// lendersOn lists, sorted, the roles whose reservations the agent's tasks
// hold as lent resources.
func lendersOn(ag *agent) []string {
	var out []string
	for _, t := range ag.tasks {
		for _, p := range t.allocation {
			if p.Revocable && !p.Throttleable && !slices.Contains(out, p.Role) {
				out = append(out, p.Role)
			}
		}
	}
	slices.Sort(out)
	return out
}

// lendingPreemption is the message of a task evicted for a lending limit.
func lendingPreemption(role string, limit api.Resources) string {
	what := "nothing"
	if len(limit) > 0 {
		what = limit.String()
	}
	return fmt.Sprintf("evicted: role %s lowered its lending limit to %s, below what it lent", role, what)
}

// LendingEffects is what setting role's lending limit to limit would take
// back now: the offers it rescinds and the tasks it kills.
func (m *Master) LendingEffects(role string, limit api.Resources) (rescinded int, evictions []api.Eviction) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, nil
	}
	tb := m.lendingTakeback(role, limit)
	for _, t := range tb.tasks {
		evictions = append(evictions, api.Eviction{TaskID: t.info.TaskID, FrameworkID: t.frameworkID,
			AgentID: t.agentID, Role: t.role, Resources: lentOf(t.allocation, role)})
	}
	return len(tb.offers), evictions
}

// rescindOverlent rescinds the outstanding revocable offers of the agents
// whose revocable allocations exceed what they can lend now (the
// allocator's Overlent): a lender was allocated its reservation, an
// estimate fell, a lending limit was lowered. What running tasks hold
// beyond that is taken back elsewhere: the agent evicts lent reservations
// for the lender's task, its QoS controller kills on usage slack, and the
// master evicts for a lowered lending limit (enforceLendingLimit).
func (m *Master) rescindOverlent() {
	for _, over := range m.alloc.Overlent() {
		outstanding := m.agentOffers(over.AgentID)
		if len(outstanding) == 0 {
			continue
		}
		allocs := make([]allocator.Offer, len(outstanding))
		for i, o := range outstanding {
			allocs[i] = *o.alloc
		}
		picked := allocator.RescindRevocable(allocs, over)
		rescinded := make([]*offer, len(picked))
		for j, i := range picked {
			rescinded[j] = outstanding[i]
		}
		m.rescindAll(rescinded)
	}
}
