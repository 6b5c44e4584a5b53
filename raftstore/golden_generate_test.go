package raftstore_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
)

// goldenSnapshotThreshold is the generating server's -raft-snapshot-threshold.
// The first writes end at exactly this index, where the server takes its one
// snapshot: masterd keeps as many trailing entries as the threshold, so Raft
// compacts nothing and the log keeps its whole history. The writes after the
// snapshot stay fewer than the threshold, so no second snapshot compacts it.
const goldenSnapshotThreshold = 24

// goldenSnapshotThresholdV3 is goldenSnapshotThreshold from store version 3
// on, whose golden log writes ACL state and labeled limits before the
// snapshot as well.
const goldenSnapshotThresholdV3 = 40

// goldenOperatorToken is the -operator-token of a version 3 generating
// server, which runs with -acl: a management token, principal "operator",
// that the joining server and the writes use. It is no secret of any
// cluster: the command lines of the generation show it.
const goldenOperatorToken = "golden-log-operator-token"

// goldenMissingTypes are the command types no release writes yet, so the
// golden log cannot hold them: masterd has no path that removes an agent
// from the registry (agent.remove).
var goldenMissingTypes = []raftstore.MessageType{raftstore.AgentRemoveType}

// goldenTarget checks that dir may receive a golden log: it is named
// golden-vN and holds none of a golden log's files yet. It returns N.
func goldenTarget(dir string) (uint32, error) {
	version, err := goldenVersion(dir)
	if err != nil {
		return 0, err
	}
	for _, name := range []string{"raft.db", "snapshots", "expected.json"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("%s already holds a golden log (%s): it is written once per store version and never regenerated; "+
				"the release that raises StoreVersion to N writes testdata/golden-vN (see testdata/golden-v1/README.md)", dir, name)
		}
	}
	return version, nil
}

