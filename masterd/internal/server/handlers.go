package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/master"
	"github.com/allot/allot/masterd/internal/ui"
	"github.com/allot/allot/raftstore"
)

// route is one path of the API and its methods.
type route struct {
	path    string
	methods methods
}

// routeTable is every endpoint: its path, its methods and the query
// parameters each takes (see query.go).
func (s *Server) routeTable() []route {
	const (
		quota, role, reservation = api.ACLObjectQuota, api.ACLObjectRole, api.ACLObjectReservation
		ratelimit, aclObj        = api.ACLObjectRateLimit, api.ACLObjectACL
		cluster                  = api.ACLObjectCluster
		read, write, register    = api.ACLRead, api.ACLWrite, api.ACLRegister
	)
	table := []route{
		{"/v1/health", methods{"GET": takes(s.health).public()}},
		// Local on every server, which asks the leader for its live state
		// unless ?stale=true.
		{"/v1/cluster", methods{"GET": reads(s.getCluster).needs(cluster, read)}},
		{"/v1/cluster/servers", methods{"POST": writes(s.leaderOnly(s.addServer)).needs(cluster, write)}},
		{"/v1/cluster/servers/{id}", methods{"DELETE": writes(s.leaderOnly(s.removeServer)).needs(cluster, write)}},
		// Lists keep the roles the caller may read.
		{"/v1/quotas", methods{"GET": reads(s.listQuotas).needsInHandler(quota, read)}},
		{"/v1/quotas/{role...}", methods{
			"GET":    reads(s.getQuota).needs(quota, read),
			"PUT":    writes(s.leaderOnly(s.putQuota)).needs(quota, write),
			"DELETE": writes(s.leaderOnly(s.deleteQuota)).needs(quota, write)}},
		{"/v1/roles", methods{"GET": reads(s.listRoles).needsInHandler(role, read)}},
		{"/v1/roles/{role...}", methods{
			"GET":    reads(s.getRole).needs(role, read),
			"PUT":    writes(s.leaderOnly(s.putRole)).needs(role, write),
			"DELETE": writes(s.leaderOnly(s.deleteRole)).needs(role, write)}},
		// A reservation's role is in the stored object and in the body.
		{"/v1/reservations", methods{"GET": reads(s.listReservations).needsInHandler(reservation, read)}},
		{"/v1/reservations/{name}", methods{
			"GET":    reads(s.getReservation).needsInHandler(reservation, read),
			"PUT":    writes(s.leaderOnly(s.putReservation)).needsInHandler(reservation, write),
			"DELETE": writes(s.leaderOnly(s.deleteReservation)).needsInHandler(reservation, write)}},
		{"/v1/ratelimits", methods{
			"GET": reads(s.getRateLimitConfig).needs(ratelimit, read),
			"PUT": writes(s.leaderOnly(s.putRateLimitConfig)).needs(ratelimit, write)}},
		{"/v1/ratelimits/{principal}", methods{
			"GET":    reads(s.getRateLimit).needs(ratelimit, read),
			"PUT":    writes(s.leaderOnly(s.putRateLimit)).needs(ratelimit, write),
			"DELETE": writes(s.leaderOnly(s.deleteRateLimit)).needs(ratelimit, write)}},
		{"/v1/ratelimits/{principal}/labels/{label}", methods{
			"GET":    reads(s.getLabeledRateLimit).needs(ratelimit, read),
			"PUT":    writes(s.leaderOnly(s.putLabeledRateLimit)).needs(ratelimit, write),
			"DELETE": writes(s.leaderOnly(s.deleteLabeledRateLimit)).needs(ratelimit, write)}},
		{"/v1/ratelimits-default", methods{
			"GET":    reads(s.getRateLimitDefault).needs(ratelimit, read),
			"PUT":    writes(s.leaderOnly(s.putRateLimitDefault)).needs(ratelimit, write),
			"DELETE": writes(s.leaderOnly(s.deleteRateLimitDefault)).needs(ratelimit, write)}},
		{api.ACLBootstrapPath, methods{"POST": takes(s.aclBootstrap).public()}},
		{api.ACLPoliciesPath, methods{"GET": reads(s.listACLPolicies).needs(aclObj, read)}},
		{"/v1/acl/policies/{name}", methods{
			"GET":    reads(s.getACLPolicy).needs(aclObj, read),
			"PUT":    writes(s.leaderOnly(s.putACLPolicy)).needs(aclObj, write),
			"DELETE": writes(s.leaderOnly(s.deleteACLPolicy)).needs(aclObj, write)}},
		{api.ACLTokensPath, methods{"GET": reads(s.listACLTokens).needs(aclObj, read)}},
		{"/v1/acl/tokens/{accessor}", methods{
			"GET":    reads(s.getACLToken).needs(aclObj, read),
			"PUT":    writes(s.leaderOnly(s.putACLToken)).needs(aclObj, write),
			"DELETE": writes(s.leaderOnly(s.deleteACLToken)).needs(aclObj, write)}},
		{api.ACLTokenSelfPath, methods{"GET": reads(s.aclTokenSelf).anyToken()}},
		{"/v1/agents", methods{"GET": reads(s.listAgents).needs(cluster, read)}},
		{"/v1/agents/{id}", methods{"GET": reads(s.getAgent).needs(cluster, read)}},
		// The leader's live state: no stale variant.
		{"/v1/frameworks", methods{"GET": takes(s.listFrameworks).needs(cluster, read)}},
		{"/v1/tasks", methods{"GET": takes(s.listTasks, paramState, paramRole, paramAgent).needs(cluster, read)}},
		{"/v1/offers", methods{"GET": takes(s.listOffers).needs(cluster, read)}},
		// SUBSCRIBE needs register on every role it names; later calls come
		// from the framework's principal (schedulerCall).
		{api.SchedulerPath, methods{"POST": takes(s.schedulerCall).needsInHandler(api.ACLObjectFramework, register)}},
		{api.AgentProtocolPath, methods{"POST": takes(s.agentCall).needs(api.ACLObjectAgent, register)}},
		{"/v1/audit", methods{"GET": reads(s.getAudit, paramAfter, paramLimit).needs(cluster, read)}},
		// A backup holds every object and the ACL state; a restore replaces
		// the tokens: both need what could grant everything (snapshot.go).
		{api.SnapshotPath, methods{
			"GET": takes(s.saveSnapshot).needs(aclObj, write),
			"PUT": writes(s.restoreSnapshot).needs(aclObj, write)}},
		{"/metrics", methods{"GET": takes(s.metrics.handler.ServeHTTP).needs(cluster, read)}},
	}
	if s.cfg.TestHooks {
		table = append(table, route{"/v1/test/agents/{name}", methods{"PUT": writes(s.leaderOnly(s.admitTestAgent)).needs(cluster, write)}})
	}
	return table
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	s.public = map[string]bool{}
	for _, rt := range s.routeTable() {
		s.handle(mux, rt.path, rt.methods)
		for _, ep := range rt.methods {
			if ep.auth.kind == authPublic {
				s.public[rt.path] = true
			}
		}
	}
	// The web UI: static pages that read the API with the user's token.
	mux.Handle("GET /ui/", http.StripPrefix("/ui", ui.Handler()))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, api.Errorf(api.CodeNotFound, "no endpoint %s", api.EchoName(r.URL.Path)))
	})
	return mux
}

