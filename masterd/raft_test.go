package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// These tests are about masterd's Raft settings: the timing and log store
// flags, and the leader's handover when it is told to stop.

func TestRaftFlagsAreChecked(t *testing.T) {
	bin := masterdBinary(t)
	_, stderr, code := runMasterd(t, bin, "-dev", "-http", "127.0.0.1:0", "-raft-election-timeout", "1ms",
		"-raft-heartbeat-timeout", "100ms", "-raft-leader-lease-timeout", "200ms", "-raft-log-store", "lsm")
	if code != 2 {
		t.Fatalf("bad Raft flags: exit %d, want 2; stderr:\n%s", code, stderr)
	}
	last := -1
	for _, want := range []string{"-raft-election-timeout: must be between 5ms and 1m0s, not 1ms",
		"-raft-leader-lease-timeout: 200ms is longer than the heartbeat timeout (100ms)",
		`-raft-log-store: unknown log store "lsm": want bolt or wal`} {
		at := strings.Index(stderr, want)
		if at < 0 {
			t.Fatalf("stderr does not say %q:\n%s", want, stderr)
		}
		if at < last {
			t.Errorf("%q is not reported in flag order:\n%s", want, stderr)
		}
		last = at
	}
	if strings.Contains(stderr, "-raft-heartbeat-timeout:") {
		t.Errorf("a valid -raft-heartbeat-timeout is reported:\n%s", stderr)
	}

	stdout, _, code := runMasterd(t, bin, "-h")
	for _, flag := range []string{"-raft-heartbeat-timeout", "-raft-election-timeout", "-raft-leader-lease-timeout", "-raft-log-store"} {
		if code != 0 || !strings.Contains(stdout, "  "+flag) {
			t.Errorf("masterd -h does not list %s", flag)
		}
	}
}

// writeStream has writers PUT quotas through cl until stop is closed and
// records what was acknowledged; a write that fails after the client's
// retries is an error of the test.
type writeStream struct {
	mu     sync.Mutex
	acked  map[string]float64
	failed []error
	stop   chan struct{}
	wg     sync.WaitGroup
}

func streamWrites(cl *api.Client, writers int) *writeStream {
	s := &writeStream{acked: map[string]float64{}, stop: make(chan struct{})}
	for w := range writers {
		s.wg.Go(func() {
			for seq := 1; ; seq++ {
				select {
				case <-s.stop:
					return
				default:
				}
				role := fmt.Sprintf("w%d-%d", w, seq)
				_, err := cl.PutQuota(context.Background(), role, api.QuotaRequest{Limits: api.Resources{"cpus": float64(seq)}}, api.WriteOptions{})
				s.mu.Lock()
				if err == nil {
					s.acked[role] = float64(seq)
				} else {
					s.failed = append(s.failed, fmt.Errorf("%s: %w", role, err))
				}
				s.mu.Unlock()
			}
		})
	}
	return s
}

func (s *writeStream) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.acked) }

func (s *writeStream) waitFor(t *testing.T, what string, n int) {
	t.Helper()
	eventually(t, what, func() error {
		if got := s.count(); got < n {
			return fmt.Errorf("%d writes acknowledged, want %d", got, n)
		}
		return nil
	})
}

func (s *writeStream) end() { close(s.stop); s.wg.Wait() }

// checkStored reads every acknowledged write back from addr.
func (s *writeStream) checkStored(t *testing.T, addr string) {
	t.Helper()
	all, err := client(t, addr).Quotas(context.Background(), api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]float64{}
	for _, q := range all {
		stored[q.Role] = q.Limits["cpus"]
	}
	for role, cpus := range s.acked {
		if got, ok := stored[role]; !ok || got != cpus {
			t.Errorf("acknowledged write %s (cpus %v) reads back as %v, present %v", role, cpus, got, ok)
		}
	}
}

// TestSIGTERMOfTheLeaderHandsTheLeadershipOver stops the leader of three
// servers as a service manager does while writers stream: it hands its
// leadership to a follower before it stops (its log says so), a new leader
// takes the writes, none fails, and every acknowledged one is stored. How
// long the writes paused is a figure of the benchmark (tools/bench
// -scenario graceful), not a bound of this test.
func TestSIGTERMOfTheLeaderHandsTheLeadershipOver(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := waitLeader(t, c)
	writes := streamWrites(client(t, c.Addresses()...), 3)
	writes.waitFor(t, "writes before the SIGTERM", 50)

	if err := c.Terminate(leader); err != nil {
		t.Fatal(err)
	}
	if log := c.LogTail(leader, 60); !strings.Contains(log, "leadership transferred") {
		t.Errorf("%s stopped without handing its leadership over; its log ends with:\n%s", c.ID(leader), log)
	}
	stopped := writes.count()
	writes.waitFor(t, "writes after the SIGTERM", stopped+50)
	writes.end()
	next := waitLeader(t, c)
	if next == leader {
		t.Fatalf("the stopped server %s leads", c.ID(leader))
	}
	for _, err := range writes.failed {
		t.Errorf("a write failed across the handover: %v", err)
	}
	writes.checkStored(t, c.Address(next))

	// A follower told to stop has nothing to hand over; the one stopped
	// first comes back and the cluster still writes.
	follower := c.Followers()[0]
	if err := c.Terminate(follower); err != nil {
		t.Fatal(err)
	}
	if log := c.LogTail(follower, 60); strings.Contains(log, "leadership transfer") {
		t.Errorf("follower %s tried to hand a leadership over:\n%s", c.ID(follower), log)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if _, err := client(t, c.Addresses()...).PutQuota(context.Background(), "after", api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWALLogStoreCluster runs three servers on -raft-log-store wal through a
// leader's kill -9 and restart, and checks that a data dir keeps its kind: a
// server restarted with the other -raft-log-store is refused, says how to
// start it, and starts with its own.
func TestWALLogStoreCluster(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithArgs("-raft-log-store", "wal"))
	leader := waitLeader(t, c)
	cl := client(t, c.Addresses()...)
	acked, killedAt, newLeader := writesSurviveLeaderKill(t, c, leader, cl, 3, 50,
		func(addr string) *api.Client { return client(t, addr) })
	t.Logf("%d acknowledged writes, %d before the kill, all readable from the new leader %s", acked, killedAt, c.ID(newLeader))

	// The killed server's data dir holds a wal log: with bolt it is refused.
	args := append(c.Args(leader), "-raft-log-store", "bolt")
	_, stderr, code := runMasterd(t, masterdBinary(t), args...)
	if code != 1 || !strings.Contains(stderr, `holds a "wal" Raft log`) || !strings.Contains(stderr, "-raft-log-store wal") {
		t.Fatalf("masterd -raft-log-store bolt on a wal data dir: exit %d, stderr:\n%s\nwant exit 1 naming the data dir's kind", code, stderr)
	}
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	last, err := cl.PutQuota(context.Background(), "after-restart", api.QuotaRequest{Limits: api.Resources{"cpus": 2}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restarted := client(t, c.Address(leader))
	eventually(t, "the restarted wal server catches up", func() error {
		q, err := restarted.Quota(context.Background(), "after-restart", api.ReadOptions{Stale: true})
		if err != nil {
			return err
		}
		if q.Version != last.Version {
			return fmt.Errorf("version %d, want %d", q.Version, last.Version)
		}
		return nil
	})
}
