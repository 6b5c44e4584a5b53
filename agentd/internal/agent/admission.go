package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allot/allot/agentd/internal/cgroups"
	"github.com/allot/allot/agentd/internal/containerizer"
	"github.com/allot/allot/masterd/api"
)

// Admission: every launch passes here before it starts. What the master
// sends fits the agent by the master's accounting, but a role's reservation
// lent out as revocable resources is held by other frameworks' tasks (the
// borrowers) until the agent takes it back. So, per launch:
//
//   - a launch of regular tasks that does not fit evicts the fewest
//     borrowers that make room (eviction.go) — none while what is already
//     being freed suffices — and waits, checkpointed, until they are gone;
//     it is never refused for it;
//   - a launch of borrowers that would need someone else evicted is
//     dropped (TASK_DROPPED, REASON_INVALID_OFFERS, as the master drops a
//     launch on an offer that is no longer valid): lent resources it was
//     offered have been taken back meanwhile; the framework launches again
//     on a new offer;
//   - everything else starts at once, as before.
//
// Usage slack (throttleable revocable resources) is not part of the
// agent's total: tasks on it hold nothing here; the QoS controller kills
// them when the node needs the room.

// launchUnit is what starts together: one lone task, or the tasks of one
// LAUNCH_GROUP with their executor.
type launchUnit struct {
	tasks    []*task
	exec     *executor // nil for a lone task
	received time.Time // when its LAUNCH came, for allot_agent_launch_seconds
}

// hold is what a task holds of the agent's total, and whether it holds it
// as a borrower (on lent, not throttleable, revocable resources) and may be
// evicted for the lender. Its allocation says where its resources come
// from; throttleable pieces (usage slack) are beyond the total. A task
// without allocation (a master that does not say) holds its requests, as a
// borrower when it is revocable.
func hold(at api.AgentTask) (held api.Resources, borrower bool) {
	if len(at.Allocation) == 0 {
		return at.Task.Resources.Clone(), at.Task.Revocable
	}
	held = api.Resources{}
	for _, p := range at.Allocation {
		if p.Revocable && p.Throttleable {
			continue
		}
		held.Add(p.Scalars)
		borrower = borrower || p.Revocable
	}
	return held, borrower
}

func executorHold(e *executor) api.Resources {
	held := api.Resources{}
	for _, p := range e.rec.Executor.Allocation {
		if !(p.Revocable && p.Throttleable) {
			held.Add(p.Scalars)
		}
	}
	return held
}

// ledger is the agent's resources by the seed's formula.
type ledger struct {
	// staying is what is held by everything not being killed: tasks that
	// run, launch or wait to start, and their executors (occupied +
	// occupiedRevocable).
	staying api.Resources
	// present is what the containers that exist now hold: staying less
	// the waiting, plus what is being killed (evicting).
	present api.Resources
	// candidates are the borrowers that run and are not being killed.
	candidates []evictionCandidate
	// freeing counts the containers being killed that hold something.
	freeing int
}

func (a *Agent) ledgerLocked() ledger {
	l := ledger{staying: api.Resources{}, present: api.Resources{}}
	type groupState struct{ live, started, staying bool }
	groups := map[string]*groupState{}
	for _, t := range a.tasks {
		if t.rec.Ended {
			continue
		}
		held, borrower := hold(t.rec.Task)
		if t.rec.Group != "" {
			g := groups[t.rec.Group]
			if g == nil {
				g = &groupState{}
				groups[t.rec.Group] = g
			}
			g.live = true
			g.started = g.started || !t.rec.Waiting
			g.staying = g.staying || !t.rec.Killing
		}
		switch {
		case t.rec.Waiting:
			l.staying.Add(held)
		case t.rec.Killing:
			l.present.Add(held)
			if !held.IsZero() {
				l.freeing++
			}
		default:
			l.staying.Add(held)
			l.present.Add(held)
			if borrower {
				l.candidates = append(l.candidates, evictionCandidate{ContainerID: t.rec.ContainerID, Held: held, StartedAt: t.rec.Started})
			}
		}
	}
	// A task group's executor holds its own resources while any of its
	// tasks stays. It is never a candidate itself: the choice counts only
	// what the evicted tasks hold, so when it evicts every task of a
	// borrowers' group, the executor's resources come free on top (never
	// too little, at worst more than needed).
	for _, e := range a.executors {
		g := groups[e.rec.ContainerID]
		if g == nil || !g.live {
			continue // goes with its last task
		}
		held := executorHold(e)
		if g.staying {
			l.staying.Add(held)
		}
		if g.started {
			l.present.Add(held)
		}
	}
	// A stable order, so that equal start times choose alike every time.
	slices.SortFunc(l.candidates, func(x, y evictionCandidate) int { return strings.Compare(x.ContainerID, y.ContainerID) })
	return l
}

// unitNeed is what a launch unit holds (its executor's resources when no
// task of that executor has started yet) and whether it is borrowers only.
func (a *Agent) unitNeed(u *launchUnit) (need api.Resources, borrowers bool) {
	need = api.Resources{}
	borrowers = true
	for _, t := range u.tasks {
		held, borrower := hold(t.rec.Task)
		need.Add(held)
		if !borrower && !held.IsZero() {
			borrowers = false
		}
	}
	if u.exec != nil && !a.groupStartedLocked(u.exec) {
		need.Add(executorHold(u.exec))
	}
	return need, borrowers
}

