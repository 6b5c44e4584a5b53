package server

import (
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// samplePath fills a route's wildcards with a value.
func samplePath(pattern string) string {
	return strings.NewReplacer("{role...}", "eng", "{id}", "x", "{name}", "r", "{principal}", "p").Replace(pattern)
}

// TestEveryEndpointRefusesUnknownQueryParameters walks the route table: an
// unknown parameter is a 400 that names it, on every method of every path,
// before anything else happens.
func TestEveryEndpointRefusesUnknownQueryParameters(t *testing.T) {
	s := startDev(t)
	before := dump(t, s)
	for _, rt := range s.routeTable() {
		for method := range rt.methods {
			path := samplePath(rt.path)
			t.Run(method+" "+path, func(t *testing.T) {
				e := wantError(t, call(t, s, method, path+"?dryrun=true", `{}`), http.StatusBadRequest, api.CodeInvalidArgument, `"dryrun"`)
				if e.Details["parameter"] != "dryrun" {
					t.Errorf("details %v, want parameter dryrun", e.Details)
				}
			})
		}
	}
	if after := dump(t, s); after != before {
		t.Fatalf("refused requests changed the state:\nbefore %s\nafter  %s", before, after)
	}
}

func TestQueryParameters(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/ratelimits/spark", `{"qps":10}`)

	// The typo of the issue: it must not write.
	wantError(t, call(t, s, "PUT", "/v1/ratelimits/x?dryrun=true", `{"qps":1}`), 400, api.CodeInvalidArgument,
		`unknown query parameter "dryrun" on PUT /v1/ratelimits/x (it takes dry_run)`)
	wantError(t, call(t, s, "GET", "/v1/ratelimits/x", ``), 404, api.CodeNotFound, "")

	refused := map[string]struct{ method, path, word string }{
		"dry_run on a read":      {"GET", "/v1/quotas?dry_run=true", `(it takes stale)`},
		"stale on a write":       {"PUT", "/v1/ratelimits/x?stale=true", `"stale"`},
		"stale on live state":    {"GET", "/v1/tasks?stale=true", `(it takes state, role, agent)`},
		"anything on health":     {"GET", "/v1/health?verbose=1", `it takes no query parameters`},
		"given twice":            {"PUT", "/v1/ratelimits/x?dry_run=true&dry_run=false", "given 2 times"},
		"empty value":            {"PUT", "/v1/ratelimits/x?dry_run=", `want true or false, not ""`},
		"bare name":              {"PUT", "/v1/ratelimits/x?dry_run", `want true or false, not ""`},
		"1 for true":             {"PUT", "/v1/ratelimits/x?dry_run=1", `not "1"`},
		"upper case":             {"GET", "/v1/quotas?stale=TRUE", `not "TRUE"`},
		"malformed escape":       {"GET", "/v1/quotas?stale=%zz", "malformed"},
		"semicolon separator":    {"GET", "/v1/quotas?stale=true;x=1", "malformed"},
		"case of the name":       {"GET", "/v1/quotas?Stale=true", `"Stale"`},
		"long name is shortened": {"GET", "/v1/quotas?" + strings.Repeat("n", 100000) + "=1", "(100000 bytes)"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			a := call(t, s, tc.method, tc.path, `{"qps":1}`)
			wantError(t, a, 400, api.CodeInvalidArgument, tc.word)
			if len(a.body) > 2000 {
				t.Errorf("answer of %d bytes", len(a.body))
			}
		})
	}
	wantError(t, call(t, s, "GET", "/v1/ratelimits/x", ``), 404, api.CodeNotFound, "")

	for _, path := range []string{"/v1/quotas?stale=true", "/v1/quotas?stale=false", "/v1/ratelimits/spark?stale=true",
		"/v1/cluster?stale=true", "/v1/audit?after=0&limit=1&stale=true", "/v1/tasks?state=TASK_RUNNING"} {
		mustCall(t, s, "GET", path, "")
	}
	a := mustCall(t, s, "PUT", "/v1/ratelimits/x?dry_run=true", `{"qps":1}`)
	if !strings.Contains(string(a.body), `"dry_run":true`) {
		t.Fatalf("dry run answer: %s", a.body)
	}
	wantError(t, call(t, s, "GET", "/v1/ratelimits/x", ``), 404, api.CodeNotFound, "")
}

// TestRouteTableParameters: every parameter a route declares can be checked,
// and reads, writes and live views take what the README says.
func TestRouteTableParameters(t *testing.T) {
	s := startDev(t)
	for _, rt := range s.routeTable() {
		for method, ep := range rt.methods {
			var names []string
			for _, p := range ep.params {
				if p.check == nil {
					t.Errorf("%s %s: parameter %s has no check", method, rt.path, p.name)
				}
				names = append(names, p.name)
			}
			sort.Strings(names)
			switch {
			case method == "GET" && slices.Contains([]string{"/v1/health", "/v1/frameworks", "/v1/offers", "/metrics", api.SnapshotPath}, rt.path):
				if len(names) != 0 {
					t.Errorf("%s %s takes %v", method, rt.path, names)
				}
			case method == "GET" && rt.path == "/v1/tasks":
				if !slices.Equal(names, []string{"agent", "role", "state"}) {
					t.Errorf("%s %s takes %v", method, rt.path, names)
				}
			case method == "GET" && rt.path == "/v1/audit":
				if !slices.Equal(names, []string{"after", "limit", "stale"}) {
					t.Errorf("%s %s takes %v", method, rt.path, names)
				}
			case method == "GET":
				if !slices.Equal(names, []string{"stale"}) {
					t.Errorf("%s %s takes %v", method, rt.path, names)
				}
			case rt.path == api.SchedulerPath || rt.path == api.AgentProtocolPath || rt.path == api.ACLBootstrapPath:
				if len(names) != 0 {
					t.Errorf("%s %s takes %v", method, rt.path, names)
				}
			default:
				if !slices.Equal(names, []string{"dry_run"}) {
					t.Errorf("%s %s takes %v", method, rt.path, names)
				}
			}
		}
	}
}
