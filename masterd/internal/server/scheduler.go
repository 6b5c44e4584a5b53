package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/acl"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/raftstore"
)

// The scheduler API and the agent protocol: one POST per call; SUBSCRIBE and
// REGISTER answer a stream. Both live on the leader only: a follower answers
// 307 to the leader, as Mesos does, because a stream cannot be forwarded
// through a server that may stop following.

// streamingPaths are served by the handlers here: scheduler calls wait in
// the queue of the framework's principal rather than the operator token's;
// agent calls, internal and paced by the agents themselves, are not
// throttled.
var streamingPaths = map[string]bool{api.SchedulerPath: true, api.AgentProtocolPath: true}

// leaderMaster answers with the term's master, or redirects to the leader
// (307) or answers no_leader, and returns nil.
func (s *Server) leaderMaster(w http.ResponseWriter, r *http.Request) *master.Master {
	if !s.node.IsLeader() {
		addr, ok := s.leaderAPIAddress()
		if !ok {
			s.writeError(w, s.noLeader(w))
			return nil
		}
		w.Header().Set("Location", addr+r.URL.Path)
		s.writeJSON(w, http.StatusTemporaryRedirect, s.appliedIndex(), map[string]string{"leader": addr})
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyWait)
	err := s.node.WaitReady(ctx)
	cancel()
	m := s.engine.current()
	if err != nil || m == nil {
		s.writeError(w, api.Errorf(api.CodeNoLeader, "this server is not ready to lead; retry"))
		return nil
	}
	return m
}

func (s *Server) schedulerCall(w http.ResponseWriter, r *http.Request) {
	m := s.leaderMaster(w, r)
	if m == nil {
		return
	}
	if e := s.checkACLsStillOff(r.Context()); e != nil {
		s.writeError(w, e)
		return
	}
	var call api.Call
	if e := decodeBody(w, r, &call); e != nil {
		s.writeError(w, e)
		return
	}
	// Throttled by the framework's principal: with ACLs on, its token's
	// (authorizeCall); with ACLs off, taken as given (API.md). Calls of an
	// unknown framework go on to get their 404.
	c := callerOf(r.Context())
	principal, label := "", ""
	if call.Type == api.CallSubscribe && call.Subscribe != nil {
		if c.acl {
			if e := s.authorizeSubscribe(c.id, call.FrameworkID, &call.Subscribe.FrameworkInfo); e != nil {
				s.writeError(w, e)
				return
			}
		}
		principal, label = call.Subscribe.FrameworkInfo.Principal, call.Subscribe.FrameworkInfo.Label
	} else if p, l, ok := m.Identity(call.FrameworkID); ok {
		if c.acl && !c.id.Management && p != c.id.Principal {
			s.writeError(w, api.Errorf(api.CodePermissionDenied, "framework %s belongs to principal %s, not to this token's (%s)",
				api.EchoName(call.FrameworkID), p, c.id.Principal))
			return
		}
		principal, label = p, l
	}
	if !s.throttle(w, r, principal, label) {
		return
	}
	if call.Type != api.CallSubscribe {
		s.answerCall(w, m.Call(r.Context(), call, r.Header.Get(api.HeaderStreamID)))
		return
	}
	if r.Header.Get(api.HeaderStreamID) != "" {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument, "SUBSCRIBE opens a stream: send it without %s", api.HeaderStreamID))
		return
	}
	stream, e := m.Subscribe(r.Context(), call)
	if e != nil {
		s.writeError(w, e)
		return
	}
	defer m.FrameworkStreamClosed(stream.Owner(), stream.ID())
	defer s.track(c, stream.ID(), frameworkSession(m, stream, call.Subscribe.FrameworkInfo.Roles))()
	heartbeat := api.Event{Type: api.EventHeartbeat}
	serveStream(w, r, s, stream, s.cfg.HeartbeatInterval, &heartbeat)
}

// authorizeSubscribe decides a SUBSCRIBE with ACLs on: the framework's
// principal is the token's (filled in when the framework names none,
// refused when it names another), the token may register a framework on
// every role it asks for, and a framework subscribes again only under the
// principal it registered with. A management token is no exception: its
// principal is its own.
func (s *Server) authorizeSubscribe(id *acl.Identity, frameworkID string, info *api.FrameworkInfo) *api.Error {
	switch info.Principal {
	case "":
		info.Principal = id.Principal
	case id.Principal:
	default:
		return api.Errorf(api.CodePermissionDenied, "framework_info.principal %s is not this token's principal (%s): leave it out or send the token of %s",
			api.EchoName(info.Principal), id.Principal, api.EchoName(info.Principal)).
			WithDetails(map[string]any{"principal": id.Principal})
	}
	for _, role := range info.Roles {
		if !id.Allow(api.ACLObjectFramework, api.ACLRegister, role) {
			return denied(id, api.ACLObjectFramework, api.ACLRegister, role, false)
		}
	}
	existing := info.ID
	if existing == "" {
		existing = frameworkID
	}
	if existing == "" {
		return nil
	}
	var (
		rec   raftstore.FrameworkRecord
		known bool
	)
	s.fsm.Read(func(st *raftstore.State) { rec, known = st.Framework(existing) })
	if known && rec.Principal != id.Principal {
		return api.Errorf(api.CodePermissionDenied, "framework %s belongs to principal %s, not to this token's (%s)",
			api.EchoName(existing), rec.Principal, id.Principal)
	}
	return nil
}