// methods maps the methods of one path to their endpoints.
type methods map[string]endpoint

// handle registers one handler per method, each behind the check of its
// query parameters, and a JSON 405 for the other methods.
func (s *Server) handle(mux *http.ServeMux, path string, byMethod methods) {
	allowed := make([]string, 0, len(byMethod))
	for method, ep := range byMethod {
		if ep.auth.kind == authUnset {
			panic(fmt.Sprintf("route %s %s does not say who may call it", method, path))
		}
		mux.HandleFunc(method+" "+path, func(w http.ResponseWriter, r *http.Request) {
			if e := checkQuery(r, ep.params); e != nil {
				s.writeError(w, e)
				return
			}
			if !s.authorize(w, r, ep.auth) {
				return
			}
			ep.serve(w, r)
		})
		allowed = append(allowed, method)
	}
	sort.Strings(allowed)
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		e := api.Errorf(api.CodeInvalidArgument, "method %s is not allowed on %s (allowed: %s)",
			api.EchoName(r.Method), api.EchoName(r.URL.Path), strings.Join(allowed, ", "))
		e.Status = http.StatusMethodNotAllowed
		s.writeError(w, e)
	})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, s.appliedIndex(), healthAnswer{Status: "ok", StoreVersion: raftstore.StoreVersion})
}

