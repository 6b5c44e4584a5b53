package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/internal/server"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
)

// ACL tests: real masterd processes with -acl. The operator token of the
// harness is a management token ("operator"); the tokens under test are
// made through the API like an operator would.

const aclOperatorToken = "acl-test-operator-token"

// aclAnswer is one HTTP exchange's answer; a stream's body is not read.
type aclAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a aclAnswer) index() uint64 {
	n, _ := strconv.ParseUint(a.header.Get(api.HeaderIndex), 10, 64)
	return n
}

func (a aclAnswer) code() string {
	var body api.ErrorBody
	if json.Unmarshal(a.body, &body) != nil || body.Error == nil {
		return ""
	}
	return body.Error.Code
}

// aclDo sends one request with token ("" for none) and returns the answer;
// a streaming answer (scheduler, agent protocol) is closed once its status
// is known.
func aclDo(t testing.TB, method, url, token, body string, header ...string) aclAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	// Never follow a 307: where it points is part of the answer.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out := aclAnswer{status: resp.StatusCode, header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		return out
	}
	if out.body, err = io.ReadAll(io.LimitReader(resp.Body, 4<<20)); err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, url, err)
	}
	return out
}

// aclMust sends a request that must succeed (200) and decodes its answer.
func aclMust(t testing.TB, method, url, token, body string, out any) aclAnswer {
	t.Helper()
	a := aclDo(t, method, url, token, body)
	if a.status != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, a.status, a.body)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, url, a.body, err)
		}
	}
	return a
}

// newToken makes a policy with rules and a token naming it; it returns the
// token's secret.
func newToken(t testing.TB, addr, accessor, principal string, rules ...api.ACLRule) string {
	t.Helper()
	body, _ := json.Marshal(api.ACLPolicyRequest{Description: "test policy of " + accessor, Rules: rules})
	aclMust(t, "PUT", addr+api.ACLPolicyPath("p-"+accessor), aclOperatorToken, string(body), nil)
	body, _ = json.Marshal(api.ACLTokenRequest{Description: "test token", Policies: []string{"p-" + accessor}, Principal: principal})
	var tok api.ACLToken
	aclMust(t, "PUT", addr+api.ACLTokenPath(accessor), aclOperatorToken, string(body), &tok)
	if tok.Secret == "" {
		t.Fatalf("PUT %s answered no secret: %+v", api.ACLTokenPath(accessor), tok)
	}
	return tok.Secret
}

func startACLCluster(t *testing.T, n int, args ...string) (*testcluster.Cluster, int) {
	t.Helper()
	c := testcluster.Start(t, n, testcluster.WithOperatorToken(aclOperatorToken),
		testcluster.WithArgs(append([]string{"-acl", "-log-level", "debug"}, args...)...))
	return c, waitLeader(t, c)
}

// aclSample is a request that an endpoint answers with success when its
// caller may make it.
type aclSample struct {
	path, body string
	header     []string
	want       int // 0: any success
}

