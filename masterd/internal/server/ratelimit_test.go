package server

import (
	"encoding/json"
	"time"

	"github.com/allot/allot/masterd/api"
	"strconv"
	"strings"
	"testing"
)

func TestOperatorCallsAreRateLimitedByPrincipal(t *testing.T) {
	s := startDev(t)
	// Capacity 0: a call with no token left is refused at once, so the test
	// needs no clock.
	mustCall(t, s, "PUT", "/v1/ratelimits/anonymous", `{"qps": 0.001, "burst": 1, "capacity": 0}`)
	first := call(t, s, "GET", "/v1/quotas", "")
	if first.status != 200 {
		t.Fatalf("first call: %d %s", first.status, first.body)
	}
	second := call(t, s, "GET", "/v1/quotas", "")
	if second.status != 429 || !strings.Contains(string(second.body), `"rate_limited"`) {
		t.Fatalf("second call: %d %s, want 429 rate_limited", second.status, second.body)
	}
	if ra, err := strconv.Atoi(second.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q, want whole seconds ≥ 1", second.header.Get("Retry-After"))
	}
	metrics := string(call(t, s, "GET", "/metrics", "").body)
	for _, want := range []string{
		`allot_ratelimit_rejected_total{label="",principal="anonymous"} 1`,
		`allot_framework_messages_received_total{label="",principal="anonymous"}`,
		`allot_framework_messages_processed_total{label="",principal="anonymous"}`,
		`allot_ratelimit_queue_depth{label="",principal="anonymous"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// /metrics is never throttled, so the limit can always be read; lifting
	// the limit needs a token, which the refill of qps 0.001 will not give
	// soon: the limit really holds.
	if a := call(t, s, "DELETE", "/v1/ratelimits/anonymous", ""); a.status != 429 {
		t.Fatalf("delete while throttled: %d %s, want 429", a.status, a.body)
	}
}

func TestRateLimitsFileSeedsANewCluster(t *testing.T) {
	qps, burst := 55.5, 10
	s := startDev(t, func(c *Config) {
		c.RateLimits = &api.RateLimitConfig{Limits: []api.RateLimitConfigLimit{{Principal: "spark", QPS: &qps, Burst: &burst}}}
	})
	var limit api.RateLimit
	eventuallyOK(t, func() bool {
		a := call(t, s, "GET", "/v1/ratelimits/spark", "")
		return a.status == 200 && json.Unmarshal(a.body, &limit) == nil
	})
	if limit.QPS == nil || *limit.QPS != qps || limit.Burst != burst || limit.Capacity != api.DefaultRateLimitCapacity {
		t.Fatalf("seeded limit %+v, want qps 55.5, burst 10, capacity %d", limit, api.DefaultRateLimitCapacity)
	}
}

func eventuallyOK(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

// The internal forwarding header does not let a caller skip its limit.
func TestForwardingHeaderDoesNotBypassRateLimit(t *testing.T) {
	s := startDev(t)
	mustCall(t, s, "PUT", "/v1/ratelimits/anonymous", `{"qps": 0.001, "burst": 1, "capacity": 0}`)
	call(t, s, "GET", "/v1/quotas", "")
	if a := call(t, s, "GET", "/v1/quotas", "", forwardedHeader, "m9"); a.status != 429 {
		t.Fatalf("call with %s: %d %s, want 429", forwardedHeader, a.status, a.body)
	}
}

// A dry run or a refused precondition never changes the Raft configuration.
func TestMembershipDryRunChangesNothing(t *testing.T) {
	s := startDev(t)
	body := `{"id":"m2","raft_address":"127.0.0.1:1","api_address":"http://127.0.0.1:2"}`
	for _, c := range []struct{ path, header string }{
		{"/v1/cluster/servers?dry_run=true", ""}, {"/v1/cluster/servers?dry_run=maybe", ""}, {"/v1/cluster/servers", "If-Match"},
	} {
		var headers []string
		if c.header != "" {
			headers = []string{c.header, "1"}
		}
		call(t, s, "POST", c.path, body, headers...)
		servers, err := s.node.Servers()
		if err != nil || len(servers) != 1 {
			t.Fatalf("POST %s %s: servers %v %v, want only the dev server", c.path, c.header, servers, err)
		}
	}
	// The only voter cannot go: the dry run answers the very refusal.
	for _, path := range []string{"/v1/cluster/servers/dev?dry_run=true", "/v1/cluster/servers/dev"} {
		wantError(t, call(t, s, "DELETE", path, ""), 409, api.CodeConflict, "only voter")
	}
	if servers, _ := s.node.Servers(); len(servers) != 1 || !s.node.IsLeader() {
		t.Fatalf("dry run removed the leader: %v", servers)
	}
}