// --- cluster ---

// getCluster answers from this server's own view of the Raft configuration,
// so that each server can be asked which leader it follows. What only the
// leader knows, the allocation and the recovery, a follower asks the leader
// for, unless ?stale=true.
func (s *Server) getCluster(w http.ResponseWriter, r *http.Request) {
	servers, err := s.node.Servers()
	if err != nil {
		s.writeError(w, api.Errorf(api.CodeNoLeader, "%v", err))
		return
	}
	s.freshness().setHeaders(w.Header())
	leaderID, leaderAddr := s.node.Leader()
	out := api.Cluster{Servers: []api.Server{}}
	switch {
	case s.node.IsLeader():
		if !flag(r, paramStale) {
			s.live.FollowedEarlyAcks() // as readLive
		}
		u := s.live.Usage()
		out.Allocated, out.Offered = nonNil(u.Allocated), nonNil(u.Offered)
		out.Revocable, out.RevocableAllocated = nonNil(u.Revocable), nonNil(u.RevocableAllocated)
		out.Recovery = s.live.Recovery()
	case !flag(r, paramStale):
		if refused := s.leaderLive(r, &out); refused != nil {
			s.writeError(w, refused)
			return
		}
	}
	var (
		index   uint64
		refused *api.Error
	)
	s.fsm.Read(func(st *raftstore.State) {
		if refused = stillValid(r.Context(), st); refused != nil {
			return
		}
		index = st.Index()
		for _, srv := range servers {
			rec, _ := st.Server(string(srv.ID))
			out.Servers = append(out.Servers, api.Server{
				ID: string(srv.ID), RaftAddress: string(srv.Address), APIAddress: rec.APIAddress,
				Suffrage: strings.ToLower(srv.Suffrage.String()), Leader: string(srv.ID) == leaderID,
				StoreVersion: s.heardStoreVersion(string(srv.ID)),
			})
		}
		if leaderID != "" {
			rec, _ := st.Server(leaderID)
			out.Leader = &api.Server{ID: leaderID, RaftAddress: leaderAddr, APIAddress: rec.APIAddress}
		}
		out.Total = st.AgentCapacity()
		out.Reserved = activeReservations(st)
		out.StoreVersion = st.RulesVersion()
	})
	if refused != nil {
		s.writeError(w, refused)
		return
	}
	s.writeJSON(w, http.StatusOK, index, out)
}

// activeReservations is what the active reservations hold: a pending one
// (its agent not admitted, or too small) holds nothing yet.
func activeReservations(st *raftstore.State) api.Resources {
	out := api.Resources{}
	for _, res := range st.Reservations() {
		if res.Status == api.ReservationActive {
			out.Add(res.Resources)
		}
	}
	return out
}

func (s *Server) addServer(w http.ResponseWriter, r *http.Request) {
	var req api.AddServerRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	if err := api.ValidateName("server id", req.ID); err != nil {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument, "%v", err))
		return
	}
	if _, _, err := splitHostPort(req.RaftAddress); err != nil {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument, "raft_address: %v", err))
		return
	}
	if u, err := url.Parse(req.APIAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument, "api_address %q: want http://host:port", req.APIAddress))
		return
	}
	if e := s.checkJoin(req); e != nil {
		s.writeError(w, e)
		return
	}
	if e := s.checkJoinVersion(r, req.ID); e != nil {
		s.writeError(w, e)
		return
	}
	cmd := &raftstore.ServerSet{ID: req.ID, RaftAddress: req.RaftAddress, APIAddress: req.APIAddress}
	if !s.membershipChangeAllowed(w, r, cmd) {
		return
	}
	if e := s.addVoter(r, req); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, cmd)
}