// aclSamples holds one sample request per endpoint of the route table, by
// "METHOD pattern". The state they act on is made by aclTableSetup; roles
// are under eng/, which the granting policies name as eng/*.
func aclSamples(c *testcluster.Cluster, leader int) map[string]aclSample {
	self := fmt.Sprintf(`{"id": %q, "raft_address": %q, "api_address": %q}`, c.ID(leader), c.RaftAddress(leader), c.Address(leader))
	version := []string{api.HeaderStoreVersion, strconv.FormatUint(uint64(raftstore.StoreVersion), 10)}
	subscribe := `{"type": "SUBSCRIBE", "subscribe": {"framework_info": {"name": "table", "roles": ["eng/ml"]}}}`
	register := `{"type": "REGISTER", "register": {"agent_info": {"name": "node-2", "hostname": "node-2.example", "resources": {"cpus": 2}}}}`
	return map[string]aclSample{
		"GET /v1/cluster":          {path: "/v1/cluster"},
		"POST /v1/cluster/servers": {path: "/v1/cluster/servers?dry_run=true", body: self, header: version},
		// The only voter: past the ACL check, the handler refuses it.
		"DELETE /v1/cluster/servers/{id}":                  {path: "/v1/cluster/servers/" + c.ID(leader) + "?dry_run=true", want: 409},
		"GET /v1/quotas":                                   {path: "/v1/quotas"},
		"GET /v1/quotas/{role...}":                         {path: "/v1/quotas/eng/ml"},
		"PUT /v1/quotas/{role...}":                         {path: "/v1/quotas/eng/ml", body: `{"limits": {"cpus": 8}}`},
		"DELETE /v1/quotas/{role...}":                      {path: "/v1/quotas/eng/ml?dry_run=true"},
		"GET /v1/roles":                                    {path: "/v1/roles"},
		"GET /v1/roles/{role...}":                          {path: "/v1/roles/eng/ml"},
		"PUT /v1/roles/{role...}":                          {path: "/v1/roles/eng/ml", body: `{"weight": 2}`},
		"DELETE /v1/roles/{role...}":                       {path: "/v1/roles/eng/ml?dry_run=true"},
		"GET /v1/reservations":                             {path: "/v1/reservations"},
		"GET /v1/reservations/{name}":                      {path: "/v1/reservations/db-1"},
		"PUT /v1/reservations/{name}":                      {path: "/v1/reservations/db-1", body: `{"agent": "node-1", "role": "eng/db", "resources": {"cpus": 1}}`},
		"DELETE /v1/reservations/{name}":                   {path: "/v1/reservations/db-1?dry_run=true"},
		"GET /v1/ratelimits":                               {path: "/v1/ratelimits"},
		"PUT /v1/ratelimits":                               {path: "/v1/ratelimits?dry_run=true", body: `{"limits": [{"principal": "spark", "qps": 10}]}`},
		"GET /v1/ratelimits/{principal}":                   {path: "/v1/ratelimits/spark"},
		"PUT /v1/ratelimits/{principal}":                   {path: "/v1/ratelimits/spark", body: `{"qps": 10}`},
		"DELETE /v1/ratelimits/{principal}":                {path: "/v1/ratelimits/spark?dry_run=true"},
		"GET /v1/ratelimits/{principal}/labels/{label}":    {path: "/v1/ratelimits/spark/labels/etl"},
		"PUT /v1/ratelimits/{principal}/labels/{label}":    {path: "/v1/ratelimits/spark/labels/etl", body: `{"qps": 5}`},
		"DELETE /v1/ratelimits/{principal}/labels/{label}": {path: "/v1/ratelimits/spark/labels/etl?dry_run=true"},
		"GET /v1/ratelimits-default":                       {path: "/v1/ratelimits-default"},
		"PUT /v1/ratelimits-default":                       {path: "/v1/ratelimits-default", body: `{"qps": 1000}`},
		"DELETE /v1/ratelimits-default":                    {path: "/v1/ratelimits-default?dry_run=true"},
		"GET /v1/acl/policies":                             {path: "/v1/acl/policies"},
		"GET /v1/acl/policies/{name}":                      {path: "/v1/acl/policies/sample"},
		"PUT /v1/acl/policies/{name}":                      {path: "/v1/acl/policies/sample", body: `{"rules": [{"object": "quota", "access": "read"}]}`},
		"DELETE /v1/acl/policies/{name}":                   {path: "/v1/acl/policies/sample?dry_run=true"},
		"GET /v1/acl/tokens":                               {path: "/v1/acl/tokens"},
		"GET /v1/acl/tokens/{accessor}":                    {path: "/v1/acl/tokens/sample"},
		"PUT /v1/acl/tokens/{accessor}":                    {path: "/v1/acl/tokens/sample", body: `{"policies": ["sample"]}`},
		"DELETE /v1/acl/tokens/{accessor}":                 {path: "/v1/acl/tokens/sample?dry_run=true"},
		"GET /v1/acl/token/self":                           {path: "/v1/acl/token/self"},
		"GET /v1/agents":                                   {path: "/v1/agents"},
		"GET /v1/agents/{id}":                              {path: "/v1/agents/node-1"},
		"GET /v1/frameworks":                               {path: "/v1/frameworks"},
		"GET /v1/tasks":                                    {path: "/v1/tasks"},
		"GET /v1/offers":                                   {path: "/v1/offers"},
		"POST /v1/scheduler":                               {path: api.SchedulerPath, body: subscribe},
		"POST /v1/agent":                                   {path: api.AgentProtocolPath, body: register},
		"GET /v1/audit":                                    {path: "/v1/audit"},
		"GET /v1/snapshot":                                 {path: api.SnapshotPath},
		"PUT /v1/snapshot":                                 {path: api.SnapshotPath + "?dry_run=true", body: backupOf(c.Address(leader), aclOperatorToken)},
		"GET /metrics":                                     {path: "/metrics"},
		"PUT /v1/test/agents/{name}":                       {path: "/v1/test/agents/node-1", body: `{"hostname": "node-1.example", "resources": {"cpus": 8, "mem": 8192}}`},
	}
}

