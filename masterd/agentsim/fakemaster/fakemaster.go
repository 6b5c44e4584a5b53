// Package fakemaster plays a master of allot's two streaming protocols, the
// scheduler API and the agent protocol, on an httptest.Server. It keeps no
// cluster state: tests drive it (send events, cut streams, redirect, refuse)
// and inspect the calls it received. It is strict where the protocol is:
// JSON bodies only, no unknown fields, later calls must name a live stream on
// this server and the framework or agent id of that stream.
package fakemaster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"github.com/allot/allot/masterd/api"
)

// Options configure New.
type Options struct {
	// Token, when set, is the bearer token every request must carry.
	Token string
	// HeartbeatIntervalSeconds is announced in SUBSCRIBED and REGISTERED
	// (default 0.05).
	HeartbeatIntervalSeconds float64
	// AutoAcknowledge answers every agent UPDATE with an ACKNOWLEDGE event,
	// as if the framework acknowledged at once.
	AutoAcknowledge bool
}

// Master is a fake master. Its methods are safe for concurrent use.
type Master struct {
	// URL is the server's base URL.
	URL string

	srv  *httptest.Server
	opts Options
	quit chan struct{}

	mu            sync.Mutex
	leader        string
	failOpens     []*api.Error
	callHook      func(Call) *api.Error
	assignAgentID func(requested string) string
	autoAck       bool
	streams       []*Stream
	calls         []Call
	opens         int
	nextID        int
	closed        bool
	changed       chan struct{}
	// idPrefix makes stream ids unique across masters, so that a call sent
	// to the wrong server is refused.
	idPrefix string
}

// Stream is a session a client opened.
type Stream struct {
	ID   string
	Path string // api.SchedulerPath or api.AgentProtocolPath
	// Header is the opening request's header.
	Header http.Header
	// Subscribe is the opening call of a scheduler stream, Register that of
	// an agent stream.
	Subscribe *api.Call
	Register  *api.AgentCall
	// FrameworkID or AgentID is the id the first event gave.
	FrameworkID string
	AgentID     string

	events    chan []byte
	done      chan struct{}
	closeOnce sync.Once
}

// Done is closed when the stream has ended, whichever side ended it.
func (s *Stream) Done() <-chan struct{} { return s.done }

func (s *Stream) end() { s.closeOnce.Do(func() { close(s.done) }) }

// Call is a call received on a stream.
type Call struct {
	StreamID string
	Path     string
	Header   http.Header
	// Scheduler is set for a scheduler call, Agent for an agent call.
	Scheduler *api.Call
	Agent     *api.AgentCall
}

// New starts a fake master; Close stops it.
func New(opts Options) *Master {
	if opts.HeartbeatIntervalSeconds == 0 {
		opts.HeartbeatIntervalSeconds = 0.05
	}
	m := &Master{opts: opts, quit: make(chan struct{}), autoAck: opts.AutoAcknowledge, changed: make(chan struct{}),
		idPrefix: rand.Text()[:8]}
	m.srv = httptest.NewServer(m)
	m.URL = m.srv.URL
	return m
}

// Close ends every stream and stops the server.
func (m *Master) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.quit)
	m.srv.CloseClientConnections()
	m.srv.Close()
}

// Redirect makes the master answer opening requests with a 307 to leader's
// base URL, as a follower does; "" makes it serve them itself again.
func (m *Master) Redirect(leader string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leader = leader
}

// FailOpens makes the next opening requests fail with errs, one each.
func (m *Master) FailOpens(errs ...*api.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failOpens = append(m.failOpens, errs...)
}

// SetCallHook makes hook decide the answer to every later call: a non-nil
// error is sent instead of 202. The call is recorded either way.
func (m *Master) SetCallHook(hook func(Call) *api.Error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.callHook = hook
}

// SetAgentIDs makes assign choose the id REGISTERED gives, from the id the
// agent presented. By default a presented id is kept and a new agent gets
// "agent-N".
func (m *Master) SetAgentIDs(assign func(requested string) string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assignAgentID = assign
}

// SetAutoAcknowledge turns Options.AutoAcknowledge on or off.
func (m *Master) SetAutoAcknowledge(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.autoAck = on
}

// Opens counts the opening requests (SUBSCRIBE, REGISTER) received,
// redirected and refused ones included.
func (m *Master) Opens() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opens
}

// WaitOpens waits until at least n opening requests were received.
func (m *Master) WaitOpens(ctx context.Context, n int) error {
	return m.waitUntil(ctx, func() bool { return m.opens >= n })
}

// Streams lists the streams opened on path, in order.
func (m *Master) Streams(path string) []*Stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.streamsLocked(path)
}

func (m *Master) streamsLocked(path string) []*Stream {
	var out []*Stream
	for _, s := range m.streams {
		if s.Path == path {
			out = append(out, s)
		}
	}
	return out
}

