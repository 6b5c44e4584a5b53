package raftstore_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// A golden log is the data dir of a real masterd of one release: its Raft log
// and a snapshot. Every later release must replay it to the same state, so
// that a server upgraded in place reads what the old one wrote. There is one
// per store version, testdata/golden-vN, written by the release that brought
// version N. See testdata/golden-v1/README.md, testdata/golden-v2/README.md
// and testdata/golden-v3/README.md.
var (
	goldenGenerate = flag.Bool("golden.generate", false,
		"write a new golden Raft log into -golden.dir with the masterd of -golden.commit (once per store version; never over an existing one)")
	goldenDir = flag.String("golden.dir", fmt.Sprintf("testdata/golden-v%d", raftstore.StoreVersion),
		"where -golden.generate writes the golden log: testdata/golden-vN, N the store version of -golden.commit")
	goldenCommit = flag.String("golden.commit", "HEAD",
		"the release commit whose masterd writes the golden log")
)

// goldenVersion is the store version a golden log was written at: the N of
// its directory's name, golden-vN.
func goldenVersion(dir string) (uint32, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(dir), "golden-v"), 10, 32)
	if err != nil || v == 0 || !strings.HasPrefix(filepath.Base(dir), "golden-v") {
		return 0, fmt.Errorf("golden log directory %s: want testdata/golden-vN, N a store version", dir)
	}
	return uint32(v), nil
}

// goldenState is the replicated state as raftstore's exported getters show
// it: what expected.json holds.
type goldenState struct {
	Index            uint64                      `json:"index"`
	Quotas           []api.Quota                 `json:"quotas"`
	Roles            []raftstore.RolePolicy      `json:"roles"`
	Reservations     []api.Reservation           `json:"reservations"`
	RateLimits       []api.RateLimit             `json:"rate_limits"`
	RateLimitDefault *api.RateLimitDefault       `json:"rate_limit_default"`
	Agents           []raftstore.AgentRecord     `json:"agents"`
	Frameworks       []raftstore.FrameworkRecord `json:"frameworks"`
	Servers          []raftstore.ServerRecord    `json:"servers"`
	Audit            []api.AuditEntry            `json:"audit"`
	// The ACL state (store version 3): older golden logs have none, which
	// reads as its empty value.
	ACLBootstrapped bool             `json:"acl_bootstrapped"`
	ACLPolicies     []api.ACLPolicy  `json:"acl_policies"`
	ACLTokens       []goldenACLToken `json:"acl_tokens"`
}

// goldenACLToken is a token as ForEachACLToken gives it: with the hash of
// its secret, hex.
type goldenACLToken struct {
	api.ACLToken
	SecretHash string `json:"secret_hash,omitempty"`
}

func stateOf(f *raftstore.FSM) goldenState {
	var g goldenState
	f.Read(func(s *raftstore.State) {
		g = goldenState{
			Index:        s.Index(),
			Quotas:       s.Quotas(),
			Roles:        s.RolePolicies(),
			Reservations: s.Reservations(),
			RateLimits:   s.RateLimits(),
			Agents:       s.Agents(),
			Frameworks:   s.Frameworks(),
			Servers:      s.Servers(),
			Audit:        s.Audit(0, 1<<30),
		}
		if d, ok := s.RateLimitDefault(); ok {
			g.RateLimitDefault = &d
		}
		g.ACLBootstrapped = s.ACLBootstrapped()
		g.ACLPolicies = s.ACLPolicies()
		s.ForEachACLToken(func(t api.ACLToken, hash [32]byte) {
			g.ACLTokens = append(g.ACLTokens, goldenACLToken{ACLToken: t, SecretHash: hex.EncodeToString(hash[:])})
		})
	})
	return g
}

