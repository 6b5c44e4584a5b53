// Package ratelimit throttles scheduler and operator API calls per principal.
//
// Each principal named in the configuration has a token bucket (qps, burst)
// and a FIFO queue of bounded capacity; every other principal shares one
// aggregate default limiter, or is not throttled when there is none. Calls
// wait in the queue and are served at the configured rate; a call that finds
// the queue full is rejected with the time after which a retry may succeed.
// The configuration changes online without dropping queued calls.
//
// A framework may carry a label beside its principal. A limit naming both
// throttles only that principal's frameworks with that label: their calls
// wait in the label's queue first, then in the principal's (or the
// aggregate default's), so that the principal's limit still caps all its
// frameworks together. Calls of a label without a limit of its own wait as
// the principal's other calls do; every label is counted apart.
//
// The package does no I/O: the server calls Wait on every request, Update
// whenever the replicated configuration changes, and registers the Limiter
// as a Prometheus collector.
package ratelimit

import (
	"cmp"
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

// RejectedError is returned when a principal's queue, or its label's, is
// full.
type RejectedError struct {
	Principal string
	// Label is set when the limit of the call's label rejected it; it is
	// "" when the principal's limit (or the aggregate default) did.
	Label string
	// RetryAfter is when a queue slot (or, with no queue, a token) frees
	// up; always positive.
	RetryAfter time.Duration
}

func (e *RejectedError) Error() string {
	if e.Label != "" {
		return fmt.Sprintf("principal %q label %q is rate limited, retry after %v", e.Principal, e.Label, e.RetryAfter)
	}
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
	mu         sync.Mutex
	named      map[string]*bucket   // throttled principals of the configuration
	free       map[string]bool      // configured principals without qps
	labeled    map[statsKey]*bucket // throttled labels of the configuration
	freeLabels map[statsKey]bool    // configured labels without qps
	fallback   *bucket              // the aggregate default, nil if none
	stats      map[statsKey]*principalStats
	closed     bool
	// config is the configuration last applied.
	config Config
	// pending and pendingLabeled hold the entries of new principals and
	// labels not yet in snapshot; misses counts the lookups that missed
	// it since it was published.
	pending        map[string]*entry
	pendingLabeled map[statsKey]*entry
	misses         int
	// unnamed counts the tracked principals not named in the
	// configuration and the tracked labels without a limit.
	unnamed  int
	overflow *entry

	snapshot atomic.Pointer[snapshot]
}

// snapshot is the immutable routing table of the request path: one map
// lookup finds both a principal's counters and its bucket. Calls without a
// label, the common case, are looked up by principal alone.
type snapshot struct {
	entries map[string]*entry
	labeled map[statsKey]*entry
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

// principalBucket is the entry's bucket at the principal's level, the
// one a call waits in after its label's.
func (e *entry) principalBucket() *bucket {
	if e.bucket != nil && e.bucket.labeled {
		return e.bucket.parent.Load()
	}
	return e.bucket
}

// New returns a Limiter running cfg.
func New(cfg Config, opts ...Option) (*Limiter, error) {
	l := &Limiter{
		clock:          RealClock{},
		maxTracked:     MaxTrackedPrincipals,
		named:          map[string]*bucket{},
		free:           map[string]bool{},
		labeled:        map[statsKey]*bucket{},
		freeLabels:     map[statsKey]bool{},
		stats:          map[statsKey]*principalStats{},
		pending:        map[string]*entry{},
		pendingLabeled: map[statsKey]*entry{},
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

// Wait returns nil when the call of a framework of principal with label (""
// for none) may proceed: at once if a token is left or the call is not
// throttled, otherwise when its turn in the queue comes — in its label's
// queue, when the label has a limit, and then in its principal's. It returns
// a *RejectedError when a queue is full, ctx.Err() when ctx ends first
// (leaving the queue), and ErrClosed once Close was called. A call that
// needs no wait does not look at ctx.
func (l *Limiter) Wait(ctx context.Context, principal, label string) error {
	s := l.snapshot.Load()
	var e *entry
	if label == "" {
		e = s.lookup(principal)
	} else {
		e = s.lookupLabeled(principal, label)
	}
	if e == nil {
		e = l.track(principal, label)
	}
	// The common case first, as cheap as before labels: a token is left in
	// the one bucket the call waits in.
	if b := e.bucket; !s.closed && (b == nil || !b.labeled && b.tryTake(l.line.now())) {
		e.stats.passed.Add(1)
		return nil
	}
	return l.wait(ctx, s, e, principal, label)
}

// wait is Wait past its common case: a call with no bucket, a labeled call,
// or one that finds no token left.
func (l *Limiter) wait(ctx context.Context, s *snapshot, e *entry, principal, label string) error {
	b := e.bucket
	// counted is set once the call was counted as received, as it first
	// queued; pastLabel once its label's bucket let it go.
	counted, pastLabel := false, false
	for {
		if s.closed {
			if !counted {
				e.stats.received.Add(1)
			}
			return ErrClosed
		}
		if b == nil {
			e.stats.done(counted)
			return nil
		}
		v, w, retryAfter := b.enter(l.line.now(), e.stats, !counted)
		switch v {
		case passed:
			if b.labeled {
				b, pastLabel = b.parent.Load(), true
				continue
			}
			e.stats.done(counted)
			return nil
		case rejected:
			if !counted {
				e.stats.received.Add(1)
			}
			e.stats.rejected.Add(1)
			rej := &RejectedError{Principal: principal, RetryAfter: retryAfter}
			if b.labeled {
				rej.Label = label
			}
			return rej
		case retired:
			// Update retired the bucket after we read the snapshot, and
			// publishes the new one before it lets go of mu.
			l.mu.Lock()
			s = l.snapshot.Load()
			l.mu.Unlock()
			if label == "" {
				e = s.lookup(principal)
			} else {
				e = s.lookupLabeled(principal, label)
			}
			if e == nil {
				e = l.track(principal, label)
			}
			if b = e.bucket; pastLabel {
				b = e.principalBucket()
			}
			continue
		}
		counted = true
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
		// The bucket that let the call go: a labeled one, unless Update
		// moved the call on to its principal's while it waited.
		if released := w.bucket.Load(); released.labeled {
			b, pastLabel = released.parent.Load(), true
			continue
		}
		e.stats.processed.Add(1)
		return nil
	}
}

// done counts a call that goes on: one that never queued is received and
// processed at one instant, counted once in passed.
func (st *principalStats) done(counted bool) {
	if counted {
		st.processed.Add(1)
	} else {
		st.passed.Add(1)
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

// lookupLabeled finds the entry of a principal's calls with a label. Once no
// more labels get counters of their own, the calls of an untracked label are
// counted and throttled with their principal's others.
func (s *snapshot) lookupLabeled(principal, label string) *entry {
	if e, ok := s.labeled[statsKey{principal, label}]; ok {
		return e
	}
	if s.full {
		return s.lookup(principal)
	}
	return nil
}

// track finds the entry of a principal or label missing from the snapshot.
// A new principal gets counters of its own, or shares the overflow counters
// once maxTracked unnamed principals are tracked. New entries wait in
// pending and join the snapshot once the misses paid for copying it, as in
// sync.Map: a burst of new principals costs amortized O(1) each, not a map
// copy each.
func (l *Limiter) track(principal, label string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.snapshot.Load()
	e := l.trackLocked(s, principal, label)
	l.misses++
	if l.misses >= len(s.entries)+len(s.labeled)+len(l.pending)+len(l.pendingLabeled) {
		l.promote(s)
	}
	return e
}

func (l *Limiter) trackLocked(s *snapshot, principal, label string) *entry {
	if label != "" {
		return l.trackLabel(s, principal, label)
	}
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
		e = &entry{stats: l.statsFor(statsKey{Principal: principal}), bucket: l.fallback}
		l.pending[principal] = e
		if principal != OverflowPrincipal {
			l.unnamed++
		}
	}
	return e
}

// trackLabel is trackLocked for a label. A label without a limit waits
// where its principal's other calls wait; it only has counters of its own.
// Labels, like principals, come from user input: past maxTracked (or too
// long, or not UTF-8) they are counted with their principal's other calls.
func (l *Limiter) trackLabel(s *snapshot, principal, label string) *entry {
	k := statsKey{principal, label}
	if e, ok := s.labeled[k]; ok {
		return e
	}
	if e, ok := l.pendingLabeled[k]; ok {
		return e
	}
	if l.unnamed >= l.maxTracked || len(principal) > maxTrackedLength || len(label) > maxTrackedLength ||
		!utf8.ValidString(principal) || !utf8.ValidString(label) {
		return l.trackLocked(s, principal, "")
	}
	e := &entry{stats: l.statsFor(k), bucket: l.principalBucket(principal)}
	l.pendingLabeled[k] = e
	l.unnamed++
	return e
}

// principalBucket is the bucket a principal's calls wait in: its own, none
// when it is configured without qps, else the aggregate default.
func (l *Limiter) principalBucket(principal string) *bucket {
	if b, ok := l.named[principal]; ok {
		return b
	}
	if l.free[principal] {
		return nil
	}
	return l.fallback
}

// promote publishes a copy of s with the pending entries added.
func (l *Limiter) promote(s *snapshot) {
	next := &snapshot{
		entries: make(map[string]*entry, len(s.entries)+len(l.pending)),
		labeled: make(map[statsKey]*entry, len(s.labeled)+len(l.pendingLabeled)),
		closed:  s.closed,
	}
	for name, e := range s.entries {
		next.entries[name] = e
	}
	for name, e := range l.pending {
		next.entries[name] = e
	}
	for k, e := range s.labeled {
		next.labeled[k] = e
	}
	for k, e := range l.pendingLabeled {
		next.labeled[k] = e
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
	clear(l.pendingLabeled)
	l.misses = 0
}

// overflowEntry returns the entry of principals beyond maxTracked. Its
// counters are those of a principal called OverflowPrincipal, so that no
// two series carry the same label, but its limiter is the default one.
func (l *Limiter) overflowEntry() *entry {
	if l.overflow == nil || l.overflow.bucket != l.fallback {
		l.overflow = &entry{stats: l.statsFor(statsKey{Principal: OverflowPrincipal}), bucket: l.fallback}
	}
	return l.overflow
}

func (l *Limiter) statsFor(k statsKey) *principalStats {
	st, ok := l.stats[k]
	if !ok {
		st = &principalStats{}
		l.stats[k] = st
	}
	return st
}

// publish rebuilds the snapshot from the configuration and the counters,
// after the configuration changed.
func (l *Limiter) publish() {
	s := &snapshot{entries: make(map[string]*entry, len(l.stats)), labeled: map[statsKey]*entry{}, closed: l.closed}
	l.unnamed = 0
	for k, st := range l.stats {
		e := &entry{stats: st}
		if k.Label != "" {
			e.bucket = l.principalBucket(k.Principal)
			switch b, ok := l.labeled[k]; {
			case ok:
				b.parent.Store(e.bucket)
				e.bucket = b
			case l.freeLabels[k]:
			default:
				l.unnamed++
			}
			s.labeled[k] = e
			continue
		}
		name := k.Principal
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
// default limiter's queue, or proceed when there is no default limiter; the
// calls queued under a label that loses its limit move to the back of their
// principal's queue (or the default's), their last wait.
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
		key      statsKey
		from, to *bucket
	}
	var retirements []retirement

	oldFallback := l.fallback
	if d := cfg.Default; d != nil && d.QPS != nil {
		s := newSettings(*d.QPS, d.Burst, d.Capacity)
		if l.fallback == nil {
			l.fallback = newBucket(l.line, s, false)
		} else {
			l.fallback.reconfigure(now, s)
		}
	} else {
		l.fallback = nil
	}
	if oldFallback != nil && l.fallback == nil {
		oldFallback.retire(now, nil)
	}

	oldNamed, oldLabeled := l.named, l.labeled
	l.named = make(map[string]*bucket, len(cfg.Limits))
	l.free = make(map[string]bool)
	l.labeled = make(map[statsKey]*bucket)
	l.freeLabels = make(map[statsKey]bool)
	for _, lim := range cfg.Limits {
		k := statsKey{lim.Principal, lim.Label}
		l.statsFor(k)
		if lim.Label != "" {
			if lim.QPS == nil {
				l.freeLabels[k] = true
				continue
			}
			s := newSettings(*lim.QPS, lim.Burst, lim.Capacity)
			if b, ok := oldLabeled[k]; ok {
				b.reconfigure(now, s)
				l.labeled[k] = b
			} else {
				l.labeled[k] = newBucket(l.line, s, true)
			}
			continue
		}
		if lim.QPS == nil {
			l.free[lim.Principal] = true
			continue
		}
		s := newSettings(*lim.QPS, lim.Burst, lim.Capacity)
		if b, ok := oldNamed[lim.Principal]; ok {
			b.reconfigure(now, s)
			l.named[lim.Principal] = b
		} else {
			l.named[lim.Principal] = newBucket(l.line, s, false)
		}
	}
	for name, b := range oldNamed {
		switch {
		case l.named[name] != nil:
		case l.free[name]:
			retirements = append(retirements, retirement{key: statsKey{Principal: name}, from: b})
		default:
			retirements = append(retirements, retirement{key: statsKey{Principal: name}, from: b, to: l.fallback})
		}
	}
	for k, b := range oldLabeled {
		if l.labeled[k] == nil {
			retirements = append(retirements, retirement{key: k, from: b, to: l.principalBucket(k.Principal)})
		}
	}
	l.config = cfg
	slices.SortFunc(retirements, func(a, b retirement) int {
		return cmp.Or(strings.Compare(a.key.Principal, b.key.Principal), strings.Compare(a.key.Label, b.key.Label))
	})
	for _, r := range retirements {
		r.from.retire(now, r.to)
	}
	l.publish()
	return nil
}

// Config returns the configuration the limiter runs, as last given to
// Update; it shares the QPS values with the caller's.
func (l *Limiter) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Config{Limits: slices.Clone(l.config.Limits), Default: l.config.Default}
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
	for _, b := range l.labeled {
		b.close(ErrClosed)
	}
	if l.fallback != nil {
		l.fallback.close(ErrClosed)
	}
}
