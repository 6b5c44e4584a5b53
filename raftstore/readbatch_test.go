package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// threeServers starts a 3-server in-memory cluster and waits until every
// server has the whole log; it returns the leader's index.
func threeServers(t *testing.T) (*testCluster, int) {
	t.Helper()
	c := newInmemCluster(t, 3)
	if err := c.node(0).Bootstrap(); err != nil {
		t.Fatal(err)
	}
	i := c.readyLeader()
	lead := c.node(i)
	for j := range 3 {
		if j != i {
			if err := lead.AddVoter(c.node(j).ID(), c.node(j).RaftAddress(), StoreVersion); err != nil {
				t.Fatal(err)
			}
		}
	}
	last := lead.Raft().LastIndex()
	waitFor(t, "every server to have the whole log", func() bool {
		for j := range 3 {
			if c.node(j).Raft().LastIndex() < last {
				return false
			}
		}
		return true
	})
	return c, i
}

// gatedRounds holds every round of n's readBatch at its start until the test
// releases it, then runs the real leadership check. started receives the
// round's number (1, 2, …) as it starts.
type gatedRounds struct {
	started chan uint64
	release chan struct{}
}

func gateRounds(t *testing.T, n *Node) *gatedRounds {
	t.Helper()
	g := &gatedRounds{started: make(chan uint64, 16), release: make(chan struct{}, 16)}
	b := n.reads
	b.mu.Lock()
	real := b.verify
	b.verify = func() error {
		g.started <- b.rounds.Load()
		<-g.release
		return real()
	}
	b.mu.Unlock()
	return g
}

// awaitStart waits for round number want to start.
func (g *gatedRounds) awaitStart(t *testing.T, want uint64) {
	t.Helper()
	select {
	case got := <-g.started:
		if got != want {
			t.Fatalf("round %d started, want round %d", got, want)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("gave up after %v waiting for round %d to start", waitTimeout, want)
	}
}

// waitJoined waits until n reads wait for the round that has not started.
func waitJoined(t *testing.T, n *Node, readers int) {
	t.Helper()
	b := n.reads
	waitFor(t, fmt.Sprintf("%d reads to wait for the next round", readers), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.next != nil && b.next.readers == readers
	})
}

// goRead runs VerifyRead on n in a goroutine; its result comes on the channel.
func goRead(ctx context.Context, n *Node) <-chan error {
	done := make(chan error, 1)
	go func() { done <- n.VerifyRead(ctx) }()
	return done
}

func readResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitTimeout):
		t.Fatalf("gave up after %v waiting for a read", waitTimeout)
		return nil
	}
}

func TestVerifyReadSharesRounds(t *testing.T) {
	c, i := threeServers(t)
	lead := c.node(i)
	g := gateRounds(t, lead)
	ctx := context.Background()

	// One read starts round 1 and is held there; 100 reads that arrive
	// meanwhile must not ride on it: they all wait for round 2, and share it.
	first := goRead(ctx, lead)
	g.awaitStart(t, 1)
	const readers = 100
	var later []<-chan error
	for range readers {
		later = append(later, goRead(ctx, lead))
	}
	waitJoined(t, lead, readers)
	g.release <- struct{}{}
	if err := readResult(t, first); err != nil {
		t.Fatalf("first read: %v", err)
	}
	g.awaitStart(t, 2)
	for i, done := range later {
		select {
		case err := <-done:
			t.Fatalf("read %d returned (%v) before its round ran", i, err)
		default:
		}
	}
	g.release <- struct{}{}
	for i, done := range later {
		if err := readResult(t, done); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
	if got := lead.reads.rounds.Load(); got != 2 {
		t.Fatalf("%d rounds for %d reads, want 2", got, readers+1)
	}
	select {
	case n := <-g.started:
		t.Fatalf("round %d started with no read waiting", n)
	default:
	}
}

func TestVerifyReadCancelled(t *testing.T) {
	c, i := threeServers(t)
	lead := c.node(i)
	g := gateRounds(t, lead)

	// A first read holds round 1, so that both reads below join round 2
	// before it starts: started together, the second could otherwise miss
	// round 1 and wait for a round 2 the test never releases.
	first := goRead(context.Background(), lead)
	g.awaitStart(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := goRead(ctx, lead)
	waiting := goRead(context.Background(), lead)
	waitJoined(t, lead, 2)
	g.release <- struct{}{}
	if err := readResult(t, first); err != nil {
		t.Fatalf("first read: %v", err)
	}
	g.awaitStart(t, 2)
	cancel()
	if err := readResult(t, cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v, want context.Canceled", err)
	}
	// The round goes on for the read still waiting.
	g.release <- struct{}{}
	if err := readResult(t, waiting); err != nil {
		t.Fatalf("read sharing the round: %v", err)
	}
}

func TestVerifyReadDeposed(t *testing.T) {
	c, old := threeServers(t)
	lead := c.node(old)
	g := gateRounds(t, lead)

	// Reads wait on a round held at its start while the leader is cut off
	// and the others elect one of their own.
	var reads []<-chan error
	for range 10 {
		reads = append(reads, goRead(context.Background(), lead))
	}
	g.awaitStart(t, 1)
	c.trans[old].DisconnectAll()
	for j := range c.trans {
		if j != old {
			c.trans[j].Disconnect(c.addrs[old])
		}
	}
	waitFor(t, "a new leader among the others", func() bool {
		for j := range c.trans {
			if j != old && c.node(j).IsLeader() {
				return true
			}
		}
		return false
	})
	g.release <- struct{}{}
	g.release <- struct{}{} // a second round, if reads were left for one
	for i, done := range reads {
		if err := readResult(t, done); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("read %d on the deposed leader: %v, want ErrNotLeader", i, err)
		}
	}
}

func TestVerifyReadShutdown(t *testing.T) {
	c, i := threeServers(t)
	lead := c.node(i)
	g := gateRounds(t, lead)
	read := goRead(context.Background(), lead)
	g.awaitStart(t, 1)
	c.shutdown(i)
	g.release <- struct{}{}
	if err := readResult(t, read); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("read on a server shut down: %v, want ErrNotLeader", err)
	}
}