// canonicalJSON is how expected.json is written: indented, map keys sorted
// (encoding/json sorts them), a final newline.
func canonicalJSON(v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// TestGoldenLog replays every golden log in testdata/ two ways, as a server
// of this tree would read that data dir: (a) every command from the first
// index into a fresh FSM; (b) the newest snapshot, then the commands after
// it. Both must give the state in expected.json, committed to the store
// version the log was written at. Every store version up to StoreVersion
// must have its golden log: raising it without one fails here.
func TestGoldenLog(t *testing.T) {
	if *goldenGenerate {
		generateGoldenLog(t, *goldenDir, *goldenCommit)
	}
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden-v*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden log in testdata/golden-v* (%v)", err)
	}
	have := map[uint32]bool{}
	for _, dir := range dirs {
		v, err := goldenVersion(dir)
		if err != nil {
			t.Fatal(err)
		}
		have[v] = true
	}
	for v := uint32(1); v <= raftstore.StoreVersion; v++ {
		if !have[v] {
			t.Errorf("no golden log of store version %d (testdata/golden-v%d): the release that raised StoreVersion to %d writes one "+
				"(go test ./raftstore -run 'TestGoldenLog$' -golden.generate; see testdata/golden-v1/README.md)", v, v, v)
		}
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			version, _ := goldenVersion(dir)
			expected, err := os.ReadFile(filepath.Join(dir, "expected.json"))
			if err != nil {
				t.Fatal(err)
			}
			data := copyGoldenDir(t, dir)
			logs := openLog(t, data)
			first, last := logRange(t, logs)
			if first != 1 {
				t.Fatalf("the golden log starts at index %d: it must hold the whole history, from index 1", first)
			}

			full := raftstore.NewFSM(nil)
			applied := replay(t, logs, full, first, last)
			if d := stateDifference(t, expected, stateOf(full)); d != "" {
				t.Errorf("(a) replaying all %d commands (indexes %d to %d) does not give expected.json:\n%s", applied, first, last, d)
			}
			if got := rulesVersion(full); got != version {
				t.Errorf("(a) replaying the log commits the state to store version %d, want %d", got, version)
			}

			fromSnapshot := raftstore.NewFSM(nil)
			snap := restoreNewestSnapshot(t, data, fromSnapshot)
			if snap.Index >= last {
				t.Fatalf("the snapshot (index %d) has no entries after it (last index %d)", snap.Index, last)
			}
			after := replay(t, logs, fromSnapshot, snap.Index+1, last)
			if after == 0 {
				t.Fatalf("no command follows the snapshot at index %d", snap.Index)
			}
			if d := stateDifference(t, expected, stateOf(fromSnapshot)); d != "" {
				t.Errorf("(b) restoring snapshot %s (index %d) and replaying the %d commands after it does not give expected.json:\n%s",
					snap.ID, snap.Index, after, d)
			}
			if got := rulesVersion(fromSnapshot); got != version {
				t.Errorf("(b) the snapshot and the commands after it commit the state to store version %d, want %d", got, version)
			}
		})
	}
}

func rulesVersion(f *raftstore.FSM) uint32 {
	var v uint32
	f.Read(func(s *raftstore.State) { v = s.RulesVersion() })
	return v
}

// copyGoldenDir copies a golden dir's raft.db and snapshots into a temporary
// data dir: opening raft.db may write to it, and the golden files must stay
// as the release wrote them.
func copyGoldenDir(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel != "raft.db" && rel != "snapshots" && !strings.HasPrefix(rel, "snapshots"+string(filepath.Separator)) {
			return nil // README.md, expected.json
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", dir, err)
	}
	return dst
}

// openLog opens a data dir's raft.db as masterd does: with raft-boltdb.
func openLog(t *testing.T, dataDir string) *raftboltdb.BoltStore {
	t.Helper()
	path := filepath.Join(dataDir, "raft.db")
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: time.Second}})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func logRange(t *testing.T, logs raft.LogStore) (first, last uint64) {
	t.Helper()
	first, err := logs.FirstIndex()
	if err == nil {
		last, err = logs.LastIndex()
	}
	if err != nil || last == 0 {
		t.Fatalf("read the log's range: %v (last index %d)", err, last)
	}
	return first, last
}

// replay applies the commands from index from to to, as Raft hands them to
// the FSM, and returns how many there were.
func replay(t *testing.T, logs raft.LogStore, fsm *raftstore.FSM, from, to uint64) int {
	t.Helper()
	applied := 0
	for i := from; i <= to; i++ {
		var entry raft.Log
		if err := logs.GetLog(i, &entry); err != nil {
			t.Fatalf("read log entry %d: %v", i, err)
		}
		if entry.Type != raft.LogCommand {
			continue // configuration changes, no-ops and barriers never reach the FSM
		}
		apply(t, fsm, &entry)
		applied++
	}
	return applied
}

