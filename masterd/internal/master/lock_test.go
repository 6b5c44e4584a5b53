package master

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
	"github.com/allot/allot/raftstore"
)

// An allocation cycle holds m.mu from start to end. These tests hold it as
// a cycle does and check that what must not wait for a cycle does not: Raft
// applying a write (the FSM calls Applied), and the consumption a quota
// write is checked against. Each waits for its condition; were the wait
// still there, the condition would never come and the test would fail at
// waitTimeout.

// TestRaftApplyDoesNotWaitForTheCycle: a write commits and is applied while
// the master's lock is held; the master follows it once the lock is free,
// coalescing the writes that came meanwhile.
func TestRaftApplyDoesNotWaitForTheCycle(t *testing.T) {
	h := newHarness(t)
	m := h.m()
	m.mu.Lock()
	applied := make(chan raftstore.Result, 3)
	go func() {
		// Three writes: the last two of the same quota, which the
		// follower may follow once.
		for _, cpus := range []float64{1, 2, 3} {
			role := "eng"
			if cpus == 1 {
				role = "ops"
			}
			res, err := h.node.Apply(context.Background(), &raftstore.QuotaSet{
				WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()}, Role: role, Limits: api.Resources{"cpus": cpus}})
			if err == nil && res.Err != nil {
				err = res.Err
			}
			if err != nil {
				t.Errorf("apply: %v", err)
			}
			applied <- res
		}
	}()
	var last raftstore.Result
	for range 3 {
		select {
		case last = <-applied:
		case <-time.After(waitTimeout):
			m.mu.Unlock()
			t.Fatal("a write was not applied while the master's lock was held: Raft apply waits for the cycle")
		}
	}
	m.mu.Unlock()
	if !m.caughtUp(last.Index) {
		t.Fatal("the term ended")
	}
	for role, want := range map[string]float64{"ops": 1, "eng": 3} {
		stats, ok := m.alloc.Role(role)
		if !ok || stats.Limits["cpus"] != want {
			t.Fatalf("role %s in the allocator: %+v, want a cpus limit of %v", role, stats, want)
		}
	}
}

// TestConsumptionDoesNotWaitForTheCycle: the consumption of a role is
// answered while the master's lock is held, and while the allocator
// allocates it is the figure the cycle started from.
func TestConsumptionDoesNotWaitForTheCycle(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024})
	fw := h.subscribe(fwInfo("web", "eng"))
	fw.offerOn(ag.id)
	want := api.Resources{"cpus": 4, "mem": 1024}

	m := h.m()
	m.mu.Lock()
	got := make(chan api.Resources, 1)
	go func() { got <- m.Consumption("eng") }()
	select {
	case c := <-got:
		if !maps.Equal(c, want) {
			t.Errorf("consumption of eng: %v, want %v (the outstanding offer)", c, want)
		}
	case <-time.After(waitTimeout):
		m.mu.Unlock()
		t.Fatal("Consumption waited for the master's lock")
	}
	// eng was asked for: a cycle takes its figure before it allocates.
	if !m.publishConsumption(h.clock.Now()) {
		t.Error("the cycle took no consumption though eng was just asked for")
	}
	if c := m.Consumption("eng"); !maps.Equal(c, want) {
		t.Errorf("consumption of eng during the cycle: %v, want %v", c, want)
	}
	m.consumption.published.Store(nil)
	m.mu.Unlock()

	// Nobody asked for a minute: cycles take nothing.
	h.clock.Advance(consumptionWindow + time.Second)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.publishConsumption(h.clock.Now()) {
		t.Error("the cycle took the consumption though nobody asked for it within the window")
	}
}

