package master

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/allot/allot/masterd/api"
)

// Call serves a scheduler call other than SUBSCRIBE, made on the framework's
// current stream.
func (m *Master) Call(ctx context.Context, call api.Call, streamID string) *api.Error {
	if call.FrameworkID == "" {
		return invalid("framework_id is required")
	}
	if streamID == "" {
		return invalid("header %s is required (the id SUBSCRIBE answered with)", api.HeaderStreamID)
	}
	m.mu.Lock()
	fw := m.frameworks[call.FrameworkID]
	switch {
	case m.closed:
		m.mu.Unlock()
		return noLeader()
	case fw == nil:
		m.mu.Unlock()
		return api.Errorf(api.CodeNotFound, "framework %s is not subscribed to this leader", call.FrameworkID)
	case fw.stream == nil || fw.stream.id != streamID:
		m.mu.Unlock()
		return api.Errorf(api.CodePermissionDenied, "stream %q is not framework %s's current subscription; subscribe again", streamID, call.FrameworkID)
	}
	if call.Type == api.CallTeardown {
		m.mu.Unlock()
		return m.teardown(ctx, fw)
	}
	defer m.mu.Unlock()
	now := m.clock.Now()
	switch call.Type {
	case api.CallAccept:
		if call.Accept == nil {
			return invalid("an ACCEPT call needs an accept body")
		}
		return m.accept(fw, call.Accept, now)
	case api.CallDecline:
		if call.Decline == nil {
			return invalid("a DECLINE call needs a decline body")
		}
		return m.decline(fw, call.Decline.OfferIDs, call.Decline.Filters, now)
	case api.CallRevive:
		var roles []string
		if call.Revive != nil {
			roles = call.Revive.Roles
		}
		if e := checkRoles(fw, roles); e != nil {
			return e
		}
		_ = m.alloc.Revive(fw.info.ID, roles)
		fw.setSuppressed(roles, false)
		m.trigger()
	case api.CallSuppress:
		var roles []string
		if call.Suppress != nil {
			roles = call.Suppress.Roles
		}
		if e := checkRoles(fw, roles); e != nil {
			return e
		}
		_ = m.alloc.Suppress(fw.info.ID, roles)
		fw.setSuppressed(roles, true)
	case api.CallKill:
		if call.Kill == nil || call.Kill.TaskID == "" {
			return invalid("a KILL call needs kill.task_id")
		}
		m.kill(fw, call.Kill)
	case api.CallAcknowledge:
		return m.acknowledge(fw, call.Acknowledge)
	case api.CallReconcile:
		var tasks []api.ReconcileTask
		if call.Reconcile != nil {
			tasks = call.Reconcile.Tasks
		}
		m.reconcile(fw, tasks)
	case api.CallSubscribe:
		return invalid("SUBSCRIBE opens a stream: send it without %s", api.HeaderStreamID)
	default:
		return invalid("unknown call type %q", call.Type)
	}
	return nil
}

func checkRoles(fw *framework, roles []string) *api.Error {
	for _, r := range roles {
		if !slices.Contains(fw.info.Roles, r) {
			return invalid("role %q is not one of the framework's roles %v", r, fw.info.Roles)
		}
	}
	return nil
}

// refuseUntil reads a filter; nil means the default refusal.
func (m *Master) refuseUntil(f *api.Filters, now time.Time) (time.Time, *api.Error) {
	secs := m.opts.DefaultRefuseSeconds
	if f != nil && f.RefuseSeconds != nil {
		secs = *f.RefuseSeconds
		if math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 || secs > 365*24*3600 {
			return time.Time{}, invalid("filters.refuse_seconds must be between 0 and one year, not %v", secs)
		}
	}
	return now.Add(secondsDuration(secs)), nil
}

