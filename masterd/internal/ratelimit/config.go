package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Config is the whole rate-limit configuration, as replicated by the cluster.
type Config struct {
	// Limits gives named principals their own limiter, and labeled
	// entries the frameworks of a principal with that label one more.
	Limits []Limit
	// Default is the one limiter shared by every principal not in Limits;
	// nil leaves those principals unthrottled.
	Default *Default
}

// Limit is one principal's limit, or with a Label the limit of the
// principal's frameworks with that label. A labeled call waits in its
// label's limiter and then in its principal's (or the aggregate default
// when the principal has no limit of its own): the principal's limit caps
// all its frameworks together.
type Limit struct {
	Principal string
	// Label, when set, narrows the limit to the principal's frameworks
	// carrying that label.
	Label string
	// QPS nil counts the principal's calls without throttling them.
	QPS *float64
	// Burst is the bucket size; 0 means max(1, ceil(QPS)).
	Burst int
	// Capacity is how many calls may wait; 0 rejects a call as soon as no
	// token is left.
	Capacity int
}

// Default is the aggregate limit of the principals not named in Config.Limits.
type Default struct {
	QPS      *float64
	Burst    int
	Capacity int
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid rate-limit configuration")

// Validate reports the first problem in c that Update would refuse.
func (c Config) Validate() error {
	seen := make(map[statsKey]bool, len(c.Limits))
	for _, l := range c.Limits {
		k := statsKey{l.Principal, l.Label}
		if seen[k] {
			if l.Label != "" {
				return fmt.Errorf("%w: principal %q with label %q is listed twice", ErrInvalidConfig, l.Principal, l.Label)
			}
			return fmt.Errorf("%w: principal %q is listed twice", ErrInvalidConfig, l.Principal)
		}
		seen[k] = true
		if !utf8.ValidString(l.Principal) {
			return fmt.Errorf("%w: principal %q is not valid UTF-8", ErrInvalidConfig, l.Principal)
		}
		if !utf8.ValidString(l.Label) {
			return fmt.Errorf("%w: label %q of principal %q is not valid UTF-8", ErrInvalidConfig, l.Label, l.Principal)
		}
		if err := validateSettings(l.QPS, l.Burst, l.Capacity); err != nil {
			if l.Label != "" {
				return fmt.Errorf("principal %q label %q: %w", l.Principal, l.Label, err)
			}
			return fmt.Errorf("principal %q: %w", l.Principal, err)
		}
	}
	if d := c.Default; d != nil {
		if err := validateSettings(d.QPS, d.Burst, d.Capacity); err != nil {
			return fmt.Errorf("aggregate default: %w", err)
		}
	}
	return nil
}

func validateSettings(qps *float64, burst, capacity int) error {
	if qps != nil && !(*qps > 0 && !math.IsInf(*qps, 1)) {
		return fmt.Errorf("%w: qps %v is not a positive finite number", ErrInvalidConfig, *qps)
	}
	if burst < 0 {
		return fmt.Errorf("%w: burst %d is negative", ErrInvalidConfig, burst)
	}
	if capacity < 0 {
		return fmt.Errorf("%w: capacity %d is negative", ErrInvalidConfig, capacity)
	}
	return nil
}

// DefaultBurst is the burst used when none is configured: one second's worth
// of calls, and at least one so that a slow limiter ever lets a call through.
// Absurd rates get a burst that still fits an int.
func DefaultBurst(qps float64) int {
	return int(math.Min(math.Max(1, math.Ceil(qps)), 1<<53))
}

// settings is a validated limit in the form a bucket runs on.
type settings struct {
	// interval is the time between two tokens.
	interval time.Duration
	burst    int
	capacity int
	// tolerance is how far ahead of now the bucket's next free slot may be
	// while a call still passes: burst-1 intervals.
	tolerance time.Duration
}

func newSettings(qps float64, burst, capacity int) settings {
	if burst == 0 {
		burst = DefaultBurst(qps)
	}
	// Above a billion calls per second the limit cannot bind anyway; below
	// one call in a century it hardly lets any through.
	interval := time.Duration(math.Min(math.Round(float64(time.Second)/qps), float64(maxDebt)))
	interval = max(interval, 1)
	return settings{
		interval:  interval,
		burst:     burst,
		capacity:  capacity,
		tolerance: saturatingMul(interval, burst-1),
	}
}

// maxDebt bounds every duration a bucket computes, so that absurd bursts or
// rates saturate instead of overflowing time arithmetic.
const maxDebt = time.Duration(math.MaxInt64 / 4)

func saturatingMul(d time.Duration, n int) time.Duration {
	if n > 0 && d > maxDebt/time.Duration(n) {
		return maxDebt
	}
	return d * time.Duration(n)
}