// aclNeeds is what the design (issue #11) says an endpoint needs, from its
// path: the table test holds the route table to it.
func aclNeeds(key string) string {
	method, path, _ := strings.Cut(key, " ")
	access := api.ACLRead
	if method != "GET" {
		access = api.ACLWrite
	}
	switch {
	case path == api.ACLTokenSelfPath:
		return server.AuthToken + "  "
	case path == api.SchedulerPath:
		return server.AuthCapability + " framework register"
	case path == api.AgentProtocolPath:
		return server.AuthCapability + " agent register"
	case strings.HasPrefix(path, "/v1/quotas"):
		return server.AuthCapability + " quota " + access
	case strings.HasPrefix(path, "/v1/roles"):
		return server.AuthCapability + " role " + access
	case strings.HasPrefix(path, "/v1/reservations"):
		return server.AuthCapability + " reservation " + access
	case strings.HasPrefix(path, "/v1/ratelimits"):
		return server.AuthCapability + " ratelimit " + access
	case strings.HasPrefix(path, "/v1/acl/"):
		return server.AuthCapability + " acl " + access
	case path == api.SnapshotPath:
		// A backup holds the ACL state, a restore replaces it.
		return server.AuthCapability + " acl write"
	}
	// The cluster, agents, live state, audit, metrics, test hooks.
	return server.AuthCapability + " cluster " + access
}

// aclTableSetup makes the objects the samples read, update and delete.
func aclTableSetup(t *testing.T, addr string) {
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/v1/test/agents/node-1", `{"hostname": "node-1.example", "resources": {"cpus": 8, "mem": 8192}}`},
		{"PUT", "/v1/quotas/eng/ml", `{"limits": {"cpus": 8}}`},
		{"PUT", "/v1/roles/eng/ml", `{"weight": 2}`},
		{"PUT", "/v1/reservations/db-1", `{"agent": "node-1", "role": "eng/db", "resources": {"cpus": 1}}`},
		{"PUT", "/v1/ratelimits/spark", `{"qps": 10}`},
		{"PUT", "/v1/ratelimits-default", `{"qps": 1000}`},
		{"PUT", "/v1/acl/policies/sample", `{"rules": [{"object": "quota", "access": "read"}]}`},
		{"PUT", "/v1/acl/tokens/sample", `{"policies": ["sample"]}`},
	} {
		aclMust(t, w.method, addr+w.path, aclOperatorToken, w.body, nil)
	}
	// The labeled limit, where the route exists.
	if slices.ContainsFunc(server.Endpoints(true), func(e server.Endpoint) bool { return strings.Contains(e.Path, "/labels/") }) {
		aclMust(t, "PUT", addr+"/v1/ratelimits/spark/labels/etl", aclOperatorToken, `{"qps": 5}`, nil)
	}
}

// otherObject is an object that is not obj: a policy on it grants nothing
// on obj.
func otherObject(obj string) string {
	if obj == api.ACLObjectCluster {
		return api.ACLObjectQuota
	}
	return api.ACLObjectCluster
}