// decline hands offers back, filtering their agents for the framework.
// Offers no longer outstanding (rescinded, expired) are skipped, as Mesos
// does: the framework could not have known.
func (m *Master) decline(fw *framework, ids []string, filters *api.Filters, now time.Time) *api.Error {
	until, e := m.refuseUntil(filters, now)
	if e != nil {
		return e
	}
	for _, id := range ids {
		o := m.frameworkOffer(fw, id)
		if o == nil {
			continue
		}
		m.takeOffer(o)
		_ = m.alloc.RecoverOffer(*o.alloc)
		if until.After(now) {
			_ = m.alloc.Decline(fw.info.ID, o.alloc.AgentID, sumPieces(o.alloc.Pieces), until)
		}
	}
	m.trigger()
	return nil
}

// kill asks the task's agent to kill it; an unknown task is answered with
// TASK_LOST so the framework stops waiting for it.
func (m *Master) kill(fw *framework, k *api.Kill) {
	t := fw.tasks[k.TaskID]
	if ag := m.agents[k.AgentID]; ag != nil {
		// Two agents may run tasks of one id (see forgetFramework): the
		// agent named says which.
		if on := ag.tasks[taskKey{fw.info.ID, k.TaskID}]; on != nil {
			t = on
		}
	}
	if t == nil {
		fw.send(api.Event{Type: api.EventUpdate, Update: &api.Update{Status: api.TaskStatus{
			TaskID: k.TaskID, AgentID: k.AgentID, State: api.TaskLost, Reason: api.ReasonReconciliation,
			Message: "the task is unknown to the master", Timestamp: m.clock.Now().UTC()}}})
		return
	}
	// Kept until the task ends: sent again if the agent re-registers.
	t.killRequested = true
	if ag := m.agents[t.agentID]; ag != nil && ag.stream != nil {
		ag.stream.send(api.AgentEvent{Type: api.AgentEventKill, Kill: &api.AgentKill{FrameworkID: t.frameworkID, TaskID: t.info.TaskID}})
	}
}

// acknowledge passes a framework's acknowledgement of a status update to the
// agent that sent the update, which stops repeating it.
func (m *Master) acknowledge(fw *framework, a *api.Acknowledge) *api.Error {
	if a == nil || a.AgentID == "" || a.TaskID == "" || a.UUID == "" {
		return invalid("an ACKNOWLEDGE call needs acknowledge.agent_id, task_id and uuid")
	}
	ag := m.agents[a.AgentID]
	if ag == nil {
		return api.Errorf(api.CodeNotFound, "agent %s is not admitted", a.AgentID)
	}
	if ag.stream != nil {
		ag.stream.send(api.AgentEvent{Type: api.AgentEventAcknowledge, Acknowledge: &api.AgentAcknowledge{
			FrameworkID: fw.info.ID, TaskID: a.TaskID, UUID: a.UUID}})
	}
	// A disconnected agent repeats the update after it registers again.
	return nil
}

// reconcile answers with the latest state of the named tasks, or of all the
// framework's tasks when none are named (implicit reconciliation). A named
// task this leader does not know is TASK_LOST, unless its agent has not yet
// re-registered with this leader: then the answer waits for a later
// reconciliation, as in Mesos.
func (m *Master) reconcile(fw *framework, tasks []api.ReconcileTask) {
	send := func(st api.TaskStatus) {
		st.Reason, st.UUID = api.ReasonReconciliation, ""
		if st.Timestamp.IsZero() {
			st.Timestamp = m.clock.Now().UTC()
		}
		fw.send(api.Event{Type: api.EventUpdate, Update: &api.Update{Status: st}})
	}
	if len(tasks) == 0 {
		ids := make([]string, 0, len(fw.tasks))
		for id := range fw.tasks {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			send(fw.tasks[id].status)
		}
		return
	}
	for _, rt := range tasks {
		if t := fw.tasks[rt.TaskID]; t != nil {
			send(t.status)
			continue
		}
		if ag := m.agents[rt.AgentID]; ag != nil && !ag.reregistered {
			continue
		}
		send(api.TaskStatus{TaskID: rt.TaskID, AgentID: rt.AgentID, State: api.TaskLost,
			Message: "the task is unknown to the master"})
	}
}