// generateGoldenLog runs a real masterd of commit (not -dev: Raft on disk,
// one server, -bootstrap), writes at least one command of every type through
// its public APIs, takes a snapshot part way, and stores its raft.db and
// snapshot in dir with expected.json: the state those give. A second server
// joins for a while so that the log also holds server.remove. dir is
// testdata/golden-vN, N the store version the release runs: from version 2
// on, every write is stamped with it, and the writes include what only that
// version stores (goldenWritesV2BeforeSnapshot, ...AfterSnapshot). It only
// ever creates files: it refuses a dir that holds any of a golden log's.
func generateGoldenLog(t *testing.T, dir, commit string) {
	version, err := goldenTarget(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testcluster.BuildCommit("", commit)
	if err != nil {
		t.Fatal(err)
	}
	threshold := uint64(goldenSnapshotThreshold)
	args := []string{"-test-hooks", "-raft-snapshot-interval", "50ms"}
	var opts []testcluster.Option
	token := ""
	if version >= 3 {
		// ACL commands need -acl (a server without it refuses the
		// bootstrap); the operator token lets the second server join and
		// the writes through before and after it.
		threshold = goldenSnapshotThresholdV3
		args = append(args, "-acl")
		token = goldenOperatorToken
		opts = append(opts, testcluster.WithOperatorToken(token))
	}
	args = append(args, "-raft-snapshot-threshold", strconv.FormatUint(threshold, 10))
	c := testcluster.Start(t, 2, append(opts, testcluster.WithBinary(bin), testcluster.WithArgs(args...))...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if leader, err := c.WaitLeader(ctx); err != nil || leader != 0 {
		t.Fatalf("want %s (it bootstraps) to lead: leader %d, %v", c.ID(0), leader, err)
	}
	g := newGoldenWriter(t, ctx, c.Address(0), token)
	g.waitStoreVersion(version)
	if version >= 3 {
		goldenWritesV3First(g)
	}

	// Before the snapshot: objects of every kind.
	g.do(http.MethodPut, "/v1/test/agents/node-1", map[string]any{"hostname": "node-1.example", "resources": api.Resources{"cpus": 8, "mem": 16384, "disk": 100000}})
	g.do(http.MethodPut, "/v1/test/agents/node-2", map[string]any{"hostname": "node-2.example", "resources": api.Resources{"cpus": 4, "mem": 8192}})
	g.do(http.MethodPut, api.QuotaPath("eng"), api.QuotaRequest{Guarantees: api.Resources{"cpus": 4, "mem": 4096}, Limits: api.Resources{"cpus": 8, "mem": 8192}})
	g.do(http.MethodPut, api.QuotaPath("eng/ml"), api.QuotaRequest{Guarantees: api.Resources{"cpus": 2}, Limits: api.Resources{"cpus": 4}})
	g.do(http.MethodPut, api.RolePath("eng"), map[string]any{"weight": 2})
	g.do(http.MethodPut, api.RolePath("eng/ml"), map[string]any{"weight": 3, "lending_limit": api.Resources{"cpus": 1}})
	g.do(http.MethodPut, api.ReservationPath("db-1"), api.ReservationRequest{Agent: "node-1", Role: "db", Resources: api.Resources{"cpus": 2, "mem": 2048}})
	// Past node-2's capacity, forced: stored pending.
	g.do(http.MethodPut, api.ReservationPath("db-big"), api.ReservationRequest{Agent: "node-2", Role: "db", Resources: api.Resources{"cpus": 100}, Force: true})
	g.do(http.MethodPut, api.RateLimitPath("spark"), map[string]any{"qps": 55.5, "burst": 10, "capacity": 1000})
	g.do(http.MethodPut, api.RateLimitPath("storm"), map[string]any{}) // counted, not throttled
	g.do(http.MethodPut, "/v1/ratelimits-default", map[string]any{"qps": 33.3, "burst": 40})
	// rates.json, replacing every limit and the default at once.
	g.do(http.MethodPut, "/v1/ratelimits", map[string]any{
		"limits":                     []map[string]any{{"principal": "spark", "qps": 60}, {"principal": "flink", "qps": 10, "burst": 5, "capacity": 100}},
		"aggregate_default_qps":      20,
		"aggregate_default_capacity": 500,
	})
	analytics := g.subscribe(api.FrameworkInfo{Name: "analytics", Principal: "analytics", Roles: []string{"eng/ml"},
		Capabilities: []string{api.CapabilityRevocableResources}, FailoverTimeoutSeconds: 3600})
	batch := g.subscribe(api.FrameworkInfo{Name: "batch", Principal: "batch", Roles: []string{"batch"}, FailoverTimeoutSeconds: 600})
	if version >= 2 {
		goldenWritesV2BeforeSnapshot(g)
	}
	if version >= 3 {
		goldenWritesV3BeforeSnapshot(g)
	}
	for weight := 2.5; g.index() < threshold; weight += 0.5 {
		g.do(http.MethodPut, api.RolePath("eng"), map[string]any{"weight": weight})
	}
	if idx := g.index(); idx != threshold {
		t.Fatalf("the writes before the snapshot end at index %d, past %d: raise the snapshot threshold", idx, threshold)
	}
	snap := waitGoldenSnapshot(t, filepath.Join(c.Dir(0), "data"))
	if snap.Index != threshold {
		t.Fatalf("the snapshot is at index %d, want %d", snap.Index, threshold)
	}

	// After the snapshot: changes and deletions of what it holds, and more.
	g.do(http.MethodPut, api.QuotaPath("eng"), api.QuotaRequest{Guarantees: api.Resources{"cpus": 4, "mem": 4096}, Limits: api.Resources{"cpus": 10, "mem": 8192}})
	g.do(http.MethodDelete, api.QuotaPath("eng/ml"), nil)
	g.do(http.MethodDelete, api.RolePath("eng/ml"), nil)
	g.do(http.MethodPut, api.ReservationPath("db-2"), api.ReservationRequest{Agent: "node-1", Role: "db", Resources: api.Resources{"mem": 1024}})
	g.do(http.MethodDelete, api.ReservationPath("db-1"), nil)
	g.do(http.MethodPut, api.RateLimitPath("storm"), map[string]any{"qps": 5})
	g.do(http.MethodDelete, api.RateLimitPath("flink"), nil)
	g.do(http.MethodDelete, "/v1/ratelimits-default", nil)
	g.do(http.MethodPut, "/v1/ratelimits-default", map[string]any{"qps": 12, "capacity": 0})
	g.do(http.MethodPut, "/v1/test/agents/node-2", map[string]any{"hostname": "node-2.example", "resources": api.Resources{"cpus": 6, "mem": 8192}})
	if version >= 2 {
		goldenWritesV2AfterSnapshot(g)
	}
	if version >= 3 {
		goldenWritesV3AfterSnapshot(g)
	}
	g.teardown(batch)
	// The default limit the golden log sets throttles this call as well
	// (from version 3 on, the writes' principal is the operator's).
	for {
		err := g.cl.RemoveServer(ctx, c.ID(1))
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeRateLimited && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("remove %s: %v", c.ID(1), err)
		}
		break
	}
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	live := g.liveState()
	c.Stop()
	analytics.Close()

	copyDataDir(t, filepath.Join(c.Dir(0), "data"), dir)
	expected := checkGenerated(t, dir, live, version)
	if err := createFile(filepath.Join(dir, "expected.json"), expected); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the golden log of %s (store version %d) into %s", commit, version, dir)
}

// goldenWritesV2BeforeSnapshot writes what only store version 2 stores, so
// that the snapshot holds it: an empty lending limit (lend nothing), which
// version 1 stored as none (no cap); and values past the 0.001 fixed point,
// which the version 2 leader rounds before it proposes (version 1 logged
// them as sent and rounded them in Apply).
func goldenWritesV2BeforeSnapshot(g *goldenWriter) {
	g.do(http.MethodPut, api.RolePath("db"), map[string]any{"weight": 1.5, "lending_limit": api.Resources{}})
	g.do(http.MethodPut, api.QuotaPath("batch"), map[string]any{
		"guarantees": map[string]any{"cpus": 1.0004},
		"limits":     map[string]any{"cpus": 2.0006, "mem": 1024.0004},
	})
	g.do(http.MethodPut, api.RolePath("batch"), map[string]any{"weight": 1, "lending_limit": map[string]any{"cpus": 0.5004, "mem": 0}})
}

// goldenWritesV2AfterSnapshot changes a role from no cap to lend nothing and
// one from lend nothing to a cap, after the snapshot.
func goldenWritesV2AfterSnapshot(g *goldenWriter) {
	g.do(http.MethodPut, api.RolePath("eng"), map[string]any{"weight": 2, "lending_limit": api.Resources{}})
	g.do(http.MethodPut, api.RolePath("db"), map[string]any{"weight": 1.5, "lending_limit": map[string]any{"cpus": 1.0004, "mem": 512.0006}})
	g.do(http.MethodPut, api.ReservationPath("db-3"), map[string]any{"agent": "node-1", "role": "db", "resources": map[string]any{"cpus": 0.2506}})
}

// goldenWritesV3First bootstraps the ACL system and gives the frameworks
// the golden log subscribes tokens of their principals (with ACLs on, a
// framework's principal is its token's): acl.bootstrap, acl.policy.set,
// acl.token.set before anything else needs them.
func goldenWritesV3First(g *goldenWriter) {
	var boot api.ACLToken
	g.call(api.Request{Method: http.MethodPost, Path: api.ACLBootstrapPath}, &boot)
	if boot.Secret == "" || !boot.Management {
		g.t.Fatalf("the bootstrap answered %+v, want a management token with its secret", boot)
	}
	g.do(http.MethodPut, api.ACLPolicyPath("frameworks"), api.ACLPolicyRequest{Description: "every framework",
		Rules: []api.ACLRule{{Object: api.ACLObjectFramework, Access: api.ACLRegister, Roles: []string{"eng/*", "batch"}}}})
	g.schedTokens = map[string]string{}
	for _, principal := range []string{"analytics", "batch"} {
		var tok api.ACLToken
		g.call(api.Request{Method: http.MethodPut, Path: api.ACLTokenPath(principal), Body: api.ACLTokenRequest{
			Description: principal + " scheduler", Policies: []string{"frameworks"}}}, &tok)
		if tok.Secret == "" || tok.Principal != principal {
			g.t.Fatalf("PUT token %s answered %+v, want its secret and principal %s", principal, tok, principal)
		}
		g.schedTokens[principal] = tok.Secret
	}
}

// goldenWritesV3BeforeSnapshot writes what only store version 3 stores, so
// that the snapshot (format 3) holds it: policies, a token naming two of
// them, a management token of its own principal, labeled limits beside a
// principal's own, through the labeled endpoint and in rates.json.
func goldenWritesV3BeforeSnapshot(g *goldenWriter) {
	g.do(http.MethodPut, api.ACLPolicyPath("readers"), api.ACLPolicyRequest{
		Rules: []api.ACLRule{{Object: api.ACLObjectCluster, Access: api.ACLRead}, {Object: api.ACLObjectQuota, Access: api.ACLRead}}})
	g.do(http.MethodPut, api.ACLPolicyPath("eng-ops"), api.ACLPolicyRequest{Description: "eng's operators",
		Rules: []api.ACLRule{{Object: api.ACLObjectQuota, Access: api.ACLWrite, Roles: []string{"eng", "eng/*"}}}})
	g.do(http.MethodPut, api.ACLTokenPath("ci-deploy"), api.ACLTokenRequest{Description: "CI",
		Policies: []string{"readers", "eng-ops", "readers"}, Principal: "ci"})
	g.do(http.MethodPut, api.ACLTokenPath("ops-admin"), api.ACLTokenRequest{Management: true})
	g.do(http.MethodPut, api.LabeledRateLimitPath("spark", "etl"), map[string]any{"qps": 5, "burst": 5, "capacity": 50})
	g.do(http.MethodPut, api.LabeledRateLimitPath("analytics", "adhoc"), map[string]any{}) // counted, not throttled
	g.do(http.MethodPut, "/v1/ratelimits", map[string]any{
		"limits": []map[string]any{{"principal": "spark", "qps": 60}, {"principal": "spark", "label": "etl", "qps": 6},
			{"principal": "flink", "qps": 10, "burst": 5, "capacity": 100}, {"principal": "analytics", "label": "adhoc", "capacity": 7}},
		"aggregate_default_qps": 20, "aggregate_default_capacity": 500,
	})
}

// goldenWritesV3AfterSnapshot changes and deletes what the snapshot holds:
// a policy deleted under the token naming it (ci-deploy keeps only readers,
// at the delete's index), another token updated (its secret kept) and one
// revoked, a labeled limit deleted and another set.
func goldenWritesV3AfterSnapshot(g *goldenWriter) {
	g.do(http.MethodDelete, api.ACLPolicyPath("eng-ops"), nil)
	g.do(http.MethodPut, api.ACLTokenPath("analytics"), api.ACLTokenRequest{Description: "analytics scheduler, updated", Policies: []string{"frameworks"}})
	g.do(http.MethodDelete, api.ACLTokenPath("ops-admin"), nil)
	g.do(http.MethodDelete, api.LabeledRateLimitPath("analytics", "adhoc"), nil)
	g.do(http.MethodPut, api.LabeledRateLimitPath("batch", "nightly"), map[string]any{"qps": 1})
}

// onlyV3 reports whether c is what only store version 3 stores: an ACL
// command or a labeled rate limit.
func onlyV3(c raftstore.Command) bool {
	switch c := c.(type) {
	case *raftstore.ACLBootstrap, *raftstore.ACLPolicySet, *raftstore.ACLPolicyDelete, *raftstore.ACLTokenSet, *raftstore.ACLTokenDelete:
		return true
	case *raftstore.RateLimitSet:
		return c.Label != ""
	case *raftstore.RateLimitDelete:
		return c.Label != ""
	case *raftstore.RateLimitConfigReplace:
		return slices.ContainsFunc(c.Limits, func(l raftstore.RateLimitSet) bool { return l.Label != "" })
	}
	return false
}

// createFile writes a new file and fails on one that exists: a golden
// file is never written over.
func createFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// goldenWriter writes through the leader's public API and stops the
// generation at the first refusal.
type goldenWriter struct {
	t     *testing.T
	ctx   context.Context
	addr  string
	cl    *api.Client
	sched *api.SchedulerClient
	// token is what the writes call with ("" before version 3);
	// schedTokens are the frameworks' secrets by principal (version 3: a
	// framework subscribes with a token of its principal).
	token       string
	schedTokens map[string]string
}

func newGoldenWriter(t *testing.T, ctx context.Context, addr, token string) *goldenWriter {
	cl, err := api.NewClient([]string{addr}, token)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := api.NewSchedulerClient([]string{addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	return &goldenWriter{t: t, ctx: ctx, addr: addr, cl: cl, sched: sched, token: token}
}

func (g *goldenWriter) do(method, path string, body any) {
	g.t.Helper()
	g.call(api.Request{Method: method, Path: path, Body: body}, nil)
}

// call sends req, waiting out the rate limit the golden log itself sets on
// anonymous callers (the default limit), and returns the answer's index.
func (g *goldenWriter) call(req api.Request, out any) uint64 {
	g.t.Helper()
	for {
		meta, err := g.cl.Do(g.ctx, req, out)
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.Code == api.CodeRateLimited && g.ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			g.t.Fatalf("%s %s: %v", req.Method, req.Path, err)
		}
		return meta.Index
	}
}

// waitStoreVersion checks that the release runs store version version and,
// from version 2 on, waits until the leader has heard every server run it,
// so that every write is stamped with it (a release before store versions
// shows none: version 1).
func (g *goldenWriter) waitStoreVersion(version uint32) {
	g.t.Helper()
	for {
		var info api.Cluster
		g.call(api.Request{Method: http.MethodGet, Path: "/v1/cluster"}, &info)
		i := slices.IndexFunc(info.Servers, func(s api.Server) bool { return s.Leader })
		if i < 0 {
			g.t.Fatalf("GET /v1/cluster names no leader: %+v", info.Servers)
		}
		if runs := max(info.Servers[i].StoreVersion, 1); runs != version {
			g.t.Fatalf("the release runs store version %d: it writes testdata/golden-v%d, not golden-v%d", runs, runs, version)
		}
		if version == 1 || !slices.ContainsFunc(info.Servers, func(s api.Server) bool { return s.StoreVersion < version }) {
			return
		}
		select {
		case <-g.ctx.Done():
			g.t.Fatalf("the leader never heard every server run store version %d: %+v", version, info.Servers)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// index is the index of the last command the leader applied.
func (g *goldenWriter) index() uint64 {
	g.t.Helper()
	return g.call(api.Request{Method: http.MethodGet, Path: "/v1/quotas"}, nil)
}

// subscribe registers a framework (framework.set); its session stays open
// so that the master keeps it.
func (g *goldenWriter) subscribe(info api.FrameworkInfo) *api.SchedulerSession {
	g.t.Helper()
	sched := g.sched
	if secret, ok := g.schedTokens[info.Principal]; ok {
		var err error
		if sched, err = api.NewSchedulerClient([]string{g.addr}, secret); err != nil {
			g.t.Fatal(err)
		}
	}
	s, err := sched.Subscribe(g.ctx, info)
	if err != nil {
		g.t.Fatalf("subscribe %s: %v", info.Name, err)
	}
	g.t.Cleanup(s.Close)
	return s
}

// teardown removes a framework (framework.remove), which the master writes
// after it answers the call: it waits for the audit entry.
func (g *goldenWriter) teardown(s *api.SchedulerSession) {
	g.t.Helper()
	after := g.index()
	if err := s.Teardown(g.ctx); err != nil {
		g.t.Fatalf("teardown %s: %v", s.FrameworkID(), err)
	}
	for {
		var audit api.AuditList
		g.call(api.Request{Method: http.MethodGet, Path: "/v1/audit", Query: url.Values{"after": {strconv.FormatUint(after, 10)}}}, &audit)
		for _, e := range audit.Entries {
			if e.Object == "framework/"+s.FrameworkID() && string(e.After) == "null" {
				return
			}
		}
		select {
		case <-g.ctx.Done():
			g.t.Fatalf("framework %s was not removed: %v", s.FrameworkID(), g.ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// liveState is the state as the release's own API shows it, in the getters'
// shapes, for what the API shows of each.
func (g *goldenWriter) liveState() goldenState {
	g.t.Helper()
	var st goldenState
	get := func(path string, out any) uint64 {
		return g.call(api.Request{Method: http.MethodGet, Path: path}, out)
	}
	var quotas api.QuotaList
	st.Index = get("/v1/quotas", &quotas)
	st.Quotas = quotas.Quotas
	var roles api.RoleList
	get("/v1/roles", &roles)
	for _, r := range roles.Roles {
		if r.Version > 0 {
			st.Roles = append(st.Roles, raftstore.RolePolicy{Role: r.Role, Weight: r.Weight, LendingLimit: r.LendingLimit, Version: r.Version})
		}
	}
	var reservations api.ReservationList
	get("/v1/reservations", &reservations)
	st.Reservations = reservations.Reservations
	var limits api.RateLimitConfig
	get("/v1/ratelimits", &limits)
	for _, l := range limits.Limits {
		var rl api.RateLimit
		path := api.RateLimitPath(l.Principal)
		if l.Label != "" {
			path = api.LabeledRateLimitPath(l.Principal, l.Label)
		}
		get(path, &rl)
		st.RateLimits = append(st.RateLimits, rl)
	}
	// rates.json lists the limits by principal as stored, a principal's
	// labeled ones beside its own; the getters sort by principal, then label.
	slices.SortStableFunc(st.RateLimits, func(a, b api.RateLimit) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Label, b.Label))
	})
	var def api.RateLimitDefault
	get("/v1/ratelimits-default", &def)
	st.RateLimitDefault = &def
	var agents api.AgentList
	get("/v1/agents", &agents)
	for _, a := range agents.Agents {
		rec := raftstore.AgentRecord{ID: a.ID, Name: a.Name, Hostname: a.Hostname, Resources: a.Resources, AdmittedAt: a.RegisteredAt, Version: a.Version}
		if len(a.Capabilities) > 0 {
			rec.Capabilities = a.Capabilities
		}
		st.Agents = append(st.Agents, rec)
	}
	var frameworks api.FrameworkList
	get("/v1/frameworks", &frameworks)
	for _, f := range frameworks.Frameworks {
		// The API shows no version or registration time of a framework.
		st.Frameworks = append(st.Frameworks, raftstore.FrameworkRecord{ID: f.ID, Name: f.Name, Principal: f.Principal, Roles: f.Roles, Capabilities: f.Capabilities})
	}
	var audit api.AuditList
	get("/v1/audit", &audit)
	st.Audit = audit.Entries
	if g.token != "" {
		// The API shows tokens without hashes, and no bootstrapped flag:
		// those are checked through the replay.
		var policies api.ACLPolicyList
		get(api.ACLPoliciesPath, &policies)
		st.ACLPolicies = policies.Policies
		var tokens api.ACLTokenList
		get(api.ACLTokensPath, &tokens)
		for _, tok := range tokens.Tokens {
			st.ACLTokens = append(st.ACLTokens, goldenACLToken{ACLToken: tok})
		}
	}
	return st
}

// goldenSnapshotMeta is the part of hashicorp/raft's meta.json it needs.
type goldenSnapshotMeta struct {
	ID    string
	Index uint64
}

// waitGoldenSnapshot waits for the first complete snapshot in a live
// server's data dir.
func waitGoldenSnapshot(t *testing.T, dataDir string) goldenSnapshotMeta {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "snapshots"))
		for _, e := range entries {
			if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(dataDir, "snapshots", e.Name(), "meta.json"))
			if err != nil {
				continue
			}
			var m goldenSnapshotMeta
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			return m
		}
	}
	t.Fatalf("no snapshot appeared in %s", dataDir)
	return goldenSnapshotMeta{}
}

// copyDataDir copies raft.db and the snapshots of a stopped server's data dir.
func copyDataDir(t *testing.T, dataDir, dir string) {
	t.Helper()
	files := []string{"raft.db"}
	snaps, err := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		rel, _ := filepath.Rel(dataDir, s)
		files = append(files, rel)
	}
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dataDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := createFile(filepath.Join(dir, rel), data); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", rel, len(data))
	}
}