// TestConsumptionWhileOffersExpire: while the loop takes back expired
// offers, each of which takes the allocator's lock, Consumption answers
// the figure from before, without contending for that lock; once they are
// taken back it answers the new figure.
func TestConsumptionWhileOffersExpire(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.OfferTimeout = time.Second })
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024})
	fw := h.subscribe(fwInfo("web", "eng"))
	fw.offerOn(ag.id)
	offered := api.Resources{"cpus": 4, "mem": 1024}

	m := h.m()
	if c := m.Consumption("eng"); !maps.Equal(c, offered) {
		t.Fatalf("consumption of eng: %v, want %v (the outstanding offer)", c, offered)
	}
	m.mu.Lock()
	var during api.Resources
	later := h.clock.Now().Add(h.opts.OfferTimeout + time.Second)
	m.withConsumptionPublished(later, func() {
		m.expireOffers(later)
		during = m.Consumption("eng")
	})
	outstanding := len(m.offers)
	m.mu.Unlock()
	if outstanding != 0 {
		t.Fatalf("%d offers outstanding after they expired", outstanding)
	}
	if !maps.Equal(during, offered) {
		t.Errorf("consumption of eng while offers expire: %v, want the figure from before, %v", during, offered)
	}
	if c := m.Consumption("eng"); c["cpus"] != 0 || c["mem"] != 0 {
		t.Errorf("consumption of eng after the offers expired: %v, want nothing", c)
	}
}

// TestFollowedWaitsForTheMaster: the server acknowledges a write only once
// Followed returns, and for most writes Followed returns only once the
// master followed the write: a reservation set while a cycle holds the
// lock is in the allocator when Followed returns, never before the lock is
// free. A rate limit write, which the master does not follow, and a quota
// write do not wait; a read of live figures (FollowedEarlyAcks) waits until
// the master follows the quota.
func TestFollowedWaitsForTheMaster(t *testing.T) {
	h := newHarness(t)
	ag := h.registerAgent("node-1", api.Resources{"cpus": 4, "mem": 1024})
	m := h.m()

	m.mu.Lock()
	qps := 10.0
	rate := &raftstore.RateLimitSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Principal: "web", QPS: &qps, Burst: 10}
	res, err := h.node.Apply(context.Background(), rate)
	if err != nil || res.Err != nil {
		m.mu.Unlock()
		t.Fatalf("rate limit: %v %v", err, res.Err)
	}
	done := make(chan struct{})
	go func() { m.Followed(rate, res.Index); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		m.mu.Unlock()
		t.Fatal("a rate limit write waited for the master's lock")
	}

	quota := &raftstore.QuotaSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Role: "web", Guarantees: api.Resources{"cpus": 1}}
	res, err = h.node.Apply(context.Background(), quota)
	if err != nil || res.Err != nil {
		m.mu.Unlock()
		t.Fatalf("quota: %v %v", err, res.Err)
	}
	done = make(chan struct{})
	go func() { m.Followed(quota, res.Index); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		m.mu.Unlock()
		t.Fatal("a quota write waited for the master's lock")
	}
	read := make(chan struct{})
	go func() { m.FollowedEarlyAcks(); close(read) }()
	select {
	case <-read:
		m.mu.Unlock()
		t.Fatal("a read of live figures did not wait for the master to follow the quota acknowledged before it")
	case <-time.After(50 * time.Millisecond):
	}

	set := &raftstore.ReservationSet{WriteMeta: raftstore.WriteMeta{Time: h.clock.Now()},
		Name: "db-1", Agent: "node-1", Role: "db", Resources: api.Resources{"cpus": 2}}
	res, err = h.node.Apply(context.Background(), set)
	if err != nil || res.Err != nil {
		m.mu.Unlock()
		t.Fatalf("reservation: %v %v", err, res.Err)
	}
	followed := make(chan struct{})
	go func() { m.Followed(set, res.Index); close(followed) }()
	select {
	case <-followed:
		m.mu.Unlock()
		t.Fatal("Followed returned while the master's lock was held, before the master followed the reservation")
	case <-time.After(50 * time.Millisecond):
	}
	m.mu.Unlock()
	<-followed
	<-read
	if g, ok := m.alloc.Role("web"); !ok || g.Guarantees["cpus"] != 1 {
		t.Fatalf("web's quota once the read waited: %+v, want a guarantee of cpus 1", g)
	}
	if got := m.alloc.QuotaConsumed("db"); got["cpus"] != 2 {
		t.Fatalf("db's consumption once Followed returned: %v, want the reservation's cpus 2 (agent %s)", got, ag.id)
	}
}
