package raftstore_test

import (
	"context"
	"encoding/json"
	"errors"
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

// goldenMissingTypes are the command types no release writes yet, so the
// golden log cannot hold them: masterd has no path that removes an agent
// from the registry (agent.remove).
var goldenMissingTypes = []raftstore.MessageType{raftstore.AgentRemoveType}

// generateGoldenLog runs a real masterd of commit (not -dev: Raft on disk,
// one server, -bootstrap), writes at least one command of every type through
// its public APIs, takes a snapshot part way, and stores its raft.db and
// snapshot in dir with expected.json: the state those give. A second server
// joins for a while so that the log also holds server.remove.
func generateGoldenLog(t *testing.T, dir, commit string) {
	for _, name := range []string{"raft.db", "snapshots", "expected.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Fatalf("%s already holds a golden log: it is written once per release and never regenerated; "+
				"write the next release's into a new testdata/golden-vN (see testdata/golden-v1/README.md)", dir)
		}
	}
	bin, err := testcluster.BuildCommit("", commit)
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, 2, testcluster.WithBinary(bin), testcluster.WithArgs("-test-hooks",
		"-raft-snapshot-threshold", strconv.Itoa(goldenSnapshotThreshold), "-raft-snapshot-interval", "50ms"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if leader, err := c.WaitLeader(ctx); err != nil || leader != 0 {
		t.Fatalf("want %s (it bootstraps) to lead: leader %d, %v", c.ID(0), leader, err)
	}
	g := newGoldenWriter(t, ctx, c.Address(0))

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
	for weight := 2.5; g.index() < goldenSnapshotThreshold; weight += 0.5 {
		g.do(http.MethodPut, api.RolePath("eng"), map[string]any{"weight": weight})
	}
	if idx := g.index(); idx != goldenSnapshotThreshold {
		t.Fatalf("the writes before the snapshot end at index %d, past %d: raise goldenSnapshotThreshold", idx, goldenSnapshotThreshold)
	}
	snap := waitGoldenSnapshot(t, filepath.Join(c.Dir(0), "data"))
	if snap.Index != goldenSnapshotThreshold {
		t.Fatalf("the snapshot is at index %d, want %d", snap.Index, goldenSnapshotThreshold)
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
	g.teardown(batch)
	if err := g.cl.RemoveServer(ctx, c.ID(1)); err != nil {
		t.Fatalf("remove %s: %v", c.ID(1), err)
	}
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	live := g.liveState()
	c.Stop()
	analytics.Close()

	copyDataDir(t, filepath.Join(c.Dir(0), "data"), dir)
	expected := checkGenerated(t, dir, live)
	if err := os.WriteFile(filepath.Join(dir, "expected.json"), expected, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the golden log of %.12s into %s", commit, dir)
}

// goldenWriter writes through the leader's public API and stops the
// generation at the first refusal.
type goldenWriter struct {
	t     *testing.T
	ctx   context.Context
	addr  string
	cl    *api.Client
	sched *api.SchedulerClient
}

func newGoldenWriter(t *testing.T, ctx context.Context, addr string) *goldenWriter {
	cl, err := api.NewClient([]string{addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := api.NewSchedulerClient([]string{addr}, "")
	if err != nil {
		t.Fatal(err)
	}
	return &goldenWriter{t: t, ctx: ctx, addr: addr, cl: cl, sched: sched}
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

// index is the index of the last command the leader applied.
func (g *goldenWriter) index() uint64 {
	g.t.Helper()
	return g.call(api.Request{Method: http.MethodGet, Path: "/v1/quotas"}, nil)
}

// subscribe registers a framework (framework.set); its session stays open
// so that the master keeps it.
func (g *goldenWriter) subscribe(info api.FrameworkInfo) *api.SchedulerSession {
	g.t.Helper()
	s, err := g.sched.Subscribe(g.ctx, info)
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
		get(api.RateLimitPath(l.Principal), &rl)
		st.RateLimits = append(st.RateLimits, rl)
	}
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
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", rel, len(data))
	}
}

// checkGenerated checks the copied golden log (the whole history, one
// snapshot with commands after it, every command type a release can write)
// and that replaying it gives what the release's API showed. It returns
// expected.json.
func checkGenerated(t *testing.T, dir string, live goldenState) []byte {
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
	types := map[raftstore.MessageType]int{}
	entries := map[raft.LogType]int{}
	for i := first; i <= last; i++ {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			t.Fatal(err)
		}
		entries[e.Type]++
		if e.Type == raft.LogCommand {
			types[raftstore.MessageType(e.Data[0])]++
		}
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
