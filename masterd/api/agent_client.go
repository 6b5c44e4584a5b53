package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AgentHandler is what runs the tasks behind an AgentClient. The client calls
// it from one goroutine at a time (Run's), so its methods need no locking
// against each other, but they must not block for long: events wait behind
// them. They may call SendUpdate.
type AgentHandler interface {
	// Tasks lists the tasks and executors the agent runs, each task with its
	// latest state; it is reported at every registration.
	Tasks() ([]AgentTask, []AgentExecutor)
	// Registered is called after every REGISTERED, before the session's
	// other events. previousID is the id the agent registered with ("" the
	// first time); when the master answered another id, the master took the
	// agent for a new one and the tasks of the old one are lost: the client
	// has dropped their pending updates, and the handler should drop them.
	Registered(agentID, previousID string)
	// Launch starts tasks (LAUNCH event).
	Launch(AgentLaunch)
	// Kill kills a task (KILL event).
	Kill(AgentKill)
	// Acknowledged reports an update that needs no more sending: its
	// acknowledgement came, or that of a later update of the same task.
	Acknowledged(frameworkID string, status TaskStatus)
}

// AgentClient keeps an agent registered with the leading master through
// failovers: it registers with the tasks its handler reports, heartbeats,
// passes LAUNCH and KILL on to the handler, and delivers status updates at
// least once.
type AgentClient struct {
	streams *streamClient
	info    AgentInfo
	handler AgentHandler

	// UpdateRetryInterval is how long an unacknowledged update waits before
	// it is sent again (default 5s). Updates are also sent again in every
	// new session.
	UpdateRetryInterval time.Duration
	// ReconnectDelay is the first wait before registering again after a
	// session ended (default 100ms); it doubles, up to MaxReconnectDelay
	// (default 5s), while registrations fail.
	ReconnectDelay    time.Duration
	MaxReconnectDelay time.Duration
	// CallTimeout bounds each HEARTBEAT and UPDATE call (default 10s).
	CallTimeout time.Duration
	// Logf receives the client's diagnostics; nil discards them.
	Logf func(format string, args ...any)
	// RegisterFailed, when set, hears what keeps the agent from
	// registering (a refused registration, or a round of attempts no master
	// took) instead of Logf, so that the program can say what to change
	// (see Diagnose). The client keeps trying either way: a token or a
	// certificate may be fixed meanwhile.
	RegisterFailed func(err error)

	// wake tells the session's update sender that an update was added;
	// wakeSlack its oversubscription sender that the estimate changed.
	wake      chan struct{}
	wakeSlack chan struct{}

	mu            sync.Mutex
	running       bool
	agentID       string
	registrations int
	session       *agentSession
	noHeartbeats  bool
	updates       updateQueue
	// slack is the latest estimate given to SetOversubscribed (nil:
	// never given, nothing is sent); slackSent what the current session
	// sent last (nil: nothing yet).
	slack     Resources
	slackSent Resources
	// changed is closed and replaced whenever the state above changes.
	changed chan struct{}
}

// agentSession is one registration: a stream and the calls sent on it.
type agentSession struct {
	number   int // the registration count it started with
	agentID  string
	interval time.Duration
	stream   *eventStream[AgentEvent]
}

const (
	defaultUpdateRetryInterval = 5 * time.Second
	defaultReconnectDelay      = 100 * time.Millisecond
	defaultMaxReconnectDelay   = 5 * time.Second
	defaultCallTimeout         = 10 * time.Second
	// fallbackHeartbeat is used when REGISTERED names no interval.
	fallbackHeartbeat = 5 * time.Second
)

// NewAgentClient returns a client for an agent described by info, on the
// cluster at addresses (any servers: a follower redirects to the leader).
// token, when not empty, is sent as a bearer token.
func NewAgentClient(addresses []string, token string, info AgentInfo, handler AgentHandler) (*AgentClient, error) {
	if handler == nil {
		return nil, errors.New("agent client needs a handler")
	}
	streams, err := newStreamClient(addresses, token)
	if err != nil {
		return nil, err
	}
	c := &AgentClient{
		streams:   streams,
		info:      info,
		handler:   handler,
		wake:      make(chan struct{}, 1),
		wakeSlack: make(chan struct{}, 1),
		changed:   make(chan struct{}),
	}
	streams.retrying = func(rounds int, err error) {
		if c.RegisterFailed != nil {
			c.RegisterFailed(fmt.Errorf("no master takes the registration yet (%d attempts over every address): %w", rounds, err))
			return
		}
		c.logf("agent %s: no master takes the registration yet (%d attempts over every address): %v; still trying", info.Name, rounds, err)
	}
	return c, nil
}

// AgentID is the id of the agent's last registration ("" before the first).
func (c *AgentClient) AgentID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agentID
}

