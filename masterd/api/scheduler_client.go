package api

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SchedulerClient opens scheduler API sessions (POST /v1/scheduler) for a
// framework. It is low level: a session ends when its stream ends, and the
// caller decides whether to subscribe again (see SchedulerSession.Resubscribe).
type SchedulerClient struct {
	streams *streamClient

	// IdleTimeout is how long a session may go without any event, heartbeats
	// included, before the client takes the connection for broken and ends
	// the session with ErrStreamIdle. Zero means five heartbeat intervals
	// (as SUBSCRIBED announces them), at least minIdleTimeout; negative
	// means never. Set it before Subscribe.
	IdleTimeout time.Duration
	// Retrying, when set, hears why no master took a SUBSCRIBE yet after
	// 1, 2, 4, … rounds of attempts (a master down, a TLS handshake that
	// fails: see Diagnose); Subscribe keeps trying until its ctx ends. Set
	// it before Subscribe.
	Retrying func(rounds int, err error)
}

const (
	missedHeartbeats = 5
	// minIdleTimeout keeps a short heartbeat interval from turning a
	// scheduling hiccup of a busy machine into a lost session.
	minIdleTimeout = 5 * time.Second
)

// NewSchedulerClient returns a client for the cluster at addresses (any
// servers: a follower redirects to the leader). token, when not empty, is
// sent as a bearer token.
func NewSchedulerClient(addresses []string, token string) (*SchedulerClient, error) {
	streams, err := newStreamClient(addresses, token)
	if err != nil {
		return nil, err
	}
	c := &SchedulerClient{streams: streams}
	streams.retrying = func(rounds int, err error) {
		if c.Retrying != nil {
			c.Retrying(rounds, err)
		}
	}
	return c, nil
}

