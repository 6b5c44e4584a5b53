package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

func TestTimingProblems(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		timing Timing
		want   map[string]string // key → a word of the problem
	}{
		{"defaults", Timing{}, nil},
		{"heartbeat alone scales the rest", Timing{HeartbeatTimeout: 6 * ms}, nil},
		{"explicit and consistent", Timing{HeartbeatTimeout: 100 * ms, ElectionTimeout: 200 * ms, LeaderLeaseTimeout: 100 * ms}, nil},
		{"negative heartbeat", Timing{HeartbeatTimeout: -time.Second}, map[string]string{"heartbeat-timeout": "-1s"}},
		{"below raft's floor", Timing{ElectionTimeout: ms}, map[string]string{"election-timeout": "between 5ms"}},
		{"a unit typo", Timing{HeartbeatTimeout: 500 * time.Second}, map[string]string{"heartbeat-timeout": "8m20s"}},
		{"lease past the heartbeat timeout", Timing{HeartbeatTimeout: 100 * ms, LeaderLeaseTimeout: 200 * ms},
			map[string]string{"leader-lease-timeout": "longer than the heartbeat timeout"}},
		{"election shorter than the heartbeat timeout", Timing{HeartbeatTimeout: time.Second, ElectionTimeout: 500 * ms},
			map[string]string{"election-timeout": "shorter than the heartbeat timeout"}},
		{"both relations and a range", Timing{HeartbeatTimeout: 100 * ms, ElectionTimeout: ms, LeaderLeaseTimeout: 200 * ms},
			map[string]string{"election-timeout": "between", "leader-lease-timeout": "longer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.timing.Problems()
			if len(got) != len(tt.want) {
				t.Fatalf("problems %v, want keys of %v", got, tt.want)
			}
			for key, word := range tt.want {
				if !strings.Contains(got[key], word) {
					t.Errorf("%s: %q, want it to say %q", key, got[key], word)
				}
			}
			if err := tt.timing.Check(); (err != nil) != (len(tt.want) > 0) {
				t.Errorf("Check: %v, want an error: %v", err, len(tt.want) > 0)
			}
			// Open refuses what Check refuses, before Raft starts.
			if len(tt.want) > 0 {
				if n, err := Open(Config{ID: "m1", InMemory: true, Timing: tt.timing}); err == nil {
					n.Shutdown()
					t.Error("Open accepted the timing")
				}
			}
		})
	}
}

