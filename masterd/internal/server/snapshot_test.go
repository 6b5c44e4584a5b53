package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

// fillState gives a server one of every kind of object the API writes.
func fillState(t testing.TB, s *Server) {
	t.Helper()
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/v1/test/agents/node-1", `{"hostname":"h1","resources":{"cpus":8,"mem":4096}}`},
		{"PUT", "/v1/quotas/eng", `{"guarantees":{"cpus":2},"limits":{"cpus":4,"mem":2048}}`},
		{"PUT", "/v1/quotas/eng/ml", `{"limits":{"cpus":3}}`},
		{"PUT", "/v1/roles/eng/ml", `{"weight":2,"lending_limit":{"cpus":1}}`},
		{"PUT", "/v1/reservations/db-1", `{"agent":"node-1","role":"db","resources":{"cpus":1,"mem":512}}`},
		{"PUT", "/v1/ratelimits/spark", `{"qps":10,"burst":20}`},
		{"PUT", "/v1/ratelimits/spark/labels/nightly", `{"qps":2}`},
		{"PUT", "/v1/ratelimits-default", `{"qps":100}`},
	} {
		mustCall(t, s, w.method, w.path, w.body)
	}
}

// objects is everything the operator API lists, read through the API.
func objects(t testing.TB, s *Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range []string{"/v1/quotas", "/v1/roles", "/v1/reservations", "/v1/ratelimits", "/v1/ratelimits-default",
		"/v1/agents", "/v1/audit", "/v1/acl/policies", "/v1/acl/tokens"} {
		out[p] = string(call(t, s, "GET", p, "").body)
	}
	return out
}

// save is GET /v1/snapshot over real HTTP, as a client sees it.
func save(t testing.TB, s *Server, token string) ([]byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", s.APIAddress()+api.SnapshotPath, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", api.SnapshotPath, resp.StatusCode, body)
	}
	return body, resp.Header
}

func restore(t testing.TB, s *Server, body []byte, token string) answer {
	t.Helper()
	req, _ := http.NewRequest("PUT", s.APIAddress()+api.SnapshotPath, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: data, header: resp.Header}
}

// TestSnapshotRestoresIntoAFreshServer saves a server's state and restores
// it into another: every object reads back identical, versions and audit
// trail included; the restoring server's own objects are gone; a write
// after it gets a version above the backup's index.
func TestSnapshotRestoresIntoAFreshServer(t *testing.T) {
	from := startDev(t)
	fillState(t, from)
	backup, header := save(t, from, "")
	if ct := header.Get("Content-Type"); ct != api.SnapshotContentType {
		t.Errorf("Content-Type %q, want %q", ct, api.SnapshotContentType)
	}
	sr, err := api.NewSnapshotReader(bytes.NewReader(backup))
	if err != nil {
		t.Fatal(err)
	}
	if err := sr.Verify(); err != nil {
		t.Fatalf("the backup does not verify: %v", err)
	}
	h := sr.Header()
	if strconv.FormatUint(h.Index, 10) != header.Get(api.HeaderIndex) || h.Index != from.appliedIndex() || h.Server != from.cfg.ID {
		t.Errorf("header %+v, X-Allot-Index %s, want the server's index %d", h, header.Get(api.HeaderIndex), from.appliedIndex())
	}
	want := objects(t, from)

	to := startDev(t)
	mustCall(t, to, "PUT", "/v1/ratelimits/mine", `{"qps":1}`)
	for range 3 * int(h.Index) { // the restoring server's log runs ahead of the backup's
		mustCall(t, to, "PUT", "/v1/ratelimits/mine", `{"qps":2}`)
	}
	logBefore := to.node.Raft().LastIndex()
	a := restore(t, to, backup, "")
	if a.status != http.StatusOK {
		t.Fatalf("PUT %s: %d %s", api.SnapshotPath, a.status, a.body)
	}
	var restored api.SnapshotRestored
	decode(t, a.body, &restored)
	if restored.Index != h.Index || a.header.Get(api.HeaderIndex) != strconv.FormatUint(h.Index, 10) {
		t.Errorf("answer %s, %s %s, want index %d", a.body, api.HeaderIndex, a.header.Get(api.HeaderIndex), h.Index)
	}
	got := objects(t, to)
	for path, body := range want {
		if got[path] != body {
			t.Errorf("GET %s after the restore:\n%s\nwant\n%s", path, got[path], body)
		}
	}
	var q api.Quota
	decode(t, mustCall(t, to, "PUT", "/v1/quotas/after", `{"limits":{"cpus":1}}`).body, &q)
	if q.Version <= max(h.Index, logBefore) {
		t.Errorf("a write after the restore got version %d, not above the backup's index %d and the log's %d", q.Version, h.Index, logBefore)
	}
}