func splitHostPort(addr string) (string, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "" || port == "") {
		err = fmt.Errorf("%q: want host:port", addr)
	}
	return host, port, err
}

// membershipChangeAllowed answers dry runs and refuses preconditions before
// the Raft configuration changes: a membership change cannot be undone by a
// later validation failure. It reports whether the change may go ahead.
func (s *Server) membershipChangeAllowed(w http.ResponseWriter, r *http.Request, cmd raftstore.Command) bool {
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument, "If-Match and If-None-Match are not supported on cluster membership"))
		return false
	}
	if flag(r, paramDryRun) {
		s.commit(w, r, cmd) // answers the error or the dry run; changes nothing
		return false
	}
	return true
}

func (s *Server) removeServer(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validName("server id", id); e != nil {
		s.writeError(w, e)
		return
	}
	if s.onlyVoter(id) {
		s.writeError(w, api.Errorf(api.CodeConflict, "server %s is the cluster's only voter: a cluster cannot remove its last server (stop the server instead)", id))
		return
	}
	if !s.membershipChangeAllowed(w, r, &raftstore.ServerRemove{ID: id}) {
		return
	}
	if err := s.node.RemoveServer(id); err != nil {
		s.writeError(w, api.Errorf(api.CodeNoLeader, "%v", err))
		return
	}
	if id == s.cfg.ID {
		// The leader removed itself and steps down; the record goes with the
		// next leader's view.
		s.writeJSON(w, http.StatusOK, s.appliedIndex(), map[string]string{"removed": id})
		return
	}
	s.commit(w, r, &raftstore.ServerRemove{ID: id})
}

// onlyVoter reports whether id is the one voter of the Raft configuration:
// Raft refuses to remove it, and that refusal is not for want of a leader.
func (s *Server) onlyVoter(id string) bool {
	servers, err := s.node.Servers()
	if err != nil {
		return false
	}
	var voters []string
	for _, srv := range servers {
		if srv.Suffrage == raft.Voter {
			voters = append(voters, string(srv.ID))
		}
	}
	return len(voters) == 1 && voters[0] == id
}

// --- quotas ---

// validRole and validName refuse a name in a path before it goes further,
// so that no answer repeats more than a valid name can hold.
func validRole(role string) *api.Error {
	if err := api.ValidateRole(role); err != nil {
		return api.Errorf(api.CodeInvalidArgument, "%v", err)
	}
	return nil
}

func validName(kind, name string) *api.Error {
	if err := api.ValidateName(kind, name); err != nil {
		return api.Errorf(api.CodeInvalidArgument, "%v", err)
	}
	return nil
}

func (s *Server) listQuotas(w http.ResponseWriter, r *http.Request) {
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		out := api.QuotaList{Quotas: []api.Quota{}}
		for _, q := range st.Quotas() {
			if mayRead(r.Context(), api.ACLObjectQuota, q.Role) {
				out.Quotas = append(out.Quotas, q)
			}
		}
		return out, nil
	})
}

func (s *Server) getQuota(w http.ResponseWriter, r *http.Request) {
	role := r.PathValue("role")
	if e := validRole(role); e != nil {
		s.writeError(w, e)
		return
	}
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		q, ok := st.Quota(role)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "role %s has no quota", role)
		}
		return q, nil
	})
}

func (s *Server) putQuota(w http.ResponseWriter, r *http.Request) {
	var req api.QuotaRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.QuotaSet{WriteMeta: raftstore.WriteMeta{Force: req.Force},
		Role: r.PathValue("role"), Guarantees: req.Guarantees, Limits: req.Limits})
}