// TestACLEveryEndpoint is generated from the route table: every endpoint
// but /v1/health and the bootstrap answers 401 without a token and with an
// unknown one, 403 with a token whose policy grants something else, and
// success with a token whose policy grants exactly what the route declares
// (for role-scoped objects, on eng/* only). A new route without a sample
// here fails the test.
func TestACLEveryEndpoint(t *testing.T) {
	c, leader := startACLCluster(t, 1, "-test-hooks")
	addr := c.Address(leader)
	aclTableSetup(t, addr)
	samples := aclSamples(c, leader)

	// A granting and a lacking token per capability, made once.
	type capability struct{ object, access string }
	granting, lacking, readers := map[capability]string{}, map[capability]string{}, map[capability]string{}
	secretOf := func(m map[capability]string, cp capability, prefix string, rule api.ACLRule) string {
		if s, ok := m[cp]; ok {
			return s
		}
		m[cp] = newToken(t, addr, prefix+"-"+cp.object+"-"+cp.access, "", rule)
		return m[cp]
	}
	anyToken := newToken(t, addr, "any", "", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLRead, Roles: []string{"nothing/*"}})

	for _, e := range server.Endpoints(true) {
		key := e.Method + " " + e.Path
		if e.Auth == server.AuthPublic {
			if key != "GET /v1/health" && key != "POST "+api.ACLBootstrapPath {
				t.Errorf("%s needs no token: only /v1/health and the bootstrap may", key)
			}
			continue
		}
		sample, ok := samples[key]
		if !ok {
			t.Errorf("%s has no sample request in aclSamples: add one", key)
			continue
		}
		if got, want := e.Auth+" "+e.Object+" "+e.Access, aclNeeds(key); got != want {
			t.Errorf("%s needs %q, the design says %q", key, got, want)
		}
		t.Run(key, func(t *testing.T) {
			url := addr + sample.path
			if a := aclDo(t, e.Method, url, "", sample.body, sample.header...); a.status != 401 || a.code() != api.CodeUnauthenticated {
				t.Errorf("without a token: %d %s", a.status, a.body)
			}
			if a := aclDo(t, e.Method, url, "allot_not-a-token", sample.body, sample.header...); a.status != 401 || a.code() != api.CodeUnauthenticated {
				t.Errorf("with an unknown token: %d %s", a.status, a.body)
			}
			var good string
			switch e.Auth {
			case server.AuthToken:
				good = anyToken
			case server.AuthCapability:
				cp := capability{e.Object, e.Access}
				grant := api.ACLRule{Object: e.Object, Access: e.Access}
				if api.ACLRoleScoped(e.Object) {
					grant.Roles = []string{"eng/*"}
				}
				good = secretOf(granting, cp, "grant", grant)
				other := api.ACLRule{Object: otherObject(e.Object), Access: api.ACLWrite}
				bad := secretOf(lacking, cp, "lack", other)
				a := aclDo(t, e.Method, url, bad, sample.body, sample.header...)
				if a.status != 403 || a.code() != api.CodePermissionDenied || !strings.Contains(string(a.body), e.Object) {
					t.Errorf("with a token that may only %s %s: %d %s, want 403 naming %s", other.Access, other.Object, a.status, a.body, e.Object)
				}
				// Read on the object is not write.
				if e.Access == api.ACLWrite {
					reader := grant
					reader.Access = api.ACLRead
					a := aclDo(t, e.Method, url, secretOf(readers, cp, "read", reader), sample.body, sample.header...)
					if a.status != 403 || a.code() != api.CodePermissionDenied || !strings.Contains(string(a.body), "write "+e.Object) {
						t.Errorf("with a token that may only read %s: %d %s, want 403 naming write %s", e.Object, a.status, a.body, e.Object)
					}
				}
			default:
				t.Fatalf("auth %q: the test knows no such kind", e.Auth)
			}
			a := aclDo(t, e.Method, url, good, sample.body, sample.header...)
			if ok := a.status >= 200 && a.status <= 299; (sample.want == 0 && !ok) || (sample.want != 0 && a.status != sample.want) {
				t.Errorf("with a token that may %s %s: %d %s", e.Access, e.Object, a.status, a.body)
			}
		})
	}
}

