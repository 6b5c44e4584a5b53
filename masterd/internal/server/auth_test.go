package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
)

// TestACLsStayOnOnceBootstrapped: a server restarted without -acl in a
// bootstrapped cluster still enforces them (the replicated state says so).
func TestACLsStayOnOnceBootstrapped(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := l.Addr().String()
	l.Close()
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