// SetAgentID sets the id the next registration presents, as an agent that
// restarts from its checkpoint does. Call it before Run.
func (c *AgentClient) SetAgentID(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.agentID = id
}

// Registrations is how many times the agent has registered.
func (c *AgentClient) Registrations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.registrations
}

// Connected reports whether a session is up.
func (c *AgentClient) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != nil
}

// PendingUpdates is the number of updates waiting for acknowledgement.
func (c *AgentClient) PendingUpdates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.updates.len()
}

// SetHeartbeats turns the HEARTBEAT calls on or off (off lets tests see the
// master time an agent out).
func (c *AgentClient) SetHeartbeats(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noHeartbeats = !on
}

// WaitRegistered waits until the agent has registered at least n times.
func (c *AgentClient) WaitRegistered(ctx context.Context, n int) error {
	return c.waitUntil(ctx, func() bool { return c.registrations >= n })
}

// WaitUpdatesSettled waits until no update waits for acknowledgement.
func (c *AgentClient) WaitUpdatesSettled(ctx context.Context) error {
	return c.waitUntil(ctx, func() bool { return c.updates.len() == 0 })
}

// waitUntil waits until cond, called with c.mu held, is true.
func (c *AgentClient) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		c.mu.Lock()
		ok, changed := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// notify wakes the waiters of waitUntil; c.mu must be held.
func (c *AgentClient) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// SendUpdate queues a status update of a task of the framework and returns
// its uuid. A status without uuid gets a random one, without timestamp the
// current time, without agent id the agent's. The update is sent at once
// when a session is up and again until it is acknowledged.
func (c *AgentClient) SendUpdate(frameworkID string, status TaskStatus) string {
	if status.UUID == "" {
		status.UUID = newUUID()
	}
	if status.Timestamp.IsZero() {
		status.Timestamp = time.Now().UTC()
	}
	c.mu.Lock()
	c.updates.add(frameworkID, status)
	c.notify()
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
	return status.UUID
}

// SetOversubscribed sets the usage slack the agent lends (its estimator's
// latest estimate): UPDATE_OVERSUBSCRIBED is sent at once when a session is
// up and the estimate differs from what the session sent last, and again
// after every REGISTERED. An empty estimate withdraws the slack; an agent
// that never calls it sends no UPDATE_OVERSUBSCRIBED. How often estimates
// are made is the caller's business (agentd: -oversubscribed-interval).
func (c *AgentClient) SetOversubscribed(slack Resources) {
	slack = slack.Normalized()
	c.mu.Lock()
	c.slack = slack
	c.notify()
	c.mu.Unlock()
	select {
	case c.wakeSlack <- struct{}{}:
	default:
	}
}

// Oversubscribed is the estimate the current session last sent, and
// whether it sent one.
func (c *AgentClient) Oversubscribed() (Resources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slackSent.Clone(), c.slackSent != nil
}

// WaitOversubscribed waits until the current session has sent slack.
func (c *AgentClient) WaitOversubscribed(ctx context.Context, slack Resources) error {
	slack = slack.Normalized()
	return c.waitUntil(ctx, func() bool { return c.slackSent != nil && sameResources(c.slackSent, slack) })
}

// sameResources compares two estimates, a missing kind as zero.
func sameResources(a, b Resources) bool {
	return a.Contains(b) && b.Contains(a)
}

// DropUpdates forgets the pending updates of a task: an agent about to run
// a new task under an ended one's id drops the old task's last updates, or
// the master would apply them to the new one.
func (c *AgentClient) DropUpdates(frameworkID, taskID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates.dropTask(frameworkID, taskID)
	c.notify()
}

// Reregister ends the current session; Run registers again at once.
func (c *AgentClient) Reregister() {
	c.mu.Lock()
	s := c.session
	c.mu.Unlock()
	if s != nil {
		s.stream.cancel(errors.New("re-registration asked for"))
	}
}