// withChecksum ends body with the checksum line that matches it.
func withChecksum(body string) []byte {
	sum := sha256.Sum256([]byte(body))
	return []byte(body + "sha256 " + hex.EncodeToString(sum[:]) + "\n")
}

// TestSnapshotRestoreRefusesBadInput: every bad body gets 400 (413 when too
// large) with a message that names what is wrong, and changes nothing.
func TestSnapshotRestoreRefusesBadInput(t *testing.T) {
	s := startDev(t)
	fillState(t, s)
	good, _ := save(t, s, "")
	before := objects(t, s)
	lines := strings.SplitN(string(good), "\n", 3)
	doc := lines[2][:len(lines[2])-len("sha256 ")-2*sha256.Size-1]
	altered := bytes.Clone(good)
	i := bytes.Index(altered, []byte(`"cpus": 4`))
	altered[i+len(`"cpus": `)] = '9'

	tests := map[string]struct {
		body []byte
		says string
	}{
		"an empty body":         {nil, "empty"},
		"JSON":                  {[]byte(`{"quotas": []}`), "not an allot backup"},
		"cut short":             {good[:len(good)/2], "truncated"},
		"without its last byte": {good[:len(good)-1], "truncated"},
		"a limit altered":       {altered, "checksum"},
		"a newer file format":   {[]byte("allot-snapshot 2\n" + lines[1] + "\n" + lines[2]), "file version 2"},
		"a newer store version": {withChecksum(lines[0] + "\n" +
			strings.Replace(lines[1], `"rules_version":3`, `"rules_version":4`, 1) + "\n" + doc), "upgrade every server"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, query := range []string{"", "?dry_run=true"} {
				wantError(t, call(t, s, "PUT", api.SnapshotPath+query, string(tc.body)), http.StatusBadRequest, api.CodeInvalidArgument, tc.says)
			}
		})
	}
	wantError(t, call(t, s, "PUT", api.SnapshotPath, string(good), "If-Match", "3"), http.StatusBadRequest, api.CodeInvalidArgument, "If-Match")
	req := httptest.NewRequest("PUT", api.SnapshotPath, bytes.NewReader(good))
	req.ContentLength = maxSnapshotBytes + 1
	rec := httptest.NewRecorder()
	s.http.Handler.ServeHTTP(rec, req)
	wantError(t, answer{status: rec.Code, body: rec.Body.Bytes()}, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, "bytes")

	// A dry run of a good backup says what it would restore.
	var dry api.DryRun
	decode(t, mustCall(t, s, "PUT", api.SnapshotPath+"?dry_run=true", string(good)).body, &dry)
	var object api.SnapshotRestored
	decode(t, dry.Object, &object)
	if !dry.DryRun || object.Index == 0 {
		t.Errorf("dry run: %+v", dry)
	}
	if after := objects(t, s); !equalObjects(after, before) {
		t.Fatalf("refused restores or a dry run changed the state:\n%v\nwant\n%v", after, before)
	}
}

