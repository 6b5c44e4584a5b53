package main

import (
	"context"
	"log"

	"github.com/allot/allot/masterd/agentsim"
	"github.com/allot/allot/masterd/api"
)

// taskLog logs the launches and ends of an agent's tasks. agentsim reports
// its tasks, not events, so taskLog compares each report with the one
// before.
type taskLog struct {
	agent  *agentsim.Agent
	logger *log.Logger
	// states holds the last logged state of each task the agent reports.
	states map[taskKey]string
}

type taskKey struct{ frameworkID, taskID string }

func newTaskLog(agent *agentsim.Agent, logger *log.Logger) *taskLog {
	return &taskLog{agent: agent, logger: logger, states: map[taskKey]string{}}
}

// follow logs task changes until ctx ends.
func (l *taskLog) follow(ctx context.Context) {
	_ = l.agent.WaitUntil(ctx, func() bool {
		l.logChanges()
		return false
	})
}

func (l *taskLog) logChanges() {
	reported := map[taskKey]bool{}
	for _, t := range l.agent.Tasks() {
		k := taskKey{t.FrameworkID, t.Task.TaskID}
		reported[k] = true
		last, seen := l.states[k]
		if !seen {
			l.logger.Printf("launched task %s of framework %s (%s): %s", k.taskID, k.frameworkID, t.Task.Resources, command(t.Task))
		}
		if api.IsTerminal(t.State) && !api.IsTerminal(last) {
			l.logger.Printf("task %s of framework %s ended: %s", k.taskID, k.frameworkID, t.State)
		}
		l.states[k] = t.State
	}
	// A task leaves the report once its final update is acknowledged; it
	// may have ended and been acknowledged between two reports.
	for k, last := range l.states {
		if reported[k] {
			continue
		}
		if state := l.agent.State(k.taskID); api.IsTerminal(state) && !api.IsTerminal(last) {
			l.logger.Printf("task %s of framework %s ended: %s", k.taskID, k.frameworkID, state)
		}
		delete(l.states, k)
	}
}

func command(t api.TaskInfo) string {
	if t.Command == nil {
		return "(no command)"
	}
	return t.Command.Value
}
