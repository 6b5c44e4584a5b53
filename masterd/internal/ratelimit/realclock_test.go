package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestRealClockThrottles runs the production clock: 20 calls at qps 100,
// burst 1, from 20 principals sharing the default limiter, so that each
// call's place in the queue can be watched through its own counters. Every
// check holds however slow the machine is: nothing assumes how soon a call
// is served, only what the limiter guarantees.
func TestRealClockThrottles(t *testing.T) {
	const (
		calls    = 20
		interval = 10 * time.Millisecond
	)
	l, err := New(Config{Default: &Default{QPS: qps(100), Burst: 1, Capacity: calls}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	principal := func(i int) string { return fmt.Sprintf("p%02d", i) }
	depth := func(i int) int { return statsOf(l, principal(i)).QueueDepth }

	var (
		mu        sync.Mutex
		overtaken []string
		wg        sync.WaitGroup
	)
	start := time.Now()
	for i := range calls {
		wg.Go(func() {
			if err := l.Wait(context.Background(), principal(i), ""); err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			// Served in arrival order: every earlier call has left the
			// queue by the time this one returns.
			for j := range i {
				if depth(j) != 0 {
					mu.Lock()
					overtaken = append(overtaken, fmt.Sprintf("call %d returned while call %d waited", i, j))
					mu.Unlock()
				}
			}
		})
		// The next call arrives only once this one passed or queued.
		waitFor(t, func() bool {
			s := statsOf(l, principal(i))
			return s.Processed+uint64(s.QueueDepth) == 1
		})
	}

	// Record when each call is seen leaving the queue. Scanning from the
	// last call to the first means a call seen gone implies every earlier
	// one is seen gone in the same scan, if the queue is FIFO: the recorded
	// times are then non-decreasing in arrival order.
	left := make([]time.Time, calls)
	waitFor(t, func() bool {
		var seen []int
		for i := calls - 1; i >= 0; i-- {
			if left[i].IsZero() && depth(i) == 0 {
				seen = append(seen, i)
			}
		}
		// Read after the scan, so never before a call really left.
		now := time.Now()
		for _, i := range seen {
			left[i] = now
		}
		return !slices.ContainsFunc(left, time.Time.IsZero)
	})
	wg.Wait()

	if len(overtaken) > 0 {
		t.Errorf("served out of order: %v", overtaken)
	}
	for i := 1; i < calls; i++ {
		if left[i].Before(left[i-1]) {
			t.Errorf("call %d left the queue at %v, before call %d at %v", i, left[i].Sub(start), i-1, left[i-1].Sub(start))
		}
	}
	// Call i needs i more tokens after the first, one per interval: a lower
	// bound the limiter guarantees, which shows it throttled at all.
	if got, min := left[calls-1].Sub(start), (calls-1)*interval; got < min {
		t.Errorf("the last call left the queue %v after the start, before its turn at %v", got, min)
	}
	for _, s := range l.Stats() {
		if s.Received != 1 || s.Processed != 1 || s.QueueDepth != 0 {
			t.Errorf("at the end: %+v", s)
		}
	}
}

// TestConcurrentUseKeepsCounts hammers one limiter from many goroutines
// while its configuration changes and callers give up, then checks that every
// call is accounted for exactly once. Run it with -race.
func TestConcurrentUseKeepsCounts(t *testing.T) {
	// Slow enough that calls queue for several milliseconds, so that
	// cancellations and updates meet queued calls.
	configs := []Config{
		{Limits: []Limit{{Principal: "p0", QPS: qps(500), Burst: 1, Capacity: 20}}, Default: &Default{QPS: qps(800), Burst: 2, Capacity: 50}},
		// The default goes: its queue proceeds.
		{Limits: []Limit{
			{Principal: "p0", QPS: qps(300), Burst: 1, Capacity: 5},
			{Principal: "p1", QPS: qps(400), Burst: 2, Capacity: 10},
			{Principal: "p2", QPS: qps(400), Burst: 2, Capacity: 10},
			{Principal: "p3", QPS: qps(400), Burst: 1, Capacity: 1},
		}},
		// p0, p2 and p3 go: their queues move to the default, beyond its
		// capacity; p1 is no longer throttled: its queue proceeds.
		{Limits: []Limit{{Principal: "p1"}}, Default: &Default{QPS: qps(600), Burst: 2, Capacity: 4}},
		{Limits: []Limit{{Principal: "p0", QPS: qps(500), Burst: 2, Capacity: 20}}, Default: &Default{QPS: qps(400), Burst: 2, Capacity: 10}},
	}
	l, err := New(configs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	const workers, callsEach = 8, 100
	type tally struct{ ok, rejected, cancelled int }
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range callsEach {
				ctx, cancel := context.WithCancel(context.Background())
				if rng.IntN(4) == 0 {
					// Give up after a random moment, maybe while queued.
					time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, cancel)
				}
				err := l.Wait(ctx, fmt.Sprintf("p%d", rng.IntN(4)), "")
				cancel()
				switch {
				case err == nil:
					tallies[w].ok++
				case errors.Is(err, ErrRejected):
					tallies[w].rejected++
				case errors.Is(err, context.Canceled):
					tallies[w].cancelled++
				default:
					t.Errorf("unexpected error: %v", err)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 1; ; i++ {
		select {
		case <-done:
		default:
			if err := l.Update(configs[i%len(configs)]); err != nil {
				t.Fatal(err)
			}
			gather(t, l)
			time.Sleep(20 * time.Millisecond) // pacing only; nothing is asserted on time
			continue
		}
		break
	}

	var total tally
	for _, ty := range tallies {
		total.ok += ty.ok
		total.rejected += ty.rejected
		total.cancelled += ty.cancelled
	}
	var received, processed, rejected uint64
	for _, s := range l.Stats() {
		if s.QueueDepth != 0 {
			t.Errorf("%q still has %d calls queued", s.Principal, s.QueueDepth)
		}
		received += s.Received
		processed += s.Processed
		rejected += s.Rejected
	}
	t.Logf("callers saw %+v", total)
	if received != workers*callsEach || processed != uint64(total.ok) || rejected != uint64(total.rejected) {
		t.Errorf("counted received %d processed %d rejected %d; callers saw %+v of %d calls",
			received, processed, rejected, total, workers*callsEach)
	}
}
