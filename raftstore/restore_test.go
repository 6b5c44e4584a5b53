package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/allot/allot/masterd/api"
)

// startRestoreCluster is a 3-server in-memory cluster whose leader, m1, has
// heard that every server runs StoreVersion (unless heard is false) and
// holds server records and quotas of its own.
func startRestoreCluster(t *testing.T, heard bool) (*testCluster, *Node) {
	c, lead := newLedCluster(t)
	if !heard {
		lead.ForgetServerVersions() // as in a new term: the joins recorded versions
	}
	for i := range 3 {
		n := c.node(i)
		applyOK(t, lead, &ServerSet{WriteMeta: meta(), ID: n.ID(), RaftAddress: n.RaftAddress(), APIAddress: "http://" + n.ID() + ".restoring"})
	}
	applyOK(t, lead, admit("node-9", api.Resources{"cpus": 100}))
	var res Result
	for i := range 40 {
		res = applyOK(t, lead, quotaSet(fmt.Sprintf("mine-%d", i), api.Resources{"cpus": 1}, nil))
	}
	c.waitConverged(res.Index)
	return c, lead
}

// restoredAs is what a cluster must hold after restoring st: st, with the
// cluster's own server records.
func restoredAs(t testing.TB, st *State, cluster *Node) []byte {
	t.Helper()
	want := st.clone()
	cluster.FSM().Read(func(cur *State) { want.servers = cloneMap(cur.servers) })
	return snapshotBytes(t, want)
}

// waitState waits until every live server's state is want.
func (c *testCluster) waitState(what string, want []byte) {
	c.t.Helper()
	waitFor(c.t, what, func() bool {
		for _, i := range c.live() {
			if !bytes.Equal(fsmSnapshotBytes(c.t, c.node(i).FSM()), want) {
				return false
			}
		}
		return true
	})
}

// TestRestoreReplacesTheClustersState restores backups into a running
// 3-server cluster: every server ends with the backup's state (but its own
// server records), the leader's term starts again on it, and writes after
// it get versions above both the backup's index and the cluster's own log,
// whichever of the two is ahead.
func TestRestoreReplacesTheClustersState(t *testing.T) {
	c, lead := startRestoreCluster(t, true)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		index uint64 // the backup's index, above or below the cluster's log
	}{
		{"a backup ahead of the cluster's log", 100000},
		{"a backup behind the cluster's log", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backup := richStateV3(t)
			if tc.index != 0 {
				backup.index = tc.index
			}
			lastBefore := lead.Raft().LastIndex()
			eventsBefore := len(c.leadershipEvents(0))
			want := restoredAs(t, backup, lead)

			index, err := lead.Restore(ctx, backup)
			if err != nil {
				t.Fatal(err)
			}
			if index != backup.Index() {
				t.Errorf("Restore answered index %d, want the backup's %d", index, backup.Index())
			}
			c.waitState("every server to hold the restored state", want)
			if !lead.Ready() {
				t.Error("the leader is not ready once Restore returned")
			}
			// The term was started again: OnLeadership(false), then (true).
			events := c.leadershipEvents(0)[eventsBefore:]
			if len(events) != 2 || events[0].leading || !events[1].leading {
				t.Errorf("leadership calls during the restore: %+v, want false then true", events)
			}

			res := applyOK(t, lead, quotaSet("after-restore", api.Resources{"cpus": 1}, nil))
			if floor := max(backup.Index(), lastBefore); res.Index <= floor {
				t.Errorf("the first write after the restore got index %d, not above %d (backup %d, log %d)",
					res.Index, floor, backup.Index(), lastBefore)
			}
			if q, _ := lookupQuota(lead, "mine-0"); q {
				t.Error("a quota the backup does not hold survived the restore")
			}
			c.waitState("every server to apply the write after the restore", fsmSnapshotBytes(t, lead.FSM()))
		})
	}
}

func lookupQuota(n *Node, role string) (found bool, version uint64) {
	n.FSM().Read(func(s *State) {
		q, ok := s.Quota(role)
		found, version = ok, q.Version
	})
	return found, version
}

// TestRestoreRefusals: a follower, and a backup newer than a server of the
// cluster is known to run, change nothing.
func TestRestoreRefusals(t *testing.T) {
	c, lead := startRestoreCluster(t, false)
	ctx := context.Background()
	before := fsmSnapshotBytes(t, lead.FSM())

	if _, err := c.node(1).Restore(ctx, richStateV3(t)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("restore on a follower: %v, want ErrNotLeader", err)
	}
	// The leader has heard no server's version: they count as version 1.
	var tooNew *RestoreVersionError
	if _, err := lead.Restore(ctx, richStateV3(t)); !errors.As(err, &tooNew) || tooNew.Backup != 3 || tooNew.Cluster != 1 {
		t.Errorf("restore of a version 3 state into a cluster at version 1: %v, want a RestoreVersionError", err)
	}
	if after := fsmSnapshotBytes(t, lead.FSM()); !bytes.Equal(after, before) {
		t.Fatalf("a refused restore changed the state:\n%s", after)
	}
	// A state of version 1 every server reads.
	v1 := richStateUnder(t, 1)
	if _, err := lead.Restore(ctx, v1); err != nil {
		t.Fatalf("restore of a version 1 state: %v", err)
	}
	c.waitState("every server to hold the version 1 state", restoredAs(t, v1, lead))
}

// TestRestoreKeepsACLsBootstrapped: a cluster whose ACLs are bootstrapped
// refuses, and keeps its state, a state whose ACLs never were; one that
// was bootstrapped too restores.
func TestRestoreKeepsACLsBootstrapped(t *testing.T) {
	c, lead := startRestoreCluster(t, true)
	ctx := context.Background()
	applyOK(t, lead, &ACLBootstrap{WriteMeta: meta(), Accessor: "boot", SecretHash: hashOf("allot_boot")})
	before := fsmSnapshotBytes(t, lead.FSM())

	if _, err := lead.Restore(ctx, richStateUnder(t, 2)); !errors.Is(err, ErrRestoreUnbootstraps) {
		t.Fatalf("restore of a state without ACLs into a bootstrapped cluster: %v, want ErrRestoreUnbootstraps", err)
	}
	if after := fsmSnapshotBytes(t, lead.FSM()); !bytes.Equal(after, before) {
		t.Fatalf("a refused restore changed the state:\n%s", after)
	}
	backup := richStateV3(t)
	if _, err := lead.Restore(ctx, backup); err != nil {
		t.Fatalf("restore of a bootstrapped state: %v", err)
	}
	c.waitState("every server to hold the restored state", restoredAs(t, backup, lead))
}
