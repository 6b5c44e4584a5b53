package master

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/allocator"
)

// accept launches tasks on the resources of one or more offers of one agent
// and one role. A call the master cannot act on at all (an unknown or
// malformed operation) is refused with 400 and changes nothing; an ACCEPT
// without operations declines its offers, as in Mesos; a task
// that is invalid gets TASK_ERROR, a task on offers that are not (or no
// longer) outstanding gets TASK_DROPPED, as Mesos does. What no task used
// goes back to the allocator, filtered for refuse_seconds.
func (m *Master) accept(fw *framework, a *api.Accept, now time.Time) *api.Error {
	for i, op := range a.Operations {
		switch {
		case op.Type == api.OperationLaunch && op.Launch != nil && op.LaunchGroup == nil:
		case op.Type == api.OperationLaunchGroup && op.LaunchGroup != nil && op.Launch == nil:
		default:
			return invalid("operations[%d]: type must be LAUNCH with a launch body or LAUNCH_GROUP with a launch_group body", i)
		}
	}
	until, e := m.refuseUntil(a.Filters, now)
	if e != nil {
		return e
	}
	offers, problem := m.acceptedOffers(fw, a.OfferIDs)
	if problem != "" {
		for _, o := range offers {
			m.takeOffer(o)
			_ = m.alloc.RecoverOffer(*o.alloc)
		}
		for _, op := range a.Operations {
			for _, t := range operationTasks(op) {
				m.sendStatus(fw, t.TaskID, t.AgentID, api.TaskDropped, api.ReasonInvalidOffers, problem)
			}
		}
		m.trigger()
		return nil
	}
	ag := m.agents[offers[0].alloc.AgentID]
	role := offers[0].alloc.Role
	var pool []allocator.Piece
	for _, o := range offers {
		m.takeOffer(o)
		pool = append(pool, clonePieces(o.alloc.Pieces)...)
	}
	l := launcher{m: m, fw: fw, ag: ag, role: role, pool: pool, seen: map[string]bool{}}
	for _, op := range a.Operations {
		if op.Type == api.OperationLaunch {
			for _, t := range op.Launch.Tasks {
				l.launch(t)
			}
		} else {
			l.launchGroup(op.LaunchGroup)
		}
	}
	left := nonZeroPieces(l.pool)
	if len(left) > 0 {
		_ = m.alloc.Recover(fw.info.ID, ag.id, role, left)
		if until.After(now) {
			_ = m.alloc.Decline(fw.info.ID, ag.id, sumPieces(left), until)
		}
	}
	m.trigger()
	return nil
}

// acceptedOffers looks the offers up; problem says why they cannot be used.
// The offers that were found are returned either way.
func (m *Master) acceptedOffers(fw *framework, ids []string) (found []*offer, problem string) {
	if len(ids) == 0 {
		return nil, "ACCEPT names no offer"
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			return found, fmt.Sprintf("offer %s is named twice", id)
		}
		seen[id] = true
		o := m.frameworkOffer(fw, id)
		if o == nil {
			problem = fmt.Sprintf("offer %s is not outstanding (used, declined, rescinded, expired, or not this framework's)", id)
			continue
		}
		found = append(found, o)
	}
	if problem != "" {
		return found, problem
	}
	for _, o := range found[1:] {
		if o.alloc.AgentID != found[0].alloc.AgentID {
			return found, "the offers of one ACCEPT must all be on one agent"
		}
		if o.alloc.Role != found[0].alloc.Role {
			return found, "the offers of one ACCEPT must all be for one role"
		}
	}
	if ag := m.agents[found[0].alloc.AgentID]; ag == nil || !ag.connected() {
		return found, "the offers' agent is no longer connected"
	}
	return found, ""
}

func operationTasks(op api.Operation) []api.TaskInfo {
	switch {
	case op.Launch != nil:
		return op.Launch.Tasks
	case op.LaunchGroup != nil:
		return op.LaunchGroup.Tasks
	}
	return nil
}

// sendStatus tells the framework about a task the master refused.
func (m *Master) sendStatus(fw *framework, taskID, agentID, state, reason, message string) {
	fw.send(api.Event{Type: api.EventUpdate, Update: &api.Update{Status: api.TaskStatus{
		TaskID: taskID, AgentID: agentID, State: state, Reason: reason, Message: message, Timestamp: m.clock.Now().UTC()}}})
}

// launcher carves the tasks of one ACCEPT out of its offers' resources.
type launcher struct {
	m    *Master
	fw   *framework
	ag   *agent
	role string
	pool []allocator.Piece
	seen map[string]bool // task ids of this ACCEPT
}

