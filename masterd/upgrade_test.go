//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
	"github.com/allot/allot/raftstore"
)

// previousRelease is the commit of the last allot release: the rolling-upgrade
// test starts its cluster on masterd built from it. Bump it at each release.
const previousRelease = "cbadcc89ebaf4b2b1e4a6e986428c4c96463700a"

// upgradeArgs make every server take (and install) real Raft snapshots during
// the test: one every 16 entries, checked ten times a second.
var upgradeArgs = []string{"-test-hooks", "-raft-snapshot-threshold", "16", "-raft-snapshot-interval", "100ms"}

// TestRollingUpgradeFromPreviousRelease runs a 3-server cluster of the
// previous release's masterd, replaces its servers one at a time by the
// masterd of this tree (followers first, the leader last) while writers keep
// writing, and checks that no acknowledged write is lost and that every
// server ends with the same state. On the way it checks that what the old
// binary wrote to disk and sent over Raft reads in the new one: the old
// leader's snapshot brings up a fresh new server, and every server restores
// its own snapshot, written by the old binary, when it restarts on the new.
func TestRollingUpgradeFromPreviousRelease(t *testing.T) {
	oldBin, err := testcluster.BuildCommit("", previousRelease)
	if err != nil {
		t.Fatalf("build masterd of the previous release: %v", err)
	}
	newBin, err := testcluster.Build("")
	if err != nil {
		t.Fatalf("build masterd of this tree: %v", err)
	}
	ctx := context.Background()
	c := testcluster.Start(t, 3, testcluster.WithBinary(oldBin), testcluster.WithArgs(upgradeArgs...))
	leader := waitLeader(t, c)
	t.Logf("previous release %.12s: 3 servers, leader %s", previousRelease, c.ID(leader))

	admin := newClient(t, 20*time.Second, c.Addresses()...)
	if _, err := admin.Do(ctx, api.Request{Method: http.MethodPut, Path: "/v1/test/agents/node-1",
		Body: map[string]any{"hostname": "node-1", "resources": api.Resources{"cpus": 64, "mem": 1 << 20, "disk": 1 << 20}}}, nil); err != nil {
		t.Fatalf("admit agent node-1: %v", err)
	}
	prefill(t, admin)
	waitSnapshotsEverywhere(t, c, 40)

	t.Run("the previous release's snapshot brings up a fresh new server", func(t *testing.T) {
		checkJoinFromOldSnapshot(t, c, admin, newBin)
	})
	if t.Failed() {
		return
	}

	w := startWriters(t, c.Addresses())
	w.waitAcks(t, 100)

	// Step 1: a follower. The old leader goes on stamping nothing.
	oldLeader := waitLeader(t, c)
	followers := c.Followers()
	first, oldFollower := followers[0], followers[1]
	t.Logf("step 1: upgrading %s (leader %s)", c.ID(first), c.ID(oldLeader))
	restored := upgradeServer(t, c, first, newBin)
	w.waitAcks(t, 50)
	checkStillVersion1(t, c, first, restored.Index)

	// Step 2: the old leader, while the other old server is stopped: the
	// new leader is then one of the new servers, and it leads a follower
	// of the previous release.
	t.Logf("step 2: upgrading %s, the leader, with %s stopped", c.ID(oldLeader), c.ID(oldFollower))
	upgradeLeaderPastOldFollower(t, c, w, oldLeader, oldFollower, newBin)
	checkNewLeaderKeepsVersion1(t, c, w, oldFollower)

	// Step 3: the last server of the previous release, a follower.
	t.Logf("step 3: upgrading %s (leader %s)", c.ID(oldFollower), c.ID(waitLeader(t, c)))
	upgradeServer(t, c, oldFollower, newBin)
	w.waitAcks(t, 50)
	waitLeader(t, c)
	w.waitAcks(t, 50)
	w.stop()
	if w.refused() != nil {
		t.Fatalf("the cluster refused a valid write: %v", w.refused())
	}
	t.Logf("writers: %d writes acknowledged, %d with no answer", w.acks.Load(), w.unknown.Load())

	final := sameStateEverywhere(t, c)
	w.checkAcknowledged(t, final)
	checkStoreVersionMovesUp(t, c, admin)
	t.Run("a backup of the upgraded cluster restores into a new one", func(t *testing.T) {
		checkBackupOfUpgradedCluster(t, c)
	})
}

// checkBackupOfUpgradedCluster: the state the previous release built, now
// served by this one, saves as a backup that a new cluster restores whole
// (backup_test.go).
func checkBackupOfUpgradedCluster(t *testing.T, c *testcluster.Cluster) {
	leader := waitLeader(t, c)
	want, err := readLists(t, c.Address(leader), "", false)
	if err != nil {
		t.Fatal(err)
	}
	path, index := saveBackup(t, c, c.Followers()[0], "")
	if again, err := readLists(t, c.Address(leader), "", false); err != nil || sameLists(again, want) != "" {
		t.Fatalf("the upgraded cluster changed while its backup was saved (%v)", err)
	}
	fresh := testcluster.Start(t, 3, testcluster.WithArgs("-test-hooks"))
	waitLeader(t, fresh)
	if got := restoreBackup(t, fresh, fresh.Followers()[0], "", path); got != index {
		t.Errorf("the restore answered index %d, the backup holds %d", got, index)
	}
	checkRestored(t, fresh, "", index, want)
}