// TestACLRoleScopedCapabilities: a token for eng/* reads and writes eng's
// quotas, lists only them, and is refused finance's; a reservation moves to
// a role only with write on both.
func TestACLRoleScopedCapabilities(t *testing.T) {
	c, leader := startACLCluster(t, 1, "-test-hooks")
	addr := c.Address(leader)
	aclMust(t, "PUT", addr+"/v1/test/agents/node-1", aclOperatorToken, `{"hostname": "h", "resources": {"cpus": 8}}`, nil)
	for _, role := range []string{"eng/ml", "finance"} {
		aclMust(t, "PUT", addr+"/v1/quotas/"+role, aclOperatorToken, `{"limits": {"cpus": 4}}`, nil)
	}
	aclMust(t, "PUT", addr+"/v1/reservations/fin-1", aclOperatorToken, `{"agent": "node-1", "role": "finance", "resources": {"cpus": 1}}`, nil)
	eng := newToken(t, addr, "eng-admin", "", api.ACLRule{Object: api.ACLObjectQuota, Access: api.ACLWrite, Roles: []string{"eng/*"}},
		api.ACLRule{Object: api.ACLObjectReservation, Access: api.ACLWrite, Roles: []string{"eng/*"}})

	var quotas api.QuotaList
	aclMust(t, "GET", addr+"/v1/quotas", eng, "", &quotas)
	if len(quotas.Quotas) != 1 || quotas.Quotas[0].Role != "eng/ml" {
		t.Errorf("eng/* lists %+v, want eng/ml's quota only", quotas.Quotas)
	}
	aclMust(t, "PUT", addr+"/v1/quotas/eng/ml", eng, `{"limits": {"cpus": 3}}`, nil)
	for _, call := range []struct{ method, path, body string }{
		{"GET", "/v1/quotas/finance", ""},
		{"PUT", "/v1/quotas/finance", `{"limits": {"cpus": 1}}`},
		{"DELETE", "/v1/quotas/finance", ""},
		// Taking finance's reservation into eng needs write on finance too.
		{"PUT", "/v1/reservations/fin-1", `{"agent": "node-1", "role": "eng/ml", "resources": {"cpus": 1}}`},
		{"PUT", "/v1/reservations/new", `{"agent": "node-1", "role": "finance", "resources": {"cpus": 1}}`},
		{"DELETE", "/v1/reservations/fin-1", ""},
	} {
		a := aclDo(t, call.method, addr+call.path, eng, call.body)
		if a.status != 403 || !strings.Contains(string(a.body), "finance") {
			t.Errorf("%s %s with an eng/* token: %d %s, want 403 naming finance", call.method, call.path, a.status, a.body)
		}
	}
	// Another role's reservation is as good as absent to a reader: its name
	// says nothing of whose it is.
	if a := aclDo(t, "GET", addr+"/v1/reservations/fin-1", eng, ""); a.status != 404 || strings.Contains(string(a.body), "finance") {
		t.Errorf("GET finance's reservation with an eng/* token: %d %s, want 404 not naming finance", a.status, a.body)
	}
	var res api.ReservationList
	aclMust(t, "GET", addr+"/v1/reservations", eng, "", &res)
	if len(res.Reservations) != 0 {
		t.Errorf("eng/* lists reservations %+v, want none (finance's is not eng's)", res.Reservations)
	}
	var eng1 api.Reservation
	aclMust(t, "PUT", addr+"/v1/reservations/eng-1", eng, `{"agent": "node-1", "role": "eng/ml", "resources": {"cpus": 1}}`, &eng1)
	// A role-scoped write lands only on the version whose role was checked:
	// an If-Match of another version is refused before anything is proposed.
	if a := aclDo(t, "PUT", addr+"/v1/reservations/eng-1", eng, `{"agent": "node-1", "role": "eng/ml", "resources": {"cpus": 2}}`,
		"If-Match", strconv.FormatUint(eng1.Version+100, 10)); a.status != 412 {
		t.Errorf("PUT eng-1 with a stale If-Match: %d %s, want 412", a.status, a.body)
	}
	// A token without any rule on roles is refused the list outright.
	if a := aclDo(t, "GET", addr+"/v1/roles", eng, ""); a.status != 403 {
		t.Errorf("GET /v1/roles with no role rule: %d %s, want 403", a.status, a.body)
	}
}