func (a *Agent) groupStartedLocked(e *executor) bool {
	for _, t := range a.tasks {
		if t.rec.Group == e.rec.ContainerID && !t.rec.Ended && !t.rec.Waiting {
			return true
		}
	}
	return false
}

// only keeps the kinds of r that need names: a launch answers for the
// kinds it uses, not for an overcommitment of others it did not cause.
func only(r, need api.Resources) api.Resources {
	var out api.Resources
	for k, v := range r {
		if need[k] > 0 {
			if out == nil {
				out = api.Resources{}
			}
			out[k] = v
		}
	}
	return out
}

// admitLocked decides a launch unit: start, evict and wait, or drop.
func (a *Agent) admitLocked(u *launchUnit) {
	for _, t := range u.tasks {
		t.rec.Waiting = true // counted as staying, not present
	}
	need, borrowers := a.unitNeed(u)
	l := a.ledgerLocked()
	short := only(shortfall(a.cfg.Info.Resources, l.staying), need)
	switch {
	case short == nil:
	case borrowers:
		a.dropUnitLocked(u, need, l)
		return
	default:
		chosen, enough := chooseEvictions(short, l.candidates)
		if !enough {
			a.log.Warn("a launch needs more than every revocable task here frees: evicting what can be freed; the master's view of this agent differs",
				"task_id", u.tasks[0].rec.Task.Task.TaskID, "short", short.String(), "resources", a.cfg.Info.Resources.String())
		}
		// The launch is checkpointed as waiting before anyone is killed
		// for it: a restart in between finds it and waits again.
		a.checkpointWaitingLocked(u)
		lender := describeLender(u.tasks[0].rec.Task)
		for _, i := range chosen {
			victim := a.byID[l.candidates[i].ContainerID]
			a.preemptLocked(victim, fmt.Sprintf("evicted to make room for %s on its reservation (this agent lacked %s)", lender, short))
		}
	}
	a.waiting = append(a.waiting, u)
	a.startWaitingLocked()
	if u.tasks[0].rec.Waiting && u.tasks[0].rec.WaitingSince.IsZero() {
		// Not started: it waits for tasks killed earlier.
		a.checkpointWaitingLocked(u)
	}
}

// checkpointWaitingLocked saves the tasks of a launch that waits to start.
func (a *Agent) checkpointWaitingLocked(u *launchUnit) {
	since := time.Now().UTC()
	for _, t := range u.tasks {
		t.rec.WaitingSince = since
		if err := a.ckpt.saveTask(&t.rec); err != nil {
			a.log.Error("checkpoint waiting task", "task_id", t.rec.Task.Task.TaskID, "error", err)
		}
	}
}

// describeLender names a task and the role it launches for: "task db-1 of
// framework f1 (role db)".
func describeLender(at api.AgentTask) string {
	role := at.Role
	for _, p := range at.Allocation {
		if !p.Revocable && p.Role != "*" {
			role = p.Role // the reservation it launches on
			break
		}
	}
	return fmt.Sprintf("task %s of framework %s (role %s)", at.Task.TaskID, at.FrameworkID, role)
}

// dropUnitLocked ends a launch of borrowers that does not fit.
func (a *Agent) dropUnitLocked(u *launchUnit, need api.Resources, l ledger) {
	free := a.cfg.Info.Resources.Clone().Subtract(l.staying)
	free.Add(need) // l.staying counted this launch
	left := positive(only(free, need)).String()
	if left == "" {
		left = "nothing"
	}
	msg := fmt.Sprintf("the revocable resources this task was offered are no longer lendable on this agent (lent reservations taken back by their role): "+
		"it needs %s, %s is left beside the agent's other tasks; launch it again on a new offer", need, left)
	for _, t := range u.tasks {
		t.rec.Waiting = false
		t.rec.Ended = true
		a.stats.dropped.Add(1)
		a.updateLocked(t, api.TaskDropped, api.ReasonInvalidOffers, msg)
	}
	if u.exec != nil {
		a.endGroupIfIdleLocked(u.exec)
	}
}

// preemptLocked kills a task to make room: its end is reported as
// TASK_KILLED, REASON_CONTAINER_PREEMPTED with why.
func (a *Agent) preemptLocked(t *task, why string) {
	if t == nil || t.rec.Ended || t.rec.Killing {
		return
	}
	t.rec.Killing = true
	t.rec.Preempted = why
	a.stats.preempted.Add(1)
	if f := a.stats.onPreempt.Load(); f != nil {
		(*f)(t.rec.ContainerID)
	}
	if err := a.ckpt.saveTask(&t.rec); err != nil {
		a.log.Error("checkpoint task", "task_id", t.rec.Task.Task.TaskID, "error", err)
	}
	a.log.Info("preempting task", "framework_id", t.rec.Task.FrameworkID, "task_id", t.rec.Task.Task.TaskID, "container_id", t.rec.ContainerID, "why", why)
	if t.launching {
		return // launched() kills it once it runs
	}
	if err := a.ctz.Kill(t.rec.ContainerID, gracePeriod(t.rec.Task.Task)); err != nil {
		a.log.Error("kill task", "task_id", t.rec.Task.Task.TaskID, "container_id", t.rec.ContainerID, "error", err)
	}
}

