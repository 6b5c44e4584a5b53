package server

import (
	"net/http"
	"sort"
)

// Endpoint is one method of one path the API serves, as the route table
// declares it: the path in http.ServeMux syntax ({role...} takes the rest of
// the path) and the query parameters the method accepts.
type Endpoint struct {
	Method string
	Path   string
	Query  []string
	// Auth is who may call it when ACLs are on: AuthPublic, AuthToken or
	// AuthCapability.
	Auth string
	// Object and Access are what AuthCapability needs (api.ACLObject*,
	// api.ACLRead/Write/Register). For a role-scoped object the role is the
	// path's {role...}, unless RoleInHandler: then the route needs the
	// access for some role, and the handler checks the roles it acts on
	// (a list keeps those the caller may read; a reservation's stored and
	// new role; a framework's roles).
	Object, Access string
	RoleInHandler  bool
}

// What an Endpoint's Auth says.
const (
	AuthPublic     = "public"     // no token needed
	AuthToken      = "token"      // any valid token
	AuthCapability = "capability" // Object and Access
)

// Endpoints lists every endpoint of the route table, sorted by path and
// method; testHooks adds those served only with -test-hooks. It exists so
// that the API reference (docs/api/openapi.yaml) can be checked against the
// table that serves the requests, in both directions.
func Endpoints(testHooks bool) []Endpoint {
	// The table is built from a server's handlers; listing it calls none of
	// them, so a Server with no store behind it is enough.
	s := &Server{cfg: Config{TestHooks: testHooks}, metrics: &metrics{handler: http.NotFoundHandler()}}
	var out []Endpoint
	for _, rt := range s.routeTable() {
		for method, ep := range rt.methods {
			e := Endpoint{Method: method, Path: rt.path, Query: []string{},
				Object: ep.auth.object, Access: ep.auth.access, RoleInHandler: ep.auth.inHandler}
			switch ep.auth.kind {
			case authPublic:
				e.Auth = AuthPublic
			case authToken:
				e.Auth = AuthToken
			case authCapability:
				e.Auth = AuthCapability
			}
			for _, p := range ep.params {
				e.Query = append(e.Query, p.name)
			}
			sort.Strings(e.Query)
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}
