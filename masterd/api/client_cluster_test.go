package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/masterd/testcluster"
)

// These tests run the client against real masterd processes: what the
// headers say and who leads is only known there.

func startCluster(t *testing.T) (*testcluster.Cluster, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts three masterd processes")
	}
	c := testcluster.Start(t, 3)
	leader, err := c.WaitLeader(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return c, leader
}

// clientOf is a client of the given servers only.
func clientOf(t *testing.T, c *testcluster.Cluster, servers ...int) *api.Client {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = c.Address(s)
	}
	client, err := api.NewClient(addrs, "")
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// staleQuota reads a quota with ?stale=true, once, from the client's server.
func staleQuota(ctx context.Context, client *api.Client, role string) (api.Quota, api.Meta, error) {
	var q api.Quota
	meta, err := client.Do(ctx, api.Request{Method: http.MethodGet, Path: api.QuotaPath(role),
		Query: map[string][]string{"stale": {"true"}}}, &q)
	return q, meta, err
}

// TestMetaOfStaleReads: a stale read from a follower carries how current
// the follower's state is, in Meta, whether it answers (it knows the leader
// and has applied the write it is asked about) or refuses (restarted alone:
// it has heard from no leader and has not applied what its log holds).
func TestMetaOfStaleReads(t *testing.T) {
	c, leader := startCluster(t)
	ctx := testContext(t)
	q, err := clientOf(t, c, leader).PutQuota(ctx, "eng", api.QuotaRequest{Limits: api.Resources{"cpus": 4}}, api.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Followers()[0]
	fromFollower := clientOf(t, c, follower)
	fromFollower.RetryFor = 0 // one attempt: the meta of the follower's own answer
	// /v1/health takes no query parameter; the client must send none.
	if err := fromFollower.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}

	// The follower may not have applied the write yet (it then answers
	// no_leader for a moment): wait until it has.
	var meta api.Meta
	waitUntil(t, "the follower serves the quota", func() error {
		_, meta, err = staleQuota(ctx, fromFollower, "eng")
		return err
	})
	if !meta.KnownLeader || meta.LastContact < 0 || meta.AppliedIndex < q.Version ||
		meta.KnownIndex < q.Version || meta.AppliedIndex < meta.KnownIndex || meta.Index < q.Version {
		t.Fatalf("stale read from follower %s: meta %+v; want a known leader, a last contact, and the write (index %d) applied",
			c.ID(follower), meta, q.Version)
	}

	// Every server down, then the follower back alone: its log holds the
	// quota, but no leader tells it the log is committed.
	for _, i := range c.Live() {
		if err := c.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Restart(follower); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the restarted follower to answer", func() error {
		_, meta, err = staleQuota(ctx, fromFollower, "eng")
		if api.ErrorCode(err) == api.CodeNoLeader {
			return nil
		}
		return errors.New("no no_leader answer yet")
	})
	if meta.KnownLeader || meta.LastContact >= 0 || meta.AppliedIndex >= meta.KnownIndex || meta.KnownIndex < q.Version {
		t.Fatalf("stale read from a follower restarted alone: %v, meta %+v; want no known leader, no last contact, "+
			"and applied below known (≥ %d)", err, meta, q.Version)
	}

	// Without a leader, LeaderCluster says so rather than naming one.
	fromFollower.RetryFor = 500 * time.Millisecond
	if info, err := fromFollower.LeaderCluster(ctx); api.ErrorCode(err) != api.CodeNoLeader {
		t.Fatalf("LeaderCluster with no quorum: %+v, %v; want no_leader", info, err)
	}
}

// TestLeaderClusterRightAfterTheLeaderIsKilled: a follower keeps naming a
// killed leader until its heartbeat timeout runs out; LeaderCluster, asked
// at once, names the leader the cluster elects next.
func TestLeaderClusterRightAfterTheLeaderIsKilled(t *testing.T) {
	c, leader := startCluster(t)
	ctx := testContext(t)
	followers := clientOf(t, c, c.Followers()...)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	info, err := followers.LeaderCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Leader == nil || info.Leader.ID == c.ID(leader) {
		t.Fatalf("LeaderCluster right after %s was killed names leader %+v", c.ID(leader), info.Leader)
	}
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Leader.ID != c.ID(next) {
		t.Fatalf("LeaderCluster names %s; the live servers agree on %s", info.Leader.ID, c.ID(next))
	}
	for _, s := range info.Servers {
		if s.Leader != (s.ID == info.Leader.ID) {
			t.Errorf("server %s has leader = %v in an answer that names %s", s.ID, s.Leader, info.Leader.ID)
		}
	}
}

// waitUntil polls cond until it returns nil or the test's context ends.
func waitUntil(t *testing.T, what string, cond func() error) {
	t.Helper()
	ctx := testContext(t)
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
