package server

import (
	"cmp"
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/acl"
	"github.com/allot/allot/raftstore"
)

// Who may call what. The middleware authenticates (the bearer token → an
// acl.Identity in the request's context, or 401); each endpoint of the route
// table declares what it needs (an auth), which the route's wrapper checks
// (403), and the handlers that act on roles named in a body or in the
// stored object check those roles themselves.
//
// ACLs are on when this server runs with -acl or the replicated state says
// the cluster was bootstrapped. Off, the old behaviour stays: the
// -operator-token, when set, guards every call but /v1/health, and a caller
// may do everything.

// authKind says how an endpoint is guarded when ACLs are on.
type authKind int

const (
	authUnset      authKind = iota // a route that forgot to say: refused at startup
	authPublic                     // no token needed
	authToken                      // any valid token
	authCapability                 // object + access (see auth)
)

// auth is what an endpoint needs from its caller.
type auth struct {
	kind   authKind
	object string
	access string
	// inHandler: the route checks only that the caller has access to the
	// object for some role (acl.Identity.AllowSome); the handler checks
	// the roles it acts on (lists filtered, a reservation's role, a
	// framework's roles). Otherwise a role-scoped object's role is the
	// path's {role...}.
	inHandler bool
}

// needs guards an endpoint with access to object; for a role-scoped object
// the role is the path's {role...}.
func (e endpoint) needs(object, access string) endpoint {
	e.auth = auth{kind: authCapability, object: object, access: access}
	return e
}

// needsInHandler guards an endpoint with access to object for some role;
// the handler checks the roles it acts on.
func (e endpoint) needsInHandler(object, access string) endpoint {
	e.auth = auth{kind: authCapability, object: object, access: access, inHandler: true}
	return e
}

// public needs no token.
func (e endpoint) public() endpoint { e.auth = auth{kind: authPublic}; return e }

// anyToken needs a valid token and nothing else.
func (e endpoint) anyToken() endpoint { e.auth = auth{kind: authToken}; return e }

// caller is what the middleware learnt about the request's author.
type caller struct {
	// id is nil when this server passes the request on to the leader
	// without knowing the token: the leader decides.
	id *acl.Identity
	// acl says whether ACLs were on: a framework's principal is then its
	// token's.
	acl bool
}

type callerKey struct{}

// withCaller keeps c in the request's context (by value: the check itself
// allocates nothing, see BenchmarkACLRequestCheck).
func withCaller(ctx context.Context, c caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) caller {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c
}

// principalOf is the principal the request's writes are audited under.
func principalOf(ctx context.Context) string {
	if id := callerOf(ctx).id; id != nil {
		return id.Principal
	}
	return ""
}

// aclState is what the request path reads: swapped whole when an ACL
// command applies, so that no request sees half of a change.
type aclState struct {
	on       bool
	resolver *acl.Resolver
}

// aclStore holds the current aclState.
type aclStore struct{ p atomic.Pointer[aclState] }

func (a *aclStore) load() *aclState {
	if st := a.p.Load(); st != nil {
		return st
	}
	return &aclState{}
}

// isACLCommand reports whether cmd changes the ACL state.
func isACLCommand(cmd raftstore.Command) bool {
	switch cmd.Type() {
	case raftstore.ACLBootstrapType, raftstore.ACLPolicySetType, raftstore.ACLPolicyDeleteType,
		raftstore.ACLTokenSetType, raftstore.ACLTokenDeleteType:
		return true
	}
	return false
}

// refreshACL rebuilds the resolver from the replicated policies and tokens.
// Every server runs it as it applies an ACL command (and after a snapshot
// restore), as refreshLimiter does for rate limits, so a revoked token stops
// resolving on a server as soon as it applies the delete.
func (s *Server) refreshACL(cmd raftstore.Command, _ raftstore.Result) {
	if cmd != nil && !isACLCommand(cmd) {
		return
	}
	next := &aclState{on: s.cfg.ACL}
	s.fsm.Read(func(st *raftstore.State) {
		next.on = next.on || st.ACLBootstrapped()
		var tokens []acl.TokenEntry
		st.ForEachACLToken(func(t api.ACLToken, hash [32]byte) {
			tokens = append(tokens, acl.TokenEntry{Token: t, Hash: hash})
		})
		next.resolver = acl.NewResolver(st.ACLPolicies(), tokens)
	})
	s.acl.p.Store(next)
	if next.on {
		// The leader's open sessions whose token this change revoked end
		// now (followers have none).
		s.endRevokedSessions(next)
	}
}

