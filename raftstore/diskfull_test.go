package raftstore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// failingLogs fails every append with err.
type failingLogs struct {
	raft.LogStore
	err error
}

func (f failingLogs) StoreLogs([]*raft.Log) error { return f.err }

// countingTransport counts the vote requests that reach the network.
type countingTransport struct {
	raft.Transport
	votes, preVotes int
}

func (t *countingTransport) RequestVote(raft.ServerID, raft.ServerAddress, *raft.RequestVoteRequest, *raft.RequestVoteResponse) error {
	t.votes++
	return nil
}

func (t *countingTransport) RequestPreVote(raft.ServerID, raft.ServerAddress, *raft.RequestPreVoteRequest, *raft.RequestPreVoteResponse) error {
	t.preVotes++
	return nil
}

func TestDiskGuard(t *testing.T) {
	full := &fs.PathError{Op: "write", Path: "/data/raft.db", Err: syscall.ENOSPC}
	tests := map[string]struct {
		appendErr error
		freeBytes uint64
		wantStand bool
	}{
		"append succeeded":                 {appendErr: nil, freeBytes: 0, wantStand: true},
		"disk full, still no room":         {appendErr: full, freeBytes: diskRoom - 1, wantStand: false},
		"disk full, room again":            {appendErr: full, freeBytes: diskRoom, wantStand: true},
		"quota exceeded":                   {appendErr: fmt.Errorf("commit: %w", syscall.EDQUOT), freeBytes: 0, wantStand: false},
		"another error is not a full disk": {appendErr: errors.New("i/o timeout"), freeBytes: 0, wantStand: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			guard := newDiskGuard("/data", hclog.NewNullLogger())
			guard.free = func(string) (uint64, error) { return tc.freeBytes, nil }
			logs := guardedLogStore{LogStore: failingLogs{LogStore: raft.NewInmemStore(), err: tc.appendErr}, guard: guard}
			if err := logs.StoreLogs([]*raft.Log{{Index: 1}}); !errors.Is(err, tc.appendErr) {
				t.Fatalf("StoreLogs = %v, want the store's own error %v", err, tc.appendErr)
			}
			inner := &countingTransport{}
			trans := guardedTransport{Transport: inner, guard: guard}
			voteErr := trans.RequestVote("m2", "a", &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{})
			preErr := trans.RequestPreVote("m2", "a", &raft.RequestPreVoteRequest{}, &raft.RequestPreVoteResponse{})
			if tc.wantStand {
				if voteErr != nil || preErr != nil || inner.votes != 1 || inner.preVotes != 1 {
					t.Fatalf("vote requests: %v, %v; %d and %d sent, want both sent", voteErr, preErr, inner.votes, inner.preVotes)
				}
				return
			}
			if !errors.Is(voteErr, ErrDiskFull) || !errors.Is(preErr, ErrDiskFull) || inner.votes+inner.preVotes != 0 {
				t.Fatalf("vote requests: %v, %v; %d and %d sent, want ErrDiskFull and none sent", voteErr, preErr, inner.votes, inner.preVotes)
			}
			if !guard.Full() {
				t.Fatal("Full() = false while the guard refuses to stand")
			}
			// The next append that lands means room again.
			guard.wrote(nil)
			if !guard.mayStand() {
				t.Fatal("a successful append did not end the full state")
			}
		})
	}
}
