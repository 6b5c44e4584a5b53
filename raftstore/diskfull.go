package raftstore

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A full data dir, as hashicorp/raft meets it: a leader whose log store
// fails to append steps down at once (the write's future fails, the HTTP
// answer is 503 no_leader), but it stays the leader its peers know, so
// their pre-votes go to it first (leader stickiness) and it wins the next
// election again, fails its first append again, and so on: the cluster
// takes no write for as long as that one disk is full. diskGuard ends the
// loop: once an append failed for lack of space, this server asks for no
// vote until its disk has room again, so the servers that can write elect
// one of their own. A follower whose disk is full only fails its appends:
// the leader retries them, and the server catches up once space returns.

// ErrDiskFull is what a server with a full data dir answers its own
// request to stand for election with.
var ErrDiskFull = errors.New("the data dir is full: this server does not stand for election until it has room")

// diskRoom is how much free space a data dir needs before a server that
// ran out of it stands for election again: enough for raft.db to grow by
// a few pages and for a snapshot of a policy store.
const diskRoom = 1 << 20

// diskGuard remembers that an append failed for lack of space in dir.
type diskGuard struct {
	dir    string
	logger hclog.Logger
	full   atomic.Bool
	// free reports the bytes free for dir's file system (statfs; a test
	// may replace it).
	free func(dir string) (uint64, error)
}

func newDiskGuard(dir string, logger hclog.Logger) *diskGuard {
	return &diskGuard{dir: dir, logger: logger, free: freeBytes}
}

// noSpace reports whether err says that the file system is full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// wrote records the outcome of a log store write.
func (g *diskGuard) wrote(err error) {
	switch {
	case err == nil:
		if g.full.Swap(false) {
			g.logger.Info("the data dir has room again: writes to the Raft log succeed", "data_dir", g.dir)
		}
	case noSpace(err):
		if !g.full.Swap(true) {
			g.logger.Error("the data dir is full: this server cannot append to its Raft log and will not stand for election until it has room; free space in it",
				"data_dir", g.dir, "error", err)
		}
	}
}

// mayStand reports whether this server may ask for votes: its disk did not
// fill up, or has room again.
func (g *diskGuard) mayStand() bool {
	if !g.full.Load() {
		return true
	}
	free, err := g.free(g.dir)
	if err != nil || free < diskRoom {
		return false
	}
	if g.full.Swap(false) {
		g.logger.Info("the data dir has room again: this server stands for election again", "data_dir", g.dir, "free_bytes", free)
	}
	return true
}

// Full reports whether this server's last log write failed for lack of
// space and its data dir has not had room since.
func (g *diskGuard) Full() bool { return g != nil && !g.mayStand() }

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// guardedLogStore tells the guard how each append went.
type guardedLogStore struct {
	raft.LogStore
	guard *diskGuard
}

func (s guardedLogStore) StoreLog(l *raft.Log) error {
	err := s.LogStore.StoreLog(l)
	s.guard.wrote(err)
	return err
}

func (s guardedLogStore) StoreLogs(logs []*raft.Log) error {
	err := s.LogStore.StoreLogs(logs)
	s.guard.wrote(err)
	return err
}

// guardedTransport refuses to carry this server's own vote requests while
// its disk is full; everything else passes through.
type guardedTransport struct {
	raft.Transport
	guard *diskGuard
}

// Both transports allot uses (TCP and in-memory) take pre-votes, and
// hashicorp/raft asks a transport whether it does by this interface.
var _ raft.WithPreVote = guardedTransport{}

func (t guardedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if !t.guard.mayStand() {
		return ErrDiskFull
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

func (t guardedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if !t.guard.mayStand() {
		return ErrDiskFull
	}
	pre, ok := t.Transport.(raft.WithPreVote)
	if !ok {
		return fmt.Errorf("transport %T does not carry pre-votes", t.Transport)
	}
	return pre.RequestPreVote(id, target, args, resp)
}

// Close closes the transport when it can be (raft.WithClose): Raft closes
// its transport on shutdown through it.
func (t guardedTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}