// The identities of the -operator-token, and of every caller with ACLs off
// and no -operator-token.
var (
	operatorIdentity  = acl.Management("operator", "operator")
	anonymousIdentity = acl.Management("anonymous", "anonymous")
)

// bearer is the request's bearer token ("" without one). A header of
// another scheme, or a bare secret, is none: it is refused as missing, as it
// was before ACLs.
func bearer(r *http.Request) string {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return token
}

func (s *Server) isOperatorToken(token string) bool {
	return s.cfg.OperatorToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.OperatorToken)) == 1
}

// authenticate finds who calls. With ACLs on: the -operator-token, or a
// replicated token; a token this server does not know is passed on to the
// leader when the request goes there anyway (it may have been created a
// moment ago), and otherwise refused after this server caught up with the
// leader (unless the read asked for stale state: then this server's state
// judges).
func (s *Server) authenticate(r *http.Request) (caller, *api.Error) {
	state := s.acl.load()
	token := bearer(r)
	if !state.on {
		if s.cfg.OperatorToken == "" {
			return caller{id: anonymousIdentity}, nil
		}
		if token == "" {
			return caller{}, api.Errorf(api.CodeUnauthenticated, "this server requires Authorization: Bearer <token>")
		}
		if !s.isOperatorToken(token) {
			return caller{}, api.Errorf(api.CodeUnauthenticated, "the bearer token is not valid")
		}
		return caller{id: operatorIdentity}, nil
	}
	if token == "" {
		return caller{}, api.Errorf(api.CodeUnauthenticated, "ACLs are on: this server requires Authorization: Bearer <token>")
	}
	if s.isOperatorToken(token) {
		return caller{id: operatorIdentity, acl: true}, nil
	}
	if id, ok := state.resolver.Resolve(token); ok {
		return caller{id: id, acl: true}, nil
	}
	if !s.servesLocally(r) {
		return caller{acl: true}, nil // the leader decides
	}
	if stale, _ := boolQuery(r, "stale"); !stale && !s.node.IsLeader() {
		s.catchUpWithLeader(r)
		if id, ok := s.acl.load().resolver.Resolve(token); ok {
			return caller{id: id, acl: true}, nil
		}
	}
	return caller{}, revoked()
}

