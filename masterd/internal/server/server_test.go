package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// startDev runs an in-process masterd -dev on a free loopback port.
func startDev(t testing.TB, mutate ...func(*Config)) *Server {
	t.Helper()
	cfg := Config{Dev: true, HTTPAddr: "127.0.0.1:0", TestHooks: true,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	// Ready, and its own record written (registerSelf runs after the
	// leadership barrier): tests of membership calls need it.
	registered := func() (ok bool) {
		s.fsm.Read(func(st *raftstore.State) { _, ok = st.Server(s.cfg.ID) })
		return ok
	}
	for deadline := time.Now().Add(10 * time.Second); !s.node.Ready() || !registered(); {
		if time.Now().After(deadline) {
			t.Fatal("the dev server did not become leader")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

type answer struct {
	status int
	body   []byte
	header http.Header
}

func call(t testing.TB, s *Server, method, path, body string, headers ...string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	s.http.Handler.ServeHTTP(rec, req)
	return answer{status: rec.Code, body: rec.Body.Bytes(), header: rec.Header()}
}

func mustCall(t testing.TB, s *Server, method, path, body string) answer {
	t.Helper()
	a := call(t, s, method, path, body)
	if a.status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, a.status, a.body)
	}
	return a
}

// dump reads everything the operator API shows, to prove a refused request
// changed nothing.
func dump(t testing.TB, s *Server) string {
	t.Helper()
	var b strings.Builder
	for _, p := range []string{"/v1/quotas", "/v1/roles", "/v1/reservations", "/v1/ratelimits", "/v1/agents", "/v1/frameworks", "/v1/tasks", "/v1/offers"} {
		b.Write(mustCall(t, s, "GET", p, "").body)
	}
	b.WriteString(call(t, s, "GET", "/v1/ratelimits-default", "").header.Get(api.HeaderIndex))
	return b.String()
}

func TestHostileRequestsAreRefusedAndChangeNothing(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`)
	mustCall(t, s, "PUT", "/v1/quotas/eng", `{"guarantees":{"cpus":2},"limits":{"cpus":4,"mem":2048}}`)
	mustCall(t, s, "PUT", "/v1/reservations/db-1", `{"agent":"node-1","role":"db","resources":{"cpus":1}}`)
	mustCall(t, s, "PUT", "/v1/ratelimits/spark", `{"qps":10}`)
	before := dump(t, s)

	big := `{"limits":{"cpus":1},"pad":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := map[string]struct {
		method, path, body string
		headers            []string
		status             int
		code               string
	}{
		"negative guarantee":              {"PUT", "/v1/quotas/x", `{"guarantees":{"cpus":-1}}`, nil, 400, "invalid_argument"},
		"negative limit":                  {"PUT", "/v1/quotas/x", `{"limits":{"mem":-0.5}}`, nil, 400, "invalid_argument"},
		"NaN as string":                   {"PUT", "/v1/quotas/x", `{"limits":{"cpus":"NaN"}}`, nil, 400, "invalid_argument"},
		"Infinity in quota":               {"PUT", "/v1/quotas/x", `{"limits":{"cpus":"Infinity"}}`, nil, 400, "invalid_argument"},
		"1e400":                           {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1e400}}`, nil, 400, "invalid_argument"},
		"huge but finite":                 {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1e300}}`, nil, 400, "invalid_argument"},
		"unknown field":                   {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1},"limit":{}}`, nil, 400, "invalid_argument"},
		"trailing garbage":                {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1}} garbage`, nil, 400, "invalid_argument"},
		"second object":                   {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1}}{}`, nil, 400, "invalid_argument"},
		"2 MiB body":                      {"PUT", "/v1/quotas/x", big, nil, 413, "payload_too_large"},
		"empty body":                      {"PUT", "/v1/quotas/x", ``, nil, 400, "invalid_argument"},
		"truncated body":                  {"PUT", "/v1/quotas/x", `{"limits":{"cpus":1`, nil, 400, "invalid_argument"},
		"not json":                        {"PUT", "/v1/quotas/x", `limits=cpus:1`, nil, 400, "invalid_argument"},
		"array body":                      {"PUT", "/v1/quotas/x", `[1,2]`, nil, 400, "invalid_argument"},
		"wrong type for limits":           {"PUT", "/v1/quotas/x", `{"limits":[1]}`, nil, 400, "invalid_argument"},
		"wrong type for value":            {"PUT", "/v1/quotas/x", `{"limits":{"cpus":true}}`, nil, 400, "invalid_argument"},
		"wrong type for force":            {"PUT", "/v1/quotas/x", `{"force":"yes"}`, nil, 400, "invalid_argument"},
		"bad resource name":               {"PUT", "/v1/quotas/x", `{"limits":{"CPUs":1}}`, nil, 400, "invalid_argument"},
		"bad role name":                   {"PUT", "/v1/quotas/-bad", `{"limits":{"cpus":1}}`, nil, 400, "invalid_argument"},
		"role with empty segment":         {"PUT", "/v1/quotas/eng//ml", `{"limits":{"cpus":1}}`, nil, 400, "invalid_argument"},
		"role with dotdot":                {"PUT", "/v1/quotas/eng/../x", `{"limits":{"cpus":1}}`, nil, 400, "invalid_argument"},
		"star role":                       {"PUT", "/v1/quotas/*", `{"limits":{"cpus":1}}`, nil, 400, "invalid_argument"},
		"guarantee above limit":           {"PUT", "/v1/quotas/x", `{"guarantees":{"cpus":3},"limits":{"cpus":2}}`, nil, 400, "invalid_argument"},
		"child limit above parent":        {"PUT", "/v1/quotas/eng/ml", `{"limits":{"cpus":5}}`, nil, 400, "invalid_argument"},
		"children above parent guarantee": {"PUT", "/v1/quotas/eng/ml", `{"guarantees":{"cpus":3},"limits":{"cpus":4}}`, nil, 400, "invalid_argument"},
		"guarantee above capacity":        {"PUT", "/v1/quotas/big", `{"guarantees":{"cpus":100}}`, nil, 409, "capacity_exceeded"},
		"bad If-Match":                    {"PUT", "/v1/quotas/eng", `{"limits":{"cpus":4}}`, []string{"If-Match", "abc"}, 400, "invalid_argument"},
		"stale If-Match":                  {"PUT", "/v1/quotas/eng", `{"limits":{"cpus":4}}`, []string{"If-Match", "1"}, 412, "precondition_failed"},
		"If-None-Match on existing":       {"PUT", "/v1/quotas/eng", `{"limits":{"cpus":4}}`, []string{"If-None-Match", "*"}, 412, "precondition_failed"},
		"bad dry_run":                     {"PUT", "/v1/quotas/eng?dry_run=maybe", `{"limits":{"cpus":4}}`, nil, 400, "invalid_argument"},
		"zero weight":                     {"PUT", "/v1/roles/eng", `{"weight":0}`, nil, 400, "invalid_argument"},
		"negative weight":                 {"PUT", "/v1/roles/eng", `{"weight":-2}`, nil, 400, "invalid_argument"},
		"weight as string":                {"PUT", "/v1/roles/eng", `{"weight":"2"}`, nil, 400, "invalid_argument"},
		"reservation unknown agent":       {"PUT", "/v1/reservations/r", `{"agent":"node-9","role":"db","resources":{"cpus":1}}`, nil, 409, "conflict"},
		"reservation too big":             {"PUT", "/v1/reservations/r", `{"agent":"node-1","role":"db","resources":{"cpus":8}}`, nil, 409, "capacity_exceeded"},
		"reservation of nothing":          {"PUT", "/v1/reservations/r", `{"agent":"node-1","role":"db","resources":{}}`, nil, 400, "invalid_argument"},
		"reservation star role":           {"PUT", "/v1/reservations/r", `{"agent":"node-1","role":"*","resources":{"cpus":1}}`, nil, 400, "invalid_argument"},
		"reservation bad name":            {"PUT", "/v1/reservations/r%20x", `{"agent":"node-1","role":"db","resources":{"cpus":1}}`, nil, 400, "invalid_argument"},
		"qps zero":                        {"PUT", "/v1/ratelimits/spark", `{"qps":0}`, nil, 400, "invalid_argument"},
		"qps negative":                    {"PUT", "/v1/ratelimits/spark", `{"qps":-1}`, nil, 400, "invalid_argument"},
		"burst zero":                      {"PUT", "/v1/ratelimits/spark", `{"qps":1,"burst":0}`, nil, 400, "invalid_argument"},
		"capacity negative":               {"PUT", "/v1/ratelimits/spark", `{"qps":1,"capacity":-1}`, nil, 400, "invalid_argument"},
		"burst fractional":                {"PUT", "/v1/ratelimits/spark", `{"qps":1,"burst":1.5}`, nil, 400, "invalid_argument"},
		"config duplicate principal":      {"PUT", "/v1/ratelimits", `{"limits":[{"principal":"a","qps":1},{"principal":"a","qps":2}]}`, nil, 400, "invalid_argument"},
		"config bad principal":            {"PUT", "/v1/ratelimits", `{"limits":[{"principal":"","qps":1}]}`, nil, 400, "invalid_argument"},
		"default qps NaN":                 {"PUT", "/v1/ratelimits-default", `{"qps":"NaN"}`, nil, 400, "invalid_argument"},
		"delete missing quota":            {"DELETE", "/v1/quotas/nobody", ``, nil, 404, "not_found"},
		"delete missing reservation":      {"DELETE", "/v1/reservations/none", ``, nil, 404, "not_found"},
		"get missing quota":               {"GET", "/v1/quotas/nobody", ``, nil, 404, "not_found"},
		"unknown endpoint":                {"GET", "/v1/nothing", ``, nil, 404, "not_found"},
		"wrong method":                    {"POST", "/v1/quotas/eng", `{}`, nil, 405, "invalid_argument"},
		"bad audit index":                 {"GET", "/v1/audit?after=-1", ``, nil, 400, "invalid_argument"},
		"bad server join":                 {"POST", "/v1/cluster/servers", `{"id":"m9","raft_address":"nowhere","api_address":"x"}`, nil, 400, "invalid_argument"},
		"subscribe unknown field":         {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":["*"],"bogus":1}}}`, nil, 400, "invalid_argument"},
		"subscribe without body":          {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE"}`, nil, 400, "invalid_argument"},
		"subscribe without roles":         {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":[]}}}`, nil, 400, "invalid_argument"},
		"subscribe bad role":              {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":["-x"]}}}`, nil, 400, "invalid_argument"},
		"subscribe without name":          {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"roles":["*"]}}}`, nil, 400, "invalid_argument"},
		"subscribe unknown capability":    {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":["*"],"capabilities":["TELEPORT"]}}}`, nil, 400, "invalid_argument"},
		"subscribe negative failover":     {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":["*"],"failover_timeout_seconds":-1}}}`, nil, 400, "invalid_argument"},
		"subscribe unknown framework":     {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"id":"fw-none","name":"x","roles":["*"]}}}`, nil, 404, "not_found"},
		"subscribe with a stream id":      {"POST", "/v1/scheduler", `{"type":"SUBSCRIBE","subscribe":{"framework_info":{"name":"x","roles":["*"]}}}`, []string{api.HeaderStreamID, "s"}, 400, "invalid_argument"},
		"call without framework id":       {"POST", "/v1/scheduler", `{"type":"REVIVE"}`, []string{api.HeaderStreamID, "s"}, 400, "invalid_argument"},
		"call without stream id":          {"POST", "/v1/scheduler", `{"framework_id":"fw-none","type":"REVIVE"}`, nil, 400, "invalid_argument"},
		"call of unknown framework":       {"POST", "/v1/scheduler", `{"framework_id":"fw-none","type":"REVIVE"}`, []string{api.HeaderStreamID, "s"}, 404, "not_found"},
		"scheduler empty body":            {"POST", "/v1/scheduler", ``, nil, 400, "invalid_argument"},
		"scheduler GET":                   {"GET", "/v1/scheduler", ``, nil, 405, "invalid_argument"},
		"register without body":           {"POST", "/v1/agent", `{"type":"REGISTER"}`, nil, 400, "invalid_argument"},
		"register bad name":               {"POST", "/v1/agent", `{"type":"REGISTER","register":{"agent_info":{"name":"a b","resources":{"cpus":1}}}}`, nil, 400, "invalid_argument"},
		"register negative resources":     {"POST", "/v1/agent", `{"type":"REGISTER","register":{"agent_info":{"name":"n2","resources":{"cpus":-1}}}}`, nil, 400, "invalid_argument"},
		"register unknown capability":     {"POST", "/v1/agent", `{"type":"REGISTER","register":{"agent_info":{"name":"n2","resources":{"cpus":1},"capabilities":["X"]}}}`, nil, 400, "invalid_argument"},
		"register task without id":        {"POST", "/v1/agent", `{"type":"REGISTER","register":{"agent_info":{"name":"n2","resources":{"cpus":1}},"tasks":[{"framework_id":"f","role":"*","task":{}}]}}`, nil, 400, "invalid_argument"},
		"agent call of unknown agent":     {"POST", "/v1/agent", `{"agent_id":"agent-none","type":"HEARTBEAT"}`, []string{api.HeaderStreamID, "s"}, 404, "not_found"},
		"agent call unknown field":        {"POST", "/v1/agent", `{"agent_id":"a","type":"HEARTBEAT","beat":1}`, nil, 400, "invalid_argument"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := call(t, s, tc.method, tc.path, tc.body, tc.headers...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			var body api.ErrorBody
			if err := json.Unmarshal(a.body, &body); err != nil || body.Error == nil {
				t.Fatalf("answer is not an error body: %s", a.body)
			}
			if body.Error.Code != tc.code || body.Error.Message == "" {
				t.Fatalf("error %+v, want code %s", body.Error, tc.code)
			}
			if a.header.Get(api.HeaderIndex) == "" {
				t.Fatalf("no %s header", api.HeaderIndex)
			}
		})
	}
	if after := dump(t, s); after != before {
		t.Fatalf("refused requests changed the state:\nbefore %s\nafter  %s", before, after)
	}
}