// onDisk opens a one-server cluster on dir with the given log store and
// waits until it leads.
func onDisk(t *testing.T, dir, kind string) *Node {
	t.Helper()
	n, err := openWithin(t, Config{ID: "m1", DataDir: dir, LogStore: kind, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Bootstrap(); err != nil {
		n.Shutdown()
		t.Fatal(err)
	}
	waitNodeReady(t, n)
	return n
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// TestDataDirKeepsItsLogStore: a server started with the other kind of log
// store than its data dir holds is refused, says how to start it, and
// leaves the data dir as it was.
func TestDataDirKeepsItsLogStore(t *testing.T) {
	for _, kinds := range [][2]string{{LogStoreBolt, LogStoreWAL}, {LogStoreWAL, LogStoreBolt}, {"", LogStoreWAL}} {
		made, other := kinds[0], kinds[1]
		t.Run(fmt.Sprintf("%q then %s", made, other), func(t *testing.T) {
			dir := t.TempDir()
			n := onDisk(t, dir, made)
			applyOK(t, n, quotaSet("kept", nil, api.Resources{"cpus": 1}))
			if err := n.Shutdown(); err != nil {
				t.Fatal(err)
			}
			if made == "" {
				made = LogStoreBolt
			}
			if kind, err := DataDirLogStore(dir); kind != made || err != nil {
				t.Fatalf("DataDirLogStore: %q, %v; want %q", kind, err, made)
			}
			before := listDir(t, dir)

			_, err := openWithin(t, Config{ID: "m1", DataDir: dir, LogStore: other, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
			var mismatch *LogStoreMismatchError
			if !errors.As(err, &mismatch) || mismatch.Found != made || mismatch.Want != other {
				t.Fatalf("open with %s: %v, want a LogStoreMismatchError (found %s)", other, err, made)
			}
			if !strings.Contains(err.Error(), "-raft-log-store "+made) {
				t.Errorf("the error does not say how to start the server: %v", err)
			}
			if after := listDir(t, dir); after != before {
				t.Errorf("the refused start changed the data dir: %s → %s", before, after)
			}

			// With its own kind it starts, with its state.
			n = onDisk(t, dir, made)
			defer n.Shutdown()
			if found, _ := lookupQuota(n, "kept"); !found {
				t.Error("the quota written before the restart is gone")
			}
		})
	}

	t.Run("unknown kind", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := openWithin(t, Config{ID: "m1", DataDir: dir, LogStore: "lsm", RaftAddr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), `"lsm"`) {
			t.Fatalf("open with an unknown log store: %v", err)
		}
		if got := listDir(t, dir); got != "" {
			t.Errorf("the refused start left %s in the data dir", got)
		}
	})

	// A first start with the wal store that failed before writing leaves
	// an empty wal/: no log of either kind yet.
	t.Run("empty wal dir", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, walDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if kind, err := DataDirLogStore(dir); kind != "" || err != nil {
			t.Fatalf("DataDirLogStore of an empty wal/: %q, %v; want none", kind, err)
		}
		onDisk(t, dir, LogStoreBolt).Shutdown()
	})

	t.Run("both kinds", func(t *testing.T) {
		dir := t.TempDir()
		onDisk(t, dir, LogStoreBolt).Shutdown()
		if err := os.Mkdir(filepath.Join(dir, walDir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, walDir, "wal-meta.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, kind := range LogStores {
			if _, err := openWithin(t, Config{ID: "m1", DataDir: dir, LogStore: kind, RaftAddr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "holds both") {
				t.Errorf("open with %s of a data dir holding both: %v", kind, err)
			}
		}
	})
}

// TestWALNodeOnDisk runs a server on the wal log store through what the
// bolt one goes through: writes, a snapshot, a restored backup (the wal
// refuses the gap Raft leaves in the log after one unless Raft knows that,
// through the disk guard and the log cache), more writes and a restart.
func TestWALNodeOnDisk(t *testing.T) {
	dir := t.TempDir()
	n := onDisk(t, dir, LogStoreWAL)
	for i := range 20 {
		applyOK(t, n, quotaSet(fmt.Sprintf("team%d", i), nil, api.Resources{"cpus": float64(i + 1)}))
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	applyOK(t, n, quotaSet("after-snapshot", nil, nil))

	backup := richStateV3(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := n.Restore(ctx, backup); err != nil {
		t.Fatalf("restore: %v", err)
	}
	for i := range 5 {
		applyOK(t, n, quotaSet(fmt.Sprintf("after-restore-%d", i), nil, nil))
	}
	want := fsmSnapshotBytes(t, n.FSM())
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, boltFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a wal server made %s: %v", boltFile, err)
	}

	n, err := openWithin(t, Config{ID: "m1", DataDir: dir, LogStore: LogStoreWAL, RaftAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if !n.HasExistingState() {
		t.Fatal("a restarted wal server reports no state")
	}
	waitNodeReady(t, n)
	if got := fsmSnapshotBytes(t, n.FSM()); !bytes.Equal(got, want) {
		t.Fatalf("state after restart:\n%s\nwant\n%s", got, want)
	}
	applyOK(t, n, quotaSet("after-restart", nil, nil))
}

// TestTransferLeadership hands the leadership of a 3-server cluster over:
// another server leads and takes writes, which reach every server; on a
// follower, and on a server alone, it does nothing.
func TestTransferLeadership(t *testing.T) {
	c, lead := newLedCluster(t)
	res := applyOK(t, lead, quotaSet("before", nil, nil))
	c.waitConverged(res.Index)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.node(1).TransferLeadership(ctx); err != nil {
		t.Fatalf("transfer on a follower: %v", err)
	}
	if !lead.IsLeader() {
		t.Fatal("a follower's transfer moved the leadership")
	}
	if err := lead.TransferLeadership(ctx); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	if lead.IsLeader() {
		t.Fatal("m1 still leads after handing its leadership over")
	}
	// A request held meanwhile learns the new leader.
	lead.AwaitTransfer(ctx)
	next := c.readyLeader()
	if next == 0 {
		t.Fatal("m1 leads again")
	}
	if _, err := lead.Apply(ctx, quotaSet("on-the-old-leader", nil, nil)); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write on the old leader: %v, want ErrNotLeader", err)
	}
	res = applyOK(t, c.node(next), quotaSet("after", nil, nil))
	c.waitConverged(res.Index)
	for _, i := range c.live() {
		if found, _ := lookupQuota(c.node(i), "after"); !found {
			t.Errorf("m%d lacks the write made after the transfer", i+1)
		}
	}

	alone := startInMemory(t, "solo")
	if err := alone.TransferLeadership(ctx); err != nil || !alone.IsLeader() {
		t.Fatalf("transfer on a server alone: %v, leads: %v; want a no-op", err, alone.IsLeader())
	}
}
