package server

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/tools/freeaddr"
)

// TestStaleReadOfARestartedFollower: a follower that restarts rebuilds its
// state from the leader; until it has, its state lacks objects that exist.
// A stale read there says so (503 no_leader, and the freshness headers)
// instead of answering not_found, and answers again once it caught up.
func TestStaleReadOfARestartedFollower(t *testing.T) {
	dir := t.TempDir()
	cfgs := make([]Config, 3)
	for i := range cfgs {
		id := "m" + strconv.Itoa(i+1)
		cfgs[i] = Config{ID: id, DataDir: filepath.Join(dir, id), HTTPAddr: freeAddr(t), RaftAddr: freeAddr(t),
			Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Error, Output: io.Discard})}
	}
	cfgs[0].Bootstrap = true
	m1 := startServer(t, cfgs[0])
	waitFor(t, "m1 to lead", func() bool { return m1.node.Ready() })
	cfgs[1].Join, cfgs[2].Join = []string{m1.APIAddress()}, []string{m1.APIAddress()}
	m2, m3 := startServer(t, cfgs[1]), startServer(t, cfgs[2])
	mustCall(t, m1, "PUT", "/v1/quotas/eng", `{"limits":{"cpus":4}}`)
	waitFor(t, "m3 to apply the quota", func() bool {
		return call(t, m3, "GET", "/v1/quotas/eng?stale=true", "").status == http.StatusOK
	})
	for _, s := range []*Server{m1, m2, m3} {
		stopServer(t, s)
	}

	// m3 alone: its log holds the quota, but no leader tells it that the
	// log is committed, so its state is empty.
	m3 = startServer(t, cfgs[2])
	a := call(t, m3, "GET", "/v1/quotas/eng?stale=true", "")
	e := wantError(t, a, http.StatusServiceUnavailable, api.CodeNoLeader, "has not heard from a leader since it started")
	applied, known := headerIndex(t, a, api.HeaderAppliedIndex), headerIndex(t, a, api.HeaderKnownIndex)
	if applied >= known || a.header.Get(api.HeaderKnownLeader) != "false" || a.header.Get(api.HeaderLastContact) != "-1" {
		t.Fatalf("headers %v, want applied < known, no known leader, last contact -1", a.header)
	}
	if e.Details["known_leader"] != false {
		t.Errorf("details %v", e.Details)
	}
	a = mustCall(t, m3, "GET", "/v1/cluster", "")
	if a.header.Get(api.HeaderKnownLeader) != "false" || headerIndex(t, a, api.HeaderAppliedIndex) >= headerIndex(t, a, api.HeaderKnownIndex) {
		t.Fatalf("GET /v1/cluster headers %v", a.header)
	}

	// With m1 back, a leader is elected and m3 catches up.
	m1 = startServer(t, cfgs[0])
	waitFor(t, "m3 to catch up", func() bool {
		a = call(t, m3, "GET", "/v1/quotas/eng?stale=true", "")
		return a.status == http.StatusOK
	})
	var q api.Quota
	decode(t, a.body, &q)
	if q.Limits["cpus"] != 4 || a.header.Get(api.HeaderKnownLeader) != "true" ||
		headerIndex(t, a, api.HeaderAppliedIndex) < headerIndex(t, a, api.HeaderKnownIndex) {
		t.Fatalf("caught up: %s %v", a.body, a.header)
	}
	if ms, err := strconv.Atoi(a.header.Get(api.HeaderLastContact)); err != nil || ms < 0 {
		t.Fatalf("%s: %q", api.HeaderLastContact, a.header.Get(api.HeaderLastContact))
	}

	// A follower's GET /v1/cluster has the leader's live allocation (none
	// yet: {}); with ?stale=true it has none to show (null).
	follower := m3
	if m3.node.IsLeader() {
		follower = m1
	}
	var c api.Cluster
	waitFor(t, "the follower to know the leader's API address", func() bool {
		decode(t, mustCall(t, follower, "GET", "/v1/cluster", "").body, &c)
		return c.Leader != nil && c.Leader.APIAddress != "" && c.Allocated != nil
	})
	decode(t, mustCall(t, follower, "GET", "/v1/cluster?stale=true", "").body, &c)
	if c.Allocated != nil {
		t.Fatalf("stale GET /v1/cluster on a follower: allocated %v, want null", c.Allocated)
	}
}

func headerIndex(t testing.TB, a answer, name string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(a.header.Get(name), 10, 64)
	if err != nil {
		t.Fatalf("header %s: %q", name, a.header.Get(name))
	}
	return n
}

func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { stopServer(t, s) })
	return s
}

func stopServer(t testing.TB, s *Server) {
	select {
	case <-s.stop:
		return // already stopped
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Shutdown(ctx)
}

// waitFor polls cond until it holds; the bound only turns a hang into a
// failure.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	addr, err := freeaddr.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