// WaitStreams waits until at least n streams were opened on path and returns
// them all.
func (m *Master) WaitStreams(ctx context.Context, path string, n int) ([]*Stream, error) {
	var out []*Stream
	err := m.waitUntil(ctx, func() bool {
		out = m.streamsLocked(path)
		return len(out) >= n
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d streams on %s (have %d): %w", n, path, len(m.Streams(path)), err)
	}
	return out, nil
}

// Calls returns the received calls for which match is true (all when nil).
func (m *Master) Calls(match func(Call) bool) []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.callsLocked(match)
}

func (m *Master) callsLocked(match func(Call) bool) []Call {
	var out []Call
	for _, c := range m.calls {
		if match == nil || match(c) {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls waits until at least n received calls match and returns them.
func (m *Master) WaitCalls(ctx context.Context, n int, match func(Call) bool) ([]Call, error) {
	var out []Call
	err := m.waitUntil(ctx, func() bool {
		out = m.callsLocked(match)
		return len(out) >= n
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for %d matching calls (have %d): %w", n, len(m.Calls(match)), err)
	}
	return out, nil
}

// waitUntil waits until cond, called with m.mu held, is true.
func (m *Master) waitUntil(ctx context.Context, cond func() bool) error {
	for {
		m.mu.Lock()
		ok, changed := cond(), m.changed
		m.mu.Unlock()
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

func (m *Master) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Send writes event (an api.Event or api.AgentEvent) on the stream.
func (m *Master) Send(streamID string, event any) error {
	line, err := json.Marshal(event)
	if err != nil {
		return err
	}
	s := m.stream(streamID)
	if s == nil {
		return fmt.Errorf("no stream %s", streamID)
	}
	select {
	case <-s.done:
		return fmt.Errorf("stream %s has ended", streamID)
	case s.events <- append(line, '\n'):
		return nil
	}
}

// Cut ends the stream as a master that loses leadership does.
func (m *Master) Cut(streamID string) {
	if s := m.stream(streamID); s != nil {
		s.end()
	}
}

func (m *Master) stream(id string) *Stream {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.streams {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// ServeHTTP serves both protocols' endpoints.
func (m *Master) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != api.SchedulerPath && r.URL.Path != api.AgentProtocolPath {
		writeError(w, api.Errorf(api.CodeNotFound, "no endpoint %s", r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, api.Errorf(api.CodeInvalidArgument, "%s wants POST", r.URL.Path))
		return
	}
	if m.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+m.opts.Token {
		writeError(w, api.Errorf(api.CodeUnauthenticated, "missing or wrong bearer token"))
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		writeError(w, api.Errorf(api.CodeInvalidArgument, "Content-Type %q, want application/json", r.Header.Get("Content-Type")))
		return
	}
	var sched api.Call
	var agent api.AgentCall
	var into any = &sched
	if r.URL.Path == api.AgentProtocolPath {
		into = &agent
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		writeError(w, api.Errorf(api.CodeInvalidArgument, "body: %v", err))
		return
	}
	c := Call{Path: r.URL.Path, Header: r.Header.Clone(), StreamID: r.Header.Get(api.HeaderStreamID)}
	if r.URL.Path == api.AgentProtocolPath {
		c.Agent = &agent
	} else {
		c.Scheduler = &sched
	}
	if c.StreamID == "" {
		m.open(w, r, c)
		return
	}
	m.call(w, c)
}

// open serves SUBSCRIBE and REGISTER: the stream lasts until it is cut, the
// client goes away or the master closes.
func (m *Master) open(w http.ResponseWriter, r *http.Request, c Call) {
	m.mu.Lock()
	m.opens++
	m.notifyLocked()
	if len(m.failOpens) > 0 {
		e := m.failOpens[0]
		m.failOpens = m.failOpens[1:]
		m.mu.Unlock()
		writeError(w, e)
		return
	}
	if m.leader != "" {
		leader := m.leader
		m.mu.Unlock()
		w.Header().Set("Location", leader+r.URL.Path)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	s, first, apiErr := m.newStreamLocked(c)
	if apiErr != nil {
		m.mu.Unlock()
		writeError(w, apiErr)
		return
	}
	m.streams = append(m.streams, s)
	m.notifyLocked()
	m.mu.Unlock()
	defer func() {
		s.end()
		m.mu.Lock()
		m.notifyLocked()
		m.mu.Unlock()
	}()

	line, _ := json.Marshal(first)
	w.Header().Set("Content-Type", api.StreamContentType)
	w.Header().Set(api.HeaderStreamID, s.ID)
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	write := func(line []byte) bool {
		if _, err := w.Write(line); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	if !write(append(line, '\n')) {
		return
	}
	for {
		select {
		case line := <-s.events:
			if !write(line) {
				return
			}
		case <-s.done:
			return
		case <-r.Context().Done():
			return
		case <-m.quit:
			return
		}
	}
}

// newStreamLocked checks an opening call and makes its stream and first
// event.
func (m *Master) newStreamLocked(c Call) (*Stream, any, *api.Error) {
	m.nextID++
	s := &Stream{
		ID:     m.idPrefix + "-stream-" + strconv.Itoa(m.nextID),
		Path:   c.Path,
		Header: c.Header,
		events: make(chan []byte, 1024),
		done:   make(chan struct{}),
	}
	if c.Agent != nil {
		if c.Agent.Type != api.AgentCallRegister || c.Agent.Register == nil {
			return nil, nil, api.Errorf(api.CodeInvalidArgument, "a stream opens with REGISTER, not %q", c.Agent.Type)
		}
		s.Register = c.Agent
		s.AgentID = c.Agent.AgentID
		if m.assignAgentID != nil {
			s.AgentID = m.assignAgentID(c.Agent.AgentID)
		}
		if s.AgentID == "" {
			s.AgentID = "agent-" + strconv.Itoa(m.nextID)
		}
		return s, api.AgentEvent{Type: api.AgentEventRegistered, Registered: &api.AgentRegistered{
			AgentID: s.AgentID, HeartbeatIntervalSeconds: m.opts.HeartbeatIntervalSeconds,
		}}, nil
	}
	if c.Scheduler.Type != api.CallSubscribe || c.Scheduler.Subscribe == nil {
		return nil, nil, api.Errorf(api.CodeInvalidArgument, "a stream opens with SUBSCRIBE, not %q", c.Scheduler.Type)
	}
	if c.Scheduler.FrameworkID != c.Scheduler.Subscribe.FrameworkInfo.ID {
		return nil, nil, api.Errorf(api.CodeInvalidArgument, "framework_id %q differs from framework_info.id %q",
			c.Scheduler.FrameworkID, c.Scheduler.Subscribe.FrameworkInfo.ID)
	}
	s.Subscribe = c.Scheduler
	s.FrameworkID = c.Scheduler.FrameworkID
	if s.FrameworkID == "" {
		s.FrameworkID = "framework-" + strconv.Itoa(m.nextID)
	}
	return s, api.Event{Type: api.EventSubscribed, Subscribed: &api.Subscribed{
		FrameworkID: s.FrameworkID, HeartbeatIntervalSeconds: m.opts.HeartbeatIntervalSeconds,
	}}, nil
}

// call serves a call on a stream.
func (m *Master) call(w http.ResponseWriter, c Call) {
	m.mu.Lock()
	var s *Stream
	for _, st := range m.streams {
		if st.ID == c.StreamID {
			s = st
		}
	}
	if s == nil || isDone(s) {
		m.mu.Unlock()
		writeError(w, api.Errorf(api.CodeNotFound, "no stream %s on this server", c.StreamID))
		return
	}
	if apiErr := checkCall(s, c); apiErr != nil {
		m.mu.Unlock()
		writeError(w, apiErr)
		return
	}
	m.calls = append(m.calls, c)
	m.notifyLocked()
	hook, autoAck := m.callHook, m.autoAck
	m.mu.Unlock()

	if hook != nil {
		if e := hook(c); e != nil {
			writeError(w, e)
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
	if autoAck && c.Agent != nil && c.Agent.Type == api.AgentCallUpdate {
		u := c.Agent.Update
		_ = m.Send(s.ID, api.AgentEvent{Type: api.AgentEventAcknowledge, Acknowledge: &api.AgentAcknowledge{
			FrameworkID: u.FrameworkID, TaskID: u.Status.TaskID, UUID: u.Status.UUID,
		}})
	}
}

// checkCall refuses a call that does not belong on stream s.
func checkCall(s *Stream, c Call) *api.Error {
	if c.Path != s.Path {
		return api.Errorf(api.CodeInvalidArgument, "stream %s belongs to %s", s.ID, s.Path)
	}
	if c.Agent != nil {
		switch {
		case c.Agent.AgentID != s.AgentID:
			return api.Errorf(api.CodeInvalidArgument, "agent_id %q, the stream's is %q", c.Agent.AgentID, s.AgentID)
		case c.Agent.Type == api.AgentCallUpdate && c.Agent.Update == nil,
			c.Agent.Type == api.AgentCallHeartbeat && c.Agent.Heartbeat == nil,
			c.Agent.Type == api.AgentCallUpdateOversubscribed && c.Agent.UpdateOversubscribed == nil:
			return api.Errorf(api.CodeInvalidArgument, "%s without its body", c.Agent.Type)
		case c.Agent.Type != api.AgentCallUpdate && c.Agent.Type != api.AgentCallHeartbeat && c.Agent.Type != api.AgentCallUpdateOversubscribed:
			return api.Errorf(api.CodeInvalidArgument, "call type %q on a stream", c.Agent.Type)
		}
		return nil
	}
	switch {
	case c.Scheduler.FrameworkID != s.FrameworkID:
		return api.Errorf(api.CodeInvalidArgument, "framework_id %q, the stream's is %q", c.Scheduler.FrameworkID, s.FrameworkID)
	case c.Scheduler.Type == api.CallSubscribe:
		return api.Errorf(api.CodeInvalidArgument, "SUBSCRIBE on a stream")
	}
	return nil
}

func isDone(s *Stream) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func writeError(w http.ResponseWriter, e *api.Error) {
	if e.Code == api.CodeRateLimited && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.HTTPStatus())
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: e})
}