// benchCluster is a 3-server in-memory cluster with a ready leader.
func benchCluster(b *testing.B) *Node {
	b.Helper()
	var addrs []raft.ServerAddress
	var trans []*raft.InmemTransport
	for i := range 3 {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("m%d", i+1)))
		addrs, trans = append(addrs, addr), append(trans, tr)
	}
	var nodes []*Node
	for i := range 3 {
		for j := range 3 {
			if i != j {
				trans[i].Connect(addrs[j], trans[j])
			}
		}
		n, err := Open(Config{ID: fmt.Sprintf("m%d", i+1), InMemory: true, Transport: trans[i]})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
		b.Cleanup(func() { n.Shutdown() })
	}
	if err := nodes[0].Bootstrap(); err != nil {
		b.Fatal(err)
	}
	waitFor(b, "m1 to lead", nodes[0].Ready)
	for i := 1; i < 3; i++ {
		if err := nodes[0].AddVoter(fmt.Sprintf("m%d", i+1), string(addrs[i]), StoreVersion); err != nil {
			b.Fatal(err)
		}
	}
	return nodes[0]
}

// BenchmarkVerifyRead runs linearizable-read checks from N concurrent
// readers on a 3-server cluster's leader: batched=false is one Raft
// VerifyLeader per read (what VerifyRead did before readBatch), batched=true
// is VerifyRead. reads/s and verifies/s (leadership rounds) are reported.
func BenchmarkVerifyRead(b *testing.B) {
	for _, readers := range []int{1, 10, 100} {
		for _, batched := range []bool{false, true} {
			b.Run(fmt.Sprintf("readers=%d/batched=%t", readers, batched), func(b *testing.B) {
				n := benchCluster(b)
				ctx := context.Background()
				var verifies atomic.Uint64
				read := func() error {
					if batched {
						return n.VerifyRead(ctx)
					}
					verifies.Add(1)
					if err := n.WaitReady(ctx); err != nil {
						return err
					}
					return n.waitFuture(ctx, n.raft.VerifyLeader())
				}
				b.ReportAllocs()
				b.ResetTimer()
				roundsBefore := n.reads.rounds.Load()
				start := time.Now()
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				for range readers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for left.Add(-1) >= 0 {
							if err := read(); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start).Seconds()
				b.StopTimer()
				rounds := verifies.Load()
				if batched {
					rounds = n.reads.rounds.Load() - roundsBefore
				}
				b.ReportMetric(float64(b.N)/elapsed, "reads/s")
				b.ReportMetric(float64(rounds)/elapsed, "verifies/s")
				b.ReportMetric(float64(b.N)/float64(max(rounds, 1)), "reads/verify")
			})
		}
	}
}
