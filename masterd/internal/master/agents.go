package master

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// agentCapabilities are the capabilities an agent may announce.
var agentCapabilities = []string{api.CapabilityTaskResourceLimits, api.CapabilityRevocableResources}

// RegisterAgent admits (or re-admits) an agent and opens its session. The
// agent's report of its tasks and executors replaces what this leader knew of
// them. principal is who the audit trail names for the admission (with ACLs
// on, the agent token's); "" names the agent, agent/<name>.
func (m *Master) RegisterAgent(ctx context.Context, call api.AgentCall, principal string) (*Stream[api.AgentEvent], *api.Error) {
	reg := call.Register
	if reg == nil {
		return nil, invalid("a REGISTER call needs a register body")
	}
	if e := validateRegister(reg); e != nil {
		return nil, e
	}
	info := reg.AgentInfo
	info.Resources = info.Resources.Normalized()

	var (
		id        string
		needAdmit bool
	)
	m.store.Read(func(st *raftstore.State) {
		rec, known := st.AgentByName(info.Name)
		if known && call.AgentID == rec.ID {
			id = rec.ID
		} else {
			// Unknown (never admitted, or removed), or a new incarnation of
			// a known name: a new id, and the old incarnation's tasks are
			// lost when its record is replaced.
			id = "agent-" + randomID(8)
		}
		needAdmit = !known || rec.ID != id || rec.Hostname != info.Hostname ||
			!maps.Equal(rec.Resources, info.Resources) || !slices.Equal(rec.Capabilities, info.Capabilities)
	})
	if needAdmit {
		cmd := &raftstore.AgentAdmit{ID: id, Name: info.Name, Hostname: info.Hostname,
			Resources: info.Resources, Capabilities: info.Capabilities}
		cmd.Time = m.clock.Now().UTC()
		cmd.Principal = principal
		if principal == "" {
			cmd.Principal = "agent/" + info.Name
		}
		if e := m.apply(ctx, cmd); e != nil {
			return nil, e
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, noLeader()
	}
	ag := m.agents[id]
	if ag == nil {
		return nil, api.Errorf(api.CodeConflict, "agent %s was removed while it registered; register again", info.Name)
	}
	if ag.stream != nil {
		ag.stream.close()
	}
	now := m.clock.Now()
	ag.stream = newStream[api.AgentEvent](m.newID("agent-stream"), id)
	ag.lastSeen = now
	ag.disconnectedAt = time.Time{}
	ag.stream.send(api.AgentEvent{Type: api.AgentEventRegistered, Registered: &api.AgentRegistered{
		AgentID: id, HeartbeatIntervalSeconds: m.agentHeartbeat().Seconds()}})
	if call.AgentID != id {
		// A new agent, or a new incarnation: it drops what an earlier one
		// ran (the client does so on a new id), so nothing is adopted.
		reg = &api.AgentRegister{AgentInfo: reg.AgentInfo}
	}
	// Offers made before this registration could keep a reported task
	// from fitting.
	m.rescindAgentOffers(ag)
	// An estimate belongs to the session it came in: the agent sends its
	// current one again after REGISTERED.
	_ = m.alloc.UpdateSlack(id, api.Resources{})
	m.reconcileAgent(ag, reg)
	// A lending limit lowered while this leader did not know the tasks the
	// agent reports (a new term, or the write came first) holds for them.
	for _, lender := range lendersOn(ag) {
		m.enforceLendingLimit(lender, m.lendingLimits[lender])
	}
	ag.reregistered = true
	_ = m.alloc.ActivateAgent(id)
	m.noteReregistered(id, now)
	m.trigger()
	return ag.stream, nil
}

// agentHeartbeat is how often agents are asked to heartbeat: three tries per
// ping timeout.
func (m *Master) agentHeartbeat() time.Duration { return m.opts.AgentPingTimeout / 3 }

func validateRegister(reg *api.AgentRegister) *api.Error {
	info := reg.AgentInfo
	if err := api.ValidateName("agent name", info.Name); err != nil {
		return invalid("%v", err)
	}
	if err := info.Resources.Validate("agent_info.resources"); err != nil {
		return invalid("%v", err)
	}
	for _, c := range info.Capabilities {
		if !slices.Contains(agentCapabilities, c) {
			return invalid("agent_info.capabilities: unknown capability %q (known: %v)", c, agentCapabilities)
		}
	}
	for i, t := range reg.Tasks {
		if t.FrameworkID == "" || t.Task.TaskID == "" || t.Role == "" {
			return invalid("tasks[%d]: framework_id, role and task.task_id are required", i)
		}
		if t.State != "" && !validState(t.State) {
			return invalid("tasks[%d]: unknown state %q", i, t.State)
		}
		if e := validAllocation(t.Allocation); e != nil {
			return invalid("tasks[%d].allocation: %s", i, e.Message)
		}
	}
	for i, x := range reg.Executors {
		if x.FrameworkID == "" || x.ExecutorID == "" || x.Role == "" {
			return invalid("executors[%d]: framework_id, executor_id and role are required", i)
		}
		if e := validAllocation(x.Allocation); e != nil {
			return invalid("executors[%d].allocation: %s", i, e.Message)
		}
	}
	return nil
}

func validAllocation(rs []api.OfferResource) *api.Error {
	for _, r := range rs {
		if r.Role != api.DefaultRole {
			if err := api.ValidateRole(r.Role); err != nil {
				return invalid("%v", err)
			}
		}
		if err := r.Scalars.Validate("scalars"); err != nil {
			return invalid("%v", err)
		}
		// Usage slack is the agent's, not a role's.
		if r.Throttleable && (!r.Revocable || r.Role != api.DefaultRole) {
			return invalid("a throttleable piece is revocable usage slack of role %q, not of role %q", api.DefaultRole, r.Role)
		}
	}
	return nil
}

// reconcileAgent makes this leader's view of an agent's tasks what the agent
// reports: tasks it no longer has are lost, tasks this leader did not know
// are adopted (their resources count as used until they end), and tasks of
// frameworks that are gone, or that were given up as TASK_GONE, are killed.
func (m *Master) reconcileAgent(ag *agent, reg *api.AgentRegister) {
	for _, x := range reg.Executors {
		k := execKey{x.FrameworkID, x.ExecutorID}
		if ag.executors[k] != nil {
			continue
		}
		ex := &executor{frameworkID: x.FrameworkID, agentID: ag.id, id: x.ExecutorID, role: x.Role,
			allocation: fromOfferResources(x.Allocation)}
		if err := m.alloc.AddUsed(x.FrameworkID, ag.id, x.Role, ex.allocation); err != nil {
			m.log.Warn("executor reported by agent does not fit it", "agent", ag.name, "executor", x.ExecutorID, "error", err)
			// Not counted, so nothing to hand back when it ends: releasing
			// it would free what another task or executor holds.
			ex.allocation = nil
		}
		ag.executors[k] = ex
	}
	reported := map[taskKey]api.AgentTask{}
	for _, rt := range reg.Tasks {
		reported[taskKey{rt.FrameworkID, rt.Task.TaskID}] = rt
	}
	for _, t := range sortedTasks(ag.tasks) {
		if _, ok := reported[t.key()]; !ok {
			m.endTask(t, api.TaskLost, api.ReasonAgentRestarted, "the agent re-registered without this task")
		}
	}
	for _, rt := range reg.Tasks {
		k := taskKey{rt.FrameworkID, rt.Task.TaskID}
		state := rt.State
		if state == "" {
			state = api.TaskRunning
		}
		if t := ag.tasks[k]; t != nil {
			// A task that ended is left to the agent's own update, which
			// is on its way (the agent reports a task until its final
			// update is acknowledged) and says why it ended; a status made
			// up here would reach the framework first, without the reason.
			if t.status.State != state && !api.IsTerminal(state) {
				m.setStatus(t, api.TaskStatus{State: state, Message: "reported by the agent as it re-registered"})
			}
			continue
		}
		if api.IsTerminal(state) {
			continue // its final update is still on its way and needs no resources
		}
		t := &task{frameworkID: rt.FrameworkID, agentID: ag.id, role: rt.Role, executorID: rt.ExecutorID,
			info: rt.Task, allocation: fromOfferResources(rt.Allocation), launched: m.clock.Now()}
		t.status = api.TaskStatus{TaskID: t.info.TaskID, AgentID: ag.id, State: state, Timestamp: m.clock.Now().UTC()}
		if err := m.alloc.AddUsed(t.frameworkID, ag.id, t.role, t.allocation); err != nil {
			m.log.Warn("task reported by agent does not fit it", "agent", ag.name, "task", t.info.TaskID, "error", err)
			// Not counted, so nothing to hand back when it ends: releasing
			// it would free what another task holds on the agent.
			t.released = true
		}
		m.addTask(ag, t)
		if ex := ag.executors[execKey{t.frameworkID, t.executorID}]; ex != nil {
			ex.tasks++
		}
		if ag.goneTasks[k] {
			// Its framework was told it is gone and may have replaced it.
			delete(ag.goneTasks, k)
			t.killRequested = true
			continue
		}
		if fw := m.frameworks[t.frameworkID]; fw != nil {
			// After a leader change the framework last heard of the task
			// from the old leader (often as unreachable): tell it where the
			// task stands. Made up here, so no uuid and no acknowledgement.
			st := t.status
			st.Message = "reported by agent " + ag.name + " as it re-registered"
			fw.send(api.Event{Type: api.EventUpdate, Update: &api.Update{Status: st}})
		}
	}
	clear(ag.goneTasks) // those not reported are gone for good
	// Executors whose tasks all ended hold nothing any more.
	for k, ex := range ag.executors {
		if ex.tasks <= 0 {
			_ = m.alloc.Release(ex.frameworkID, ag.id, ex.role, ex.allocation)
			delete(ag.executors, k)
		}
	}
	for _, t := range sortedTasks(ag.tasks) {
		if m.frameworks[t.frameworkID] == nil {
			t.killRequested = true
		}
		if t.killRequested {
			ag.stream.send(api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: t.frameworkID, TaskID: t.info.TaskID}})
		}
	}
}

