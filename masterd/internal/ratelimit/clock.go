package ratelimit

import "time"

// Clock is the time source of a Limiter. Tests inject a fake one so that
// service times are exact and nothing depends on how busy the machine is.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call: Stop prevents the call if it has not
// started and reports whether it did. An alias, so that a clock need not
// import this package to name it.
type Timer = interface{ Stop() bool }

// RealClock is the machine's clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// timeline reads a Clock as the time since the limiter started. Durations
// compare and add as plain integers, cheaper than time.Time on the request
// path, and the real clock is read through time.Since, which skips the wall
// clock and reads only the monotonic one.
type timeline struct {
	clock Clock
	epoch time.Time
	real  bool
}

func newTimeline(c Clock) *timeline {
	_, real := c.(RealClock)
	return &timeline{clock: c, epoch: c.Now(), real: real}
}

func (t *timeline) now() time.Duration {
	if t.real {
		return time.Since(t.epoch)
	}
	return t.clock.Now().Sub(t.epoch)
}
