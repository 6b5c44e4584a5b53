// Package ratelimit throttles scheduler and operator API calls per principal.
//
// Each principal named in the configuration has a token bucket (qps, burst)
// and a FIFO queue of bounded capacity; every other principal shares one
// aggregate default limiter, or is not throttled when there is none. Calls
// wait in the queue and are served at the configured rate; a call that finds
// the queue full is rejected with the time after which a retry may succeed.
// The configuration changes online without dropping queued calls.
//
// The package does no I/O: the server calls Wait on every request, Update
// whenever the replicated configuration changes, and registers the Limiter
// as a Prometheus collector.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// OverflowPrincipal is the label under which calls are counted once
// MaxTrackedPrincipals unnamed principals have been seen, and those of
// unnamed principals longer than 256 bytes or not valid UTF-8: principals
// come from user input and must not grow the metrics without bound.
const OverflowPrincipal = "other"

// MaxTrackedPrincipals is the default number of principals not named in the
// configuration that get counters of their own.
const MaxTrackedPrincipals = 4096

// maxTrackedLength bounds the principals not named in the configuration
// that get counters of their own: longer ones would make every tracked
// principal cost as much memory as a request body.
const maxTrackedLength = 256

// ErrRejected is wrapped by every *RejectedError.
var ErrRejected = errors.New("rate limited")

// ErrClosed is returned by calls waiting in, or made to, a closed Limiter.
var ErrClosed = errors.New("rate limiter closed")

// RejectedError is returned when a principal's queue is full.
type RejectedError struct {
	Principal string
	// RetryAfter is when a queue slot (or, with no queue, a token) frees
	// up; always positive.
	RetryAfter time.Duration
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("principal %q is rate limited, retry after %v", e.Principal, e.RetryAfter)
}

func (e *RejectedError) Unwrap() error { return ErrRejected }

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock replaces the real clock, for tests.
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithMaxTrackedPrincipals changes MaxTrackedPrincipals.
func WithMaxTrackedPrincipals(n int) Option { return func(l *Limiter) { l.maxTracked = n } }

// Limiter holds the limiters and counters of every principal.
type Limiter struct {
	clock      Clock
	line       *timeline
	maxTracked int

	// mu serializes reconfiguration and the tracking of new principals;
	// the request path only reads snapshot.
	mu       sync.Mutex
	named    map[string]*bucket // throttled principals of the configuration
	free     map[string]bool    // configured principals without qps
	fallback *bucket            // the aggregate default, nil if none
	stats    map[string]*principalStats
	closed   bool
	// pending holds the entries of new principals not yet in snapshot;
	// misses counts the lookups that missed it since it was published.
	pending  map[string]*entry
	misses   int
	unnamed  int // tracked principals not named in the configuration
	overflow *entry

	snapshot atomic.Pointer[snapshot]
}

// snapshot is the immutable routing table of the request path: one map
// lookup finds both a principal's counters and its bucket.
type snapshot struct {
	entries map[string]*entry
	// full is set when no more unnamed principals get counters of their
	// own; the rest use overflow.
	full     bool
	overflow *entry
	closed   bool
}

type entry struct {
	stats  *principalStats
	bucket *bucket // nil: not throttled
}

// New returns a Limiter running cfg.
func New(cfg Config, opts ...Option) (*Limiter, error) {
	l := &Limiter{
		clock:      RealClock{},
		maxTracked: MaxTrackedPrincipals,
		named:      map[string]*bucket{},
		free:       map[string]bool{},
		stats:      map[string]*principalStats{},
		pending:    map[string]*entry{},
	}
	for _, o := range opts {
		o(l)
	}
	l.line = newTimeline(l.clock)
	if err := l.Update(cfg); err != nil {
		return nil, err
	}
	return l, nil
}

// Wait returns nil when the principal's call may proceed: at once if a token
// is left or the principal is not throttled, otherwise when its turn in the
// queue comes. It returns a *RejectedError when the queue is full, ctx.Err()
// when ctx ends first (leaving the queue), and ErrClosed once Close was
// called. A call that needs no wait does not look at ctx.
func (l *Limiter) Wait(ctx context.Context, principal string) error {
	s := l.snapshot.Load()
	e := s.lookup(principal)
	if e == nil {
		e = l.track(principal)
	}
	for {
		if s.closed {
			e.stats.received.Add(1)
			return ErrClosed
		}
		if e.bucket == nil {
			e.stats.passed.Add(1)
			return nil
		}
		v, w, retryAfter := e.bucket.enter(l.line.now(), e.stats)
		switch v {
		case passed:
			e.stats.passed.Add(1)
			return nil
		case rejected:
			e.stats.received.Add(1)
			e.stats.rejected.Add(1)
			return &RejectedError{Principal: principal, RetryAfter: retryAfter}
		case retired:
			// Update retired the bucket after we read the snapshot, and
			// publishes the new one before it lets go of mu.
			l.mu.Lock()
			s = l.snapshot.Load()
			l.mu.Unlock()
			if e = s.lookup(principal); e == nil {
				e = l.track(principal)
			}
			continue
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			if cancel(w) {
				return ctx.Err()
			}
			// Released at the same moment: the turn was taken, use it.
		}
		if w.err != nil {
			return w.err
		}
		e.stats.processed.Add(1)
		return nil
	}
}

func (s *snapshot) lookup(principal string) *entry {
	if e, ok := s.entries[principal]; ok {
		return e
	}
	if s.full {
		return s.overflow
	}
	return nil
}