// AgentCall serves an agent's UPDATE or HEARTBEAT on its session.
func (m *Master) AgentCall(call api.AgentCall, streamID string) *api.Error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return noLeader()
	}
	ag := m.agents[call.AgentID]
	if ag == nil {
		return api.Errorf(api.CodeNotFound, "agent %q is not registered with this leader; register again", call.AgentID)
	}
	if ag.stream == nil || ag.stream.id != streamID {
		return api.Errorf(api.CodePermissionDenied, "stream %q is not agent %s's current session; register again", streamID, call.AgentID)
	}
	ag.lastSeen = m.clock.Now()
	switch call.Type {
	case api.AgentCallHeartbeat:
		return nil
	case api.AgentCallUpdate:
		if call.Update == nil {
			return invalid("an UPDATE call needs an update body")
		}
		return m.agentUpdate(ag, call.Update)
	case api.AgentCallUpdateOversubscribed:
		if call.UpdateOversubscribed == nil {
			return invalid("an UPDATE_OVERSUBSCRIBED call needs an update_oversubscribed body")
		}
		return m.updateOversubscribed(ag, call.UpdateOversubscribed.Resources)
	}
	return invalid("unknown agent call type %q", call.Type)
}

func (m *Master) agentUpdate(ag *agent, u *api.AgentUpdate) *api.Error {
	st := u.Status
	if u.FrameworkID == "" || st.TaskID == "" || st.UUID == "" {
		return invalid("update: framework_id, status.task_id and status.uuid are required")
	}
	if !validState(st.State) {
		return invalid("update: unknown state %q", st.State)
	}
	st.AgentID = ag.id
	if st.Timestamp.IsZero() {
		st.Timestamp = m.clock.Now().UTC()
	}
	if t := ag.tasks[taskKey{u.FrameworkID, st.TaskID}]; t != nil {
		if t.preempted != "" && st.State == api.TaskKilled {
			// The agent killed it because the master asked; the framework
			// is told why.
			st.Reason, st.Message = api.ReasonContainerPreempted, t.preempted
		}
		m.setStatus(t, st)
		return nil
	}
	// An update for a task that already ended here: a retry whose
	// acknowledgement was lost. It goes to the framework again (at least
	// once), or is acknowledged here when the framework is gone.
	fw := m.frameworks[u.FrameworkID]
	if fw == nil {
		ag.stream.send(api.AgentEvent{Type: api.AgentEventAcknowledge, Acknowledge: &api.AgentAcknowledge{
			FrameworkID: u.FrameworkID, TaskID: st.TaskID, UUID: st.UUID}})
		return nil
	}
	fw.send(api.Event{Type: api.EventUpdate, Update: &api.Update{Status: st}})
	return nil
}

