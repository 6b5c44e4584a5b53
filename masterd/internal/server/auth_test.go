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
	"github.com/allot/allot/masterd/internal/acl"
)

// TestACLsStayOnOnceBootstrapped: a server restarted without -acl in a
// bootstrapped cluster still enforces them (the replicated state says so).
func TestACLsStayOnOnceBootstrapped(t *testing.T) {
	dir := t.TempDir()
	raftAddr := freeAddr(t)
	start := func(aclOn bool) *Server {
		s, err := New(Config{ID: "m1", DataDir: dir, HTTPAddr: "127.0.0.1:0", RaftAddr: raftAddr, Bootstrap: true, ACL: aclOn,
			Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: io.Discard})})
		if err != nil {
			t.Fatal(err)
		}
		go s.Serve()
		for deadline := time.Now().Add(30 * time.Second); !s.node.Ready(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the server did not become leader")
			}
		}
		return s
	}
	stop := func(s *Server) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}

	s := start(false)
	if a := call(t, s, "GET", "/v1/quotas", ""); a.status != 200 {
		t.Fatalf("ACLs off, no operator token: %d %s", a.status, a.body)
	}
	var self api.ACLToken
	if a := call(t, s, "GET", api.ACLTokenSelfPath, ""); a.status != 200 || json.Unmarshal(a.body, &self) != nil || self.Principal != "anonymous" || !self.Management {
		t.Fatalf("token/self with ACLs off: %d %s, want anonymous, management", a.status, a.body)
	}
	wantError(t, call(t, s, "POST", api.ACLBootstrapPath, ""), 409, api.CodeConflict, "-acl")
	stop(s)

	s = start(true)
	a := call(t, s, "POST", api.ACLBootstrapPath, "")
	var boot api.ACLToken
	if a.status != 200 || json.Unmarshal(a.body, &boot) != nil || boot.Secret == "" {
		t.Fatalf("bootstrap: %d %s", a.status, a.body)
	}
	wantError(t, call(t, s, "GET", "/v1/quotas", ""), 401, api.CodeUnauthenticated, "")
	stop(s)

	s = start(false)
	defer stop(s)
	wantError(t, call(t, s, "GET", "/v1/quotas", ""), 401, api.CodeUnauthenticated, "")
	if a := call(t, s, "GET", "/v1/quotas", "", "Authorization", "Bearer "+boot.Secret); a.status != 200 {
		t.Fatalf("the bootstrap token after a restart without -acl: %d %s", a.status, a.body)
	}
}

// TestBootstrapIgnoresAForgedForwardHeader: X-Allot-Forwarded-By is a header
// any client can send, so it must not let a caller bootstrap ACLs on a
// server that runs without -acl (which would hand the caller a management
// token and lock every other caller out of the cluster).
func TestBootstrapIgnoresAForgedForwardHeader(t *testing.T) {
	s := startDev(t, func(c *Config) { c.OperatorToken = "op-secret" })
	wantError(t, call(t, s, "POST", api.ACLBootstrapPath, "", forwardedHeader, "m2"), 409, api.CodeConflict, "-acl")
	if a := call(t, s, "GET", "/v1/quotas", "", "Authorization", "Bearer op-secret"); a.status != 200 {
		t.Fatalf("the operator token after a refused bootstrap: %d %s", a.status, a.body)
	}
	if s.acl.load().on {
		t.Fatal("a refused bootstrap turned ACLs on")
	}
}

// TestTokenNeedsTheBearerScheme: a token sent without "Bearer " (raw, or
// under another scheme) is no bearer token, with ACLs off as before them
// and with ACLs on.
func TestTokenNeedsTheBearerScheme(t *testing.T) {
	for _, aclOn := range []bool{false, true} {
		s := startDev(t, func(c *Config) { c.OperatorToken = "op-secret"; c.ACL = aclOn })
		for _, header := range []string{"op-secret", "Basic op-secret"} {
			wantError(t, call(t, s, "GET", "/v1/quotas", "", "Authorization", header), 401, api.CodeUnauthenticated, "Bearer")
		}
		if a := call(t, s, "GET", "/v1/quotas", "", "Authorization", "Bearer op-secret"); a.status != 200 {
			t.Fatalf("acl %v, Bearer op-secret: %d %s", aclOn, a.status, a.body)
		}
	}
}

// TestCallsRefuseACallerLetInWhileACLsLookedOff: a server restarted without
// -acl serves anyone until it applies the cluster's bootstrap; a call let in
// just before must not be served from the state that says ACLs are on (a
// stale read and a write wait for this server to catch up, the scheduler
// and agent calls for it to lead). The handlers are called with the caller
// the middleware found while ACLs looked off.
func TestCallsRefuseACallerLetInWhileACLsLookedOff(t *testing.T) {
	s := startDev(t, func(c *Config) { c.ACL = true; c.OperatorToken = "op-secret" })
	if a := call(t, s, "POST", api.ACLBootstrapPath, ""); a.status != 200 {
		t.Fatalf("bootstrap: %d %s", a.status, a.body)
	}
	serve := func(id *acl.Identity, method, path, body string, h http.HandlerFunc) answer {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.SetPathValue("role", "eng")
		r = r.WithContext(withCaller(r.Context(), caller{id: id}))
		rec := httptest.NewRecorder()
		h(rec, r)
		return answer{status: rec.Code, body: rec.Body.Bytes(), header: rec.Header()}
	}
	subscribe := `{"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "f", "principal": "p", "roles": ["eng"]}}}`
	register := `{"type": "REGISTER", "register": {"agent_info": {"name": "n", "hostname": "h", "resources": {"cpus": 1}}}}`
	for name, c := range map[string]struct {
		method, path, body string
		h                  http.HandlerFunc
	}{
		"stale read":     {"GET", "/v1/quotas?stale=true", "", s.listQuotas},
		"stale cluster":  {"GET", "/v1/cluster?stale=true", "", s.getCluster},
		"write":          {"PUT", "/v1/quotas/eng", `{"limits": {"cpus": 1}}`, s.putQuota},
		"scheduler call": {"POST", api.SchedulerPath, subscribe, s.schedulerCall},
		"agent call":     {"POST", api.AgentProtocolPath, register, s.agentCall},
	} {
		wantError(t, serve(anonymousIdentity, c.method, c.path, c.body, c.h), 401, api.CodeUnauthenticated, "ACLs are on")
		if name == "stale read" || name == "write" {
			// The operator token stays a management token with ACLs on.
			if a := serve(operatorIdentity, c.method, c.path, c.body, c.h); a.status != 200 {
				t.Errorf("%s by the operator let in while ACLs looked off: %d %s", name, a.status, a.body)
			}
		}
	}
	if a := call(t, s, "GET", "/v1/frameworks", "", "Authorization", "Bearer op-secret"); a.status != 200 || strings.Contains(string(a.body), `"f"`) {
		t.Errorf("frameworks after the refused SUBSCRIBE: %d %s", a.status, a.body)
	}
}
