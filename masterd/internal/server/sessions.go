package server

import (
	"fmt"
	"sync"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/acl"
	"github.com/allot/allot/masterd/internal/master"
)

// Revocation reaches open sessions. A scheduler or agent stream is
// authorized once, when it opens; its later calls are checked one by one,
// but the stream itself would keep receiving offers and launches after its
// token was deleted. So the leader remembers which token opened each
// session, and whenever an ACL command applies (refreshACL) it ends the
// sessions whose token is gone or no longer grants what the session needs:
// the stream gets an ERROR event that says why, then closes, and the
// framework or agent is disconnected as after any lost connection. The
// -operator-token's sessions, and sessions opened with ACLs off, are not
// tracked.

// session is one open stream and the token that opened it.
type session struct {
	accessor  string
	principal string
	// missing says what id no longer grants that the session needs ("":
	// nothing).
	missing func(id *acl.Identity) string
	// end ends the session with an ERROR event carrying message.
	end func(message string)
}

// sessions are the open streams of this server's masters, by stream id.
type sessions struct {
	mu   sync.Mutex
	open map[string]*session
}

// track remembers the session that c opened (stream id) unless it needs no
// tracking, checks it at once against the current ACL state (a change may
// have applied between the call's authorization and now) and returns the
// function that forgets it.
func (s *Server) track(c caller, streamID string, sess *session) (forget func()) {
	if !c.acl || c.id == nil || c.id == operatorIdentity {
		return func() {}
	}
	sess.accessor, sess.principal = c.id.Accessor, c.id.Principal
	s.sessions.mu.Lock()
	if s.sessions.open == nil {
		s.sessions.open = map[string]*session{}
	}
	s.sessions.open[streamID] = sess
	// Under the lock: refreshACL stores the new state before it looks at
	// the sessions, so either it sees this one or this load sees its state.
	why := sess.revokedBy(s.acl.load())
	s.sessions.mu.Unlock()
	if why != "" {
		s.endSession(streamID, sess, why)
	}
	return func() {
		s.sessions.mu.Lock()
		delete(s.sessions.open, streamID)
		s.sessions.mu.Unlock()
	}
}

// revokedBy says why state no longer lets the session go on ("": it does).
func (sess *session) revokedBy(state *aclState) string {
	id, ok := state.resolver.ByAccessor(sess.accessor)
	switch {
	case !ok:
		return fmt.Sprintf("session ended: token %s was revoked (deleted); open the session again with a valid token", api.EchoName(sess.accessor))
	case id.Principal != sess.principal:
		return fmt.Sprintf("session ended: token %s now belongs to principal %s, not %s", api.EchoName(sess.accessor), id.Principal, sess.principal)
	}
	if what := sess.missing(id); what != "" {
		return fmt.Sprintf("session ended: token %s (principal %s) no longer grants %s", api.EchoName(sess.accessor), id.Principal, what)
	}
	return ""
}

// endRevokedSessions ends every open session state no longer lets go on.
func (s *Server) endRevokedSessions(state *aclState) {
	type ending struct {
		streamID string
		sess     *session
		why      string
	}
	var ends []ending
	s.sessions.mu.Lock()
	for id, sess := range s.sessions.open {
		if why := sess.revokedBy(state); why != "" {
			ends = append(ends, ending{id, sess, why})
		}
	}
	s.sessions.mu.Unlock()
	// Outside the lock: ending takes the master's.
	for _, e := range ends {
		s.endSession(e.streamID, e.sess, e.why)
	}
}

func (s *Server) endSession(streamID string, sess *session, why string) {
	s.logger.Info("ending a session its token no longer grants", "stream", streamID, "token", sess.accessor, "why", why)
	sess.end(why)
}

// frameworkSession is what a framework's scheduler stream needs: register
// framework on each of its roles.
func frameworkSession(m *master.Master, stream *master.Stream[api.Event], roles []string) *session {
	return &session{
		missing: func(id *acl.Identity) string {
			for _, role := range roles {
				if !id.Allow(api.ACLObjectFramework, api.ACLRegister, role) {
					return fmt.Sprintf("%s %s for role %s", api.ACLRegister, api.ACLObjectFramework, api.EchoName(role))
				}
			}
			return ""
		},
		end: func(message string) { m.EndFrameworkSession(stream.Owner(), stream.ID(), message) },
	}
}

// agentSession is what an agent's stream needs: register agent.
func agentSession(m *master.Master, stream *master.Stream[api.AgentEvent]) *session {
	return &session{
		missing: func(id *acl.Identity) string {
			if !id.Allow(api.ACLObjectAgent, api.ACLRegister, "") {
				return fmt.Sprintf("%s %s", api.ACLRegister, api.ACLObjectAgent)
			}
			return ""
		},
		end: func(message string) { m.EndAgentSession(stream.Owner(), stream.ID(), message) },
	}
}