func (l *launcher) refuse(tasks []api.TaskInfo, reason string) {
	for _, t := range tasks {
		l.m.sendStatus(l.fw, t.TaskID, t.AgentID, api.TaskError, api.ReasonTaskInvalid, reason)
	}
}

func (l *launcher) launch(t api.TaskInfo) {
	if msg := l.validate(t, false); msg != "" {
		l.refuse([]api.TaskInfo{t}, msg)
		return
	}
	pieces, ok := l.take(t.Resources, t.Revocable)
	if !ok {
		msg := fmt.Sprintf("task %s asks for %s, more than the offers have left", t.TaskID, t.Resources)
		if !t.Revocable && isRevocable(l.pool) {
			msg += " (revocable resources go only to tasks with revocable: true)"
		}
		l.refuse([]api.TaskInfo{t}, msg)
		return
	}
	l.start(nil, []api.TaskInfo{t}, [][]allocator.Piece{pieces})
}

func (l *launcher) launchGroup(g *api.LaunchGroup) {
	refuse := func(msg string) { l.refuse(g.Tasks, msg) }
	if len(g.Tasks) == 0 {
		return
	}
	if err := api.ValidateName("executor_id", g.Executor.ExecutorID); err != nil {
		refuse(err.Error())
		return
	}
	if l.ag.executors[execKey{l.fw.info.ID, g.Executor.ExecutorID}] != nil {
		refuse(fmt.Sprintf("executor %s already runs on agent %s", g.Executor.ExecutorID, l.ag.id))
		return
	}
	if err := g.Executor.Resources.Validate("executor.resources"); err != nil {
		refuse(err.Error())
		return
	}
	inGroup := map[string]bool{}
	for _, t := range g.Tasks {
		if msg := l.validate(t, true); msg != "" {
			refuse(fmt.Sprintf("task %s: %s", t.TaskID, msg))
			return
		}
		// validate only sees the ids of tasks already started; a group
		// starts all at once, so its own duplicates are caught here (else
		// the second task would replace the first and the first's
		// resources would never be released).
		if inGroup[t.TaskID] {
			refuse(fmt.Sprintf("task id %s is used twice in this task group", t.TaskID))
			return
		}
		inGroup[t.TaskID] = true
	}
	// All or nothing: take from a copy of the pool. The executor may run on
	// revocable resources only when every task of the group may: evicting
	// it ends them all.
	allRevocable := true
	for _, t := range g.Tasks {
		allRevocable = allRevocable && t.Revocable
	}
	saved := clonePieces(l.pool)
	execPieces, ok := l.take(g.Executor.Resources.Normalized(), allRevocable)
	taskPieces := make([][]allocator.Piece, len(g.Tasks))
	for i, t := range g.Tasks {
		if !ok {
			break
		}
		taskPieces[i], ok = l.take(t.Resources, t.Revocable)
	}
	if !ok {
		l.pool = saved
		refuse("the task group and its executor ask for more than the offers have left")
		return
	}
	ex := &executor{frameworkID: l.fw.info.ID, agentID: l.ag.id, id: g.Executor.ExecutorID, role: l.role, allocation: execPieces}
	l.start(ex, g.Tasks, taskPieces)
}

// validate checks a task as API.md says; it returns why it is invalid.
func (l *launcher) validate(t api.TaskInfo, inGroup bool) string {
	if err := api.ValidateTaskInfo(t, inGroup); err != nil {
		return err.Error()
	}
	if l.seen[t.TaskID] {
		return fmt.Sprintf("task id %s is used twice in this ACCEPT", t.TaskID)
	}
	if old := l.fw.tasks[t.TaskID]; old != nil {
		return fmt.Sprintf("task id %s is already in use (%s)", t.TaskID, old.status.State)
	}
	if t.AgentID != l.ag.id {
		return fmt.Sprintf("agent_id %q is not the offers' agent %s", t.AgentID, l.ag.id)
	}
	if len(t.Limits) > 0 && !l.ag.hasCapability(api.CapabilityTaskResourceLimits) {
		return fmt.Sprintf("agent %s does not support task limits (no %s capability)", l.ag.id, api.CapabilityTaskResourceLimits)
	}
	return ""
}

