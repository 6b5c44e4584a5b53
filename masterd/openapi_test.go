package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/server"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
	"github.com/allot/allot/tools/freeaddr"
)

// docs/api/openapi.yaml is the reference of masterd's HTTP API. This test
// holds it to the server: the document is valid OpenAPI; it lists exactly the
// endpoints of the server's route table, with the same query parameters; and
// a real masterd, driven through every endpoint with good and bad requests,
// gives only answers the document describes (status, headers, body, every
// line of a stream), while the document accepts the requests the server
// takes and refuses the ones it refuses.

const openAPIToken = "openapi-operator-token"

func TestOpenAPIDocumentListsTheServersEndpoints(t *testing.T) {
	doc := loadAPIDocument(t)
	ops := documentedOperations(t, doc)

	type endpoint struct{ method, path, query string }
	documented := map[endpoint]docOperation{}
	testHooks := map[endpoint]bool{}
	for _, op := range ops {
		e := endpoint{op.method, op.pattern, strings.Join(op.query, ",")}
		documented[e] = op
		testHooks[endpoint{op.method, op.pattern, ""}] = op.testHook
	}
	served := map[endpoint]bool{}
	for _, e := range server.Endpoints(true) {
		served[endpoint{e.Method, e.Path, strings.Join(e.Query, ",")}] = true
	}
	withoutHooks := map[endpoint]bool{}
	for _, e := range server.Endpoints(false) {
		withoutHooks[endpoint{e.Method, e.Path, ""}] = true
	}

	for e := range served {
		if _, ok := documented[e]; !ok {
			t.Errorf("the server serves %s %s (query parameters: %q), the document does not describe it so", e.method, e.path, e.query)
		}
	}
	for e, op := range documented {
		if !served[e] {
			t.Errorf("the document describes %s (as %s %s, query parameters %q), the server does not serve it so", op.id(), e.method, e.path, e.query)
		}
		onlyWithHooks := !withoutHooks[endpoint{e.method, e.path, ""}]
		if documentedHook := testHooks[endpoint{e.method, e.path, ""}]; onlyWithHooks != documentedHook {
			t.Errorf("%s: served only with -test-hooks: %v; the document's %s: %v", op.id(), onlyWithHooks, testHooksExtension, documentedHook)
		}
	}
	if len(ops) == 0 {
		t.Fatal("the document describes no operation")
	}
}

func TestOpenAPIDocumentMatchesServer(t *testing.T) {
	doc := loadAPIDocument(t)
	ops := documentedOperations(t, doc)

	// Generous bounds: they end a hung test, they assert nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testcluster.Start(t, 1, testcluster.WithOperatorToken(openAPIToken),
		testcluster.WithArgs("-test-hooks", "-allocation-interval", "50ms", "-heartbeat-interval", "1s"))
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := newAPIHarness(t, ctx, doc, ops, c.Address(leader), openAPIToken)

	t.Run("operator", func(t *testing.T) { driveOperatorAPI(t, h.with(t), c, leader) })
	t.Run("scheduler and agent protocol", func(t *testing.T) { driveSchedulerAndAgents(t, h.with(t)) })
	t.Run("answers outside operations", func(t *testing.T) { driveUnrouted(t, h.with(t)) })
	t.Run("acl", func(t *testing.T) { driveACL(t, h.with(t)) })
	t.Run("snapshot", func(t *testing.T) { driveSnapshot(t, h.with(t)) })
	// Last: the limit it sets stays until the server stops.
	t.Run("rate limited", func(t *testing.T) { driveRateLimited(t, h.with(t)) })

	// Every operation was driven to at least one success.
	for _, op := range ops {
		statuses := h.answered.statuses[op.id()]
		var got []int
		success := false
		for s := range statuses {
			got = append(got, s)
			success = success || (s >= 200 && s < 300)
		}
		sort.Ints(got)
		if !success {
			t.Errorf("%s was never answered with success (answers: %v)", op.id(), got)
		}
		t.Logf("%-40s %v", op.id(), got)
	}
}

