package agentsim

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
)

// handler runs the agent's tasks for its api.AgentClient.
type handler struct{ a *Agent }

var _ api.AgentHandler = handler{}

func (h handler) Tasks() ([]api.AgentTask, []api.AgentExecutor) {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	return h.a.reportLocked()
}

// reportLocked lists the unsettled tasks and their executors in a stable
// order.
func (a *Agent) reportLocked() ([]api.AgentTask, []api.AgentExecutor) {
	tasks := make([]api.AgentTask, 0, len(a.tasks))
	for _, t := range a.tasks {
		tasks = append(tasks, t.info)
	}
	slices.SortFunc(tasks, func(x, y api.AgentTask) int {
		return cmp.Or(cmp.Compare(x.FrameworkID, y.FrameworkID), cmp.Compare(x.Task.TaskID, y.Task.TaskID))
	})
	executors := make([]api.AgentExecutor, 0, len(a.executors))
	for _, e := range a.executors {
		executors = append(executors, e)
	}
	slices.SortFunc(executors, func(x, y api.AgentExecutor) int {
		return cmp.Or(cmp.Compare(x.FrameworkID, y.FrameworkID), cmp.Compare(x.ExecutorID, y.ExecutorID))
	})
	return tasks, executors
}

func (h handler) Registered(agentID, previousID string) {
	a := h.a
	if previousID == "" || agentID == previousID {
		return
	}
	// The master took us for a new agent: it counts the old one's tasks
	// as lost, and so must we.
	a.mu.Lock()
	defer a.mu.Unlock()
	a.logf("agent %s registered as %s: dropping %d tasks of the old incarnation", previousID, agentID, len(a.tasks))
	for k, t := range a.tasks {
		t.stopTimer()
		delete(a.tasks, k)
	}
	clear(a.executors)
	a.notifyLocked()
}

func (h handler) Launch(l api.AgentLaunch) {
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.notifyLocked()
	if a.frozen {
		return
	}
	if l.Executor != nil {
		a.executors[taskKey{l.FrameworkID, l.Executor.ExecutorID}] = *l.Executor
	}
	for _, info := range l.Tasks {
		id := info.Task.TaskID
		a.launches[id]++
		k := taskKey{l.FrameworkID, id}
		if cur, ok := a.tasks[k]; ok && !api.IsTerminal(cur.info.State) {
			a.logf("task %s of framework %s launched again while %s; keeping the running one", id, l.FrameworkID, cur.info.State)
			continue
		}
		info.FrameworkID = l.FrameworkID
		if l.Executor != nil && info.ExecutorID == "" {
			info.ExecutorID = l.Executor.ExecutorID
		}
		t := &task{info: info}
		a.tasks[k] = t
		a.setStateLocked(t, api.TaskStarting, "", "")
		a.setStateLocked(t, api.TaskRunning, "", "")
		if d, ok := sleepDuration(info.Task.Command); ok {
			t.timer = time.AfterFunc(d, func() { a.finish(k, t) })
		}
	}
}

// finish ends a `sleep N` task that ran its course.
func (a *Agent) finish(k taskKey, t *task) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.frozen || a.tasks[k] != t || api.IsTerminal(t.info.State) {
		return // killed, dropped or relaunched meanwhile
	}
	a.setStateLocked(t, api.TaskFinished, "", "command exited with status 0")
	a.notifyLocked()
}

func (h handler) Kill(kill api.AgentKill) {
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.notifyLocked()
	if a.frozen {
		return
	}
	t, ok := a.tasks[taskKey{kill.FrameworkID, kill.TaskID}]
	switch {
	case ok && api.IsTerminal(t.info.State):
		// Its final update is on its way already.
	case ok:
		t.stopTimer()
		a.setStateLocked(t, api.TaskKilled, "", "killed on request")
	case api.IsTerminal(a.states[kill.TaskID]):
		// It ended and was settled; its final update was delivered.
	default:
		// The master believes in a task the agent never ran: say so, as
		// the framework waits for a terminal update.
		a.states[kill.TaskID] = api.TaskLost
		a.client.SendUpdate(kill.FrameworkID, api.TaskStatus{
			TaskID: kill.TaskID, State: api.TaskLost, Reason: api.ReasonTaskUnknown,
			Message: "the agent does not know this task",
		})
	}
}

func (h handler) Acknowledged(frameworkID string, status api.TaskStatus) {
	a := h.a
	if !api.IsTerminal(status.State) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	k := taskKey{frameworkID, status.TaskID}
	t, ok := a.tasks[k]
	if !ok || t.info.State != status.State {
		return // relaunched meanwhile, or never ours
	}
	// Its final update arrived: the task is settled and no longer reported.
	delete(a.tasks, k)
	if e := t.info.ExecutorID; e != "" && !a.executorInUseLocked(frameworkID, e) {
		delete(a.executors, taskKey{frameworkID, e})
	}
	a.notifyLocked()
}

func (a *Agent) executorInUseLocked(frameworkID, executorID string) bool {
	for k, t := range a.tasks {
		if k.frameworkID == frameworkID && t.info.ExecutorID == executorID {
			return true
		}
	}
	return false
}

// setStateLocked moves a task to state and queues the update. Both happen
// under a.mu, so that a task's updates are queued in the order of its
// states.
func (a *Agent) setStateLocked(t *task, state, reason, message string) {
	t.info.State = state
	a.states[t.info.Task.TaskID] = state
	a.client.SendUpdate(t.info.FrameworkID, api.TaskStatus{
		TaskID:  t.info.Task.TaskID,
		State:   state,
		Reason:  reason,
		Message: message,
	})
}

func (t *task) stopTimer() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// sleepDuration reads a `sleep N` command (N seconds, fractions allowed).
func sleepDuration(cmd *api.CommandInfo) (time.Duration, bool) {
	if cmd == nil {
		return 0, false
	}
	fields := strings.Fields(cmd.Value)
	if len(fields) != 2 || fields[0] != "sleep" {
		return 0, false
	}
	secs, err := strconv.ParseFloat(fields[1], 64)
	if err != nil || secs < 0 || math.IsInf(secs, 0) || math.IsNaN(secs) {
		return 0, false
	}
	return time.Duration(secs * float64(time.Second)), true
}