func equalObjects(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSnapshotRestoreBringsBackTheBackupsTokens: restoring into a cluster
// with ACLs replaces its tokens by the backup's: its own bootstrap token
// stops working, the backup's works, and -operator-token keeps working.
func TestSnapshotRestoreBringsBackTheBackupsTokens(t *testing.T) {
	bootstrap := func(s *Server) string {
		var tok api.ACLToken
		decode(t, mustCall(t, s, "POST", api.ACLBootstrapPath, "").body, &tok)
		return tok.Secret
	}
	from := startDev(t, func(c *Config) { c.ACL = true })
	old := bootstrap(from)
	backup, _ := save(t, from, old)

	to := startDev(t, func(c *Config) { c.ACL = true; c.OperatorToken = "the-operator" })
	fresh := bootstrap(to)
	if a := restore(t, to, backup, "no-such-token"); a.status != http.StatusUnauthorized {
		t.Fatalf("restore with an unknown token: %d %s", a.status, a.body)
	}
	if a := restore(t, to, backup, fresh); a.status != http.StatusOK {
		t.Fatalf("restore with the bootstrap token: %d %s", a.status, a.body)
	}
	for token, want := range map[string]int{fresh: 401, old: 200, "the-operator": 200} {
		a := call(t, to, "GET", "/v1/acl/tokens", "", "Authorization", "Bearer "+token)
		if a.status != want {
			t.Errorf("after the restore, GET /v1/acl/tokens with %.8s…: %d %s, want %d", token, a.status, a.body, want)
		}
	}
}

// TestSnapshotRestoreKeepsACLsBootstrapped: a backup of a cluster whose ACLs
// were never bootstrapped is refused by one whose ACLs are (it would drop
// every token and reopen bootstrap), dry run included, and nothing changes.
func TestSnapshotRestoreKeepsACLsBootstrapped(t *testing.T) {
	from := startDev(t)
	fillState(t, from)
	backup, _ := save(t, from, "")

	to := startDev(t, func(c *Config) { c.ACL = true })
	var tok api.ACLToken
	decode(t, mustCall(t, to, "POST", api.ACLBootstrapPath, "").body, &tok)
	before := call(t, to, "GET", "/v1/audit", "", "Authorization", "Bearer "+tok.Secret)
	for _, path := range []string{api.SnapshotPath + "?dry_run=true", api.SnapshotPath} {
		req, _ := http.NewRequest("PUT", to.APIAddress()+path, bytes.NewReader(backup))
		req.Header.Set("Authorization", "Bearer "+tok.Secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "bootstrap") {
			t.Errorf("PUT %s of a backup without ACLs into a bootstrapped cluster: %d %s, want 409 naming bootstrap", path, resp.StatusCode, body)
		}
	}
	after := call(t, to, "GET", "/v1/audit", "", "Authorization", "Bearer "+tok.Secret)
	if after.status != http.StatusOK || string(after.body) != string(before.body) {
		t.Errorf("the refused restore changed the cluster: audit %d %s, was %s", after.status, after.body, before.body)
	}
}

// TestSnapshotRestoreStartsTheTermAgain: the leader's live state is built
// again from the restored state, as when it wins an election: the agent
// connected before is told to register again (its stream ends), and the
// agents and totals shown are the backup's.
func TestSnapshotRestoreStartsTheTermAgain(t *testing.T) {
	from := startDev(t)
	mustCall(t, from, "PUT", "/v1/test/agents/node-7", `{"hostname":"h7","resources":{"cpus":7}}`)
	backup, _ := save(t, from, "")

	to := startDev(t)
	ag := openStream[api.AgentEvent](t, to, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Resources: api.Resources{"cpus": 4}}}})
	ag.next(t, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered })
	if a := restore(t, to, backup, ""); a.status != http.StatusOK {
		t.Fatalf("restore: %d %s", a.status, a.body)
	}
	ended := time.After(20 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ag.events:
		case <-ended:
			t.Fatal("the agent's stream stayed open through the restore")
		}
	}
	var agents api.AgentList
	decode(t, mustCall(t, to, "GET", "/v1/agents", "").body, &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Name != "node-7" || agents.Agents[0].Connected {
		t.Errorf("agents after the restore: %+v, want the backup's node-7, not connected", agents.Agents)
	}
	var cluster api.Cluster
	decode(t, mustCall(t, to, "GET", "/v1/cluster", "").body, &cluster)
	if cluster.Total["cpus"] != 7 {
		t.Errorf("cluster total after the restore: %v, want the backup's cpus:7", cluster.Total)
	}
}