// Run keeps the agent registered until ctx ends, then returns ctx's error. A
// session that ends (master failover, lost connection, failed heartbeat) is
// followed by a new registration reporting the handler's tasks. Only one Run
// may be active at a time; a later Run continues with the same agent id and
// pending updates.
func (c *AgentClient) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return errors.New("agent client is already running")
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()

	delay := c.reconnectDelay()
	for {
		registered, err := c.serveSession(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if registered {
			delay = c.reconnectDelay()
			c.logf("agent %s: session ended: %v; registering again", c.AgentID(), err)
		} else if c.RegisterFailed != nil {
			c.RegisterFailed(err)
		} else {
			c.logf("agent %s: registration failed: %v", c.info.Name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(jittered(delay)):
		}
		if !registered {
			delay = min(2*delay, c.maxReconnectDelay())
		}
	}
}

// serveSession registers and serves the session until its stream ends.
// registered says whether REGISTERED came.
func (c *AgentClient) serveSession(ctx context.Context) (registered bool, err error) {
	tasks, executors := c.handler.Tasks()
	previousID := c.AgentID()
	opened, err := c.streams.open(ctx, AgentProtocolPath, AgentCall{
		AgentID: previousID,
		Type:    AgentCallRegister,
		Register: &AgentRegister{
			AgentInfo: c.info,
			Tasks:     tasks,
			Executors: executors,
		},
	})
	if err != nil {
		return false, err
	}
	// Whatever ends the session may have taken its server away: the next
	// registration starts from the addresses rather than insist on it.
	stream := readEvents[AgentEvent](opened, func() { c.streams.forget(opened.base) })
	defer stream.close(ErrSessionClosed)

	stream.setIdle(c.streams.openTimeout)
	first, ok := <-stream.events
	if !ok {
		return false, fmt.Errorf("stream ended before REGISTERED: %w", stream.Err())
	}
	switch {
	case first.Type == AgentEventError && first.Error != nil:
		return false, fmt.Errorf("registration refused: %s", first.Error.Message)
	case first.Type != AgentEventRegistered || first.Registered == nil || first.Registered.AgentID == "":
		return false, fmt.Errorf("first event is %q, want %s with an agent id", first.Type, AgentEventRegistered)
	}
	// Liveness from here on is the heartbeat calls': the master need not
	// send anything on an idle agent's stream.
	stream.setIdle(0)

	s := &agentSession{agentID: first.Registered.AgentID, interval: seconds(first.Registered.HeartbeatIntervalSeconds), stream: stream}
	if s.interval <= 0 {
		c.logf("agent %s: REGISTERED names no heartbeat interval; using %s", s.agentID, fallbackHeartbeat)
		s.interval = fallbackHeartbeat
	}
	c.mu.Lock()
	c.registrations++
	s.number = c.registrations
	if previousID != "" && s.agentID != previousID {
		// A new incarnation: the master forgot the old agent's tasks.
		c.updates.clear()
	}
	c.agentID = s.agentID
	c.session = s
	c.slackSent = nil // a new session reports the estimate again
	c.notify()
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.session = nil
		c.slackSent = nil
		c.notify()
		c.mu.Unlock()
	}()
	c.handler.Registered(s.agentID, previousID)

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.heartbeat(sctx, s) })
	wg.Go(func() { c.sendUpdates(sctx, s) })
	wg.Go(func() { c.sendOversubscribed(sctx, s) })
	defer wg.Wait()
	defer cancel()

	for ev := range stream.events {
		c.dispatch(s, ev)
	}
	return true, stream.Err()
}

// dispatch hands one event of the session to the handler.
func (c *AgentClient) dispatch(s *agentSession, ev AgentEvent) {
	switch {
	case ev.Type == AgentEventLaunch && ev.Launch != nil:
		c.handler.Launch(*ev.Launch)
	case ev.Type == AgentEventKill && ev.Kill != nil:
		c.handler.Kill(*ev.Kill)
	case ev.Type == AgentEventAcknowledge && ev.Acknowledge != nil:
		c.mu.Lock()
		settled := c.updates.settle(ev.Acknowledge.UUID)
		if settled != nil {
			c.notify()
		}
		c.mu.Unlock()
		for _, u := range settled {
			c.handler.Acknowledged(u.frameworkID, u.status)
		}
	case ev.Type == AgentEventHeartbeat:
	case ev.Type == AgentEventError && ev.Error != nil:
		c.logf("agent %s: master reports an error: %s", s.agentID, ev.Error.Message)
	default:
		c.logf("agent %s: ignoring event %q", s.agentID, ev.Type)
	}
}

// heartbeat sends HEARTBEAT every interval. A heartbeat the server refuses
// (other than for its rate) or cannot take ends the session: the stream is
// gone or going, and a new registration finds the leader.
func (c *AgentClient) heartbeat(ctx context.Context, s *agentSession) {
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		c.mu.Lock()
		off := c.noHeartbeats
		c.mu.Unlock()
		if off {
			continue
		}
		err := c.call(ctx, s, AgentCall{AgentID: s.agentID, Type: AgentCallHeartbeat, Heartbeat: &AgentHeartbeat{}})
		if err == nil || ErrorCode(err) == CodeRateLimited || ctx.Err() != nil {
			continue
		}
		s.stream.cancel(fmt.Errorf("heartbeat failed: %w", err))
		return
	}
}

