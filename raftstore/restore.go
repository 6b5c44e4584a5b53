package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// RestoreVersionError refuses a backup that a server of the cluster could
// not read: its state was written under a newer store version than the
// cluster runs.
type RestoreVersionError struct {
	// Backup is the backup's store version, Cluster the lowest a server
	// of the cluster runs (as the leader last heard).
	Backup, Cluster uint32
}

func (e *RestoreVersionError) Error() string {
	return fmt.Sprintf("the backup's state was written under store version %d, and a server of this cluster runs %d, "+
		"or has not answered the leader yet (GET /v1/cluster shows each server's): upgrade every server, or bring it back, "+
		"before restoring it", e.Backup, e.Cluster)
}

// ErrRestoreUnbootstraps refuses a backup whose ACLs were never
// bootstrapped in a cluster whose ACLs are: bootstrapping is once per
// cluster, and the restore would drop every token and open bootstrap to
// whoever calls first.
var ErrRestoreUnbootstraps = errors.New("this cluster's ACLs are bootstrapped and the backup's are not: " +
	"restoring it would drop every token and let anyone bootstrap again; restore it into a cluster " +
	"whose ACLs were never bootstrapped, then bootstrap there")

// CheckRestore says whether st may replace cur, the cluster's state
// (ErrRestoreUnbootstraps). The server asks it first, so that a dry run
// answers as the restore would; Restore asks it again where it counts.
func CheckRestore(cur, st *State) error {
	if cur.aclBootstrapped && !st.aclBootstrapped {
		return ErrRestoreUnbootstraps
	}
	return nil
}

// Restore replaces the replicated state of the whole cluster with st, as
// hashicorp/raft's user restore does: the leader installs it as a snapshot
// at an index past both its own log and st's index, leaving a hole in its
// log, so that every follower (and any later joiner) is sent the snapshot,
// and waits until a quorum has it. Writes after it therefore get versions
// above every version st holds.
//
// What is not the backup's stays the cluster's: the Raft configuration
// (Raft keeps its own) and the server records, which hold the API
// addresses followers forward to; st's are replaced by the cluster's.
//
// Then the leadership is reasserted: OnLeadership(false), a barrier and
// OnLeadership(true), as when this server won, so that what the leader
// built from the old state is built again from the restored one. Restore
// returns the index st reflects once this server is ready again.
func (n *Node) Restore(ctx context.Context, st *State) (uint64, error) {
	if err := n.WaitReady(ctx); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	// Once handed to Raft the restore runs to its end whatever ctx does,
	// and the leadership must be reasserted after it: a goroutine sees to
	// both.
	go func() {
		err := n.install(st)
		if err == nil {
			err = n.reassert()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return 0, err
		}
	case <-n.stop:
		return 0, raft.ErrRaftShutdown
	case <-ctx.Done():
		return 0, fmt.Errorf("restore: %w (the restore goes on: GET /v1/audit shows whether it happened)", ctx.Err())
	}
	if err := n.WaitReady(ctx); err != nil {
		return 0, fmt.Errorf("the backup was restored, but this server did not lead again: %w", err)
	}
	return st.index, nil
}

// install hands st to Raft while no write is proposed and no server joins
// (Node.membership), once the writes proposed before have been applied
// (a barrier): what it takes from the cluster's state (the server
// records) and judges against it (CheckRestore, the store version) stay
// so until st is in place. A server record written meanwhile would be
// lost, a write in flight aborted.
func (n *Node) install(st *State) error {
	n.membership.Lock()
	defer n.membership.Unlock()
	if err := n.raft.Barrier(applyTimeout).Error(); err != nil {
		return restoreError(err)
	}
	if cluster := n.ClusterStoreVersion(); st.RulesVersion() > cluster {
		return &RestoreVersionError{Backup: st.RulesVersion(), Cluster: cluster}
	}
	st = st.clone()
	var refused error
	n.fsm.Read(func(cur *State) {
		if refused = CheckRestore(cur, st); refused == nil {
			st.servers = cloneMap(cur.servers)
		}
	})
	if refused != nil {
		return refused
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, st); err != nil {
		return err
	}
	// Raft panics when its FSM refuses a restore: make sure this one reads.
	if _, err := ReadSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
		return fmt.Errorf("restore: the state to install does not read back: %w", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: st.index, Size: int64(buf.Len())}
	if err := n.raft.Restore(meta, &buf, applyTimeout); err != nil {
		return restoreError(err)
	}
	n.logger.Info("installed a restored state through raft", "state_index", st.index, "raft_index", n.raft.AppliedIndex())
	return nil
}

// restoreError wraps a Raft error of a restore, as ErrNotLeader when this
// server is no longer the one to do it.
func restoreError(err error) error {
	if notLeading(err) {
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return fmt.Errorf("restore: %w", err)
}

// reassert ends this server's leadership term and starts another, as if
// it had just won (monitorLeadership does it).
func (n *Node) reassert() error {
	done := make(chan error, 1)
	select {
	case n.reassertCh <- done:
	case <-n.stop:
		return raft.ErrRaftShutdown
	}
	select {
	case err := <-done:
		return err
	case <-n.stop:
		return raft.ErrRaftShutdown
	}
}