func (s *Server) deleteQuota(w http.ResponseWriter, r *http.Request) {
	if e := validRole(r.PathValue("role")); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.QuotaDelete{Role: r.PathValue("role")})
}

// --- roles ---

// withRoleUsage completes a role's view with the master's live figures.
func withRoleUsage(out api.Role, usage master.RoleUsage) api.Role {
	out.Allocated, out.Offered = nonNil(usage.Allocated), nonNil(usage.Offered)
	out.RevocableAllocated, out.Lent = nonNil(usage.RevocableAllocated), nonNil(usage.Lent)
	out.Frameworks = usage.Frameworks
	if out.Frameworks == nil {
		out.Frameworks = []string{}
	}
	return out
}

// roleState is a role's view without the live figures (withRoleUsage).
func roleState(st *raftstore.State, role string) api.Role {
	policy, _ := st.RolePolicy(role)
	out := api.Role{
		Role: role, Weight: policy.Weight, LendingLimit: policy.LendingLimit, Version: policy.Version,
		Reserved: api.Resources{},
	}
	if q, ok := st.Quota(role); ok {
		out.Quota = &q
	}
	for _, res := range st.Reservations() {
		if res.Role == role && res.Status == api.ReservationActive {
			out.Reserved.Add(res.Resources)
		}
	}
	return out
}

func nonNil(r api.Resources) api.Resources {
	if r == nil {
		return api.Resources{}
	}
	return r
}

func (s *Server) listRoles(w http.ResponseWriter, r *http.Request) {
	// The live roles are read before the state, their figures after it
	// (see readLive); each took the master's lock on its own before too.
	// Which roles are live follows the quota writes before this read too
	// (a guarantee rescinds offers that made a role live).
	if !flag(r, paramStale) {
		s.live.FollowedEarlyAcks()
	}
	live := s.live.LiveRoles()
	s.readLive(w, r, func(st *raftstore.State) (func() any, *api.Error) {
		names := map[string]bool{}
		for _, role := range live {
			names[role] = true
		}
		for _, p := range st.RolePolicies() {
			names[p.Role] = true
		}
		for _, q := range st.Quotas() {
			names[q.Role] = true
		}
		for _, res := range st.Reservations() {
			names[res.Role] = true
		}
		out := api.RoleList{Roles: []api.Role{}}
		for _, name := range sortedSet(names) {
			if mayRead(r.Context(), api.ACLObjectRole, name) {
				out.Roles = append(out.Roles, roleState(st, name))
			}
		}
		return func() any {
			for i, role := range out.Roles {
				out.Roles[i] = withRoleUsage(role, s.live.RoleUsage(role.Role))
			}
			return out
		}, nil
	})
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (s *Server) getRole(w http.ResponseWriter, r *http.Request) {
	role := r.PathValue("role")
	// The default role has no policy, but frameworks run in it.
	if e := validRole(role); e != nil && role != api.DefaultRole {
		s.writeError(w, e)
		return
	}
	s.readLive(w, r, func(st *raftstore.State) (func() any, *api.Error) {
		out := roleState(st, role)
		return func() any { return withRoleUsage(out, s.live.RoleUsage(role)) }, nil
	})
}

func (s *Server) putRole(w http.ResponseWriter, r *http.Request) {
	var req api.RoleRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	weight := api.DefaultWeight
	if req.Weight != nil {
		weight = *req.Weight
	}
	s.commit(w, r, &raftstore.RoleSet{Role: r.PathValue("role"), Weight: weight, LendingLimit: req.LendingLimit})
}

func (s *Server) deleteRole(w http.ResponseWriter, r *http.Request) {
	if e := validRole(r.PathValue("role")); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.RoleDelete{Role: r.PathValue("role")})
}

