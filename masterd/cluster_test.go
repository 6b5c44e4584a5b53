package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// These tests run real masterd processes on loopback: Raft over TCP,
// raft-boltdb on disk, SIGKILL for crashes.

func waitLeader(t *testing.T, c *testcluster.Cluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

func client(t *testing.T, addrs ...string) *api.Client {
	t.Helper()
	cl, err := api.NewClient(addrs, "")
	if err != nil {
		t.Fatal(err)
	}
	cl.RetryFor = 20 * time.Second
	return cl
}

// waitFor only bounds a wait on processes that hang: far above what any
// step takes, even on a loaded machine.
const waitFor = 60 * time.Second

// eventually polls cond until it holds; waitFor only bounds a hang.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(waitFor); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = cond(); err == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// writesSurviveLeaderKill has writers stream quota PUTs through cl, kills
// the leader once perPhase of them were acknowledged, lets perPhase more be
// acknowledged under the new leader, and checks that every acknowledged
// write reads back from the new leader (through the client readVia makes
// for an address). It returns how many writes were acknowledged, how many
// before the kill, and the new leader.
func writesSurviveLeaderKill(t *testing.T, c *testcluster.Cluster, leader int, cl *api.Client, writers, perPhase int,
	readVia func(addr string) *api.Client) (acknowledged, killedAt, newLeader int) {
	t.Helper()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		acked = map[string]float64{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				role := fmt.Sprintf("w%d-%d", w, seq)
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := cl.PutQuota(wctx, role, api.QuotaRequest{Limits: api.Resources{"cpus": float64(seq)}}, api.WriteOptions{})
				cancel()
				if err == nil {
					mu.Lock()
					acked[role] = float64(seq)
					mu.Unlock()
				}
			}
		}()
	}
	countAcked := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	eventually(t, "writes before the kill", func() error {
		if n := countAcked(); n < perPhase {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	killedAt = countAcked()
	eventually(t, "writes after the kill", func() error {
		if n := countAcked(); n < killedAt+perPhase {
			return fmt.Errorf("%d acknowledged since the kill", n-killedAt)
		}
		return nil
	})
	close(stop)
	wg.Wait()

	newLeader = waitLeader(t, c)
	if newLeader == leader {
		t.Fatalf("the killed server %s is still the leader", c.ID(leader))
	}
	all, err := readVia(c.Address(newLeader)).Quotas(ctx, api.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]float64{}
	for _, q := range all {
		stored[q.Role] = q.Limits["cpus"]
	}
	for role, cpus := range acked {
		if got, ok := stored[role]; !ok || got != cpus {
			t.Errorf("acknowledged write %s (cpus %v) reads back as %v, present %v", role, cpus, got, ok)
		}
	}
	return len(acked), killedAt, newLeader
}

func TestClusterSurvivesLeaderKillWithoutLosingAcknowledgedWrites(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := waitLeader(t, c)
	ctx := context.Background()

	// A client that only knows a follower still writes: the follower forwards.
	follower := c.Followers()[0]
	fq, err := client(t, c.Address(follower)).PutQuota(ctx, "via-follower", api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{})
	if err != nil {
		t.Fatalf("write through follower %s: %v", c.ID(follower), err)
	}
	if fq.Version == 0 {
		t.Fatalf("write through follower returned no version: %+v", fq)
	}

	// Writers stream quota PUTs through every address while the leader is
	// killed; every write they saw acknowledged must survive.
	cl := client(t, c.Addresses()...)
	acked, killedAt, newLeader := writesSurviveLeaderKill(t, c, leader, cl, 4, 100,
		func(addr string) *api.Client { return client(t, addr) })
	t.Logf("%d acknowledged writes, %d before the kill, all readable from the new leader %s", acked, killedAt, c.ID(newLeader))

	// The killed server restarts with its unchanged command line (-bootstrap
	// included) and catches up.
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	last, err := cl.PutQuota(ctx, "after-restart", api.QuotaRequest{Limits: api.Resources{"cpus": 2}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restarted := client(t, c.Address(leader))
	eventually(t, "restarted server catches up", func() error {
		q, err := restarted.Quota(ctx, "after-restart", api.ReadOptions{Stale: true})
		if err != nil {
			return err
		}
		if q.Version != last.Version {
			return fmt.Errorf("version %d, want %d", q.Version, last.Version)
		}
		return nil
	})
	waitLeader(t, c)
}

func TestSnapshotsRestoreOnRestartAndCatchUpLaggingServer(t *testing.T) {
	c := testcluster.Start(t, 3, testcluster.WithArgs("-raft-snapshot-threshold", "64", "-raft-snapshot-interval", "200ms"))
	waitLeader(t, c)
	ctx := context.Background()
	cl := client(t, c.Addresses()...)

	// Stop a follower, then write far past the trailing log so that the
	// leader can only catch it up by sending a snapshot.
	lagging := c.Followers()[0]
	if err := c.Kill(lagging); err != nil {
		t.Fatal(err)
	}
	var last *api.Quota
	for i := range 400 {
		q, err := cl.PutQuota(ctx, fmt.Sprintf("snap-%d", i%50), api.QuotaRequest{Limits: api.Resources{"cpus": float64(i)}}, api.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = q
	}
	leader := waitLeader(t, c)
	eventually(t, "leader snapshot on disk", func() error {
		snaps, _ := filepath.Glob(filepath.Join(c.Dir(leader), "data", "snapshots", "*", "state.bin"))
		if len(snaps) == 0 {
			return fmt.Errorf("no snapshot under %s", c.Dir(leader))
		}
		return nil
	})

	if err := c.Restart(lagging); err != nil {
		t.Fatal(err)
	}
	expectAll := func(i int) func() error {
		return func() error {
			qs, err := client(t, c.Address(i)).Quotas(ctx, api.ReadOptions{Stale: true})
			if err != nil {
				return err
			}
			if len(qs) != 50 {
				return fmt.Errorf("%s has %d quotas, want 50", c.ID(i), len(qs))
			}
			q, err := client(t, c.Address(i)).Quota(ctx, last.Role, api.ReadOptions{Stale: true})
			if err != nil {
				return err
			}
			if q.Version != last.Version || q.Limits["cpus"] != last.Limits["cpus"] {
				return fmt.Errorf("%s has %+v, want %+v", c.ID(i), q, last)
			}
			return nil
		}
	}
	eventually(t, "lagging server installs the snapshot", expectAll(lagging))

	// Every server restarts from its own snapshot plus log.
	for i := range c.N() {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.N() {
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
	}
	waitLeader(t, c)
	for i := range c.N() {
		eventually(t, "state after full restart", expectAll(i))
	}
}

func TestRateLimitChangeTakesEffectOnEveryServer(t *testing.T) {
	c := testcluster.Start(t, 3)
	waitLeader(t, c)
	ctx := context.Background()
	qps, burst, capacity := 0.001, 1, 0
	if _, err := client(t, c.Addresses()...).PutRateLimitDefault(ctx, api.RateLimitRequest{QPS: &qps, Burst: &burst, Capacity: &capacity}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every server, followers included, now lets one call of an unnamed
	// principal through and refuses the next.
	for i := range c.N() {
		cl := client(t, c.Address(i))
		cl.RetryFor = 0
		eventually(t, "default limit on "+c.ID(i), func() error {
			_, err := cl.Quotas(ctx, api.ReadOptions{Stale: true})
			if api.ErrorCode(err) == api.CodeRateLimited {
				return nil
			}
			return fmt.Errorf("call answered %v, want rate_limited", err)
		})
	}
}

func TestRemoveServer(t *testing.T) {
	c := testcluster.Start(t, 3)
	waitLeader(t, c)
	ctx := context.Background()
	removed := c.Followers()[0]
	cl := client(t, c.Addresses()...)
	if err := cl.RemoveServer(ctx, c.ID(removed)); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(removed); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two servers left", func() error {
		info, err := cl.Cluster(ctx, api.ReadOptions{})
		if err != nil {
			return err
		}
		for _, s := range info.Servers {
			if s.ID == c.ID(removed) {
				return fmt.Errorf("%s still listed: %+v", s.ID, info.Servers)
			}
		}
		if len(info.Servers) != 2 {
			return fmt.Errorf("servers %+v, want 2", info.Servers)
		}
		return nil
	})
	// The two left still commit writes: the removed server no longer counts.
	if _, err := cl.PutQuota(ctx, "after-removal", api.QuotaRequest{Limits: api.Resources{"cpus": 1}}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}