// catchUpWithLeader waits, within catchUpWait, until this follower has
// applied what the leader had applied when asked: a token created there a
// moment ago then resolves here.
func (s *Server) catchUpWithLeader(r *http.Request) {
	addr, ok := s.leaderAPIAddress()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), catchUpWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/health", nil)
	if err != nil {
		return
	}
	req.Header.Set(forwardedHeader, s.cfg.ID)
	resp, err := s.proxy(addr).Transport.RoundTrip(req)
	if err != nil {
		return
	}
	resp.Body.Close()
	target, err := strconv.ParseUint(resp.Header.Get(api.HeaderIndex), 10, 64)
	if err != nil {
		return
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.appliedIndex() < target {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// authorize checks the route's auth for the caller; it answers the request
// (403, or passes it on to the leader) and returns false when the handler
// must not run.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, a auth) bool {
	if a.kind == authPublic {
		return true
	}
	c := callerOf(r.Context())
	if c.id == nil {
		// A token this server does not know, on a request for the leader:
		// the leader judges it.
		s.passToLeader(w, r)
		return false
	}
	if a.kind == authToken {
		return true
	}
	role := ""
	var ok bool
	switch {
	case a.inHandler:
		ok = c.id.AllowSome(a.object, a.access)
	case api.ACLRoleScoped(a.object):
		role = r.PathValue("role")
		ok = c.id.Allow(a.object, a.access, role)
	default:
		ok = c.id.Allow(a.object, a.access, "")
	}
	if !ok {
		e := denied(c.id, a.object, a.access, role, a.inHandler)
		if r.URL.Path == api.SchedulerPath {
			// "for some role" tells a framework nothing: name the roles
			// its SUBSCRIBE asked for.
			e = cmp.Or(deniedSubscribe(r, c.id), e)
		}
		s.writeError(w, e)
		return false
	}
	return true
}

// passToLeader forwards a request whose token this server does not know;
// the scheduler and agent streams, which are never forwarded, are sent
// there (307).
func (s *Server) passToLeader(w http.ResponseWriter, r *http.Request) {
	if s.node.IsLeader() {
		// Leadership came here since the middleware looked.
		s.writeError(w, api.Errorf(api.CodeNoLeader, "leadership moved while the request was authenticated; retry"))
		return
	}
	if streamingPaths[r.URL.Path] {
		s.leaderMaster(w, r)
		return
	}
	s.forward(w, r)
}

// denied is the 403 of a caller that lacks access to object (for role when
// it is role-scoped; some is true when any role would have done).
func denied(id *acl.Identity, object, access, role string, some bool) *api.Error {
	what := fmt.Sprintf("%s %s", access, object)
	switch {
	case api.ACLRoleScoped(object) && some:
		what += " for some role"
	case api.ACLRoleScoped(object):
		what += " for role " + api.EchoName(role)
	}
	return api.Errorf(api.CodePermissionDenied, "token %s (principal %s) lacks %s", api.EchoName(id.Accessor), api.EchoName(id.Principal), what).
		WithDetails(map[string]any{"object": object, "access": access, "role": role})
}

// allowRole is a handler's check of one role; it returns the 403 to answer
// or nil.
func allowRole(ctx context.Context, object, access, role string) *api.Error {
	id := callerOf(ctx).id
	if id == nil {
		return api.Errorf(api.CodeUnauthenticated, "the bearer token is not valid")
	}
	if id.Allow(object, access, role) {
		return nil
	}
	return denied(id, object, access, role, false)
}

// mayRead reports whether the caller may read object for role: lists keep
// only those entries.
func mayRead(ctx context.Context, object, role string) bool {
	id := callerOf(ctx).id
	return id != nil && id.Allow(object, api.ACLRead, role)
}

// stillValid checks, under the state lock of a read, that the caller may
// still read this state: the resolver is swapped just after an ACL command
// applies, so a read must never answer from a state in which its token was
// revoked, nor, for a caller let in while ACLs looked off (a server
// restarted without -acl, not yet caught up), from one that says the
// cluster was bootstrapped. It returns the error to answer, or nil.
func stillValid(ctx context.Context, st *raftstore.State) *api.Error {
	c := callerOf(ctx)
	switch {
	case c.id == nil || c.id == operatorIdentity:
		// A public endpoint, or the operator token, which is a management
		// token with ACLs on as well.
		return nil
	case !c.acl:
		if st.ACLBootstrapped() {
			return aclsTurnedOn()
		}
		return nil
	}
	if _, ok := st.ACLToken(c.id.Accessor); !ok {
		return revoked()
	}
	return nil
}

// checkACLsStillOff is stillValid for the scheduler and agent calls, which
// answer from the master rather than from a read of the state: it refuses a
// caller let in while ACLs looked off once this server found them on
// (leaderMaster waited until it applied what the cluster committed).
func (s *Server) checkACLsStillOff(ctx context.Context) *api.Error {
	c := callerOf(ctx)
	if c.id != nil && c.id != operatorIdentity && !c.acl && s.acl.load().on {
		return aclsTurnedOn()
	}
	return nil
}

func aclsTurnedOn() *api.Error {
	return api.Errorf(api.CodeUnauthenticated, "ACLs are on (the cluster was bootstrapped): this server requires Authorization: Bearer <token>")
}

func revoked() *api.Error {
	return api.Errorf(api.CodeUnauthenticated, "the bearer token is not valid (unknown or revoked)")
}

// isPublic reports whether r is for the path of an endpoint that needs no
// token (/v1/health, /v1/acl/bootstrap, the web UI): another method on it
// gets its 405 without a token too.
func (s *Server) isPublic(r *http.Request) bool {
	return s.public[r.URL.Path] || isUIPath(r.URL.Path)
}

// isUIPath reports whether p is the web UI's (or / , which leads there):
// its pages carry no data and ask for the token themselves.
func isUIPath(p string) bool {
	return p == "/" || p == "/ui" || strings.HasPrefix(p, "/ui/")
}
