package ratelimit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// bucket is one token bucket with its FIFO queue of waiting calls.
//
// The bucket is kept as a GCRA (generic cell rate algorithm) state: a single
// instant, nextFree, at which the bucket would be full again if no call came.
// A call passes at now when nextFree-now ≤ tolerance and pushes nextFree one
// interval further. Working in whole nanoseconds instead of fractional tokens
// keeps the spacing between served calls exactly one interval. Instants are
// read from the limiter's timeline.
type bucket struct {
	line *timeline

	mu sync.Mutex
	settings
	nextFree time.Duration
	// head and tail hold the waiting calls in arrival order.
	head, tail *waiter
	length     int
	// timer wakes the bucket when its head may pass; timerGeneration tells
	// the current timer from a stopped one whose callback already started.
	timer           Timer
	timerAt         time.Duration
	timerGeneration uint64
	// retired is set once the bucket left the configuration; calls that
	// still hold it look the limiter up again.
	retired bool

	// labeled is set on the bucket of a labeled limit: a call it lets go
	// still waits its turn under its principal's limit, in parent (nil:
	// the principal is not throttled). The limiter sets parent as its
	// configuration changes; a call that finds it retired looks again.
	// Last: the request path of unlabeled calls never reads them.
	labeled bool
	parent  atomic.Pointer[bucket]
}

// waiter is one queued call.
type waiter struct {
	prev, next *waiter
	stats      *principalStats
	// bucket is where the waiter is queued now; it changes only while both
	// the old and the new bucket are locked.
	bucket atomic.Pointer[bucket]
	// queued is guarded by the mutex of the waiter's bucket.
	queued bool
	// err is written before ready is closed.
	err   error
	ready chan struct{}
}

type verdict int

const (
	passed verdict = iota
	queued
	rejected
	retired
)

// newBucket returns a full bucket.
func newBucket(line *timeline, s settings, labeled bool) *bucket {
	return &bucket{line: line, settings: s, labeled: labeled}
}

// take lets a call pass at now if a token is left, and spends it.
func (b *bucket) take(now time.Duration) bool {
	b.nextFree = max(b.nextFree, now)
	if b.nextFree-now > b.tolerance {
		return false
	}
	b.nextFree += b.interval
	return true
}

// nextToken is the earliest instant at which take succeeds.
func (b *bucket) nextToken() time.Duration {
	return b.nextFree - b.tolerance
}

// tryTake lets a call pass at now if no call waits and a token is left.
func (b *bucket) tryTake(now time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.retired && b.head == nil && b.take(now)
}

// enter decides a call's fate: it passes, waits in the queue as the returned
// waiter, or is rejected with the time until a slot frees up. A call that
// already waited in a labeled bucket was counted as received there
// (countReceived false), not again here.
func (b *bucket) enter(now time.Duration, stats *principalStats, countReceived bool) (verdict, *waiter, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.retired {
		return retired, nil, 0
	}
	// A call never overtakes the queue, even when a token is due: the
	// timer serves the head in a moment.
	if b.head == nil && b.take(now) {
		return passed, nil, 0
	}
	if b.length >= b.capacity {
		// A slot frees when the head leaves at the next token; a queue
		// that Update left above its capacity needs that many more
		// intervals. Without a queue this is when the next token comes.
		wait := b.nextToken() - now + saturatingMul(b.interval, b.length-b.capacity)
		return rejected, nil, max(wait, time.Nanosecond)
	}
	w := &waiter{stats: stats, queued: true, ready: make(chan struct{})}
	w.bucket.Store(b)
	b.push(w)
	if b.head == w {
		b.arm(now)
	}
	// Counted once the timer is set: a test that sees the call queued may
	// move a fake clock at once.
	if countReceived {
		stats.received.Add(1)
	}
	stats.queueDepth.Add(1)
	return queued, w, 0
}