// apply turns the FSM's panic on an entry it cannot read into a test failure
// that names the entry.
func apply(t *testing.T, fsm *raftstore.FSM, entry *raft.Log) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("log entry %d (command type %d) cannot be applied: %v", entry.Index, entry.Data[0], r)
		}
	}()
	fsm.Apply(entry)
}

// restoreNewestSnapshot restores the newest snapshot of a data dir into fsm,
// read with Raft's own file snapshot store (which checks its checksum).
func restoreNewestSnapshot(t *testing.T, dataDir string, fsm *raftstore.FSM) *raft.SnapshotMeta {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		t.Fatalf("snapshot store in %s: %v", dataDir, err)
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("no snapshot in %s (%v)", dataDir, err)
	}
	meta, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		t.Fatalf("open snapshot %s: %v", list[0].ID, err)
	}
	if err := fsm.Restore(rc); err != nil {
		t.Fatalf("restore snapshot %s: %v", meta.ID, err)
	}
	return meta
}

// --- comparing with expected.json ---

// stateDifference compares got with expected.json and describes every
// difference by its path ("" when there is none). A field that expected.json
// lacks is accepted while its value is empty (null, 0, "", false, [] or {}):
// a field added to a stored type after the release, which its data cannot
// hold. But not {} where expected.json holds the field elsewhere in the same
// place (another item of the list): the release knew the field and left it
// out, as it leaves out a nil map and never an empty one, and the two can
// mean opposites (a lending limit: none is no cap, {} is lend nothing). Any
// other difference is a change in what the release's data means.
func stateDifference(t *testing.T, expected []byte, got goldenState) string {
	t.Helper()
	gotJSON, err := canonicalJSON(got)
	if err != nil {
		t.Fatalf("encode the replayed state: %v", err)
	}
	want, err := decodeJSON(expected)
	if err != nil {
		t.Fatalf("expected.json: %v", err)
	}
	have, err := decodeJSON(gotJSON)
	if err != nil {
		t.Fatalf("the replayed state: %v", err)
	}
	known := map[string]bool{}
	fieldPlaces("", want, known)
	var diffs []string
	jsonDiff("", want, have, known, &diffs)
	const shown = 30
	if len(diffs) > shown {
		diffs = append(diffs[:shown], fmt.Sprintf("… and %d more differences", len(diffs)-shown))
	}
	return strings.Join(diffs, "\n")
}

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// fieldPlaces adds to known the place of every field in v under path: its
// path with the list indexes left out (.roles[].lending_limit).
func fieldPlaces(path string, v any, known map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			known[path+"."+k] = true
			fieldPlaces(path+"."+k, x, known)
		}
	case []any:
		for _, x := range v {
			fieldPlaces(path+"[]", x, known)
		}
	}
}

// place is path with its list indexes left out.
func place(path string) string {
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		b.WriteByte(path[i])
		if path[i] == '[' {
			for i+1 < len(path) && path[i+1] != ']' {
				i++
			}
		}
	}
	return b.String()
}

// jsonDiff appends a line per difference between want and got under path;
// known holds the places of expected.json's fields (fieldPlaces).
func jsonDiff(path string, want, got any, known map[string]bool, diffs *[]string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %s, got %s", orRoot(path), short(want), short(got)))
			return
		}
		for _, k := range sortedKeys(w) {
			if gv, ok := g[k]; ok {
				jsonDiff(path+"."+k, w[k], gv, known, diffs)
			} else {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: missing, want %s", path, k, short(w[k])))
			}
		}
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; ok {
				continue
			}
			if m, isMap := g[k].(map[string]any); isMap && len(m) == 0 && known[place(path+"."+k)] {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: {} where the release wrote none (it omits only a nil map)", path, k))
			} else if !emptyJSON(g[k]) {
				*diffs = append(*diffs, fmt.Sprintf("%s.%s: not in expected.json, got %s", path, k, short(g[k])))
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %s, got %s", orRoot(path), short(want), short(got)))
			return
		}
		if len(w) != len(g) {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %d items, got %d", orRoot(path), len(w), len(g)))
		}
		for i := range min(len(w), len(g)) {
			jsonDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], known, diffs)
		}
	default:
		if !sameScalar(want, got) {
			*diffs = append(*diffs, fmt.Sprintf("%s: want %s, got %s", orRoot(path), short(want), short(got)))
		}
	}
}

