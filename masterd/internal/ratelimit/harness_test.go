package ratelimit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/allot/allot/masterd/internal/ratelimit/fakeclock"
)

func qps(v float64) *float64 { return &v }

// hangGuard only keeps a broken limiter from hanging the test run; no
// assertion depends on it.
const hangGuard = 30 * time.Second

// outcome is how one call ended and when, by the limiter's clock.
type outcome struct {
	index int
	err   error
	at    time.Time
}

// harness makes calls one after another, each decided (passed, queued or
// rejected) before the next one arrives, so that arrival order is known.
type harness struct {
	t       *testing.T
	limiter *Limiter
	clock   Clock
	// results gets the calls that proceeded or failed, rejected those
	// rejected for a full queue.
	results  chan outcome
	rejected chan outcome
}

func newHarness(t *testing.T, cfg Config, opts ...Option) (*harness, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New()
	l, err := New(cfg, append([]Option{WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(l.Close)
	return &harness{t: t, limiter: l, clock: clock, results: make(chan outcome, 10000), rejected: make(chan outcome, 10000)}, clock
}

// start makes call index for principal and returns once the limiter decided
// its fate. Only valid while no queued call of the principal is being
// released, which holds whenever a fake clock stands still.
func (h *harness) start(ctx context.Context, principal string, index int) {
	h.t.Helper()
	h.startLabeled(ctx, principal, "", index)
}

// startLabeled is start for a framework of principal with label.
func (h *harness) startLabeled(ctx context.Context, principal, label string, index int) {
	h.t.Helper()
	before := h.decided(principal, label)
	go func() {
		err := h.limiter.Wait(ctx, principal, label)
		o := outcome{index: index, err: err, at: h.clock.Now()}
		if errors.Is(err, ErrRejected) {
			h.rejected <- o
		} else {
			h.results <- o
		}
	}()
	waitFor(h.t, func() bool { return h.decided(principal, label) == before+1 })
}

func (h *harness) decided(principal, label string) uint64 {
	s := statsOfLabel(h.limiter, principal, label)
	return s.Processed + s.Rejected + uint64(s.QueueDepth)
}

// next returns the next outcome to arrive.
func (h *harness) next() outcome {
	h.t.Helper()
	select {
	case o := <-h.results:
		return o
	case <-time.After(hangGuard):
		h.t.Fatal("no call returned")
		return outcome{}
	}
}

// nextRejected returns the next rejected call.
func (h *harness) nextRejected() outcome {
	h.t.Helper()
	select {
	case o := <-h.rejected:
		return o
	case <-time.After(hangGuard):
		h.t.Fatal("no call was rejected")
		return outcome{}
	}
}

// expectNone checks that no call returned beyond those already received.
func (h *harness) expectNone() {
	h.t.Helper()
	select {
	case o := <-h.results:
		h.t.Fatalf("unexpected outcome %+v", o)
	case o := <-h.rejected:
		h.t.Fatalf("unexpected rejection %+v", o)
	default:
	}
}

// served is a call expected to proceed at offset after fakeclock.Epoch.
type served struct {
	index  int
	offset time.Duration
}

// expectServed advances the clock to each expected service time in turn and
// checks which calls proceeded then. Calls released at one instant return in
// any order, so each instant compares sets; the order between instants is
// the order of service.
func (h *harness) expectServed(clock *fakeclock.Clock, want []served) {
	h.t.Helper()
	byTime := map[time.Duration][]int{}
	var offsets []time.Duration
	for _, s := range want {
		if _, ok := byTime[s.offset]; !ok {
			offsets = append(offsets, s.offset)
		}
		byTime[s.offset] = append(byTime[s.offset], s.index)
	}
	slices.Sort(offsets)
	for _, offset := range offsets {
		if d := fakeclock.Epoch.Add(offset).Sub(clock.Now()); d > 0 {
			clock.Advance(d)
		}
		wantIndexes := slices.Sorted(slices.Values(byTime[offset]))
		var got []int
		for range wantIndexes {
			o := h.next()
			if o.err != nil {
				h.t.Fatalf("call %d at %v: %v", o.index, offset, o.err)
			}
			if at := o.at.Sub(fakeclock.Epoch); at != offset {
				h.t.Errorf("call %d served at %v, want %v", o.index, at, offset)
			}
			got = append(got, o.index)
		}
		slices.Sort(got)
		if !slices.Equal(got, wantIndexes) {
			h.t.Fatalf("at %v served calls %v, want %v", offset, got, wantIndexes)
		}
	}
	h.expectNone()
}

func statsOf(l *Limiter, principal string) Stats {
	return statsOfLabel(l, principal, "")
}

func statsOfLabel(l *Limiter, principal, label string) Stats {
	for _, s := range l.Stats() {
		if s.Principal == principal && s.Label == label {
			return s
		}
	}
	return Stats{Principal: principal, Label: label}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never became true")
		}
		runtime.Gosched()
	}
}