// frameworkCall is a SUBSCRIBE of info.
func subscribeBody(t *testing.T, info api.FrameworkInfo) string {
	b, err := json.Marshal(api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{FrameworkInfo: info}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestACLFrameworkPrincipalIsTheTokens: a framework with a token for eng/*
// cannot subscribe as finance nor claim another principal (403), and is
// throttled by its real principal: a tight limit on it gives 429s, a tight
// limit on the principal it claimed and was refused is never touched.
func TestACLFrameworkPrincipalIsTheTokens(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	engFW := newToken(t, addr, "eng-fw", "eng-sched", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"eng/*"}})
	victim := newToken(t, addr, "victim-fw", "victim", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister})

	sched := addr + api.SchedulerPath
	if a := aclDo(t, "POST", sched, engFW, subscribeBody(t, api.FrameworkInfo{Name: "f", Roles: []string{"finance"}})); a.status != 403 || !strings.Contains(string(a.body), "finance") {
		t.Errorf("SUBSCRIBE as finance with an eng/* token: %d %s, want 403 naming finance", a.status, a.body)
	}
	if a := aclDo(t, "POST", sched, engFW, subscribeBody(t, api.FrameworkInfo{Name: "f", Roles: []string{"eng/ml", "finance"}})); a.status != 403 {
		t.Errorf("SUBSCRIBE as eng/ml and finance with an eng/* token: %d %s, want 403", a.status, a.body)
	}

	// One call a 1000 s for victim, no queue: the first call takes the
	// token, any second one is refused.
	aclMust(t, "PUT", addr+"/v1/ratelimits/victim", aclOperatorToken, `{"qps": 0.001, "burst": 1, "capacity": 0}`, nil)
	for range 3 {
		a := aclDo(t, "POST", sched, engFW, subscribeBody(t, api.FrameworkInfo{Name: "f", Principal: "victim", Roles: []string{"eng/ml"}}))
		if a.status != 403 || a.code() != api.CodePermissionDenied || !strings.Contains(string(a.body), "eng-sched") {
			t.Fatalf("SUBSCRIBE claiming principal victim with eng-sched's token: %d %s, want 403 naming eng-sched", a.status, a.body)
		}
	}
	// The refused claims took nothing from victim's bucket.
	if a := aclDo(t, "POST", sched, victim, subscribeBody(t, api.FrameworkInfo{Name: "v", Roles: []string{"*"}})); a.status != 200 {
		t.Fatalf("victim's own first SUBSCRIBE: %d %s, want 200 (refused claims must not spend its limit)", a.status, a.body)
	}

	// Its real principal's limit throttles it.
	aclMust(t, "PUT", addr+"/v1/ratelimits/eng-sched", aclOperatorToken, `{"qps": 0.001, "burst": 1, "capacity": 0}`, nil)
	var limited bool
	for range 2 {
		a := aclDo(t, "POST", sched, engFW, subscribeBody(t, api.FrameworkInfo{Name: "e", Roles: []string{"eng/ml"}}))
		switch a.status {
		case 200:
		case 429:
			limited = true
		default:
			t.Fatalf("SUBSCRIBE with eng-sched's token: %d %s", a.status, a.body)
		}
	}
	if !limited {
		t.Fatal("2 SUBSCRIBEs under eng-sched's limit of 1 call per 1000 s were never answered 429")
	}
	var fws api.FrameworkList
	aclMust(t, "GET", addr+"/v1/frameworks", aclOperatorToken, "", &fws)
	for _, fw := range fws.Frameworks {
		if fw.Name == "e" && fw.Principal != "eng-sched" {
			t.Errorf("framework e subscribed without a principal has principal %q, want its token's eng-sched", fw.Principal)
		}
	}
	// The audit trail names the authenticated principal as the author.
	var audit struct{ Entries []api.AuditEntry }
	aclMust(t, "GET", addr+"/v1/audit", aclOperatorToken, "", &audit)
	var authors []string
	for _, e := range audit.Entries {
		if e.Action == "framework.set" {
			authors = append(authors, e.Principal)
		}
	}
	if !slices.Contains(authors, "eng-sched") || !slices.Contains(authors, "victim") || len(authors) == 0 {
		t.Errorf("framework.set audit entries by %v, want the frameworks' authenticated principals eng-sched and victim", authors)
	}
	for _, a := range authors {
		if a != "eng-sched" && a != "victim" {
			t.Errorf("a framework.set audit entry by %q, want only authenticated principals", a)
		}
	}
}

// TestACLFrameworkCallsComeFromItsPrincipal: once subscribed, a framework's
// calls need a token of its principal (or a management token).
func TestACLFrameworkCallsComeFromItsPrincipal(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	a1 := newToken(t, addr, "fw-a", "team-a", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister})
	b1 := newToken(t, addr, "fw-b", "team-b", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister})

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", addr+api.SchedulerPath,
		strings.NewReader(subscribeBody(t, api.FrameworkInfo{Name: "a", Roles: []string{"*"}, FailoverTimeoutSeconds: 60})))
	req.Header.Set("Authorization", "Bearer "+a1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev api.Event
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || ev.Type != api.EventSubscribed {
		t.Fatalf("first event %+v (%v), want SUBSCRIBED", ev, err)
	}
	stream := resp.Header.Get(api.HeaderStreamID)
	revive, _ := json.Marshal(api.Call{FrameworkID: ev.Subscribed.FrameworkID, Type: api.CallRevive})
	if a := aclDo(t, "POST", addr+api.SchedulerPath, b1, string(revive), api.HeaderStreamID, stream); a.status != 403 || !strings.Contains(string(a.body), "team-a") {
		t.Errorf("REVIVE of team-a's framework with team-b's token: %d %s, want 403", a.status, a.body)
	}
	// Nor may team-b take the framework over by subscribing with its id.
	takeover := subscribeBody(t, api.FrameworkInfo{ID: ev.Subscribed.FrameworkID, Name: "a", Roles: []string{"*"}})
	if a := aclDo(t, "POST", addr+api.SchedulerPath, b1, takeover); a.status != 403 {
		t.Errorf("SUBSCRIBE with team-a's framework id and team-b's token: %d %s, want 403", a.status, a.body)
	}
	if a := aclDo(t, "POST", addr+api.SchedulerPath, a1, string(revive), api.HeaderStreamID, stream); a.status != 202 {
		t.Errorf("REVIVE with team-a's token: %d %s, want 202", a.status, a.body)
	}
	if a := aclDo(t, "POST", addr+api.SchedulerPath, aclOperatorToken, string(revive), api.HeaderStreamID, stream); a.status != 202 {
		t.Errorf("REVIVE with the operator (management) token: %d %s, want 202", a.status, a.body)
	}
}

// TestACLAgentNeedsAgentToken: an agent without a token cannot register
// (401); with a token lacking agent register, 403; with one, it registers.
func TestACLAgentNeedsAgentToken(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	fw := newToken(t, addr, "not-an-agent", "", api.ACLRule{Object: api.ACLObjectFramework, Access: api.ACLRegister})
	agent := newToken(t, addr, "agent", "", api.ACLRule{Object: api.ACLObjectAgent, Access: api.ACLRegister})
	register := `{"type": "REGISTER", "register": {"agent_info": {"name": "node-1", "hostname": "h", "resources": {"cpus": 2}}}}`
	if a := aclDo(t, "POST", addr+api.AgentProtocolPath, "", register); a.status != 401 {
		t.Errorf("REGISTER without a token: %d %s, want 401", a.status, a.body)
	}
	if a := aclDo(t, "POST", addr+api.AgentProtocolPath, fw, register); a.status != 403 || !strings.Contains(string(a.body), "register agent") {
		t.Errorf("REGISTER with a framework token: %d %s, want 403 naming register agent", a.status, a.body)
	}
	if a := aclDo(t, "POST", addr+api.AgentProtocolPath, agent, register); a.status != 200 {
		t.Errorf("REGISTER with an agent token: %d %s, want 200", a.status, a.body)
	}
	var agents api.AgentList
	aclMust(t, "GET", addr+"/v1/agents", aclOperatorToken, "", &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Name != "node-1" {
		t.Errorf("agents %+v, want node-1 alone (refused registrations admit nothing)", agents.Agents)
	}
}

// TestACLBootstrap: the first bootstrap answers a management token whose
// secret works; a second is a conflict; a server without -acl refuses it;
// no secret reaches a log line or the audit trail.
func TestACLBootstrap(t *testing.T) {
	c, leader := startACLCluster(t, 1)
	addr := c.Address(leader)
	var boot api.ACLToken
	aclMust(t, "POST", addr+api.ACLBootstrapPath, "", "", &boot)
	if !boot.Management || boot.Principal != "bootstrap" || len(boot.Accessor) != 32 || !strings.HasPrefix(boot.Secret, "allot_") {
		t.Fatalf("bootstrap answered %+v, want a management token of principal bootstrap with a 32-character accessor and a secret", boot)
	}
	if a := aclDo(t, "POST", addr+api.ACLBootstrapPath, "", ""); a.status != 409 || a.code() != api.CodeConflict {
		t.Errorf("second bootstrap: %d %s, want 409 conflict", a.status, a.body)
	}
	var self api.ACLToken
	aclMust(t, "GET", addr+api.ACLTokenSelfPath, boot.Secret, "", &self)
	if self.Accessor != boot.Accessor || self.Secret != "" {
		t.Errorf("token/self with the bootstrap secret: %+v", self)
	}
	aclMust(t, "GET", addr+api.ACLTokenSelfPath, aclOperatorToken, "", &self)
	if self.Accessor != "operator" || self.Principal != "operator" || !self.Management {
		t.Errorf("token/self with the operator token: %+v, want accessor and principal operator, management", self)
	}
	// The bootstrap token manages: it makes a token, whose secret is new.
	var made api.ACLToken
	aclMust(t, "PUT", addr+api.ACLPolicyPath("readers"), boot.Secret, `{"rules": [{"object": "cluster", "access": "read"}]}`, nil)
	aclMust(t, "PUT", addr+api.ACLTokenPath("reader"), boot.Secret, `{"policies": ["readers", "readers"]}`, &made)
	if made.Secret == "" || made.Secret == boot.Secret || made.Principal != "reader" || !slices.Equal(made.Policies, []string{"readers"}) {
		t.Errorf("new token %+v: want a new secret, principal = accessor, policies deduplicated", made)
	}
	var again api.ACLToken
	aclMust(t, "PUT", addr+api.ACLTokenPath("reader"), boot.Secret, `{"description": "renamed", "policies": ["readers"]}`, &again)
	if again.Secret != "" {
		t.Errorf("an update answered a secret: %+v", again)
	}
	aclMust(t, "GET", addr+"/v1/cluster", made.Secret, "", nil) // the secret kept through the update
	if a := aclDo(t, "PUT", addr+api.ACLTokenPath("bad"), boot.Secret, `{"policies": ["nope"]}`); a.status != 400 || !strings.Contains(string(a.body), "nope") {
		t.Errorf("a token naming a missing policy: %d %s, want 400 naming it", a.status, a.body)
	}
	var list api.ACLTokenList
	listed := aclMust(t, "GET", addr+api.ACLTokensPath, boot.Secret, "", &list)
	audit := aclMust(t, "GET", addr+"/v1/audit", boot.Secret, "", nil)

	// A server without -acl refuses the bootstrap.
	plain := testcluster.Start(t, 1, testcluster.WithOperatorToken(aclOperatorToken))
	pl := waitLeader(t, plain)
	if a := aclDo(t, "POST", plain.Address(pl)+api.ACLBootstrapPath, "", ""); a.status != 409 || !strings.Contains(string(a.body), "-acl") {
		t.Errorf("bootstrap on a server without -acl: %d %s, want 409 naming -acl", a.status, a.body)
	}

	if !strings.Contains(string(audit.body), "acl.token.set") {
		t.Errorf("the audit trail does not show the token writes: %s", audit.body)
	}
	// Not the operator token: the harness writes the command line it runs
	// (-operator-token included) into the log file.
	logs, err := os.ReadFile(c.LogPath(leader))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{boot.Secret, made.Secret} {
		for name, text := range map[string][]byte{"GET /v1/acl/tokens": listed.body, "GET /v1/audit": audit.body, "the server's log": logs} {
			if strings.Contains(string(text), secret) {
				t.Errorf("%s shows a secret", name)
			}
		}
	}
}