// deniedSubscribe is the 403 of a SUBSCRIBE whose token has no framework
// register rule at all (the route's check): it names the roles the call
// asked for. It returns nil for any other call, which keeps the route's
// message. The request is refused either way, so its body is not kept.
func deniedSubscribe(r *http.Request, id *acl.Identity) *api.Error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return nil
	}
	var call api.Call
	if json.Unmarshal(data, &call) != nil || call.Type != api.CallSubscribe || call.Subscribe == nil {
		return nil
	}
	var lacking, echoed []string
	for _, role := range call.Subscribe.FrameworkInfo.Roles {
		if !id.Allow(api.ACLObjectFramework, api.ACLRegister, role) {
			lacking, echoed = append(lacking, role), append(echoed, api.EchoName(role))
		}
	}
	switch len(lacking) {
	case 0:
		return nil
	case 1:
		return denied(id, api.ACLObjectFramework, api.ACLRegister, lacking[0], false)
	}
	const shown = 10 // a message, not a copy of the request
	list := strings.Join(echoed[:min(len(echoed), shown)], ", ")
	if len(echoed) > shown {
		list += fmt.Sprintf(" and %d more", len(echoed)-shown)
		echoed = echoed[:shown]
	}
	return api.Errorf(api.CodePermissionDenied, "token %s (principal %s) lacks %s %s for roles %s",
		api.EchoName(id.Accessor), api.EchoName(id.Principal), api.ACLRegister, api.ACLObjectFramework, list).
		WithDetails(map[string]any{"object": api.ACLObjectFramework, "access": api.ACLRegister, "roles": echoed})
}

// answerCall answers a call on a session: 202 with no body, or the error.
func (s *Server) answerCall(w http.ResponseWriter, e *api.Error) {
	if e != nil {
		s.writeError(w, e)
		return
	}
	w.Header().Set(api.HeaderIndex, strconv.FormatUint(s.appliedIndex(), 10))
	w.WriteHeader(http.StatusAccepted)
}

func (s *Server) agentCall(w http.ResponseWriter, r *http.Request) {
	m := s.leaderMaster(w, r)
	if m == nil {
		return
	}
	if e := s.checkACLsStillOff(r.Context()); e != nil {
		s.writeError(w, e)
		return
	}
	var call api.AgentCall
	if e := decodeBody(w, r, &call); e != nil {
		s.writeError(w, e)
		return
	}
	if call.Type != api.AgentCallRegister {
		s.answerCall(w, m.AgentCall(call, r.Header.Get(api.HeaderStreamID)))
		return
	}
	// With ACLs on, the admission is audited under the agent token's
	// principal, as every other write is under its caller's.
	author := ""
	if c := callerOf(r.Context()); c.acl {
		author = principalOf(r.Context())
	}
	stream, e := m.RegisterAgent(r.Context(), call, author)
	if e != nil {
		s.writeError(w, e)
		return
	}
	defer m.AgentStreamClosed(stream.Owner(), stream.ID())
	defer s.track(callerOf(r.Context()), stream.ID(), agentSession(m, stream))()
	serveStream[api.AgentEvent](w, r, s, stream, 0, nil)
}

// streamWriteTimeout bounds one write to a stream: a client that stops
// reading but keeps its connection open is disconnected rather than hold its
// session (and its offers) forever.
const streamWriteTimeout = 10 * time.Second

// serveStream writes a session's events as NDJSON until the master ends it
// or the client goes away; with a heartbeat event, it writes that every
// interval.
func serveStream[E any](w http.ResponseWriter, r *http.Request, s *Server, stream *master.Stream[E], interval time.Duration, heartbeat *E) {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set(api.HeaderStreamID, stream.ID())
	h.Set(api.HeaderIndex, strconv.FormatUint(s.appliedIndex(), 10))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	write := func(events ...E) bool {
		for _, e := range events {
			// Per event: a slow but steady reader may take a long burst.
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if enc.Encode(e) != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	var tick <-chan time.Time
	if heartbeat != nil && interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-stream.Ready():
			if !write(stream.Take()...) {
				return
			}
		case <-tick:
			if !write(*heartbeat) {
				return
			}
		case <-stream.Done():
			write(stream.Take()...)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// live views of the leader

func (s *Server) liveView(w http.ResponseWriter, r *http.Request, view func(m *master.Master) any) {
	if !s.node.IsLeader() {
		s.forward(w, r)
		return
	}
	m := s.leaderMaster(w, r)
	if m == nil {
		return
	}
	// A quota write is acknowledged before the master follows it: the
	// offers its guarantee rescinds must be gone from what its writer reads.
	s.live.FollowedEarlyAcks()
	s.writeJSON(w, http.StatusOK, s.appliedIndex(), view(m))
}

func (s *Server) listFrameworks(w http.ResponseWriter, r *http.Request) {
	s.liveView(w, r, func(m *master.Master) any { return api.FrameworkList{Frameworks: m.Frameworks()} })
}

// listTasks answers the live and recently ended tasks, only those in one of
// the states of ?state=TASK_RUNNING,TASK_STAGING when it is given.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	states := list(r, paramState)
	role, agent := r.URL.Query().Get(paramRole.name), r.URL.Query().Get(paramAgent.name)
	s.liveView(w, r, func(m *master.Master) any {
		tasks := slices.DeleteFunc(m.Tasks(), func(t api.Task) bool {
			return (states != nil && !slices.Contains(states, t.State)) ||
				(role != "" && t.Role != role) || (agent != "" && t.AgentID != agent)
		})
		return api.TaskList{Tasks: tasks}
	})
}

func (s *Server) listOffers(w http.ResponseWriter, r *http.Request) {
	s.liveView(w, r, func(m *master.Master) any { return api.OfferList{Offers: m.Offers()} })
}
