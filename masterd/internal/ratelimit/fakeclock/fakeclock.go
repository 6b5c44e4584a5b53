// Package fakeclock is a ratelimit.Clock that moves only when told to, for
// tests that need exact service times whatever the machine's load.
//
// It does not import ratelimit (whose own tests use it): AfterFunc returns
// the interface ratelimit.Timer stands for.
package fakeclock

import (
	"slices"
	"sync"
	"time"
)

// Epoch is where every Clock starts.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock moves only in Advance, which runs due timer callbacks in its own
// goroutine, in deadline order, with Now set to each deadline, so a test
// knows every call due by then has been released when Advance returns.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*timer
}

type timer struct {
	clock   *Clock
	at      time.Time
	f       func()
	pending bool
}

// New returns a Clock at Epoch.
func New() *Clock { return &Clock{now: Epoch} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Elapsed is the time since Epoch.
func (c *Clock) Elapsed() time.Duration { return c.Now().Sub(Epoch) }

// AfterFunc calls f once the clock has been advanced by d.
func (c *Clock) AfterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, at: c.now.Add(d), f: f, pending: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *timer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if !t.pending {
		return false
	}
	t.pending = false
	t.clock.drop(t)
	return true
}

func (c *Clock) drop(t *timer) {
	if i := slices.Index(c.timers, t); i >= 0 {
		c.timers = slices.Delete(c.timers, i, i+1)
	}
}

// Advance moves the clock by d, firing the timers due on the way.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *timer
		for _, t := range c.timers {
			if !t.at.After(target) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = target
			c.mu.Unlock()
			return
		}
		if next.at.After(c.now) {
			c.now = next.at
		}
		next.pending = false
		c.drop(next)
		c.mu.Unlock()
		// Outside the lock: the callback reads the clock and sets timers.
		next.f()
	}
}

// Pending is how many timers wait to fire.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