// checkGenerated checks the copied golden log (the whole history, one
// snapshot with commands after it, every command type a release can write,
// written at store version version: the snapshot's format, every entry's
// stamp and, from version 2 on, what only that version stores) and that
// replaying it gives what the release's API showed. It returns
// expected.json.
func checkGenerated(t *testing.T, dir string, live goldenState, version uint32) []byte {
	t.Helper()
	data := copyGoldenDir(t, dir)
	logs := openLog(t, data)
	first, last := logRange(t, logs)
	if first != 1 {
		t.Fatalf("the log was compacted: it starts at index %d", first)
	}
	snaps, _ := filepath.Glob(filepath.Join(data, "snapshots", "*"))
	if len(snaps) != 1 {
		t.Fatalf("want one snapshot, found %v", snaps)
	}
	var snapMeta goldenSnapshotMeta
	if raw, err := os.ReadFile(filepath.Join(snaps[0], "meta.json")); err != nil || json.Unmarshal(raw, &snapMeta) != nil {
		t.Fatalf("%s/meta.json: %v", snaps[0], err)
	}
	var format struct{ Format uint32 }
	if raw, err := os.ReadFile(filepath.Join(snaps[0], "state.bin")); err != nil || json.Unmarshal(raw, &format) != nil {
		t.Fatalf("%s/state.bin: %v", snaps[0], err)
	}
	if format.Format != version {
		t.Fatalf("the snapshot is format %d, want %d (store version %d)", format.Format, version, version)
	}
	types := map[raftstore.MessageType]int{}
	entries := map[raft.LogType]int{}
	// What only store version 2 stores, before the snapshot and after it.
	lendNothing := [2]int{}
	// What only store version 3 stores, before the snapshot and after it.
	v3Content := [2]int{}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		entries[e.Type]++
		if e.Type != raft.LogCommand {
			continue
		}
		types[raftstore.MessageType(e.Data[0])]++
		c, err := raftstore.Decode(e.Data)
		if err != nil {
			t.Fatalf("log entry %d: %v", i, err)
		}
		// Version 1 entries carry no stamp.
		if rules := raftstore.Meta(c).Rules; version >= 2 && rules != version || version == 1 && rules != 0 {
			t.Fatalf("log entry %d (%s) is stamped with store version %d, want %d", i, c.Type(), rules, version)
		}
		if onlyV3(c) {
			if i <= snapMeta.Index {
				v3Content[0]++
			} else {
				v3Content[1]++
			}
		}
		if rs, ok := c.(*raftstore.RoleSet); ok && rs.LendingLimit != nil && len(rs.LendingLimit) == 0 {
			if i <= snapMeta.Index {
				lendNothing[0]++
			} else {
				lendNothing[1]++
			}
		}
	}
	if version >= 3 && (v3Content[0] == 0 || v3Content[1] == 0) {
		t.Fatalf("the log holds %d ACL commands or labeled limits before the snapshot and %d after it: want some of each", v3Content[0], v3Content[1])
	}
	if version >= 2 && (lendNothing[0] == 0 || lendNothing[1] == 0) {
		t.Fatalf("the log holds %d role.set with an empty lending_limit before the snapshot and %d after it: want some of each", lendNothing[0], lendNothing[1])
	}
	var missing []string
	// Every type this tree knows: String names only registered ones.
	for typ := raftstore.MessageType(1); typ < raftstore.IgnoreUnknownTypeFlag; typ++ {
		if strings.HasPrefix(typ.String(), "type(") {
			continue
		}
		if types[typ] == 0 && !slices.Contains(goldenMissingTypes, typ) {
			missing = append(missing, typ.String())
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the golden log has no %s command", strings.Join(missing, ", "))
	}
	t.Logf("log: indexes %d to %d, entries by type %v, commands by type %v", first, last, entries, types)

	fsm := raftstore.NewFSM(nil)
	replay(t, logs, fsm, first, last)
	got := stateOf(fsm)
	// The API shows no framework version or registration time, nor the
	// servers' records: those are checked through the audit trail.
	projected := got
	projected.Servers = nil
	projected.Frameworks = nil
	projected.ACLBootstrapped = false
	projected.ACLTokens = nil
	for _, tok := range got.ACLTokens {
		projected.ACLTokens = append(projected.ACLTokens, goldenACLToken{ACLToken: tok.ACLToken})
	}
	for _, f := range got.Frameworks {
		projected.Frameworks = append(projected.Frameworks, raftstore.FrameworkRecord{ID: f.ID, Name: f.Name, Principal: f.Principal, Roles: f.Roles, Capabilities: f.Capabilities})
	}
	liveJSON, err := canonicalJSON(live)
	if err != nil {
		t.Fatal(err)
	}
	if d := stateDifference(t, liveJSON, projected); d != "" {
		t.Fatalf("replaying the log does not give what the release's API showed:\n%s", d)
	}
	expected, err := canonicalJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	return expected
}