// updateOversubscribed takes an agent's new estimate of its usage slack. An
// estimate that names a resource the agent does not have, or more than its
// total, is refused and changes nothing. A lower estimate rescinds the
// outstanding slack offers it no longer covers; the tasks already running on
// slack are the agent's QoS controller's to judge.
func (m *Master) updateOversubscribed(ag *agent, slack api.Resources) *api.Error {
	if err := slack.Validate("update_oversubscribed.resources"); err != nil {
		return invalid("%v", err)
	}
	slack = slack.Normalized()
	for _, name := range slack.Names() {
		total, ok := ag.resources[name]
		switch {
		case !ok:
			return invalid("update_oversubscribed.resources: agent %s has no %s to oversubscribe (it has %s)", ag.name, name, ag.resources)
		case slack[name] > total:
			return invalid("update_oversubscribed.resources: %s %g is more than agent %s's total %g", name, slack[name], ag.name, total)
		}
	}
	if err := m.alloc.UpdateSlack(ag.id, slack); err != nil {
		return invalid("update_oversubscribed.resources: %v", err)
	}
	m.rescindOverlent()
	m.trigger()
	return nil
}

// AgentStreamClosed ends an agent's session when its connection ends.
func (m *Master) AgentStreamClosed(agentID, streamID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ag := m.agents[agentID]; ag != nil && ag.stream != nil && ag.stream.id == streamID {
		m.disconnectAgent(ag, m.clock.Now())
	}
}