// sendUpdates sends the pending updates that are due, as long as the
// session lasts.
func (c *AgentClient) sendUpdates(ctx context.Context, s *agentSession) {
	retry := c.updateRetryInterval()
	for {
		c.mu.Lock()
		batch, next := c.updates.due(s.number, time.Now(), retry)
		c.mu.Unlock()
		wait := time.Duration(-1)
		for _, u := range batch {
			if ctx.Err() != nil {
				return
			}
			status := u.status
			if status.AgentID == "" {
				status.AgentID = s.agentID
			}
			err := c.call(ctx, s, AgentCall{AgentID: s.agentID, Type: AgentCallUpdate, Update: &AgentUpdate{FrameworkID: u.frameworkID, Status: status}})
			if ErrorCode(err) == CodeRateLimited {
				// Not sent: try again when the server says, in order.
				wait = max(RetryAfter(err), time.Second)
				break
			}
			c.mu.Lock()
			if ErrorCode(err) == CodeInvalidArgument {
				// The master will never take it; sending it forever helps
				// nobody.
				c.logf("agent %s: dropping update %s of task %s: %v", s.agentID, status.UUID, status.TaskID, err)
				c.updates.remove(u)
				c.notify()
			} else {
				c.updates.markSent(u, s.number, time.Now())
			}
			c.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				c.logf("agent %s: update %s of task %s: %v", s.agentID, status.UUID, status.TaskID, err)
			}
			if code := ErrorCode(err); code == CodeNotFound || code == CodePermissionDenied {
				// The server no longer takes this session as the agent's:
				// register again rather than wait for a heartbeat to fail.
				s.stream.cancel(fmt.Errorf("update refused: %w", err))
				return
			}
		}
		if wait < 0 && len(batch) > 0 {
			continue // recompute: the batch moved the due times
		}
		if wait < 0 {
			wait = time.Hour
			if !next.IsZero() {
				wait = max(time.Until(next), 0)
			}
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-c.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// oversubscribedRetry is how long a refused or failed UPDATE_OVERSUBSCRIBED
// waits before it is sent again (longer if the master asks so). A newer
// estimate that comes meanwhile waits too, and the retry sends the latest:
// a master that failed or rate-limited a call is not sent another at once.
const oversubscribedRetry = time.Second

// sendOversubscribed sends the latest estimate whenever it differs from
// what this session sent last, as long as the session lasts.
func (c *AgentClient) sendOversubscribed(ctx context.Context, s *agentSession) {
	var retry <-chan time.Time
	for {
		c.mu.Lock()
		slack, sent := c.slack, c.slackSent
		c.mu.Unlock()
		if slack != nil && (sent == nil || !sameResources(sent, slack)) && retry == nil {
			err := c.call(ctx, s, AgentCall{AgentID: s.agentID, Type: AgentCallUpdateOversubscribed,
				UpdateOversubscribed: &AgentUpdateOversubscribed{Resources: slack}})
			switch {
			case ctx.Err() != nil:
				return
			case err == nil:
				c.mu.Lock()
				if c.session == s {
					c.slackSent = slack
					c.notify()
				}
				c.mu.Unlock()
				continue // it may have changed meanwhile
			case ErrorCode(err) == CodeInvalidArgument:
				// The master will never take this estimate: it is not sent
				// again until it changes.
				c.logf("agent %s: %v; not sent again until the estimate changes", s.agentID, err)
				c.mu.Lock()
				if c.session == s {
					c.slackSent = slack
				}
				c.mu.Unlock()
				continue
			case ErrorCode(err) == CodeNotFound || ErrorCode(err) == CodePermissionDenied:
				s.stream.cancel(fmt.Errorf("oversubscription update refused: %w", err))
				return
			default:
				c.logf("agent %s: %v; sending it again", s.agentID, err)
				wait := oversubscribedRetry
				if ErrorCode(err) == CodeRateLimited {
					wait = max(RetryAfter(err), wait)
				}
				retry = time.After(wait)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.wakeSlack:
		case <-retry:
			retry = nil
		}
	}
}

func (c *AgentClient) call(ctx context.Context, s *agentSession, call AgentCall) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	defer cancel()
	if err := c.streams.call(ctx, s.stream.url, s.stream.id, call); err != nil {
		return fmt.Errorf("%s: %w", call.Type, err)
	}
	return nil
}

func (c *AgentClient) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

func (c *AgentClient) updateRetryInterval() time.Duration {
	return orDefault(c.UpdateRetryInterval, defaultUpdateRetryInterval)
}
func (c *AgentClient) reconnectDelay() time.Duration {
	return orDefault(c.ReconnectDelay, defaultReconnectDelay)
}
func (c *AgentClient) maxReconnectDelay() time.Duration {
	return max(orDefault(c.MaxReconnectDelay, defaultMaxReconnectDelay), c.reconnectDelay())
}
func (c *AgentClient) callTimeout() time.Duration {
	return orDefault(c.CallTimeout, defaultCallTimeout)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
