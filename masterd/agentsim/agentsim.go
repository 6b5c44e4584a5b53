// Package agentsim is a simulated agent for tests and benchmarks. It speaks
// the agent protocol through api.AgentClient, exactly as agentd does, but
// runs its tasks in memory: a task whose command is `sleep N` finishes after
// N seconds, any other runs until it is killed.
package agentsim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
)

// Options configure a simulated agent.
type Options struct {
	// UpdateRetryInterval is how long an unacknowledged status update waits
	// before it is sent again (api.AgentClient's default when zero).
	UpdateRetryInterval time.Duration
	// NoHeartbeats starts the agent without HEARTBEAT calls, so that the
	// master times it out; SetHeartbeats turns them on.
	NoHeartbeats bool
	// AgentID is presented at the first registration, as by an agent that
	// restarts from its checkpoint.
	AgentID string
	// Logf receives diagnostics; nil discards them.
	Logf func(format string, args ...any)
}

// Agent is a simulated agent. Its methods are safe for concurrent use.
type Agent struct {
	client *api.AgentClient
	logf   func(format string, args ...any)

	mu        sync.Mutex
	tasks     map[taskKey]*task
	executors map[taskKey]api.AgentExecutor
	launches  map[string]int
	// states holds the latest state of every task id ever seen, settled
	// ones included, for WaitState.
	states  map[string]string
	frozen  bool // after Stop: no more state changes
	changed chan struct{}

	runMu  sync.Mutex
	parent context.Context // Start's
	cancel context.CancelFunc
	done   chan struct{}
	ended  bool
}

// taskKey names a task, or an executor, within its framework.
type taskKey struct{ frameworkID, id string }

// task is a task the agent runs or ran and has not settled: its final
// update is not yet acknowledged.
type task struct {
	info  api.AgentTask // State is the latest
	timer *time.Timer   // the end of a `sleep N`
}

// New returns a simulated agent for the cluster at addresses; Start
// registers it.
func New(addresses []string, token string, info api.AgentInfo, opts Options) (*Agent, error) {
	a := &Agent{
		logf:      opts.Logf,
		tasks:     map[taskKey]*task{},
		executors: map[taskKey]api.AgentExecutor{},
		launches:  map[string]int{},
		states:    map[string]string{},
		changed:   make(chan struct{}),
	}
	if a.logf == nil {
		a.logf = func(string, ...any) {}
	}
	client, err := api.NewAgentClient(addresses, token, info, handler{a})
	if err != nil {
		return nil, err
	}
	client.UpdateRetryInterval = opts.UpdateRetryInterval
	client.Logf = opts.Logf
	client.SetHeartbeats(!opts.NoHeartbeats)
	if opts.AgentID != "" {
		client.SetAgentID(opts.AgentID)
	}
	a.client = client
	return a, nil
}

// Client is the agent's protocol client (for its wait helpers and counters).
func (a *Agent) Client() *api.AgentClient { return a.client }

// AgentID is the id of the agent's last registration.
func (a *Agent) AgentID() string { return a.client.AgentID() }

// SetHeartbeats turns the HEARTBEAT calls on or off.
func (a *Agent) SetHeartbeats(on bool) { a.client.SetHeartbeats(on) }

// Start registers the agent and keeps it registered until ctx ends or Stop.
func (a *Agent) Start(ctx context.Context) error {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.parent != nil {
		return errors.New("agent already started")
	}
	a.parent = ctx
	a.runLocked()
	return nil
}

func (a *Agent) runLocked() {
	ctx, cancel := context.WithCancel(a.parent)
	done := make(chan struct{})
	a.cancel, a.done = cancel, done
	go func() {
		defer close(done)
		_ = a.client.Run(ctx) // returns only when ctx ends
	}()
}

// Disconnect closes the agent's session and keeps it away from the master
// until Reconnect; its tasks go on running, and their updates wait.
func (a *Agent) Disconnect() {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	a.disconnectLocked()
}

func (a *Agent) disconnectLocked() {
	if a.cancel != nil {
		a.cancel()
		<-a.done
		a.cancel, a.done = nil, nil
	}
}

// Reconnect registers again after Disconnect, with the same agent id and the
// tasks the agent runs.
func (a *Agent) Reconnect() error {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	switch {
	case a.parent == nil:
		return errors.New("agent not started")
	case a.ended:
		return errors.New("agent stopped")
	case a.cancel == nil:
		a.runLocked()
	}
	return nil
}

// Stop ends the agent for good: it leaves the master and its tasks stop
// changing.
func (a *Agent) Stop() {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	a.disconnectLocked()
	a.ended = true
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frozen = true
	for _, t := range a.tasks {
		t.stopTimer()
	}
}

// Launches is how many times a task with this id was launched on the agent.
func (a *Agent) Launches(taskID string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.launches[taskID]
}

// Tasks lists the tasks the agent would report if it registered now: those
// running and those whose final update is not yet acknowledged, each with its
// latest state, ordered by framework and task id.
func (a *Agent) Tasks() []api.AgentTask {
	a.mu.Lock()
	defer a.mu.Unlock()
	tasks, _ := a.reportLocked()
	return tasks
}

// State is the latest state of the task with this id, "" when the agent
// never saw it. It stays known after the task is settled.
func (a *Agent) State(taskID string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.states[taskID]
}

// WaitState waits until the task with this id is in state.
func (a *Agent) WaitState(ctx context.Context, taskID, state string) error {
	if err := a.WaitUntil(ctx, func() bool { return a.State(taskID) == state }); err != nil {
		return fmt.Errorf("task %s is %q, not %s: %w", taskID, a.State(taskID), state, err)
	}
	return nil
}

// WaitUntil waits until cond is true; cond is checked after every change of
// the agent's tasks and may call the agent's methods.
func (a *Agent) WaitUntil(ctx context.Context, cond func() bool) error {
	for {
		a.mu.Lock()
		changed := a.changed
		a.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// notifyLocked wakes the waiters of WaitUntil; a.mu must be held.
func (a *Agent) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
}