// track finds the entry of a principal missing from the snapshot. A new
// principal gets counters of its own, or shares the overflow counters once
// maxTracked unnamed principals are tracked. New entries wait in pending and
// join the snapshot once the misses paid for copying it, as in sync.Map:
// a burst of new principals costs amortized O(1) each, not a map copy each.
func (l *Limiter) track(principal string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.snapshot.Load()
	if e := s.lookup(principal); e != nil {
		return e
	}
	e, ok := l.pending[principal]
	switch {
	case ok:
	case l.unnamed >= l.maxTracked || len(principal) > maxTrackedLength || !utf8.ValidString(principal):
		// Invalid UTF-8 cannot be a label value.
		e = l.overflowEntry()
	default:
		e = &entry{stats: l.statsFor(principal), bucket: l.fallback}
		l.pending[principal] = e
		if principal != OverflowPrincipal {
			l.unnamed++
		}
	}
	l.misses++
	if l.misses >= len(s.entries)+len(l.pending) {
		l.promote(s)
	}
	return e
}

// promote publishes a copy of s with the pending entries added.
func (l *Limiter) promote(s *snapshot) {
	next := &snapshot{entries: make(map[string]*entry, len(s.entries)+len(l.pending)), closed: s.closed}
	for name, e := range s.entries {
		next.entries[name] = e
	}
	for name, e := range l.pending {
		next.entries[name] = e
	}
	l.finish(next)
}

// finish sets the overflow of a new snapshot, publishes it and empties
// pending.
func (l *Limiter) finish(s *snapshot) {
	if l.unnamed >= l.maxTracked {
		s.full = true
		s.overflow = l.overflowEntry()
	}
	l.snapshot.Store(s)
	clear(l.pending)
	l.misses = 0
}

// overflowEntry returns the entry of principals beyond maxTracked. Its
// counters are those of a principal called OverflowPrincipal, so that no
// two series carry the same label, but its limiter is the default one.
func (l *Limiter) overflowEntry() *entry {
	if l.overflow == nil || l.overflow.bucket != l.fallback {
		l.overflow = &entry{stats: l.statsFor(OverflowPrincipal), bucket: l.fallback}
	}
	return l.overflow
}

func (l *Limiter) statsFor(principal string) *principalStats {
	st, ok := l.stats[principal]
	if !ok {
		st = &principalStats{principal: principal}
		l.stats[principal] = st
	}
	return st
}

// publish rebuilds the snapshot from the configuration and the counters,
// after the configuration changed.
func (l *Limiter) publish() {
	s := &snapshot{entries: make(map[string]*entry, len(l.stats)), closed: l.closed}
	l.unnamed = 0
	for name, st := range l.stats {
		e := &entry{stats: st}
		switch b, ok := l.named[name]; {
		case ok:
			e.bucket = b
		case l.free[name]:
		default:
			e.bucket = l.fallback
			if name != OverflowPrincipal {
				l.unnamed++
			}
		}
		s.entries[name] = e
	}
	l.finish(s)
}

// Update replaces the configuration at once. Calls queued on a limiter whose
// settings change stay queued, in order, and are served at the new rate; the
// calls of a principal that leaves the configuration move to the back of the
// default limiter's queue, or proceed when there is no default limiter.
func (l *Limiter) Update(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	now := l.line.now()

	// Buckets leave service before the new snapshot is published, so that
	// no new call of a removed principal overtakes its queued calls on the
	// way to the default limiter. They leave in the order of their
	// principals, so that the default's queue receives them in a
	// reproducible order.
	type retirement struct {
		principal string
		from, to  *bucket
	}
	var retirements []retirement

	oldFallback := l.fallback
	if d := cfg.Default; d != nil && d.QPS != nil {
		s := newSettings(*d.QPS, d.Burst, d.Capacity)
		if l.fallback == nil {
			l.fallback = newBucket(l.line, s)
		} else {
			l.fallback.reconfigure(now, s)
		}
	} else {
		l.fallback = nil
	}
	if oldFallback != nil && l.fallback == nil {
		oldFallback.retire(now, nil)
	}

	oldNamed := l.named
	l.named = make(map[string]*bucket, len(cfg.Limits))
	l.free = make(map[string]bool)
	for _, lim := range cfg.Limits {
		l.statsFor(lim.Principal)
		if lim.QPS == nil {
			l.free[lim.Principal] = true
			continue
		}
		s := newSettings(*lim.QPS, lim.Burst, lim.Capacity)
		if b, ok := oldNamed[lim.Principal]; ok {
			b.reconfigure(now, s)
			l.named[lim.Principal] = b
		} else {
			l.named[lim.Principal] = newBucket(l.line, s)
		}
	}
	for name, b := range oldNamed {
		switch {
		case l.named[name] != nil:
		case l.free[name]:
			retirements = append(retirements, retirement{principal: name, from: b})
		default:
			retirements = append(retirements, retirement{principal: name, from: b, to: l.fallback})
		}
	}
	slices.SortFunc(retirements, func(a, b retirement) int { return strings.Compare(a.principal, b.principal) })
	for _, r := range retirements {
		r.from.retire(now, r.to)
	}
	l.publish()
	return nil
}

// Close releases every queued call with ErrClosed; later calls get ErrClosed
// too. The server closes the limiter when it shuts down, so that requests do
// not outlive it in a queue.
func (l *Limiter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.publish()
	for _, b := range l.named {
		b.close(ErrClosed)
	}
	if l.fallback != nil {
		l.fallback.close(ErrClosed)
	}
}