// checkStoreVersionMovesUp: with every server upgraded, the leader hears
// their versions, the cluster moves to this release's store
// version, and every server's next snapshot is written in its format.
func checkStoreVersionMovesUp(t *testing.T, c *testcluster.Cluster, cl *api.Client) {
	t.Helper()
	ctx := context.Background()
	eventually(t, "the cluster to move to store version "+fmt.Sprint(raftstore.StoreVersion), func() error {
		if _, err := cl.PutRole(ctx, "store-version-probe", api.RoleRequest{Weight: ptr(1.0)}, api.WriteOptions{}); err != nil {
			return err
		}
		info, err := c.ClusterInfo(ctx, waitLeader(t, c))
		if err != nil {
			return err
		}
		if info.StoreVersion != raftstore.StoreVersion {
			return fmt.Errorf("store_version %d; servers %+v", info.StoreVersion, info.Servers)
		}
		return nil
	})
	for i := range c.N() {
		eventually(t, fmt.Sprintf("%s to write a snapshot of format %d", c.ID(i), raftstore.StoreVersion), func() error {
			// Writes make the servers take snapshots (threshold 16).
			if _, err := cl.PutRole(ctx, "store-version-probe", api.RoleRequest{Weight: ptr(2.0)}, api.WriteOptions{}); err != nil {
				return err
			}
			snap, ok, err := newestSnapshot(dataDir(c, i))
			if err != nil || !ok {
				return fmt.Errorf("no snapshot: %v", err)
			}
			// The snapshot format is the store version's (raftstore/snapshot.go).
			if format, err := snapshotFormat(dataDir(c, i), snap); err != nil || format != int(raftstore.StoreVersion) {
				return fmt.Errorf("newest snapshot %s: format %d (%v)", snap.ID, format, err)
			}
			return nil
		})
	}
}

// checkStillVersion1: server i runs the new binary, but the leader runs the
// previous release: the cluster stays at store version 1 (GET /v1/cluster
// on server i), and the snapshots server i writes are of format 1, which
// the servers of the previous release read.
func checkStillVersion1(t *testing.T, c *testcluster.Cluster, i int, after uint64) {
	t.Helper()
	info, err := c.ClusterInfo(context.Background(), i)
	if err != nil {
		t.Fatal(err)
	}
	if info.StoreVersion != 1 {
		t.Fatalf("%s (new binary) under a leader of the previous release: store_version %d, want 1", c.ID(i), info.StoreVersion)
	}
	checkSnapshotFormat(t, c, i, after+1, 1)
}

// checkSnapshotFormat waits until the newest snapshot on server i's disk is
// one it took itself (not one a leader sent) at minIndex or later, and
// checks its format.
func checkSnapshotFormat(t *testing.T, c *testcluster.Cluster, i int, minIndex uint64, want int) {
	t.Helper()
	var snap snapshotMeta
	eventually(t, fmt.Sprintf("%s to take a snapshot at index %d or later", c.ID(i), minIndex), func() error {
		var ok bool
		var err error
		snap, ok, err = newestSnapshot(dataDir(c, i))
		switch {
		case err != nil:
			return err
		case !ok || snap.Index < minIndex:
			return fmt.Errorf("newest %+v", snap)
		case !tookSnapshot(logSinceLastStart(c, i), snap.Index):
			return fmt.Errorf("the newest, at index %d, was sent by the leader", snap.Index)
		}
		return nil
	})
	if format, err := snapshotFormat(dataDir(c, i), snap); err != nil || format != want {
		t.Fatalf("%s: snapshot %s (index %d) is of format %d (%v), want %d", c.ID(i), snap.ID, snap.Index, format, err, want)
	}
}

// tookSnapshot reports whether a server's log says Raft took a snapshot at
// index itself (hashicorp/raft logs it at info level).
func tookSnapshot(log string, index uint64) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "snapshot complete up to") && slices.Contains(strings.Fields(line), fmt.Sprintf("index=%d", index)) {
			return true
		}
	}
	return false
}

// upgradeLeaderPastOldFollower stops oldFollower, upgrades the leader (one
// of the two new servers then leads), lets the new leader compact its log
// past what oldFollower holds, and starts oldFollower again on the previous
// release: it must install the new leader's snapshot and catch up.
func upgradeLeaderPastOldFollower(t *testing.T, c *testcluster.Cluster, w *writers, leader, oldFollower int, newBin string) {
	t.Helper()
	if err := c.Terminate(oldFollower); err != nil {
		t.Fatal(err)
	}
	// oldFollower holds nothing past what the leader had then, but for
	// writes in flight: a margin covers those.
	stoppedAt := appliedIndex(t, c, leader) + 20
	upgradeServer(t, c, leader, newBin)
	w.waitAcks(t, 20)
	// Raft keeps 16 entries behind a snapshot (upgradeArgs): past that,
	// the entries oldFollower needs next are gone from every log.
	for _, i := range c.Live() {
		waitSnapshot(t, c, i, stoppedAt+16)
	}
	if err := c.Restart(oldFollower); err != nil {
		t.Fatal(err)
	}
	newLeader := waitLeader(t, c)
	if newLeader == oldFollower {
		t.Fatalf("%s, of the previous release, leads", c.ID(oldFollower))
	}
	waitCaughtUp(t, c, oldFollower)
	if log := logSinceLastStart(c, oldFollower); !strings.Contains(log, "Installed remote snapshot") {
		t.Fatalf("%s (previous release) did not install the new leader's snapshot; its log since its start:\n%s", c.ID(oldFollower), tail(log, 40))
	}
	t.Logf("%s (previous release) installed a snapshot of %s (new binary, leading) and caught up", c.ID(oldFollower), c.ID(newLeader))
}