// startWaitingLocked starts every waiting launch that fits among the
// containers that exist now. One that does not fit while nothing is being
// killed any more starts anyway: waiting would not help (the master's view
// of the agent differs from the agent's), and a regular task is never held
// back for it.
func (a *Agent) startWaitingLocked() {
	for i := 0; i < len(a.waiting); {
		u := a.waiting[i]
		need, _ := a.unitNeed(u)
		l := a.ledgerLocked()
		over := only(shortfall(a.cfg.Info.Resources, l.present.Clone().Add(need)), need)
		if over != nil && l.freeing > 0 {
			i++
			continue
		}
		if over != nil {
			a.log.Warn("starting a task that does not fit this agent's resources: nothing is left to evict", "task_id", u.tasks[0].rec.Task.Task.TaskID, "over", over.String())
		}
		a.waiting = slices.Delete(a.waiting, i, i+1)
		a.startUnitLocked(u)
		i = 0 // a start changes nothing for the others, but keep it simple and exact
	}
}

// startUnitLocked starts a launch unit's tasks.
func (a *Agent) startUnitLocked(u *launchUnit) {
	for _, t := range u.tasks {
		t.rec.Waiting = false
		t.rec.WaitingSince = time.Time{}
	}
	if e := u.exec; e != nil {
		if err := a.ctz.CreateGroup(e.rec.ContainerID, a.groupSpecLocked(e)); err != nil {
			for _, t := range u.tasks {
				t.rec.Ended = true
				a.updateLocked(t, api.TaskFailed, api.ReasonCommandExecutorFailed, "the task group's cgroup could not be made: "+err.Error())
			}
			a.endGroupIfIdleLocked(e)
			return
		}
	}
	for _, t := range u.tasks {
		a.startLocked(t, a.launchSpecLocked(t, u.exec), u.received)
	}
}

// launchSpecLocked is how a task runs: in a cgroup of its own under the
// root, or in (or nested under) its executor's.
func (a *Agent) launchSpecLocked(t *task, e *executor) containerizer.LaunchSpec {
	spec := containerizer.LaunchSpec{
		OwnCgroup: true,
		Resources: cgroups.SpecFor(t.rec.Task.Task.Resources, t.rec.Task.Task.Limits),
	}
	if e != nil {
		spec.Group = e.rec.ContainerID
		spec.OwnCgroup = !e.rec.ShareCgroups
	}
	return spec
}

// forgetWaitingLocked takes a task out of the launch it waits with.
func (a *Agent) forgetWaitingLocked(t *task) {
	for i, u := range a.waiting {
		if j := slices.Index(u.tasks, t); j >= 0 {
			u.tasks = slices.Delete(u.tasks, j, j+1)
			if len(u.tasks) == 0 {
				a.waiting = slices.Delete(a.waiting, i, i+1)
			}
			t.rec.Waiting = false
			return
		}
	}
}

// killWaitingLocked ends a task killed before it started.
func (a *Agent) killWaitingLocked(t *task) {
	a.forgetWaitingLocked(t)
	t.rec.Ended = true
	a.updateLocked(t, api.TaskKilled, api.ReasonTaskKilledDuringLaunch, "killed before it started, while it waited for revocable tasks to be evicted")
	a.endGroupIfIdleLocked(a.groupOf(t))
	a.startWaitingLocked()
}

// recoverWaitingLocked queues again, after a restart, the launches that
// waited for evictions, in their order: the evictions were checkpointed
// (and are finished by recovery), and admission runs again in case the
// agent's tasks changed meanwhile.
func (a *Agent) recoverWaitingLocked() {
	type unitKey struct {
		group string
		since int64
	}
	units := map[unitKey]*launchUnit{}
	var keys []unitKey
	for _, t := range a.tasks {
		if !t.rec.Waiting || t.rec.Ended {
			continue
		}
		k := unitKey{t.rec.Group, t.rec.WaitingSince.UnixNano()}
		u := units[k]
		if u == nil {
			u = &launchUnit{exec: a.groupOf(t), received: time.Now()}
			units[k] = u
			keys = append(keys, k)
		}
		u.tasks = append(u.tasks, t)
	}
	slices.SortFunc(keys, func(x, y unitKey) int {
		return cmp.Or(cmp.Compare(x.since, y.since), strings.Compare(x.group, y.group))
	})
	for _, k := range keys {
		u := units[k]
		slices.SortFunc(u.tasks, func(x, y *task) int { return strings.Compare(x.rec.Task.Task.TaskID, y.rec.Task.Task.TaskID) })
		a.log.Info("a launch that waited for evictions when agentd stopped waits again", "task_id", u.tasks[0].rec.Task.Task.TaskID, "tasks", len(u.tasks))
		a.admitLocked(u)
	}
}