// --- reservations ---

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request) {
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		out := api.ReservationList{Reservations: []api.Reservation{}}
		for _, res := range st.Reservations() {
			if mayRead(r.Context(), api.ACLObjectReservation, res.Role) {
				out.Reservations = append(out.Reservations, res)
			}
		}
		return out, nil
	})
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if e := validName("reservation name", name); e != nil {
		s.writeError(w, e)
		return
	}
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		res, ok := st.Reservation(name)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "reservation %s does not exist", name)
		}
		if !mayRead(r.Context(), api.ACLObjectReservation, res.Role) {
			// As if absent: a caller may not learn that another role's
			// reservation exists, nor whose it is.
			return nil, api.Errorf(api.CodeNotFound, "reservation %s does not exist", name)
		}
		return res, nil
	})
}

func (s *Server) putReservation(w http.ResponseWriter, r *http.Request) {
	var req api.ReservationRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	// Write on the role it moves to and on the role it leaves.
	if e := allowRole(r.Context(), api.ACLObjectReservation, api.ACLWrite, req.Role); e != nil {
		s.writeError(w, e)
		return
	}
	pin, e := s.allowReservationRole(r, r.PathValue("name"))
	if e != nil {
		s.writeError(w, e)
		return
	}
	s.commitWith(w, r, &raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Force: req.Force},
		Name: r.PathValue("name"), Agent: req.Agent, Role: req.Role, Resources: req.Resources}, commitOptions{pin: pin})
}

func (s *Server) deleteReservation(w http.ResponseWriter, r *http.Request) {
	if e := validName("reservation name", r.PathValue("name")); e != nil {
		s.writeError(w, e)
		return
	}
	pin, e := s.allowReservationRole(r, r.PathValue("name"))
	if e != nil {
		s.writeError(w, e)
		return
	}
	s.commitWith(w, r, &raftstore.ReservationDelete{Name: r.PathValue("name")}, commitOptions{pin: pin})
}

// allowReservationRole checks write access to the role of the stored
// reservation name, when it exists. For a caller whose rights depend on the
// role, it returns the version it judged (0: no reservation), for the write
// to be pinned to; nil for a management caller.
func (s *Server) allowReservationRole(r *http.Request, name string) (*uint64, *api.Error) {
	var (
		res api.Reservation
		ok  bool
	)
	s.fsm.Read(func(st *raftstore.State) { res, ok = st.Reservation(name) })
	if id := callerOf(r.Context()).id; id == nil || id.Management {
		return nil, nil
	}
	if !ok {
		return new(uint64), nil
	}
	if e := allowRole(r.Context(), api.ACLObjectReservation, api.ACLWrite, res.Role); e != nil {
		return nil, e
	}
	return &res.Version, nil
}

// --- rate limits ---

func (s *Server) getRateLimitConfig(w http.ResponseWriter, r *http.Request) {
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		return st.RateLimitConfig(), nil
	})
}

// rateLimitConfigCommand turns the Mesos-format configuration into a command,
// filling the documented defaults.
func rateLimitConfigCommand(cfg api.RateLimitConfig) (*raftstore.RateLimitConfigReplace, *api.Error) {
	cmd := &raftstore.RateLimitConfigReplace{Limits: make([]raftstore.RateLimitSet, 0, len(cfg.Limits))}
	for _, l := range cfg.Limits {
		qps, burst, capacity := raftstore.FillRateLimitDefaults(l.QPS, l.Burst, l.Capacity)
		cmd.Limits = append(cmd.Limits, raftstore.RateLimitSet{Principal: l.Principal, Label: l.Label, QPS: qps, Burst: burst, Capacity: capacity})
	}
	if cfg.AggregateDefaultQPS != nil || cfg.AggregateDefaultBurst != nil || cfg.AggregateDefaultCapacity != nil {
		qps, burst, capacity := raftstore.FillRateLimitDefaults(cfg.AggregateDefaultQPS, cfg.AggregateDefaultBurst, cfg.AggregateDefaultCapacity)
		cmd.Default = &raftstore.RateLimitDefaultSet{QPS: qps, Burst: burst, Capacity: capacity}
	}
	return cmd, nil
}

