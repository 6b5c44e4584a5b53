package master

import (
	"context"
	"sync"
	"time"

	"github.com/allot/allot/masterd/internal/allocator"
	"github.com/allot/allot/masterd/internal/ratelimit"
)

// loop runs the term's periodic work: offer timeouts, agent health, framework
// failover timeouts, recovery, and an allocation cycle every allocation
// interval or soon after an event that may free or need resources.
func (m *Master) loop() {
	defer m.wg.Done()
	defer m.ticks.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-m.done
		cancel()
	}()
	for {
		select {
		case <-m.done:
			return
		case <-m.ticks.c:
			expired := m.tick(m.clock.Now())
			m.lastCycle = m.clock.Now()
			if len(expired) > 0 {
				m.removeFrameworks(ctx, expired, "failover timeout passed")
			}
		case <-m.kick:
			// Events come in bursts (a framework declining many offers):
			// they share one cycle, and some time passes between cycles in
			// which calls have the master's lock.
			if wait := m.lastCycle.Add(m.cycleGap()).Sub(m.clock.Now()); wait > 0 && !m.sleep(wait) {
				return
			}
			m.allocate(m.clock.Now())
			m.lastCycle = m.clock.Now()
		}
	}
}

// cycleGap is the least time between the end of a cycle and a cycle kicked
// by an event: a tenth of the allocation interval, at most 100 ms.
func (m *Master) cycleGap() time.Duration {
	return min(m.opts.AllocationInterval/10, 100*time.Millisecond)
}

// sleep waits d on the master's clock; false means the term ended first.
func (m *Master) sleep(d time.Duration) bool {
	passed := make(chan struct{})
	timer := m.clock.AfterFunc(d, func() { close(passed) })
	select {
	case <-passed:
		return true
	case <-m.done:
		timer.Stop()
		return false
	}
}

// ticker is a time.Ticker on a ratelimit.Clock, which only has AfterFunc:
// each tick arms the next one. Ticks the loop has not taken yet are dropped,
// as time.Ticker drops them, so a loop slower than its interval does not
// fall further behind; the loop reads the clock itself when it takes one.
type ticker struct {
	c      chan struct{}
	clock  ratelimit.Clock
	period time.Duration

	mu      sync.Mutex
	timer   ratelimit.Timer
	stopped bool
}

func newTicker(clock ratelimit.Clock, period time.Duration) *ticker {
	t := &ticker{c: make(chan struct{}, 1), clock: clock, period: period}
	// Under the lock: with a short period the first tick can fire, and arm
	// the next timer, before AfterFunc has returned here.
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = clock.AfterFunc(period, t.fire)
	return t
}

func (t *ticker) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	// Armed from the callback, so a late callback delays the ticks after it
	// by as much (microseconds on a real clock), which an allocation loop
	// does not mind; on a fake clock the callback runs at its deadline.
	t.timer = t.clock.AfterFunc(t.period, t.fire)
	select {
	case t.c <- struct{}{}:
	default:
	}
}

func (t *ticker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.timer.Stop()
}

// tick does the periodic checks and an allocation cycle. It returns the
// frameworks to remove, which needs Raft and so happens without m.mu.
func (m *Master) tick(now time.Time) []string {
	m.mu.Lock()
	m.withConsumptionPublished(now, func() { m.expireOffers(now) })
	m.checkAgents(now)
	m.checkRecovery(now)
	expired := m.expiredFrameworks(now)
	m.mu.Unlock()
	m.allocate(now)
	return expired
}

// allocate runs one allocation cycle and sends its offers, unless recovery
// holds offers back.
func (m *Master) allocate(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.recovery.active {
		return
	}
	var offers []allocator.Offer
	m.withConsumptionPublished(now, func() {
		start := m.clock.Now()
		offers = m.alloc.Allocate(now)
		if m.opts.ObserveCycle != nil {
			m.opts.ObserveCycle(m.clock.Now().Sub(start))
		}
	})
	m.sendOffers(offers, now)
	// The cycle may have given lenders their reservations back, which
	// revocable offers made earlier still hold.
	m.rescindOverlent()
}