// TestClusterTotals: GET /v1/cluster's totals are the sums of what
// /v1/agents and /v1/roles show, with offers outstanding (regular and
// revocable) and a reservation. (A follower's copy of the leader's totals
// is checked on real clusters: TestClusterTotalsOnFollowers.)
func TestClusterTotals(t *testing.T) {
	s := startDev(t, func(c *Config) { c.AllocationInterval = 20 * time.Millisecond })
	ag := openStream[api.AgentEvent](t, s, api.AgentProtocolPath, api.AgentCall{Type: api.AgentCallRegister,
		Register: &api.AgentRegister{AgentInfo: api.AgentInfo{Name: "node-1", Resources: api.Resources{"cpus": 4, "mem": 4096}}}})
	ag.next(t, "REGISTERED", func(e api.AgentEvent) bool { return e.Type == api.AgentEventRegistered })
	mustCall(t, s, "PUT", "/v1/reservations/db-1", `{"agent":"node-1","role":"db","resources":{"cpus":1,"mem":512}}`)
	fw := openStream[api.Event](t, s, api.SchedulerPath, api.Call{Type: api.CallSubscribe, Subscribe: &api.Subscribe{
		FrameworkInfo: api.FrameworkInfo{Name: "etl", Roles: []string{"analytics"}, Capabilities: []string{api.CapabilityRevocableResources}}}})
	fw.next(t, "SUBSCRIBED", func(e api.Event) bool { return e.Type == api.EventSubscribed })

	var cluster api.Cluster
	waitFor(t, "a regular and a revocable offer", func() bool {
		decode(t, mustCall(t, s, "GET", "/v1/cluster", "").body, &cluster)
		return !cluster.Offered.IsZero() && !cluster.RevocableAllocated.IsZero()
	})
	var (
		agents api.AgentList
		roles  api.RoleList
	)
	decode(t, mustCall(t, s, "GET", "/v1/agents", "").body, &agents)
	decode(t, mustCall(t, s, "GET", "/v1/roles", "").body, &roles)
	sums := map[string]api.Resources{"allocated": {}, "offered": {}, "reserved": {}, "revocable": {}, "revocable_allocated": {},
		"roles' reserved": {}, "roles' revocable_allocated": {}}
	for _, a := range agents.Agents {
		sums["allocated"].Add(a.Allocated)
		sums["reserved"].Add(a.Reserved)
		sums["revocable"].Add(a.Revocable)
		sums["revocable_allocated"].Add(a.RevocableAllocated)
	}
	for _, r := range roles.Roles {
		sums["offered"].Add(r.Offered)
		sums["roles' reserved"].Add(r.Reserved)
		sums["roles' revocable_allocated"].Add(r.RevocableAllocated)
	}
	for name, got := range map[string]api.Resources{"allocated": cluster.Allocated, "offered": cluster.Offered,
		"reserved": cluster.Reserved, "revocable": cluster.Revocable, "revocable_allocated": cluster.RevocableAllocated,
		"roles' reserved": cluster.Reserved, "roles' revocable_allocated": cluster.RevocableAllocated} {
		if !sameAmounts(got, sums[name]) {
			t.Errorf("cluster %s %v, the sum the lists show %v", name, got, sums[name])
		}
	}
	if want := (api.Resources{"cpus": 1, "mem": 512}); !sameAmounts(cluster.Reserved, want) || !sameAmounts(cluster.Revocable, want) {
		t.Errorf("reserved %v and revocable %v, want both the idle reservation %v", cluster.Reserved, cluster.Revocable, want)
	}
	if want := (api.Resources{"cpus": 3, "mem": 3584}); !sameAmounts(cluster.Offered, want) {
		t.Errorf("offered %v, want the unreserved rest %v", cluster.Offered, want)
	}
}

// sameAmounts compares resource maps, a name at 0 being as good as absent.
func sameAmounts(a, b api.Resources) bool {
	for _, name := range append(a.Names(), b.Names()...) {
		if a[name] != b[name] {
			return false
		}
	}
	return true
}

// TestSnapshotBodyOnlyHasToKeepComing: a backup that arrives in pieces over
// more than the body timeout is restored, as long as no gap between pieces
// reaches it; one that stops arriving gets 408 and changes nothing.
func TestSnapshotBodyOnlyHasToKeepComing(t *testing.T) {
	const bodyTimeout = time.Second
	s := startDev(t, func(c *Config) { c.httpTimeouts = httpTimeouts{body: bodyTimeout} })
	fillState(t, s)
	file, _ := save(t, s, "")
	before := objects(t, s)

	send := func(pieces int, stallAfter int) answer {
		pr, pw := io.Pipe()
		go func() {
			step := len(file)/pieces + 1
			for i := 0; i*step < len(file); i++ {
				if i == stallAfter {
					return // the writer never closes: the body stalls
				}
				pw.Write(file[i*step : min(len(file), (i+1)*step)])
				time.Sleep(bodyTimeout / 10)
			}
			pw.Close()
		}()
		defer pw.Close()
		req, _ := http.NewRequest("PUT", s.APIAddress()+api.SnapshotPath, pr)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, body: body, header: resp.Header}
	}
	// 20 pieces, a tenth of the timeout apart: twice the timeout in all,
	// and a busy machine has ten times a gap to spare before one cuts it.
	if a := send(20, -1); a.status != http.StatusOK {
		t.Fatalf("a backup that kept coming: %d %s", a.status, a.body)
	}
	wantError(t, send(20, 3), http.StatusRequestTimeout, api.CodeInvalidArgument, "stopped arriving")
	if after := objects(t, s); !equalObjects(after, before) {
		t.Fatal("the restores changed the state")
	}
}