// TestGoldenTarget: the generator writes only into a golden-vN directory
// that holds none of a golden log's files, so it never writes over one.
func TestGoldenTarget(t *testing.T) {
	for _, dir := range []string{"testdata/golden-v1", "testdata/golden-v2", "testdata/golden-v3"} {
		if _, err := goldenTarget(dir); err == nil || !strings.Contains(err.Error(), "already holds a golden log") {
			t.Errorf("%s: %v, want a refusal", dir, err)
		}
	}
	for _, dir := range []string{"testdata/golden", "testdata/golden-v0", "testdata/golden-vx", "testdata/v3"} {
		if _, err := goldenTarget(dir); err == nil || !strings.Contains(err.Error(), "want testdata/golden-vN") {
			t.Errorf("%s: %v, want a refusal of the name", dir, err)
		}
	}
	dir := filepath.Join(t.TempDir(), "golden-v3")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A README written first is no golden log.
	if err := createFile(filepath.Join(dir, "README.md"), []byte("# v3\n")); err != nil {
		t.Fatal(err)
	}
	if v, err := goldenTarget(dir); err != nil || v != 3 {
		t.Fatalf("an empty golden-v3: %d, %v", v, err)
	}
	if err := createFile(filepath.Join(dir, "expected.json"), []byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := goldenTarget(dir); err == nil {
		t.Error("a golden-v3 holding expected.json is accepted")
	}
	if err := createFile(filepath.Join(dir, "expected.json"), []byte("{}\n")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("creating a file over an existing one: %v", err)
	}
}