// Subscribe opens a session for the framework and waits for SUBSCRIBED. With
// info.ID set it subscribes again as that framework (failover). ctx bounds the
// attempts (elections and unreachable servers are retried until it ends) and
// then the session's life; Close ends the session earlier.
func (c *SchedulerClient) Subscribe(ctx context.Context, info FrameworkInfo) (*SchedulerSession, error) {
	call := Call{
		FrameworkID: info.ID,
		Type:        CallSubscribe,
		Subscribe:   &Subscribe{FrameworkInfo: info},
	}
	opened, err := c.streams.open(ctx, SchedulerPath, call)
	if err != nil {
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	// Whatever ends the session may have taken its server away: the next
	// session starts from the addresses rather than insist on it.
	stream := readEvents[Event](opened, func() { c.streams.forget(opened.base) })
	// The first event follows the headers at once; a server that sends
	// nothing is as dead as one that does not answer.
	stream.setIdle(c.streams.openTimeout)
	first, ok := <-stream.events
	if !ok {
		return nil, fmt.Errorf("subscribe: stream ended before SUBSCRIBED: %w", stream.Err())
	}
	switch {
	case first.Type == EventError && first.Error != nil:
		stream.close(ErrSessionClosed)
		return nil, fmt.Errorf("subscribe refused: %s", first.Error.Message)
	case first.Type != EventSubscribed || first.Subscribed == nil || first.Subscribed.FrameworkID == "":
		stream.close(ErrSessionClosed)
		return nil, fmt.Errorf("subscribe: first event is %q, want %s with a framework id", first.Type, EventSubscribed)
	}
	interval := seconds(first.Subscribed.HeartbeatIntervalSeconds)
	stream.setIdle(c.idleTimeout(interval))
	info.ID = first.Subscribed.FrameworkID
	return &SchedulerSession{client: c, info: info, heartbeat: interval, stream: stream}, nil
}

func (c *SchedulerClient) idleTimeout(heartbeat time.Duration) time.Duration {
	switch {
	case c.IdleTimeout < 0:
		return 0
	case c.IdleTimeout > 0:
		return c.IdleTimeout
	case heartbeat <= 0:
		return 0
	}
	return max(missedHeartbeats*heartbeat, minIdleTimeout)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// SchedulerSession is one subscription of a framework: the event stream and
// the calls sent on it. Its methods are safe for concurrent use.
type SchedulerSession struct {
	client    *SchedulerClient
	info      FrameworkInfo
	heartbeat time.Duration
	stream    *eventStream[Event]
}

// FrameworkID is the id SUBSCRIBED gave the framework.
func (s *SchedulerSession) FrameworkID() string { return s.info.ID }

// HeartbeatInterval is the interval of the stream's HEARTBEAT events.
func (s *SchedulerSession) HeartbeatInterval() time.Duration { return s.heartbeat }

// StreamID is the session's Allot-Stream-Id.
func (s *SchedulerSession) StreamID() string { return s.stream.id }

// ServerURL is the base URL of the server holding the stream (the leader
// when it was opened).
func (s *SchedulerSession) ServerURL() string { return s.stream.base }

// Events delivers the events after SUBSCRIBED, HEARTBEAT included, in order.
// It is closed when the stream ends; Err then says why. Read it steadily: the
// master drops a session whose reader falls far behind.
func (s *SchedulerSession) Events() <-chan Event { return s.stream.events }

// Done is closed when the stream has ended.
func (s *SchedulerSession) Done() <-chan struct{} { return s.stream.done }

// Err is why the stream ended (ErrStreamEnded, ErrStreamIdle,
// ErrSessionClosed, the context's error, a read error), or nil while it runs.
func (s *SchedulerSession) Err() error { return s.stream.Err() }

// Close ends the session. It does not tear the framework down: the master
// keeps it for its failover timeout.
func (s *SchedulerSession) Close() { s.stream.close(ErrSessionClosed) }

// Resubscribe closes this session and subscribes again as the same
// framework, for when the stream ended (a master failover).
func (s *SchedulerSession) Resubscribe(ctx context.Context) (*SchedulerSession, error) {
	s.Close()
	return s.client.Subscribe(ctx, s.info)
}

// Call sends call on the session, filling in the framework id; it answers
// nil on 202 and an *Error otherwise (RetryAfter tells the wait of a 429).
func (s *SchedulerSession) Call(ctx context.Context, call Call) error {
	if call.Type == CallSubscribe {
		return errors.New("SUBSCRIBE opens a session: use SchedulerClient.Subscribe")
	}
	call.FrameworkID = s.info.ID
	if err := s.client.streams.call(ctx, s.stream.url, s.stream.id, call); err != nil {
		return fmt.Errorf("%s: %w", call.Type, err)
	}
	return nil
}

// Accept applies operations to the offers.
func (s *SchedulerSession) Accept(ctx context.Context, offerIDs []string, ops []Operation, filters *Filters) error {
	return s.Call(ctx, Call{Type: CallAccept, Accept: &Accept{OfferIDs: offerIDs, Operations: ops, Filters: filters}})
}

// Decline gives offers back.
func (s *SchedulerSession) Decline(ctx context.Context, offerIDs []string, filters *Filters) error {
	return s.Call(ctx, Call{Type: CallDecline, Decline: &Decline{OfferIDs: offerIDs, Filters: filters}})
}

// Revive asks for offers again for roles (all the framework's roles when
// none is named).
func (s *SchedulerSession) Revive(ctx context.Context, roles ...string) error {
	return s.Call(ctx, Call{Type: CallRevive, Revive: &Revive{Roles: roles}})
}

// Suppress stops offers for roles (all the framework's roles when none is
// named).
func (s *SchedulerSession) Suppress(ctx context.Context, roles ...string) error {
	return s.Call(ctx, Call{Type: CallSuppress, Suppress: &Suppress{Roles: roles}})
}

// Kill kills a task; agentID may be empty.
func (s *SchedulerSession) Kill(ctx context.Context, taskID, agentID string) error {
	return s.Call(ctx, Call{Type: CallKill, Kill: &Kill{TaskID: taskID, AgentID: agentID}})
}

// Acknowledge acknowledges a status update by its uuid.
func (s *SchedulerSession) Acknowledge(ctx context.Context, agentID, taskID, uuid string) error {
	return s.Call(ctx, Call{Type: CallAcknowledge, Acknowledge: &Acknowledge{AgentID: agentID, TaskID: taskID, UUID: uuid}})
}

// AcknowledgeStatus acknowledges the status of an UPDATE event; a status
// without uuid needs no acknowledgement and is skipped.
func (s *SchedulerSession) AcknowledgeStatus(ctx context.Context, status TaskStatus) error {
	if status.UUID == "" {
		return nil
	}
	return s.Acknowledge(ctx, status.AgentID, status.TaskID, status.UUID)
}

// Reconcile asks for the latest status of tasks (of every task of the
// framework when none is given).
func (s *SchedulerSession) Reconcile(ctx context.Context, tasks ...ReconcileTask) error {
	if tasks == nil {
		tasks = []ReconcileTask{}
	}
	return s.Call(ctx, Call{Type: CallReconcile, Reconcile: &Reconcile{Tasks: tasks}})
}

// Teardown removes the framework: its tasks are killed and its offers
// rescinded.
func (s *SchedulerSession) Teardown(ctx context.Context) error {
	return s.Call(ctx, Call{Type: CallTeardown, Teardown: &Teardown{}})
}