func sameScalar(want, got any) bool {
	wn, wok := want.(json.Number)
	gn, gok := got.(json.Number)
	if wok && gok {
		if wn == gn {
			return true
		}
		wf, werr := wn.Float64()
		gf, gerr := gn.Float64()
		return werr == nil && gerr == nil && wf == gf
	}
	return want == got
}

func emptyJSON(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case string:
		return v == ""
	case json.Number:
		f, err := v.Float64()
		return err == nil && f == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func orRoot(path string) string {
	if path == "" {
		return "(the whole state)"
	}
	return path
}

// short renders a JSON value for a difference line.
func short(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(data) > 120 {
		return string(data[:117]) + "…"
	}
	return string(data)
}

// TestGoldenStateDifference checks that the comparison with expected.json
// reports what it must: a changed value, a missing object, a new field with
// a value; and lets a new empty field pass.
func TestGoldenStateDifference(t *testing.T) {
	base := goldenState{
		Index:  7,
		Quotas: []api.Quota{{Role: "eng", Limits: api.Resources{"cpus": 8}, Version: 5}},
		Agents: []raftstore.AgentRecord{{ID: "agent-1", Name: "node-1", Version: 6}},
	}
	expected, err := canonicalJSON(base)
	if err != nil {
		t.Fatal(err)
	}
	if d := stateDifference(t, expected, base); d != "" {
		t.Fatalf("the same state differs:\n%s", d)
	}

	changed := base
	changed.Quotas = []api.Quota{{Role: "eng", Limits: api.Resources{"cpus": 4}, Version: 5}}
	if d := stateDifference(t, expected, changed); !strings.Contains(d, ".quotas[0].limits.cpus: want 8, got 4") {
		t.Errorf("a changed limit: %q", d)
	}
	changed = base
	changed.Quotas = nil
	if d := stateDifference(t, expected, changed); !strings.Contains(d, ".quotas: want") {
		t.Errorf("a lost quota: %q", d)
	}

	// A field the release did not have: empty passes, a value does not.
	var older map[string]any
	if err := json.Unmarshal(expected, &older); err != nil {
		t.Fatal(err)
	}
	delete(older, "frameworks")
	trimmed, _ := canonicalJSON(older)
	if d := stateDifference(t, trimmed, base); d != "" {
		t.Errorf("an empty field that expected.json lacks is reported:\n%s", d)
	}
	delete(older, "agents")
	trimmed, _ = canonicalJSON(older)
	if d := stateDifference(t, trimmed, base); !strings.Contains(d, ".agents: not in expected.json") {
		t.Errorf("a field with a value that expected.json lacks: %q", d)
	}

	// A lending limit left out (none: no cap) must not come back as {}
	// (lend nothing) where the release wrote the field for another role;
	// where it never wrote it, {} passes as a new field's empty value.
	roles := base
	roles.Roles = []raftstore.RolePolicy{{Role: "db", Weight: 1, LendingLimit: api.Resources{"cpus": 1}, Version: 3}, {Role: "eng", Weight: 2, Version: 4}}
	expected, err = canonicalJSON(roles)
	if err != nil {
		t.Fatal(err)
	}
	lendNothing := roles
	lendNothing.Roles = []raftstore.RolePolicy{roles.Roles[0], {Role: "eng", Weight: 2, LendingLimit: api.Resources{}, Version: 4}}
	if d := stateDifference(t, expected, lendNothing); !strings.Contains(d, ".roles[1].lending_limit: {} where the release wrote none") {
		t.Errorf("no cap replayed as lend nothing: %q", d)
	}
	noCap := roles
	noCap.Roles = []raftstore.RolePolicy{{Role: "db", Weight: 1, Version: 3}, roles.Roles[1]}
	if d := stateDifference(t, expected, noCap); !strings.Contains(d, ".roles[0].lending_limit: missing") {
		t.Errorf("a cap replayed as none: %q", d)
	}
	oneRole := roles
	oneRole.Roles = roles.Roles[1:]
	expected, err = canonicalJSON(oneRole)
	if err != nil {
		t.Fatal(err)
	}
	oneRole.Roles = lendNothing.Roles[1:]
	if d := stateDifference(t, expected, oneRole); d != "" {
		t.Errorf("{} in a field the release never wrote is reported:\n%s", d)
	}
}