func driveOperatorAPI(t *testing.T, h *apiHarness, c *testcluster.Cluster, leader int) {
	// Health, authentication, the cluster.
	h.do(exchange{method: "GET", path: "/v1/health", noToken: true, want: 200})
	h.do(exchange{method: "GET", path: "/v1/health?verbose=true", noToken: true, want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/quotas", noToken: true, want: 401, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/quotas", token: "not-the-token", want: 401, request: docInWords})
	h.do(exchange{method: "GET", path: "/v1/cluster", want: 200})
	h.do(exchange{method: "GET", path: "/v1/cluster?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/cluster?stale=yes", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/cluster?stale=true&stale=false", want: 400, request: docInvalid})

	// Membership: the member itself again is idempotent (when it says its
	// store version); another address under its id, or an older store
	// version than the cluster's, is a conflict.
	self := fmt.Sprintf(`{"id": %q, "raft_address": %q, "api_address": %q}`, c.ID(leader), c.RaftAddress(leader), c.Address(leader))
	version := map[string]string{"X-Allot-Store-Version": strconv.FormatUint(uint64(raftstore.StoreVersion), 10)}
	h.do(exchange{method: "POST", path: "/v1/cluster/servers", body: self, header: version, want: 200})
	h.do(exchange{method: "POST", path: "/v1/cluster/servers?dry_run=true", body: self, header: version, want: 200})
	h.do(exchange{method: "POST", path: "/v1/cluster/servers", body: self, header: map[string]string{"X-Allot-Store-Version": "0"},
		want: 400, request: docInvalid})
	h.do(exchange{method: "POST", path: "/v1/cluster/servers", header: version, want: 409,
		body: fmt.Sprintf(`{"id": %q, "raft_address": "127.0.0.1:1", "api_address": "http://127.0.0.1:1"}`, c.ID(leader))})
	h.do(exchange{method: "POST", path: "/v1/cluster/servers", body: `{"id": "m9"}`, header: version, want: 400, request: docInvalid})
	h.do(exchange{method: "POST", path: "/v1/cluster/servers", body: self, header: map[string]string{"If-Match": "1",
		"X-Allot-Store-Version": version["X-Allot-Store-Version"]}, want: 400, request: docInWords})
	h.do(exchange{method: "DELETE", path: "/v1/cluster/servers/m9", want: 404})
	// The only voter cannot go, dry run or not; a member of a 3-server
	// cluster can.
	h.do(exchange{method: "DELETE", path: "/v1/cluster/servers/" + c.ID(leader) + "?dry_run=true", want: 409})
	three := testcluster.Start(t, 3, testcluster.WithOperatorToken(openAPIToken))
	if _, err := three.WaitLeader(h.ctx); err != nil {
		t.Fatal(err)
	}
	h3 := h.with(t)
	h3.base = three.Address(three.Leader())
	h3.do(exchange{method: "DELETE", path: "/v1/cluster/servers/" + three.ID(three.Followers()[0]) + "?dry_run=true", want: 200})
	three.Stop()

	// An agent to hold reservations and guarantees, without agentd.
	node := `{"hostname": "node-1.example", "resources": {"cpus": 4, "mem": 8192, "disk": 10000}}`
	h.do(exchange{method: "PUT", path: "/v1/test/agents/node-1?dry_run=true", body: node, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/test/agents/node-1", body: node, want: 200})

	// Quotas: versions, dry runs, capacity, the strict JSON rules.
	q := h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}}`, want: 200})
	quotaVersion := versionOf(t, q)
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}}`, header: map[string]string{"If-None-Match": "*"}, want: 412})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}}`, header: map[string]string{"If-Match": "999999"}, want: 412})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}}`, header: map[string]string{"If-Match": "soon"}, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"guarantees": {"cpus": 1}, "limits": {"cpus": 8}}`,
		header: map[string]string{"If-Match": `"` + quotaVersion + `"`}, want: 200})
	short := h.do(exchange{method: "PUT", path: "/v1/quotas/eng?dry_run=true", body: `{"guarantees": {"cpus": 100}}`, want: 409})
	if code := errorCode(t, short); code != api.CodeCapacityExceeded {
		t.Errorf("a guarantee beyond the agents' total: code %s, want %s", code, api.CodeCapacityExceeded)
	}
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng?dry_run=true", body: `{"guarantees": {"cpus": 100}, "force": true}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml?dry_run=true", body: `{"limits": {"cpus": 2, "mem": 1024.5}}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"Limits": {"cpus": 8}}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}, "burst": 1}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": -1}}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"force": null}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}} {}`, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}, "limits": {"cpus": 9}}`, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"guarantees": {"cpus": 4}, "limits": {"cpus": 2}}`, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 0.0001}}`, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/quotas/-eng", body: `{}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/*", body: `{}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/quotas/eng/ml", body: bigBody(1 << 20), chunked: true, want: 413, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/quotas", want: 200})
	h.do(exchange{method: "GET", path: "/v1/quotas?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/quotas?dryrun=true", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/quotas/eng/ml", want: 200})
	h.do(exchange{method: "GET", path: "/v1/quotas/eng/ml?dry_run=true", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/quotas/nobody", want: 404})
	h.do(exchange{method: "DELETE", path: "/v1/quotas/eng/ml?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/quotas/eng/ml", header: map[string]string{"If-Match": "999999"}, want: 412})
	h.do(exchange{method: "DELETE", path: "/v1/quotas/eng/ml", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/quotas/eng/ml", want: 404})

	// Roles.
	h.do(exchange{method: "PUT", path: "/v1/roles/eng/ml", body: `{"weight": 2, "lending_limit": {"cpus": 1}}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/roles/eng/ml?dry_run=true", body: `{"weight": null}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/roles/eng/ml", body: `{"weight": 0}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/roles/eng/lends-nothing", body: `{"lending_limit": {}}`, want: 200})
	h.do(exchange{method: "GET", path: "/v1/roles/eng/lends-nothing", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/roles/eng/lends-nothing", want: 200})
	h.do(exchange{method: "PUT", path: "/v1/roles/*", body: `{"weight": 2}`, want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/roles", want: 200})
	h.do(exchange{method: "GET", path: "/v1/roles/eng/ml", want: 200})
	h.do(exchange{method: "GET", path: "/v1/roles/*?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/roles/never/configured", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/roles/eng/ml?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/roles/eng/ml", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/roles/eng/ml", want: 404})

	// Reservations: on the agent, on an agent not admitted (forced:
	// pending), beyond the agent.
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-1", body: `{"agent": "node-1", "role": "db", "resources": {"cpus": 1, "mem": 1024}}`, want: 200})
	ghost := `{"agent": "ghost", "role": "db", "resources": {"cpus": 1}}`
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-2", body: ghost, want: 409})
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-2", body: ghost[:len(ghost)-1] + `, "force": true}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-3?dry_run=true", body: `{"agent": "node-1", "role": "db", "resources": {"cpus": 100}}`, want: 409})
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-3?dry_run=true", body: `{"agent": "node-1", "role": "db", "resources": {"cpus": 1}}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-3", body: `{"agent": "node-1", "role": "db"}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/reservations/db-3", body: `{"agent": "node-1", "role": "db", "resources": {}}`, want: 400, request: docInWords})
	h.do(exchange{method: "GET", path: "/v1/reservations", want: 200})
	h.do(exchange{method: "GET", path: "/v1/reservations/db-2", want: 200})
	h.do(exchange{method: "GET", path: "/v1/reservations/nothing", want: 404})
	h.do(exchange{method: "GET", path: "/v1/reservations/bad%20name", want: 400, request: docInvalid})
	h.do(exchange{method: "DELETE", path: "/v1/reservations/db-2?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/reservations/db-2", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/reservations/db-2", want: 404})

	// Rate limits: one principal, the default, the whole configuration.
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark", body: `{"qps": 55.5, "burst": 10, "capacity": 1000}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/counted?dry_run=true", body: `{}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark", body: `{"qps": 1, "burst": 1.5}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark", body: `{"QPS": 1}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark", body: `{"qps": 0}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark", body: `{"qps": 1, "burst": 0}`, want: 400, request: docInWords})
	h.do(exchange{method: "GET", path: "/v1/ratelimits/spark", want: 200})
	h.do(exchange{method: "GET", path: "/v1/ratelimits/nobody", want: 404})
	h.do(exchange{method: "GET", path: "/v1/ratelimits", want: 200})
	whole := `{"limits": [{"principal": "spark", "qps": 55.5}, {"principal": "batch"}], "aggregate_default_qps": 1000, "aggregate_default_capacity": 1000}`
	h.do(exchange{method: "PUT", path: "/v1/ratelimits?dry_run=true", body: whole, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits", body: whole, want: 200})
	// What a GET answers can be sent back: the versions it carries are ignored.
	h.do(exchange{method: "PUT", path: "/v1/ratelimits?dry_run=true", body: `{"limits": [{"principal": "spark", "qps": 55.5, "version": 7}]}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits", body: whole, header: map[string]string{"If-None-Match": "*"}, want: 400, request: docInWords})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits", body: `{"limits": [{"qps": 1}]}`, want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/ratelimits", want: 200})
	h.do(exchange{method: "GET", path: "/v1/ratelimits-default", want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits-default", body: `{"qps": 500, "burst": 600}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits-default", body: `{"qps": "fast"}`, want: 400, request: docInvalid})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits-default?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits-default", want: 200})
	h.do(exchange{method: "GET", path: "/v1/ratelimits-default", want: 404})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits-default", want: 404})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/batch?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/batch", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/batch", want: 404})
	// Labeled limits: spark's frameworks labeled nightly.
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark/labels/nightly?dry_run=true", body: `{"qps": 5}`, want: 200})
	h.do(exchange{method: "GET", path: "/v1/ratelimits/spark/labels/nightly", want: 404})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark/labels/nightly", body: `{"qps": 5, "burst": 2}`, want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark/labels/nightly", body: `{"qps": -5}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark/labels/a%20b", body: `{"qps": 5}`, want: 400, request: docInvalid})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/spark/labels/nightly", body: `{"qps": 5}`, header: map[string]string{"If-Match": "1"}, want: 412})
	h.do(exchange{method: "GET", path: "/v1/ratelimits/spark/labels/nightly", want: 200})
	h.do(exchange{method: "GET", path: "/v1/ratelimits/spark/labels/nightly?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/ratelimits", want: 200})
	h.do(exchange{method: "PUT", path: "/v1/ratelimits?dry_run=true", want: 400, request: docInWords,
		body: `{"limits": [{"principal": "spark", "label": "a", "qps": 1}, {"principal": "spark", "label": "a"}]}`})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/spark/labels/nightly?dry_run=true", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/spark/labels/nightly", want: 200})
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/spark/labels/nightly", want: 404})

	// Agents, audit, metrics.
	h.do(exchange{method: "GET", path: "/v1/agents", want: 200})
	h.do(exchange{method: "GET", path: "/v1/agents/node-1", want: 200})
	h.do(exchange{method: "GET", path: "/v1/agents/agent-node-1?stale=true", want: 200})
	h.do(exchange{method: "GET", path: "/v1/agents/nobody", want: 404})
	page := h.do(exchange{method: "GET", path: "/v1/audit?after=3&limit=2", want: 200})
	var audit api.AuditList
	page.decode(t, &audit)
	if len(audit.Entries) != 2 || audit.Entries[0].Index <= 3 {
		t.Errorf("GET /v1/audit?after=3&limit=2: want 2 entries after index 3, got %+v", audit.Entries)
	}
	h.do(exchange{method: "GET", path: "/v1/audit", want: 200})
	h.do(exchange{method: "GET", path: "/v1/audit?limit=0", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/audit?after=-1", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/metrics", want: 200})
	h.do(exchange{method: "GET", path: "/metrics?format=json", want: 400, request: docInvalid})
}

// driveRateLimited limits the operator's own calls to one token that comes
// back after 1000 s, with no queue: of two calls, however slow the machine,
// the second is answered 429, with the Retry-After the document describes.
// Nothing lifts the limit (the operator would wait as long), so it runs
// after every other call of the test.
func driveRateLimited(t *testing.T, h *apiHarness) {
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/operator", body: `{"qps": 0.001, "burst": 1, "capacity": 0}`, want: 200})
	var limited *answer
	for range 2 { // the first call may find the token
		a := h.do(exchange{method: "GET", path: "/v1/quotas", want: 0})
		if a.status == http.StatusTooManyRequests {
			limited = a
			break
		}
	}
	if limited == nil {
		t.Fatal("2 calls under a limit of 1 token per 1000 s were never answered 429")
	}
	if wait, err := strconv.Atoi(limited.header.Get("Retry-After")); err != nil || wait < 1 || wait > 1000 {
		t.Errorf("Retry-After %q, want the seconds until the token comes back (1 to 1000)", limited.header.Get("Retry-After"))
	}
}

func driveSchedulerAndAgents(t *testing.T, h *apiHarness) {
	ctx := h.ctx
	call := func(c api.Call, streamID string, want int, rule requestRule) *answer {
		t.Helper()
		ex := exchange{method: "POST", path: api.SchedulerPath, body: jsonBody(t, c), want: want, request: rule}
		if streamID != "" {
			ex.header = map[string]string{api.HeaderStreamID: streamID}
		}
		return h.do(ex)
	}
	agentCall := func(c api.AgentCall, streamID string, want int) *answer {
		t.Helper()
		ex := exchange{method: "POST", path: api.AgentProtocolPath, body: jsonBody(t, c), want: want}
		if streamID != "" {
			ex.header = map[string]string{api.HeaderStreamID: streamID}
		}
		return h.do(ex)
	}

	// An agent, through the agent protocol.
	register := api.AgentCall{Type: api.AgentCallRegister, Register: &api.AgentRegister{AgentInfo: api.AgentInfo{
		Name: "node-2", Hostname: "node-2.example", Resources: api.Resources{"cpus": 4, "mem": 4096},
		Capabilities: []string{api.CapabilityTaskResourceLimits}}}}
	agent := openStream[api.AgentEvent](t, "agent node-2", agentCall(register, "", 200))
	defer agent.close()
	registered := agent.next(ctx, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered })
	agentID := registered.Registered.AgentID
	agentCall(api.AgentCall{AgentID: agentID, Type: api.AgentCallHeartbeat, Heartbeat: &api.AgentHeartbeat{}}, agent.id, 202)
	agentCall(api.AgentCall{AgentID: agentID, Type: api.AgentCallHeartbeat, Heartbeat: &api.AgentHeartbeat{}}, "", 403)
	agentCall(api.AgentCall{AgentID: "agent-nobody", Type: api.AgentCallHeartbeat, Heartbeat: &api.AgentHeartbeat{}}, agent.id, 404)
	h.do(exchange{method: "POST", path: api.AgentProtocolPath, body: `{"type": "REGISTER", "register": {"agent_info": {"name": "node 3"}}}`,
		want: 400, request: docInvalid})

	// A framework.
	info := api.FrameworkInfo{Name: "openapi", Principal: "openapi-fw", Roles: []string{"*"}, FailoverTimeoutSeconds: 60}
	subscribe := api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: info}}
	fw := openStream[api.Event](t, "framework", call(subscribe, "", 200, docValid))
	defer func() { fw.close() }()
	subscribed := fw.next(ctx, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed })
	fwID := subscribed.Subscribed.FrameworkID
	zero := 0.0
	onNode2 := func(e api.Event) bool {
		return e.Type == api.EventOffers && slices.ContainsFunc(e.Offers.Offers, func(o api.Offer) bool { return o.AgentID == agentID })
	}
	offerOn := func(e api.Event) api.Offer {
		i := slices.IndexFunc(e.Offers.Offers, func(o api.Offer) bool { return o.AgentID == agentID })
		return e.Offers.Offers[i]
	}

	// Decline the first offer (refusing nothing), accept the next.
	first := offerOn(fw.next(ctx, "an offer of node-2", onNode2))
	call(api.Call{FrameworkID: fwID, Type: api.CallDecline, Decline: &api.Decline{OfferIDs: []string{first.ID},
		Filters: &api.Filters{RefuseSeconds: &zero}}}, fw.id, 202, docValid)
	second := offerOn(fw.next(ctx, "a second offer of node-2", onNode2))
	h.do(exchange{method: "GET", path: "/v1/offers", want: 200})
	task := api.TaskInfo{TaskID: "task-1", Name: "task-1", AgentID: agentID, Resources: api.Resources{"cpus": 1, "mem": 128},
		Limits:  api.Limits{"cpus": {Value: 2}, "mem": {Infinite: true}},
		Command: &api.CommandInfo{Value: "sleep 60"}}
	call(api.Call{FrameworkID: fwID, Type: api.CallAccept, Accept: &api.Accept{OfferIDs: []string{second.ID},
		Operations: []api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{task}}}},
		Filters:    &api.Filters{RefuseSeconds: &zero}}}, fw.id, 202, docValid)

	// The agent runs it and says so; the framework acknowledges; the agent
	// hears the acknowledgement.
	launch := agent.next(ctx, "LAUNCH", func(e api.AgentEvent) bool { return e.Type == api.AgentEventLaunch })
	if len(launch.Launch.Tasks) != 1 || launch.Launch.Tasks[0].Task.TaskID != task.TaskID {
		t.Fatalf("LAUNCH: want task %s, got %+v", task.TaskID, launch.Launch)
	}
	update := func(state, uuid string) {
		t.Helper()
		agentCall(api.AgentCall{AgentID: agentID, Type: api.AgentCallUpdate, Update: &api.AgentUpdate{FrameworkID: fwID,
			Status: api.TaskStatus{TaskID: task.TaskID, State: state, UUID: uuid}}}, agent.id, 202)
	}
	update(api.TaskRunning, "uuid-running")
	running := fw.next(ctx, "UPDATE TASK_RUNNING", func(e api.Event) bool {
		return e.Type == api.EventUpdate && e.Update.Status.State == api.TaskRunning
	})
	call(api.Call{FrameworkID: fwID, Type: api.CallAcknowledge, Acknowledge: &api.Acknowledge{AgentID: agentID,
		TaskID: task.TaskID, UUID: running.Update.Status.UUID}}, fw.id, 202, docValid)
	agent.next(ctx, "ACKNOWLEDGE", func(e api.AgentEvent) bool {
		return e.Type == api.AgentEventAcknowledge && e.Acknowledge.UUID == "uuid-running"
	})
	h.do(exchange{method: "GET", path: "/v1/tasks?state=TASK_RUNNING,TASK_STAGING", want: 200})
	h.do(exchange{method: "GET", path: "/v1/tasks", want: 200})
	h.do(exchange{method: "GET", path: "/v1/tasks?state=RUNNING", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/frameworks", want: 200})
	h.do(exchange{method: "GET", path: "/v1/frameworks?stale=true", want: 400, request: docInvalid})
	h.do(exchange{method: "GET", path: "/v1/roles/*", want: 200})
	h.do(exchange{method: "GET", path: "/v1/agents/node-2", want: 200})
	h.do(exchange{method: "GET", path: "/v1/cluster", want: 200})

	// The other calls.
	call(api.Call{FrameworkID: fwID, Type: api.CallReconcile, Reconcile: &api.Reconcile{Tasks: []api.ReconcileTask{}}}, fw.id, 202, docValid)
	fw.next(ctx, "UPDATE REASON_RECONCILIATION", func(e api.Event) bool {
		return e.Type == api.EventUpdate && e.Update.Status.Reason == api.ReasonReconciliation
	})
	call(api.Call{FrameworkID: fwID, Type: api.CallSuppress, Suppress: &api.Suppress{Roles: []string{"*"}}}, fw.id, 202, docValid)
	call(api.Call{FrameworkID: fwID, Type: api.CallRevive, Revive: &api.Revive{}}, fw.id, 202, docValid)
	call(api.Call{FrameworkID: fwID, Type: api.CallKill, Kill: &api.Kill{TaskID: task.TaskID, AgentID: agentID}}, fw.id, 202, docValid)
	agent.next(ctx, "KILL", func(e api.AgentEvent) bool { return e.Type == api.AgentEventKill && e.Kill.TaskID == task.TaskID })
	update(api.TaskKilled, "uuid-killed")
	fw.next(ctx, "UPDATE TASK_KILLED", func(e api.Event) bool {
		return e.Type == api.EventUpdate && e.Update.Status.State == api.TaskKilled
	})

	// Refused calls.
	revive := api.Call{FrameworkID: fwID, Type: api.CallRevive, Revive: &api.Revive{}}
	call(revive, "", 400, docInWords)                     // no stream id
	call(revive, "stream-of-someone-else", 403, docValid) // not the current session
	call(api.Call{FrameworkID: "fw-nobody", Type: api.CallRevive, Revive: &api.Revive{}}, fw.id, 404, docValid)
	call(api.Call{FrameworkID: fwID, Type: api.CallAccept}, fw.id, 400, docInWords) // no accept body
	call(subscribe, fw.id, 400, docInWords)                                         // SUBSCRIBE with a stream id
	h.do(exchange{method: "POST", path: api.SchedulerPath, body: `{"type": "JUMP"}`, header: map[string]string{api.HeaderStreamID: fw.id},
		want: 400, request: docInvalid})
	h.do(exchange{method: "POST", path: api.SchedulerPath, body: `{"type": "REVIVE", "framework_id": "` + fwID + `", "revive": {"Roles": []}}`,
		header: map[string]string{api.HeaderStreamID: fw.id}, want: 400, request: docInvalid})

	// A framework whose principal has one token and no queue: its second
	// call is refused at once.
	h.do(exchange{method: "PUT", path: "/v1/ratelimits/throttled-fw", body: `{"qps": 0.001, "burst": 1, "capacity": 0}`, want: 200})
	throttledInfo := api.FrameworkInfo{Name: "throttled", Principal: "throttled-fw", Roles: []string{"*"}}
	throttled := openStream[api.Event](t, "throttled framework", call(api.Call{Type: api.CallSubscribe,
		Subscribe: &api.Subscribe{FrameworkInfo: throttledInfo}}, "", 200, docValid))
	throttledID := throttled.next(ctx, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	call(api.Call{FrameworkID: throttledID, Type: api.CallSuppress, Suppress: &api.Suppress{}}, throttled.id, 429, docValid)
	throttled.close()
	h.do(exchange{method: "DELETE", path: "/v1/ratelimits/throttled-fw", want: 200})

	// A new incarnation of the agent (REGISTER without its id) loses the
	// old one's tasks: the framework hears FAILURE.
	again := openStream[api.AgentEvent](t, "agent node-2 again", agentCall(register, "", 200))
	defer again.close()
	againID := again.next(ctx, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered }).Registered.AgentID
	fw.next(ctx, "FAILURE", func(e api.Event) bool { return e.Type == api.EventFailure && e.Failure.AgentID == agentID })
	fw.next(ctx, "HEARTBEAT", func(e api.Event) bool { return e.Type == api.EventHeartbeat })

	// Subscribing again under the framework's id fails it over: the old
	// stream gets ERROR and ends.
	info.ID = fwID
	failover := openStream[api.Event](t, "framework after failover",
		call(api.Call{FrameworkID: fwID, Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: info}}, "", 200, docValid))
	fw.next(ctx, "ERROR", func(e api.Event) bool { return e.Type == api.EventError })
	fw.ended(ctx)
	t.Logf("framework stream: %v", fw.seen())
	fw.close()
	fw = failover
	fw.next(ctx, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed })
	call(api.Call{FrameworkID: fwID, Type: api.CallTeardown, Teardown: &api.Teardown{}}, fw.id, 202, docValid)
	fw.ended(ctx)

	// Usage slack: a framework with REVOCABLE_RESOURCES fills the agent
	// with a regular task; the agent's estimate is then offered to it as
	// revocable, throttleable resources.
	oversubscribed := func(r api.Resources, want int) *answer {
		return agentCall(api.AgentCall{AgentID: againID, Type: api.AgentCallUpdateOversubscribed,
			UpdateOversubscribed: &api.AgentUpdateOversubscribed{Resources: r}}, again.id, want)
	}
	h.do(exchange{method: "POST", path: api.AgentProtocolPath, header: map[string]string{api.HeaderStreamID: again.id},
		body: `{"agent_id": "` + againID + `", "type": "UPDATE_OVERSUBSCRIBED", "update_oversubscribed": {"resources": {"cpus": -1}}}`,
		want: 400, request: docInvalid})
	oversubscribed(api.Resources{"gpus": 1}, 400) // not one of the agent's
	revInfo := api.FrameworkInfo{Name: "openapi-rev", Principal: "openapi-fw", Roles: []string{"batch"},
		Capabilities: []string{api.CapabilityRevocableResources}}
	rev := openStream[api.Event](t, "revocable framework", call(api.Call{Type: api.CallSubscribe,
		Subscribe: &api.Subscribe{FrameworkInfo: revInfo}}, "", 200, docValid))
	defer rev.close()
	revID := rev.next(ctx, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed }).Subscribed.FrameworkID
	onAgain := func(revocable bool) func(api.Event) bool {
		return func(e api.Event) bool {
			return e.Type == api.EventOffers && slices.ContainsFunc(e.Offers.Offers, func(o api.Offer) bool {
				return o.AgentID == againID && len(o.Resources) > 0 && o.Resources[0].Revocable == revocable
			})
		}
	}
	regular := rev.next(ctx, "a regular offer of node-2", onAgain(false)).Offers.Offers[0]
	fill := api.TaskInfo{TaskID: "fill", Name: "fill", AgentID: againID, Resources: register.Register.AgentInfo.Resources,
		Command: &api.CommandInfo{Value: "sleep 60"}}
	call(api.Call{FrameworkID: revID, Type: api.CallAccept, Accept: &api.Accept{OfferIDs: []string{regular.ID},
		Operations: []api.Operation{{Type: api.OperationLaunch, Launch: &api.Launch{Tasks: []api.TaskInfo{fill}}}},
		Filters:    &api.Filters{RefuseSeconds: &zero}}}, rev.id, 202, docValid)
	again.next(ctx, "LAUNCH of fill", func(e api.AgentEvent) bool { return e.Type == api.AgentEventLaunch })
	oversubscribed(api.Resources{"cpus": 1, "mem": 256}, 202)
	slack := rev.next(ctx, "a revocable offer of node-2", onAgain(true)).Offers.Offers[0]
	if r := slack.Resources[0]; !r.Throttleable || r.Role != "*" {
		t.Fatalf("slack offer: %+v, want throttleable resources of role *", slack.Resources)
	}
	h.do(exchange{method: "GET", path: "/v1/agents/node-2", want: 200})
	h.do(exchange{method: "GET", path: "/v1/roles/batch", want: 200})
	h.do(exchange{method: "GET", path: "/v1/offers", want: 200})
	call(api.Call{FrameworkID: revID, Type: api.CallTeardown, Teardown: &api.Teardown{}}, rev.id, 202, docValid)
	rev.ended(ctx)
	t.Logf("agent streams: %v, %v", agent.seen(), again.seen())
}

// driveUnrouted sends requests no operation serves.
func driveUnrouted(t *testing.T, h *apiHarness) {
	h.do(exchange{method: "GET", path: "/v1/nothing", want: 404, unrouted: "NoSuchEndpoint"})
	h.do(exchange{method: "PATCH", path: "/v1/quotas/eng/ml", body: `{}`, want: 405, unrouted: "MethodNotAllowed"})
	h.do(exchange{method: "POST", path: "/v1/health", noToken: true, want: 405, unrouted: "MethodNotAllowed"})
	h.do(exchange{method: "PUT", path: "/v1/quotas//ml", body: `{}`, want: 400, unrouted: "MalformedRequest"})
	h.do(exchange{method: "GET", path: "/v1/quotas", header: map[string]string{"X-Padding": strings.Repeat("x", 128<<10)},
		want: 431, unrouted: "HeadersTooLarge"})
}

// TestOpenAPIDocumentMatchesFollowers drives what only a follower answers:
// the redirect of the scheduler and agent streams to the leader, writes and
// reads passed on to the leader, and stale reads from the follower's own
// state.
func TestOpenAPIDocumentMatchesFollowers(t *testing.T) {
	doc := loadAPIDocument(t)
	ops := documentedOperations(t, doc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := testcluster.Start(t, 3, testcluster.WithOperatorToken(openAPIToken))

	// Leadership may move between finding a follower and asking it: then
	// find the new one and ask again. Every answer is checked either way.
	var redirected, agentRedirected bool
	for attempt := 0; attempt < 5 && !(redirected && agentRedirected); attempt++ {
		leader, err := c.WaitLeader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		follower := c.Followers()[0]
		h := newAPIHarness(t, ctx, doc, ops, c.Address(follower), openAPIToken)

		h.do(exchange{method: "PUT", path: "/v1/quotas/eng", body: `{"limits": {"cpus": 8}}`, want: 0})
		h.do(exchange{method: "GET", path: "/v1/frameworks", want: 0})
		h.do(exchange{method: "GET", path: "/v1/cluster", want: 0})
		stale := h.do(exchange{method: "GET", path: "/v1/quotas?stale=true", want: 0})
		if stale.status == http.StatusOK && stale.header.Get("X-Allot-Last-Contact") == "" {
			t.Errorf("a stale read from a follower has no X-Allot-Last-Contact: %v", stale.header)
		}

		subscribe := api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: api.FrameworkInfo{Name: "follower-test", Roles: []string{"*"}}}}
		a := h.do(exchange{method: "POST", path: api.SchedulerPath, body: jsonBody(t, subscribe), want: 0})
		redirected = redirected || h.checkRedirect(a, c.Address(leader)+api.SchedulerPath)
		register := api.AgentCall{Type: api.AgentCallRegister, Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "follower-test"}}}
		a = h.do(exchange{method: "POST", path: api.AgentProtocolPath, body: jsonBody(t, register), want: 0})
		agentRedirected = agentRedirected || h.checkRedirect(a, c.Address(leader)+api.AgentProtocolPath)
	}
	if !redirected || !agentRedirected {
		t.Fatalf("a follower never answered 307 to SUBSCRIBE (%v) and REGISTER (%v) in 5 tries", redirected, agentRedirected)
	}
}

// checkRedirect reports whether a is the redirect to location; an answer
// of a server that was leading after all is closed.
func (h *apiHarness) checkRedirect(a *answer, location string) bool {
	h.t.Helper()
	if a.resp != nil {
		a.cancel()
		a.resp.Body.Close()
	}
	if a.status != http.StatusTemporaryRedirect {
		return false
	}
	if got := a.header.Get("Location"); got != location {
		h.t.Errorf("307 to %q, want %q", got, location)
	}
	return true
}

// TestOpenAPIGuideExamplesWork runs the curl examples of docs/api/README.md
// as written against masterd -dev on a free port: those of the first block
// must succeed, those of the second get the status their comment names.
func TestOpenAPIGuideExamplesWork(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the guide's examples use it")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed: the guide's examples use it")
	}
	root, err := testcluster.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(root, "docs", "api", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(guide), -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/api/README.md: want at least 2 sh blocks of examples, found %d", len(blocks))
	}
	addr := startDevMasterd(t)

	var setup []string
	for i, block := range blocks[:2] {
		for _, line := range strings.Split(block[1], "\n") {
			line = strings.ReplaceAll(strings.TrimSpace(line), "127.0.0.1:5050", addr)
			want := 0 // any 2xx
			if m := regexp.MustCompile(`\s+#\s*(\d{3})\b.*$`).FindStringSubmatch(line); m != nil {
				want, _ = strconv.Atoi(m[1])
				line = strings.TrimSuffix(line, m[0])
			}
			switch {
			case line == "":
			case !strings.HasPrefix(line, "curl "):
				setup = append(setup, line)
			default:
				if i == 1 && want == 0 {
					t.Errorf("guide: %q in the block of refused calls names no status", line)
				}
				out, err := exec.Command("bash", "-c", strings.Join(setup, "\n")+"\n"+line+" -o /dev/stderr -w '%{http_code}'").CombinedOutput()
				if err != nil {
					t.Fatalf("guide: %q: %v\n%s", line, err, out)
				}
				text := string(out)
				status, _ := strconv.Atoi(text[max(0, len(text)-3):])
				body := text[:max(0, len(text)-3)]
				if ok := status >= 200 && status < 300; (want == 0 && !ok) || (want != 0 && status != want) {
					t.Errorf("guide: %q answered %d (want %v):\n%s", line, status, map[bool]any{true: "2xx", false: want}[want == 0], body)
				}
			}
		}
	}
}

// startDevMasterd runs masterd -dev on a free port until the test ends and
// returns its address once it answers.
func startDevMasterd(t *testing.T) string {
	t.Helper()
	bin, err := testcluster.Build("")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := freeaddr.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "-dev", "-http", addr)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("masterd -dev:\n%s", log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		// A write needs a leader, which /v1/cluster names once there is one.
		if resp, err := http.Get("http://" + addr + "/v1/cluster"); err == nil {
			var info api.Cluster
			ok := resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&info) == nil && info.Leader != nil && info.Leader.APIAddress != ""
			resp.Body.Close()
			if ok {
				return addr
			}
		}
		select {
		case <-exited:
			t.Fatalf("masterd -dev exited:\n%s", log.String())
		case <-ctx.Done():
			t.Fatalf("masterd -dev at %s did not name a leader: %v", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