func (s *Server) putRateLimitConfig(w http.ResponseWriter, r *http.Request) {
	var req api.RateLimitConfig
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" {
		s.writeError(w, api.Errorf(api.CodeInvalidArgument,
			"the whole configuration has no single version: use If-Match on /v1/ratelimits/{principal} and /v1/ratelimits-default"))
		return
	}
	cmd, e := rateLimitConfigCommand(req)
	if e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, cmd)
}

func (s *Server) getRateLimit(w http.ResponseWriter, r *http.Request) {
	principal := r.PathValue("principal")
	if e := validName("principal", principal); e != nil {
		s.writeError(w, e)
		return
	}
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		l, ok := st.RateLimit(principal)
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "principal %s has no rate limit", principal)
		}
		return l, nil
	})
}

func (s *Server) putRateLimit(w http.ResponseWriter, r *http.Request) {
	var req api.RateLimitRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	qps, burst, capacity := raftstore.FillRateLimitDefaults(req.QPS, req.Burst, req.Capacity)
	s.commit(w, r, &raftstore.RateLimitSet{Principal: r.PathValue("principal"), QPS: qps, Burst: burst, Capacity: capacity})
}

func (s *Server) deleteRateLimit(w http.ResponseWriter, r *http.Request) {
	if e := validName("principal", r.PathValue("principal")); e != nil {
		s.writeError(w, e)
		return
	}
	s.commit(w, r, &raftstore.RateLimitDelete{Principal: r.PathValue("principal")})
}

func (s *Server) getRateLimitDefault(w http.ResponseWriter, r *http.Request) {
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		d, ok := st.RateLimitDefault()
		if !ok {
			return nil, api.Errorf(api.CodeNotFound, "no default rate limit is set")
		}
		return d, nil
	})
}

func (s *Server) putRateLimitDefault(w http.ResponseWriter, r *http.Request) {
	var req api.RateLimitRequest
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	qps, burst, capacity := raftstore.FillRateLimitDefaults(req.QPS, req.Burst, req.Capacity)
	s.commit(w, r, &raftstore.RateLimitDefaultSet{QPS: qps, Burst: burst, Capacity: capacity})
}

func (s *Server) deleteRateLimitDefault(w http.ResponseWriter, r *http.Request) {
	s.commit(w, r, &raftstore.RateLimitDefaultDelete{})
}

// --- agents ---

// withAgentUsage completes an agent's view with the master's live figures.
func withAgentUsage(out api.Agent, usage master.AgentUsage) api.Agent {
	out.Allocated, out.Revocable = nonNil(usage.Allocated), nonNil(usage.Revocable)
	out.RevocableAllocated, out.Connected = nonNil(usage.RevocableAllocated), usage.Connected
	return out
}

// agentState is an agent's view without the live figures (withAgentUsage).
func agentState(st *raftstore.State, a raftstore.AgentRecord) api.Agent {
	out := api.Agent{
		ID: a.ID, Name: a.Name, Hostname: a.Hostname, Resources: a.Resources, Reserved: api.Resources{},
		Capabilities: a.Capabilities, RegisteredAt: a.AdmittedAt, Version: a.Version,
	}
	if out.Capabilities == nil {
		out.Capabilities = []string{}
	}
	for _, res := range st.Reservations() {
		if res.Agent == a.Name && res.Status == api.ReservationActive {
			out.Reserved.Add(res.Resources)
		}
	}
	return out
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	s.readLive(w, r, func(st *raftstore.State) (func() any, *api.Error) {
		out := api.AgentList{Agents: []api.Agent{}}
		for _, a := range st.Agents() {
			out.Agents = append(out.Agents, agentState(st, a))
		}
		return func() any {
			for i, a := range out.Agents {
				out.Agents[i] = withAgentUsage(a, s.live.AgentUsage(a.ID))
			}
			return out
		}, nil
	})
}