// checkNewLeaderKeepsVersion1: a leader of the new binary with a follower
// of the previous release hears the other servers' versions but stamps
// nothing, so the cluster stays at store version 1 and every server writes
// snapshots of format 1. A dry-run join of the old follower saying it runs
// the newest version changes none of that.
func checkNewLeaderKeepsVersion1(t *testing.T, c *testcluster.Cluster, w *writers, oldFollower int) {
	t.Helper()
	ctx := context.Background()
	var leader int
	var info *api.Cluster
	eventually(t, "the new leader to hear its servers' store versions", func() error {
		leader = waitLeader(t, c)
		var err error
		if info, err = c.ClusterInfo(ctx, leader); err != nil {
			return err
		}
		for _, s := range info.Servers {
			want := raftstore.StoreVersion
			if s.ID == c.ID(oldFollower) {
				want = 1
			}
			if s.StoreVersion != want {
				return fmt.Errorf("%s: store_version %d, want %d", s.ID, s.StoreVersion, want)
			}
		}
		return nil
	})

	// The old follower joins again (a no-op for a member at its address),
	// as a dry run, saying it runs the newest version: a claim, which must
	// not count as what the leader heard from it.
	req, _ := http.NewRequest(http.MethodPost, c.Address(leader)+"/v1/cluster/servers?dry_run=true", strings.NewReader(fmt.Sprintf(
		`{"id": %q, "raft_address": %q, "api_address": %q}`, c.ID(oldFollower), c.RaftAddress(oldFollower), c.Address(oldFollower))))
	req.Header.Set(api.HeaderStoreVersion, fmt.Sprint(raftstore.StoreVersion))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("dry-run join of %s: %s", c.ID(oldFollower), resp.Status)
	}
	if info, err = c.ClusterInfo(ctx, leader); err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Servers {
		if s.ID == c.ID(oldFollower) && s.StoreVersion != 1 {
			t.Fatalf("a dry-run join raised %s (previous release) to store version %d", s.ID, s.StoreVersion)
		}
	}

	// An empty lending limit (lend nothing) is what the old follower would
	// store as no cap: the write is refused, and its dry run (what a
	// Terraform plan asks) says so rather than promise it.
	for _, path := range []string{"/v1/roles/lends-nothing?dry_run=true", "/v1/roles/lends-nothing"} {
		req, _ := http.NewRequest(http.MethodPut, c.Address(leader)+path, strings.NewReader(`{"lending_limit": {}}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "needs store version 2") {
			t.Fatalf("PUT %s {\"lending_limit\": {}} with %s of the previous release: %s %s, want 409 naming the version",
				path, c.ID(oldFollower), resp.Status, body)
		}
	}

	start := appliedIndex(t, c, leader)
	w.waitAcks(t, 50)
	for i := range c.N() {
		if i == oldFollower {
			// Its release shows no store version; its snapshots are format 1.
			checkSnapshotFormat(t, c, i, start+1, 1)
			continue
		}
		info, err := c.ClusterInfo(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		if info.StoreVersion != 1 {
			t.Fatalf("%s: store_version %d with %s of the previous release in the cluster", c.ID(i), info.StoreVersion, c.ID(oldFollower))
		}
		checkSnapshotFormat(t, c, i, start+1, 1)
	}
}

// appliedIndex is the index of server i's own state (a stale read).
func appliedIndex(t *testing.T, c *testcluster.Cluster, i int) uint64 {
	t.Helper()
	meta, err := newClient(t, 0, c.Address(i)).Do(context.Background(),
		api.Request{Method: http.MethodGet, Path: "/v1/quotas", Query: url.Values{"stale": {"true"}}}, nil)
	if err != nil {
		t.Fatalf("read %s's index: %v", c.ID(i), err)
	}
	return meta.Index
}

// logSinceLastStart is server i's log from the line testcluster writes before
// it starts the process.
func logSinceLastStart(c *testcluster.Cluster, i int) string {
	data, _ := os.ReadFile(c.LogPath(i))
	log := string(data)
	if at := strings.LastIndex(log, "=== testcluster "); at >= 0 {
		return log[at:]
	}
	return log
}

// upgradeServer stops server i (SIGTERM, as a service manager does), restarts
// it on newBin with the same command line and data dir, and waits until it
// has caught up. It checks that the new binary restored the newest snapshot
// the old one left in the data dir, and returns that snapshot.
func upgradeServer(t *testing.T, c *testcluster.Cluster, i int, newBin string) snapshotMeta {
	t.Helper()
	waitSnapshot(t, c, i, 1)
	if err := c.Terminate(i); err != nil {
		t.Fatal(err)
	}
	snap, ok, err := newestSnapshot(dataDir(c, i))
	if err != nil || !ok {
		t.Fatalf("%s: no snapshot in %s after it stopped (%v)", c.ID(i), dataDir(c, i), err)
	}
	c.SetBinary(i, newBin)
	if err := c.Restart(i); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, c)
	waitCaughtUp(t, c, i)
	log := logSinceLastStart(c, i)
	if !restoredSnapshot(log, snap.ID) {
		t.Fatalf("%s: the new binary did not log that it restored snapshot %s (index %d) written by the previous release; log since its start:\n%s",
			c.ID(i), snap.ID, snap.Index, tail(log, 40))
	}
	t.Logf("%s runs the new binary: restored snapshot %s (index %d) and caught up", c.ID(i), snap.ID, snap.Index)
	return snap
}

// restoredSnapshot reports whether a server's log says Raft restored the
// snapshot id at start (hashicorp/raft logs it at info level).
func restoredSnapshot(log, id string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "restored from snapshot") && strings.Contains(line, "id="+id) {
			return true
		}
	}
	return false
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// --- the state every server must agree on ---

// storedRole is the replicated part of a role: the rest of api.Role is the
// leader's live allocation.
type storedRole struct {
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
	// LendingLimit is compared as it is: none (null) is not lend nothing ({}).
	LendingLimit api.Resources `json:"lending_limit"`
	Version      uint64        `json:"version"`
}

// storedAgent is the replicated part of an agent, and what the reservations
// make of it.
type storedAgent struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Hostname     string        `json:"hostname"`
	Resources    api.Resources `json:"resources"`
	Reserved     api.Resources `json:"reserved"`
	Capabilities []string      `json:"capabilities"`
	RegisteredAt time.Time     `json:"registered_at"`
	Version      uint64        `json:"version"`
}

// storedState is the replicated state as the public API shows it.
type storedState struct {
	Index            uint64                `json:"index"`
	Quotas           []api.Quota           `json:"quotas"`
	Roles            []storedRole          `json:"roles"`
	Reservations     []api.Reservation     `json:"reservations"`
	RateLimits       []api.RateLimit       `json:"rate_limits"`
	RateLimitDefault *api.RateLimitDefault `json:"rate_limit_default"`
	Agents           []storedAgent         `json:"agents"`
	Audit            []api.AuditEntry      `json:"audit"`
}

// objects is the state without its audit trail and index.
func (s storedState) objects() storedState {
	s.Index, s.Audit = 0, nil
	return s
}

// readState reads the whole replicated state from the server cl talks to
// (?stale=true: that server's own state). It fails when the state moved
// while it was read.
func readState(ctx context.Context, cl *api.Client, stale bool) (storedState, error) {
	var (
		st    storedState
		query url.Values
	)
	if stale {
		query = url.Values{"stale": {"true"}}
	}
	get := func(path string, out any) (uint64, error) {
		meta, err := cl.Do(ctx, api.Request{Method: http.MethodGet, Path: path, Query: query}, out)
		if err != nil {
			return 0, fmt.Errorf("GET %s: %w", path, err)
		}
		return meta.Index, nil
	}
	var quotas api.QuotaList
	index, err := get("/v1/quotas", &quotas)
	if err != nil {
		return st, err
	}
	st.Index, st.Quotas = index, quotas.Quotas
	var roles api.RoleList
	if _, err := get("/v1/roles", &roles); err != nil {
		return st, err
	}
	for _, r := range roles.Roles {
		if r.Version > 0 { // a role with no policy of its own is listed for its quota or reservations
			st.Roles = append(st.Roles, storedRole{Role: r.Role, Weight: r.Weight, LendingLimit: r.LendingLimit, Version: r.Version})
		}
	}
	var reservations api.ReservationList
	if _, err := get("/v1/reservations", &reservations); err != nil {
		return st, err
	}
	st.Reservations = reservations.Reservations
	var limits api.RateLimitConfig
	if _, err := get("/v1/ratelimits", &limits); err != nil {
		return st, err
	}
	// Only the per-principal answer carries the version.
	for _, l := range limits.Limits {
		var rl api.RateLimit
		if _, err := get(api.RateLimitPath(l.Principal), &rl); err != nil {
			return st, err
		}
		st.RateLimits = append(st.RateLimits, rl)
	}
	var def api.RateLimitDefault
	switch _, err := get("/v1/ratelimits-default", &def); {
	case err == nil:
		st.RateLimitDefault = &def
	case !isNotFound(err):
		return st, err
	}
	var agents api.AgentList
	if _, err := get("/v1/agents", &agents); err != nil {
		return st, err
	}
	for _, a := range agents.Agents {
		st.Agents = append(st.Agents, storedAgent{ID: a.ID, Name: a.Name, Hostname: a.Hostname, Resources: a.Resources,
			Reserved: a.Reserved, Capabilities: a.Capabilities, RegisteredAt: a.RegisteredAt, Version: a.Version})
	}
	var audit api.AuditList
	last, err := get("/v1/audit", &audit)
	if err != nil {
		return st, err
	}
	st.Audit = audit.Entries
	if last != st.Index {
		return st, fmt.Errorf("the state moved from index %d to %d while it was read", st.Index, last)
	}
	return st, nil
}

// sameStateEverywhere waits until every server has applied what the leader
// has, then checks that each one's own state (stale reads) is the same:
// objects, versions, audit trail, index. It returns that state.
func sameStateEverywhere(t *testing.T, c *testcluster.Cluster) storedState {
	t.Helper()
	ctx := context.Background()
	leaderState := mustReadState(t, newClient(t, 20*time.Second, c.Addresses()...), false)
	var states []storedState
	for i := range c.N() {
		cl := newClient(t, 20*time.Second, c.Address(i))
		var st storedState
		eventually(t, c.ID(i)+" catches up to index "+fmt.Sprint(leaderState.Index), func() error {
			var err error
			if st, err = readState(ctx, cl, true); err != nil {
				return err
			}
			if st.Index < leaderState.Index {
				return fmt.Errorf("at index %d", st.Index)
			}
			return nil
		})
		states = append(states, st)
	}
	for i, st := range states {
		if d := jsonDifference(leaderState, st); d != "" {
			t.Errorf("%s's own state differs from the leader's: %s", c.ID(i), d)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("every server is at index %d with %d quotas, %d roles, %d reservations, %d rate limits, %d audit entries",
		leaderState.Index, len(leaderState.Quotas), len(leaderState.Roles), len(leaderState.Reservations),
		len(leaderState.RateLimits), len(leaderState.Audit))
	return leaderState
}

func mustReadState(t *testing.T, cl *api.Client, stale bool) storedState {
	t.Helper()
	var st storedState
	eventually(t, "read the state from "+strings.Join(cl.Addresses(), ","), func() error {
		var err error
		st, err = readState(context.Background(), cl, stale)
		return err
	})
	return st
}

// jsonDifference describes where a and b differ as indented JSON ("" when
// they do not): the first differing line with its neighbours.
func jsonDifference(a, b any) string {
	aj, _ := json.MarshalIndent(a, "", "  ")
	bj, _ := json.MarshalIndent(b, "", "  ")
	al, bl := strings.Split(string(aj), "\n"), strings.Split(string(bj), "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		if i < len(al) && i < len(bl) && al[i] == bl[i] {
			continue
		}
		from := max(0, i-4)
		return fmt.Sprintf("at line %d\n--- want\n%s\n+++ got\n%s", i+1,
			strings.Join(al[from:min(len(al), i+3)], "\n"), strings.Join(bl[from:min(len(bl), i+3)], "\n"))
	}
	return ""
}

// --- what is written before the upgrade ---

// prefill writes objects of every kind, updates some and deletes others, so
// that every server has taken snapshots (and compacted its log) before the
// upgrade, and the snapshots hold every kind of object.
func prefill(t *testing.T, cl *api.Client) {
	t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		if err != nil {
			t.Fatalf("prefill: %s: %v", what, err)
		}
	}
	for n := 1; n <= 12; n++ {
		role := fmt.Sprintf("team-%d", n)
		_, err := cl.PutQuota(ctx, role, api.QuotaRequest{Guarantees: api.Resources{"cpus": 1}, Limits: api.Resources{"cpus": float64(n + 1), "mem": 1024}}, api.WriteOptions{})
		must("quota "+role, err)
		weight := float64(n)
		_, err = cl.PutRole(ctx, role, api.RoleRequest{Weight: &weight, LendingLimit: api.Resources{"cpus": 1}}, api.WriteOptions{})
		must("role "+role, err)
		_, err = cl.PutReservation(ctx, fmt.Sprintf("res-%d", n), api.ReservationRequest{Agent: "node-1", Role: role, Resources: api.Resources{"cpus": 1, "mem": float64(64 * n)}}, api.WriteOptions{})
		must("reservation", err)
		qps := float64(10 * n)
		_, err = cl.PutRateLimit(ctx, fmt.Sprintf("principal-%d", n), api.RateLimitRequest{QPS: &qps}, api.WriteOptions{})
		must("rate limit", err)
	}
	// Forced past the agent's capacity: stored pending.
	_, err := cl.PutReservation(ctx, "res-huge", api.ReservationRequest{Agent: "node-1", Role: "team-1", Resources: api.Resources{"cpus": 1000}, Force: true}, api.WriteOptions{})
	must("pending reservation", err)
	qps := 33.3
	_, err = cl.PutRateLimitDefault(ctx, api.RateLimitRequest{QPS: &qps}, api.WriteOptions{})
	must("default rate limit", err)
	for n := 1; n <= 12; n += 3 {
		must("delete quota", cl.DeleteQuota(ctx, fmt.Sprintf("team-%d", n), api.WriteOptions{}))
		must("delete role", cl.DeleteRole(ctx, fmt.Sprintf("team-%d", n), api.WriteOptions{}))
		must("delete reservation", cl.DeleteReservation(ctx, fmt.Sprintf("res-%d", n), api.WriteOptions{}))
		must("delete rate limit", cl.DeleteRateLimit(ctx, fmt.Sprintf("principal-%d", n), api.WriteOptions{}))
	}
}

// --- snapshots on disk ---

func dataDir(c *testcluster.Cluster, i int) string { return filepath.Join(c.Dir(i), "data") }

// snapshotMeta is what hashicorp/raft's file snapshot store writes to
// meta.json beside each snapshot.
type snapshotMeta struct {
	ID    string
	Index uint64
	Term  uint64
}

// newestSnapshot finds the newest complete snapshot in a data dir: Raft
// restores that one first when the server starts.
func newestSnapshot(dir string) (snapshotMeta, bool, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return snapshotMeta{}, false, nil
		}
		return snapshotMeta{}, false, err
	}
	var newest snapshotMeta
	found := false
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue // a snapshot being written
		}
		data, err := os.ReadFile(filepath.Join(dir, "snapshots", e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m snapshotMeta
		if err := json.Unmarshal(data, &m); err != nil {
			return snapshotMeta{}, false, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if !found || m.Term > newest.Term || (m.Term == newest.Term && m.Index > newest.Index) {
			newest, found = m, true
		}
	}
	return newest, found, nil
}

// snapshotFormat reads the format a snapshot's state names.
func snapshotFormat(dir string, snap snapshotMeta) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "snapshots", snap.ID, "state.bin"))
	if err != nil {
		return 0, err
	}
	var doc struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", snap.ID, err)
	}
	return doc.Format, nil
}

// waitSnapshot waits until server i has a snapshot at minIndex or later on disk.
func waitSnapshot(t *testing.T, c *testcluster.Cluster, i int, minIndex uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s has a snapshot at index %d or later in %s", c.ID(i), minIndex, dataDir(c, i)), func() error {
		snap, ok, err := newestSnapshot(dataDir(c, i))
		switch {
		case err != nil:
			return err
		case !ok:
			return errors.New("none yet")
		case snap.Index < minIndex:
			return fmt.Errorf("newest at index %d", snap.Index)
		}
		return nil
	})
}

func waitSnapshotsEverywhere(t *testing.T, c *testcluster.Cluster, minIndex uint64) {
	t.Helper()
	for i := range c.N() {
		waitSnapshot(t, c, i, minIndex)
	}
}

// --- an old snapshot into a new binary ---

// checkJoinFromOldSnapshot starts a server of the new binary with an empty
// data dir and has it join the old cluster. The old leader has compacted its
// log, so it sends its snapshot: the new binary must install it and end with
// the same state. The server then leaves the cluster again.
func checkJoinFromOldSnapshot(t *testing.T, c *testcluster.Cluster, cl *api.Client, newBin string) {
	ctx := context.Background()
	const id = "m4"
	httpAddr, dir := freeAddr(t), t.TempDir()
	j := startDaemon(t, newBin, append([]string{"-id", id, "-data-dir", filepath.Join(dir, "data"), "-http", httpAddr,
		"-raft", freeAddr(t), "-join", strings.Join(c.Addresses(), ",")}, upgradeArgs...)...)
	exited := func() error {
		if j.exited() {
			return fmt.Errorf("%s exited (%v); its log:\n%s", id, j.cmd.ProcessState, tail(j.logText(), 30))
		}
		return nil
	}
	jcl := newClient(t, 20*time.Second, "http://"+httpAddr)
	eventually(t, "the new server joins as a voter", func() error {
		if err := exited(); err != nil {
			return err
		}
		info, err := cl.Cluster(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		for _, s := range info.Servers {
			if s.ID == id && s.Suffrage == "voter" {
				return nil
			}
		}
		return fmt.Errorf("servers %+v", info.Servers)
	})
	want := mustReadState(t, cl, false)
	var got storedState
	eventually(t, "the new server catches up to index "+fmt.Sprint(want.Index), func() error {
		if err := exited(); err != nil {
			return err
		}
		var err error
		if got, err = readState(ctx, jcl, true); err != nil {
			return err
		}
		if got.Index < want.Index {
			return fmt.Errorf("at index %d", got.Index)
		}
		return nil
	})
	if d := jsonDifference(want, got); d != "" {
		t.Errorf("the new server's state differs from the old leader's: %s", d)
	}
	if log := j.logText(); !strings.Contains(log, "Installed remote snapshot") {
		t.Errorf("the new server did not install the old leader's snapshot (it may have replayed the log instead); its log:\n%s", tail(log, 40))
	}
	t.Logf("%s (new binary, empty data dir) joined, installed the old leader's snapshot and caught up to index %d", id, got.Index)
	if err := cl.RemoveServer(ctx, id); err != nil {
		t.Fatalf("remove %s: %v", id, err)
	}
	j.signal(t, syscall.SIGTERM)
	j.waitExit(t)
}

// --- writers ---

// objectKind is one kind of object the writers write: how to put a value,
// and how to find it again in the state.
type objectKind struct {
	name string
	path func(key string) string
	body func(value float64) any
	// find returns the key's value and version in st (ok false: absent).
	find func(st storedState, key string) (value float64, version uint64, ok bool)
}

var objectKinds = []objectKind{
	{
		name: "quota",
		path: api.QuotaPath,
		body: func(v float64) any { return api.QuotaRequest{Limits: api.Resources{"cpus": v}} },
		find: func(st storedState, key string) (float64, uint64, bool) {
			for _, q := range st.Quotas {
				if q.Role == key {
					return q.Limits["cpus"], q.Version, true
				}
			}
			return 0, 0, false
		},
	},
	{
		name: "role",
		path: api.RolePath,
		body: func(v float64) any { return api.RoleRequest{Weight: &v} },
		find: func(st storedState, key string) (float64, uint64, bool) {
			for _, r := range st.Roles {
				if r.Role == key {
					return r.Weight, r.Version, true
				}
			}
			return 0, 0, false
		},
	},
	{
		name: "reservation",
		path: api.ReservationPath,
		body: func(v float64) any {
			return api.ReservationRequest{Agent: "node-1", Role: "upgrade-db", Resources: api.Resources{"mem": v}}
		},
		find: func(st storedState, key string) (float64, uint64, bool) {
			for _, r := range st.Reservations {
				if r.Name == key {
					return r.Resources["mem"], r.Version, true
				}
			}
			return 0, 0, false
		},
	},
	{
		name: "rate limit",
		path: api.RateLimitPath,
		body: func(v float64) any { return api.RateLimitRequest{QPS: &v} },
		find: func(st storedState, key string) (float64, uint64, bool) {
			for _, l := range st.RateLimits {
				if l.Principal == key && l.QPS != nil {
					return *l.QPS, l.Version, true
				}
			}
			return 0, 0, false
		},
	},
}

// attempt is one write a writer sent: a PUT of value, or a DELETE.
type attempt struct {
	seq     int
	value   float64 // 0 for a DELETE
	deleted bool
	// acked: the cluster answered it; version is then the object's version
	// (a PUT) or the index of the answer (a DELETE).
	acked   bool
	version uint64
}

// writers write objects of every kind through every server, one request at
// a time each, and record every attempt and its outcome.
type writers struct {
	acks, unknown atomic.Int64
	stopCh        chan struct{}
	wg            sync.WaitGroup

	mu       sync.Mutex
	history  map[string][]attempt // by kind and key ("quota up-0-1")
	firstBad error
}

const keysPerWriter = 3

func startWriters(t *testing.T, addrs []string) *writers {
	t.Helper()
	w := &writers{stopCh: make(chan struct{}), history: map[string][]attempt{}}
	for n, kind := range objectKinds {
		// One request per HTTP call, no retries: an error is an unknown
		// outcome, and the next attempt writes a new value.
		cl := newClient(t, 0, addrs...)
		w.wg.Add(1)
		go w.run(cl, kind, n)
	}
	t.Cleanup(w.stop)
	return w
}

func writerKey(writer, key int) string { return fmt.Sprintf("up-%d-%d", writer, key) }

func (w *writers) run(cl *api.Client, kind objectKind, writer int) {
	defer w.wg.Done()
	for seq := 1; ; seq++ {
		select {
		case <-w.stopCh:
			return
		default:
		}
		key := writerKey(writer, seq%keysPerWriter)
		// Every 7th write is a DELETE: a key is deleted every 21 writes
		// and written again 3 later.
		a := attempt{seq: seq, deleted: seq%7 == 0}
		req := api.Request{Method: http.MethodDelete, Path: kind.path(key)}
		if !a.deleted {
			a.value = float64(seq)
			req = api.Request{Method: http.MethodPut, Path: kind.path(key), Body: kind.body(a.value)}
		}
		var obj struct{ Version uint64 }
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		meta, err := cl.Do(ctx, req, &obj)
		cancel()
		var apiErr *api.Error
		switch {
		case err == nil:
			a.acked, a.version = true, obj.Version
			if a.deleted {
				a.version = meta.Index
			}
		case a.deleted && isNotFound(err):
			a.acked, a.version = true, meta.Index // already absent: as good as deleted
		case errors.As(err, &apiErr) && apiErr.Code != api.CodeNoLeader:
			w.refuse(fmt.Errorf("%s %s %s: %w", req.Method, kind.name, key, err))
		}
		w.record(kind.name+" "+key, a)
		if !a.acked {
			// A server is down or an election is under way: let it pass
			// rather than spin.
			select {
			case <-w.stopCh:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func (w *writers) record(key string, a attempt) {
	w.mu.Lock()
	w.history[key] = append(w.history[key], a)
	w.mu.Unlock()
	if a.acked {
		w.acks.Add(1)
	} else {
		w.unknown.Add(1)
	}
}

func (w *writers) refuse(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstBad == nil {
		w.firstBad = err
	}
}

func (w *writers) refused() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstBad
}

// waitAcks waits until n more writes have been acknowledged.
func (w *writers) waitAcks(t *testing.T, n int64) {
	t.Helper()
	target := w.acks.Load() + n
	eventually(t, fmt.Sprintf("%d more acknowledged writes", n), func() error {
		if err := w.refused(); err != nil {
			return err
		}
		if got := w.acks.Load(); got < target {
			return fmt.Errorf("%d of %d", got, target)
		}
		return nil
	})
}

func (w *writers) stop() {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	w.wg.Wait()
}

// checkAcknowledged checks every key against its writer's history: the state
// holds the last acknowledged write (its value and version), or what a later
// write with no answer did, which may have been applied.
func (w *writers) checkAcknowledged(t *testing.T, st storedState) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	checked := 0
	for n, kind := range objectKinds {
		for k := range keysPerWriter {
			key := writerKey(n, k)
			history := w.history[kind.name+" "+key]
			value, version, present := kind.find(st, key)
			if err := explains(history, value, version, present); err != nil {
				t.Errorf("%s %s: %v", kind.name, key, err)
			}
			checked += len(history)
		}
	}
	t.Logf("checked %d writes to %d keys against the final state", checked, len(objectKinds)*keysPerWriter)
}

// explains returns nil when the final state of a key (value and version, or
// absent) follows from its history of writes: it is what the last
// acknowledged write left, or what a write with no answer did after it. An
// unanswered write may take effect at any time after it was sent, even after
// a later write of the same writer was acknowledged.
func explains(history []attempt, value float64, version uint64, present bool) error {
	last := -1
	for i, a := range history {
		if a.acked {
			last = i
		}
	}
	if last < 0 {
		return fmt.Errorf("no write was acknowledged (%d attempts)", len(history))
	}
	acked := history[last]
	switch {
	case acked.deleted && !present:
		return nil
	case !acked.deleted && present && value == acked.value && version == acked.version:
		return nil
	}
	unanswered := 0
	for _, a := range history {
		if a.acked {
			continue
		}
		unanswered++
		if (a.deleted && !present) || (!a.deleted && present && value == a.value && version > acked.version) {
			return nil
		}
	}
	want := fmt.Sprintf("value %v at version %d", acked.value, acked.version)
	if acked.deleted {
		want = fmt.Sprintf("absent (deleted at index %d)", acked.version)
	}
	got := "absent"
	if present {
		got = fmt.Sprintf("value %v at version %d", value, version)
	}
	return fmt.Errorf("the last acknowledged write (#%d) left it %s, but it is %s, which none of the %d unanswered writes explains",
		acked.seq, want, got, unanswered)
}

// --- helpers ---

func isNotFound(err error) bool {
	var apiErr *api.Error
	return errors.As(err, &apiErr) && apiErr.Code == api.CodeNotFound
}

func newClient(t *testing.T, retryFor time.Duration, addrs ...string) *api.Client {
	t.Helper()
	cl := client(t, addrs...)
	cl.RetryFor = retryFor
	cl.HTTP.Timeout = 10 * time.Second
	return cl
}

// waitCaughtUp waits until server i has applied everything the leader had
// applied when the wait began.
func waitCaughtUp(t *testing.T, c *testcluster.Cluster, i int) {
	t.Helper()
	ctx := context.Background()
	leaderCl := newClient(t, 20*time.Second, c.Addresses()...)
	meta, err := leaderCl.Do(ctx, api.Request{Method: http.MethodGet, Path: "/v1/quotas"}, nil)
	if err != nil {
		t.Fatalf("read the leader's index: %v", err)
	}
	own := newClient(t, 0, c.Address(i))
	eventually(t, fmt.Sprintf("%s catches up to index %d", c.ID(i), meta.Index), func() error {
		got, err := own.Do(ctx, api.Request{Method: http.MethodGet, Path: "/v1/quotas", Query: url.Values{"stale": {"true"}}}, nil)
		if err != nil {
			return err
		}
		if got.Index < meta.Index {
			return fmt.Errorf("at index %d", got.Index)
		}
		return nil
	})
}

// TestExplains checks the rule the upgrade test judges each key by, on
// histories where it must pass and must fail.
func TestExplains(t *testing.T) {
	put := func(seq int, version uint64) attempt {
		return attempt{seq: seq, value: float64(seq), acked: version > 0, version: version}
	}
	del := func(seq int, index uint64) attempt {
		return attempt{seq: seq, deleted: true, acked: index > 0, version: index}
	}
	tests := map[string]struct {
		history        []attempt
		value          float64
		version        uint64
		present, valid bool
	}{
		"the last acknowledged put":                {history: []attempt{put(1, 10), put(2, 20)}, value: 2, version: 20, present: true, valid: true},
		"an earlier value: the last write lost":    {history: []attempt{put(1, 10), put(2, 20)}, value: 1, version: 10, present: true},
		"the right value at another version":       {history: []attempt{put(1, 10), put(2, 20)}, value: 2, version: 21, present: true},
		"an acknowledged delete":                   {history: []attempt{put(1, 10), del(2, 20)}, valid: true},
		"present after an acknowledged delete":     {history: []attempt{put(1, 10), del(2, 20)}, value: 1, version: 10, present: true},
		"absent after an acknowledged put":         {history: []attempt{put(1, 10)}},
		"an unanswered put applied after the ack":  {history: []attempt{put(1, 10), put(2, 0)}, value: 2, version: 15, present: true, valid: true},
		"an unanswered put applied late":           {history: []attempt{put(1, 0), put(2, 20)}, value: 1, version: 25, present: true, valid: true},
		"an unanswered put applied before the ack": {history: []attempt{put(1, 0), put(2, 20)}, value: 1, version: 15, present: true},
		"an unanswered delete applied":             {history: []attempt{put(1, 10), del(2, 0)}, valid: true},
		"a value never written":                    {history: []attempt{put(1, 10)}, value: 7, version: 10, present: true},
		"nothing acknowledged":                     {history: []attempt{put(1, 0)}, value: 1, version: 5, present: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := explains(tc.history, tc.value, tc.version, tc.present)
			if (err == nil) != tc.valid {
				t.Fatalf("explains = %v, want valid %v", err, tc.valid)
			}
		})
	}
}