// take carves want out of the pool. A revocable task takes revocable pieces
// first: it asked for room it may lose, and what it leaves of the role's own
// resources stays for the tasks that may not. Then, as any task does, it
// takes the role's reservations and then unreserved resources; a task that
// is not revocable never takes a revocable piece (it would be evicted or
// throttled without having agreed to be). take leaves the pool as it was
// when want does not fit.
func (l *launcher) take(want api.Resources, revocable bool) ([]allocator.Piece, bool) {
	want = want.Normalized()
	order := make([]int, 0, len(l.pool))
	passes := []func(allocator.Piece) bool{
		func(p allocator.Piece) bool { return !p.Revocable && p.Role != api.DefaultRole },
		func(p allocator.Piece) bool { return !p.Revocable && p.Role == api.DefaultRole },
	}
	if revocable {
		passes = append([]func(allocator.Piece) bool{func(p allocator.Piece) bool { return p.Revocable }}, passes...)
	}
	for _, pass := range passes {
		for i, p := range l.pool {
			if pass(p) {
				order = append(order, i)
			}
		}
	}
	saved := clonePieces(l.pool)
	var out []allocator.Piece
	for _, name := range want.Names() {
		need := want[name]
		for _, i := range order {
			if need <= 0 {
				break
			}
			have := l.pool[i].Resources[name]
			got := math.Min(have, need)
			if got <= 0 {
				continue
			}
			l.pool[i].Resources[name] = api.RoundScalar(have - got)
			need = api.RoundScalar(need - got)
			out = addToPiece(out, l.pool[i], name, got)
		}
		if need > 0 {
			l.pool = saved
			return nil, false
		}
	}
	return out, true
}

// addToPiece adds v of the resource name, taken from the pool piece from, to
// the piece of pieces that comes from the same pool.
func addToPiece(pieces []allocator.Piece, from allocator.Piece, name string, v float64) []allocator.Piece {
	for i := range pieces {
		if samePool(pieces[i], from) {
			pieces[i].Resources[name] = api.RoundScalar(pieces[i].Resources[name] + v)
			return pieces
		}
	}
	return append(pieces, allocator.Piece{Role: from.Role, Revocable: from.Revocable, Throttleable: from.Throttleable,
		Resources: api.Resources{name: v}})
}

// samePool reports pieces from the same pool of an agent's resources.
func samePool(a, b allocator.Piece) bool {
	return a.Role == b.Role && a.Revocable == b.Revocable && a.Throttleable == b.Throttleable
}

// start records the tasks as staging, moves their resources from offered to
// used and tells the agent to launch them.
func (l *launcher) start(ex *executor, infos []api.TaskInfo, pieces [][]allocator.Piece) {
	m := l.m
	launch := api.AgentLaunch{FrameworkID: l.fw.info.ID}
	if ex != nil {
		if err := m.alloc.Launch(l.fw.info.ID, l.ag.id, l.role, ex.allocation); err != nil {
			m.log.Error("launch executor resources", "error", err)
		}
		l.ag.executors[execKey{ex.frameworkID, ex.id}] = ex
		ex.tasks = len(infos)
		launch.Executor = &api.AgentExecutor{FrameworkID: ex.frameworkID, ExecutorID: ex.id, Role: ex.role,
			Allocation: toOfferResources(ex.allocation)}
	}
	for i, info := range infos {
		l.seen[info.TaskID] = true
		info.Resources = info.Resources.Normalized()
		t := &task{frameworkID: l.fw.info.ID, agentID: l.ag.id, role: l.role, info: info, allocation: pieces[i],
			launched: m.clock.Now()}
		if ex != nil {
			t.executorID = ex.id
		}
		if err := m.alloc.Launch(t.frameworkID, t.agentID, t.role, t.allocation); err != nil {
			m.log.Error("launch task resources", "task", info.TaskID, "error", err)
		}
		t.status = api.TaskStatus{TaskID: info.TaskID, AgentID: l.ag.id, State: api.TaskStaging, Timestamp: m.clock.Now().UTC()}
		m.addTask(l.ag, t)
		launch.Tasks = append(launch.Tasks, api.AgentTask{FrameworkID: t.frameworkID, Role: t.role, Task: info,
			ExecutorID: t.executorID, Allocation: toOfferResources(t.allocation)})
	}
	l.ag.stream.send(api.AgentEvent{Type: api.AgentEventLaunch, Launch: &launch})
}

func clonePieces(ps []allocator.Piece) []allocator.Piece {
	out := make([]allocator.Piece, len(ps))
	for i, p := range ps {
		out[i] = allocator.Piece{Role: p.Role, Revocable: p.Revocable, Throttleable: p.Throttleable, Resources: p.Resources.Clone()}
	}
	return out
}

// nonZeroPieces drops emptied resources and pieces.
func nonZeroPieces(ps []allocator.Piece) []allocator.Piece {
	var out []allocator.Piece
	for _, p := range ps {
		r := api.Resources{}
		for k, v := range p.Resources {
			if v > 0 {
				r[k] = v
			}
		}
		if len(r) > 0 {
			out = append(out, allocator.Piece{Role: p.Role, Revocable: p.Revocable, Throttleable: p.Throttleable, Resources: r})
		}
	}
	return slices.Clip(out)
}
