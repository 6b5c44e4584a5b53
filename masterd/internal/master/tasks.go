package master

import (
	"slices"
	"strings"

	"github.com/allot/allot/masterd/api"
)

// completedKept is how many ended tasks GET /v1/tasks still shows.
const completedKept = 1000

func (m *Master) addTask(ag *agent, t *task) {
	ag.tasks[t.key()] = t
	if fw := m.frameworks[t.frameworkID]; fw != nil {
		fw.tasks[t.info.TaskID] = t
	}
}

// setStatus records a task's new status and passes it to its framework. A
// terminal status hands the task's resources back. An agent's update (one
// with a uuid) for a framework that is gone is acknowledged here, so the
// agent stops repeating it.
func (m *Master) setStatus(t *task, st api.TaskStatus) {
	st.TaskID, st.AgentID = t.info.TaskID, t.agentID
	if st.Timestamp.IsZero() {
		st.Timestamp = m.clock.Now().UTC()
	}
	t.status = st
	if api.IsTerminal(st.State) {
		m.finish(t)
	}
	fw := m.frameworks[t.frameworkID]
	if fw == nil {
		if ag := m.agents[t.agentID]; ag != nil && ag.stream != nil && st.UUID != "" {
			ag.stream.send(api.AgentEvent{Type: api.AgentEventAcknowledge, Acknowledge: &api.AgentAcknowledge{
				FrameworkID: t.frameworkID, TaskID: st.TaskID, UUID: st.UUID}})
		}
		return
	}
	fw.send(api.Event{Type: api.EventUpdate, Update: &api.Update{Status: st}})
}

// endTask ends a task with a status the master makes up (no uuid: nothing
// for an agent to retry).
func (m *Master) endTask(t *task, state, reason, message string) {
	m.setStatus(t, api.TaskStatus{State: state, Reason: reason, Message: message})
}

// finish hands a task's resources back (and its executor's, when it was the
// executor's last task) and moves it to the completed tasks.
func (m *Master) finish(t *task) {
	ag := m.agents[t.agentID]
	if !t.released {
		t.released = true
		if err := m.alloc.Release(t.frameworkID, t.agentID, t.role, t.allocation); err != nil {
			// The framework was removed (which freed everything it had) or
			// the agent was: nothing is left to hand back.
			m.log.Debug("release task resources", "task", t.info.TaskID, "error", err)
		}
	}
	if ag != nil {
		delete(ag.tasks, t.key())
		if ex := ag.executors[execKey{t.frameworkID, t.executorID}]; t.executorID != "" && ex != nil {
			ex.tasks--
			if ex.tasks <= 0 {
				_ = m.alloc.Release(ex.frameworkID, ex.agentID, ex.role, ex.allocation)
				delete(ag.executors, execKey{ex.frameworkID, ex.id})
			}
		}
	}
	if fw := m.frameworks[t.frameworkID]; fw != nil && fw.tasks[t.info.TaskID] == t {
		delete(fw.tasks, t.info.TaskID)
	}
	m.completed = append(m.completed, t)
	if len(m.completed) > 2*completedKept {
		m.completed = slices.Clone(m.completed[len(m.completed)-completedKept:])
	}
	m.trigger()
}

// sortedTasks lists tasks by framework and task id, so that the events a
// change sends come in the same order every time.
func sortedTasks(set map[taskKey]*task) []*task {
	out := make([]*task, 0, len(set))
	for _, t := range set {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *task) int {
		if c := strings.Compare(a.frameworkID, b.frameworkID); c != 0 {
			return c
		}
		return strings.Compare(a.info.TaskID, b.info.TaskID)
	})
	return out
}