// EndAgentSession ends an agent's session (the stream streamID, if it is
// still the agent's) with an ERROR event that says why: the agent is
// disconnected as if its connection ended (its tasks are unreachable until
// it registers again). It reports whether the session was still open.
func (m *Master) EndAgentSession(agentID, streamID, message string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	ag := m.agents[agentID]
	if ag == nil || ag.stream == nil || ag.stream.id != streamID {
		return false
	}
	ag.stream.send(api.AgentEvent{Type: api.AgentEventError, Error: &api.ErrorEvent{Message: message}})
	m.disconnectAgent(ag, m.clock.Now())
	return true
}

// disconnectAgent stops offering the agent; its tasks are unreachable until
// it re-registers or the removal timeout passes.
func (m *Master) disconnectAgent(ag *agent, now time.Time) {
	ag.stream.close()
	ag.stream = nil
	ag.disconnectedAt = now
	_ = m.alloc.DeactivateAgent(ag.id)
	m.rescindAgentOffers(ag)
	_ = m.alloc.UpdateSlack(ag.id, api.Resources{}) // the estimate went with the session
	for _, t := range sortedTasks(ag.tasks) {
		m.setStatus(t, api.TaskStatus{State: api.TaskUnreachable, Reason: api.ReasonAgentDisconnected,
			Message: "the agent " + ag.name + " disconnected"})
	}
}

// checkAgents disconnects agents that stopped heartbeating and gives up the
// tasks of agents disconnected for longer than the removal timeout.
func (m *Master) checkAgents(now time.Time) {
	for _, ag := range m.agents {
		switch {
		case ag.connected() && now.Sub(ag.lastSeen) > m.opts.AgentPingTimeout:
			m.log.Info("agent missed its heartbeats", "agent", ag.name, "last_seen", ag.lastSeen)
			m.disconnectAgent(ag, now)
		case !ag.connected() && !ag.disconnectedAt.IsZero() && now.Sub(ag.disconnectedAt) > m.opts.AgentRemovalTimeout:
			m.log.Info("agent stayed away past the removal timeout", "agent", ag.name)
			ag.disconnectedAt = time.Time{}
			for k := range ag.tasks {
				ag.goneTasks[k] = true
			}
			m.loseAgentTasks(ag, api.TaskGone, api.ReasonAgentRemoved, "the agent "+ag.name+" did not come back within the removal timeout")
		}
	}
}

// removeAgent forgets an agent the registry dropped or replaced.
func (m *Master) removeAgent(ag *agent, state, reason, message string) {
	if ag.stream != nil {
		ag.stream.close()
		ag.stream = nil
	}
	m.rescindAgentOffers(ag)
	m.loseAgentTasks(ag, state, reason, message)
	_ = m.alloc.RemoveAgent(ag.id)
	delete(m.agents, ag.id)
	delete(m.reservations, ag.id)
	if m.agentNames[ag.name] == ag {
		delete(m.agentNames, ag.name)
	}
	m.forgetReregistered(ag.id)
}

// loseAgentTasks ends every task on the agent and tells every framework
// that the agent failed.
func (m *Master) loseAgentTasks(ag *agent, state, reason, message string) {
	for _, t := range sortedTasks(ag.tasks) {
		m.endTask(t, state, reason, message)
	}
	for _, ex := range ag.executors {
		_ = m.alloc.Release(ex.frameworkID, ag.id, ex.role, ex.allocation)
	}
	clear(ag.executors)
	for _, fw := range m.frameworks {
		fw.send(api.Event{Type: api.EventFailure, Failure: &api.Failure{AgentID: ag.id}})
	}
}

func validState(s string) bool {
	switch s {
	case api.TaskStaging, api.TaskStarting, api.TaskRunning, api.TaskFinished, api.TaskFailed, api.TaskKilled,
		api.TaskError, api.TaskLost, api.TaskDropped, api.TaskUnreachable, api.TaskGone:
		return true
	}
	return false
}
