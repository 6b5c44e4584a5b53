package raftstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// readBatch lets concurrent linearizable reads share one leadership check,
// the way etcd batches ReadIndex requests: a check (a Raft VerifyLeader, a
// round of heartbeats a quorum must answer) costs the same for one read as
// for a hundred, and a no-op `terraform plan` refreshes its resources ten at
// a time, each with its own read.
//
// A read joins the NEXT round, one that starts after the read arrived, never
// the round already in flight: that one may have heard from the quorum
// before the read arrived, and a leader deposed meanwhile would answer it
// with the state of before. One round serves every read that was waiting
// when it started. Rounds run one after the other, in a goroutine that
// lives while reads wait.
type readBatch struct {
	// verify runs one round: it confirms the leadership with a quorum and
	// returns nil, or fails (deposed, shut down). Tests wrap it.
	verify func() error

	mu sync.Mutex
	// next is the round that reads arriving now join; it has not started.
	// nil when no read waits for one.
	next *readRound
	// running is true while a goroutine runs rounds (it takes next).
	running bool

	// rounds counts the rounds started, for tests and benchmarks.
	rounds atomic.Uint64
}

// readRound is one leadership check and the reads it serves.
type readRound struct {
	// readers is how many reads joined it (tests).
	readers int
	// done is closed once err is set.
	done chan struct{}
	err  error
}

// wait returns once a round that started after it was called has confirmed
// the leadership, or with that round's error, or ctx's.
func (b *readBatch) wait(ctx context.Context) error {
	b.mu.Lock()
	r := b.next
	if r == nil {
		r = &readRound{done: make(chan struct{})}
		b.next = r
	}
	r.readers++
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		// The round goes on for the reads that still wait.
		return ctx.Err()
	}
}

// run starts rounds while reads wait for one.
func (b *readBatch) run() {
	for {
		b.mu.Lock()
		r := b.next
		b.next = nil
		if r == nil {
			b.running = false
			b.mu.Unlock()
			return
		}
		// Taken under the lock, so that every read that joined r arrived
		// before the round starts below.
		verify := b.verify
		b.mu.Unlock()
		b.rounds.Add(1)
		r.err = verify()
		close(r.done)
	}
}

// verifyRound is one leadership round of n's readBatch. It is not bounded
// by one reader's ctx: the round serves them all. It ends when Raft answers
// (a deposed leader's checks fail once it steps down) or when n shuts down.
func (n *Node) verifyRound() error {
	return n.waitFuture(context.Background(), n.raft.VerifyLeader())
}

// verifyLeadership confirms with a quorum, in a round shared with the
// concurrent reads (see readBatch), that n still leads. It fails with
// ErrNotLeader when n was deposed or shut down, or with ctx's error.
func (n *Node) verifyLeadership(ctx context.Context) error {
	if err := n.reads.wait(ctx); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("verify leadership: %w", ctxErr)
		}
		return ErrNotLeader
	}
	return nil
}