// readLive answers a GET as read does, for an answer that joins the
// replicated state with the master's live figures: fn reads the state and
// returns finish, which reads the live figures once the state's lock is
// released. The master holds its lock through an allocation cycle, and a
// Raft apply, which needs the state's lock, must not wait behind a list
// that waits for the master. Unless stale, the live figures follow the
// quota writes applied before the read (acknowledged before the master
// follows them), so a client sees its own writes there too.
func (s *Server) readLive(w http.ResponseWriter, r *http.Request, fn func(st *raftstore.State) (finish func() any, e *api.Error)) {
	s.answerRead(w, r, true, fn)
}

// answerRead is read (live false) or readLive (live true).
func (s *Server) answerRead(w http.ResponseWriter, r *http.Request, live bool, fn func(st *raftstore.State) (finish func() any, e *api.Error)) {
	var e *api.Error
	if flag(r, paramStale) {
		if e = s.staleReady(r.Context(), w); e != nil {
			s.writeError(w, e)
			return
		}
	} else if !s.confirmedLeader(w, r) {
		return
	}
	var (
		finish func() any
		index  uint64
	)
	s.fsm.Read(func(st *raftstore.State) {
		if e = stillValid(r.Context(), st); e != nil {
			return
		}
		finish, e = fn(st)
		index = st.Index()
	})
	if e != nil {
		s.writeError(w, e)
		return
	}
	if live && !flag(r, paramStale) {
		s.live.FollowedEarlyAcks()
	}
	s.writeJSON(w, http.StatusOK, index, finish())
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if e := validName("agent id or name", id); e != nil {
		s.writeError(w, e)
		return
	}
	s.readLive(w, r, func(st *raftstore.State) (func() any, *api.Error) {
		a, ok := st.Agent(id)
		if !ok {
			if a, ok = st.AgentByName(id); !ok {
				return nil, api.Errorf(api.CodeNotFound, "agent %s is not admitted", id)
			}
		}
		out := agentState(st, a)
		return func() any { return withAgentUsage(out, s.live.AgentUsage(a.ID)) }, nil
	})
}

// admitTestAgent admits an agent without a running agentd (-test-hooks only).
func (s *Server) admitTestAgent(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Hostname  string        `json:"hostname"`
		Resources api.Resources `json:"resources"`
	}
	if e := decodeBody(w, r, &req); e != nil {
		s.writeError(w, e)
		return
	}
	name := r.PathValue("name")
	s.commit(w, r, &raftstore.AgentAdmit{ID: "agent-" + name, Name: name, Hostname: req.Hostname, Resources: req.Resources})
}

// --- audit ---

// getAudit answers the entries after ?after (oldest first), at most ?limit
// of them: a page, and ?after=<the last index seen> the next one.
func (s *Server) getAudit(w http.ResponseWriter, r *http.Request) {
	after, limit := number(r, paramAfter), int(min(number(r, paramLimit), raftstore.MaxAuditEntries))
	s.read(w, r, func(st *raftstore.State) (any, *api.Error) {
		return api.AuditList{Entries: st.Audit(after, limit)}, nil
	})
}

// present turns a stored object into its API form.
func (s *Server) present(obj any) any {
	var out any = obj
	// The master's live figures are read after the state's lock is
	// released: they wait for a running allocation cycle, and Raft's
	// apply must not wait behind them.
	live := func() any { return out }
	s.fsm.Read(func(st *raftstore.State) {
		switch o := obj.(type) {
		case raftstore.RolePolicy:
			// A dry run or a delete shows the policy it is about, not the
			// one stored now.
			v := roleState(st, o.Role)
			v.Weight, v.LendingLimit, v.Version = o.Weight, o.LendingLimit, o.Version
			live = func() any { return withRoleUsage(v, s.live.RoleUsage(o.Role)) }
		case raftstore.AgentRecord:
			v := agentState(st, o)
			live = func() any { return withAgentUsage(v, s.live.AgentUsage(o.ID)) }
		case *raftstore.RateLimitConfigReplace:
			out = o.Config()
		case raftstore.ServerRecord:
			out = api.Server{ID: o.ID, RaftAddress: o.RaftAddress, APIAddress: o.APIAddress}
		}
	})
	return live()
}