func (b *bucket) push(w *waiter) {
	w.prev, w.next = b.tail, nil
	if b.tail == nil {
		b.head = w
	} else {
		b.tail.next = w
	}
	b.tail = w
	b.length++
}

func (b *bucket) remove(w *waiter) {
	if w.prev == nil {
		b.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		b.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	b.length--
}

// release ends a waiter's wait with err (nil: the call proceeds).
func (b *bucket) release(w *waiter, err error) {
	b.remove(w)
	w.queued = false
	w.err = err
	w.stats.queueDepth.Add(-1)
	close(w.ready)
}

// dispatch serves every waiter whose turn has come and sets the timer for
// the next one.
func (b *bucket) dispatch(now time.Duration) {
	for b.head != nil && b.take(now) {
		b.release(b.head, nil)
	}
	b.arm(now)
}

// arm keeps exactly one timer pending while calls wait, due when the head
// may pass.
func (b *bucket) arm(now time.Duration) {
	if b.head == nil {
		b.stopTimer()
		return
	}
	at := b.nextToken()
	if b.timer != nil && b.timerAt == at {
		return
	}
	b.stopTimer()
	b.timerGeneration++
	generation := b.timerGeneration
	b.timerAt = at
	b.timer = b.line.clock.AfterFunc(at-now, func() { b.fire(generation) })
}

func (b *bucket) stopTimer() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

func (b *bucket) fire(generation uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if generation == b.timerGeneration {
		b.timer = nil
	}
	if !b.retired {
		b.dispatch(b.line.now())
	}
}

// cancel takes w out of whatever queue holds it. It reports false when w had
// already been released, in which case w.err and w.ready are final.
func cancel(w *waiter) bool {
	for {
		b := w.bucket.Load()
		b.mu.Lock()
		if w.bucket.Load() != b {
			// Moved to another bucket while we waited for the lock.
			b.mu.Unlock()
			continue
		}
		if !w.queued {
			b.mu.Unlock()
			return false
		}
		b.remove(w)
		w.queued = false
		w.stats.queueDepth.Add(-1)
		b.arm(b.line.now())
		b.mu.Unlock()
		return true
	}
}

// reconfigure applies new settings in place, keeping the queue. A full
// bucket stays full at its new size; otherwise the tokens left carry over
// (capped at the new burst), so a reconfiguration neither hands a fresh burst
// to a throttled principal nor takes tokens away from it.
func (b *bucket) reconfigure(now time.Duration, s settings) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s == b.settings {
		return
	}
	if debt := b.nextFree - now; debt > 0 && (s.interval != b.interval || s.burst != b.burst) {
		tokens := math.Max(0, float64(b.burst)-float64(debt)/float64(b.interval))
		tokens = math.Min(tokens, float64(s.burst))
		newDebt := (float64(s.burst) - tokens) * float64(s.interval)
		b.nextFree = now + time.Duration(math.Min(math.Round(newDebt), float64(maxDebt)))
	}
	b.settings = s
	b.dispatch(now)
}

// retire takes the bucket out of service. Its waiters move, in order, to the
// back of to's queue; with no destination they proceed unthrottled. They
// were admitted once, so neither a capacity nor a rejection applies to them.
func (b *bucket) retire(now time.Duration, to *bucket) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retired = true
	b.stopTimer()
	if to == nil {
		for b.head != nil {
			b.release(b.head, nil)
		}
		return
	}
	to.mu.Lock()
	defer to.mu.Unlock()
	for w := b.head; w != nil; {
		next := w.next
		w.prev, w.next = nil, nil
		to.push(w)
		w.bucket.Store(to)
		w = next
	}
	b.head, b.tail, b.length = nil, nil, 0
	to.dispatch(now)
}

// close releases every waiter with err and refuses further calls.
func (b *bucket) close(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retired = true
	b.stopTimer()
	for b.head != nil {
		b.release(b.head, err)
	}
}
