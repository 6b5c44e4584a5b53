// Package estimator holds the agent's usage slack estimators: what the agent
// can lend now as revocable, throttleable resources (api.Agent.Revocable),
// reported to the master with UPDATE_OVERSUBSCRIBED.
//
// Estimators (Config.Kind, agentd flag -estimator, default "noop"):
//
//   - noop: estimates nothing; the agent lends no usage slack (as Mesos's
//     default).
//   - fixed: always the resources of -estimator-fixed (e.g. "cpus:2"), as
//     Mesos's fixed estimator. Only cpus, and mem with -estimator-memory.
//   - usage: what the agent's non-revocable tasks were allocated and do not
//     use, from their cgroups' own statistics, less a safety margin, smoothed
//     (see below).
//
// Flags and their defaults (the agent's names for the Config fields):
//
//	-estimator           noop | fixed | usage (default "noop")
//	-estimator-fixed     resources lent by "fixed", e.g. "cpus:2" (no default; required by fixed only)
//	-estimator-memory    also lend mem (default false: cpus only)
//	-estimator-margin    fraction of the allocation "usage" keeps back (default 0.1)
//	-estimator-window    how long "usage" remembers a sample (default 5m)
//
// Only compressible resources are lent by default: a task that finds its
// cpus taken back is slowed, one that finds its memory taken back is killed.
// Lending mem is an explicit choice (-estimator-memory), also for "fixed",
// where naming mem without it is a configuration error rather than
// silently dropped: an operator who wrote mem:1024 meant it.
//
// # Smoothing of "usage"
//
// Each sample's slack is allocated − used − margin × allocated, per kind,
// never negative. The estimate is the smallest slack of the samples of the
// last Window, rounded down to 0.1 cpus and 32 MiB. The minimum (rather
// than an average) is the right shape for a loan: it drops at once when the
// tasks' usage rises or a task ends (lending less is always safe), and rises
// only once a whole window has shown the room unused, so a task that idles
// between bursts is judged by its bursts and the estimate does not flap with
// them. Rounding keeps jitter of a few millicores from changing the
// estimate, so the agent reports rarely.
//
// For the same reason "usage" lends nothing until its samples cover a whole
// Window (at agent start): before that the tasks' peaks are not known, and
// lending what one quiet first sample shows free would lend the room of a
// task between two bursts. Window 0 judges by the latest sample alone and
// so lends from the first one.
package estimator

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/allot/allot/masterd/api"
)

// Estimator kinds (Config.Kind).
const (
	KindNoop  = "noop"
	KindFixed = "fixed"
	KindUsage = "usage"
)

// Defaults of the usage estimator's tunables (the agent's flag defaults).
const (
	// DefaultMargin keeps 10% of the tasks' allocation back, so a task that
	// grows a little does not at once find its room lent out.
	DefaultMargin = 0.1
	// DefaultWindow is how long a usage peak keeps the estimate down.
	DefaultWindow = 5 * time.Minute
)

// The estimate of "usage" is rounded down to these steps.
const (
	cpuStep = 0.1
	memStep = 32 // MiB
)

// Sample is one measurement of the agent's non-revocable tasks.
type Sample struct {
	Time      time.Time
	Allocated api.Resources // sum of requests of the agent's NON-revocable tasks (cpus, mem MiB)
	Used      api.Resources // what those tasks use now, from their cgroups: cpus in cores averaged since the previous sample, mem MiB
}

// Config chooses and tunes an estimator.
type Config struct {
	Kind   string        // "noop" (also ""), "fixed", "usage"
	Fixed  api.Resources // -estimator-fixed: what "fixed" lends (cpus; mem with Memory)
	Memory bool          // -estimator-memory: also estimate mem (off: cpus only; mem is not compressible)

	// Margin is the fraction of the allocation "usage" never lends
	// (-estimator-margin, 0 ≤ Margin < 1). Zero is no margin.
	Margin float64
	// Window is how long "usage" remembers a sample (-estimator-window);
	// zero judges by the latest sample alone.
	Window time.Duration
}

// Estimator estimates the usage slack of one agent.
type Estimator interface {
	Name() string
	Estimate(s Sample) api.Resources // what the agent can lend now (never negative; only configured kinds)
}

// New builds the estimator cfg names, or says what is wrong with cfg.
func New(cfg Config) (Estimator, error) {
	kind := cfg.Kind
	if kind == "" {
		kind = KindNoop
	}
	if len(cfg.Fixed) > 0 && kind != KindFixed {
		return nil, fmt.Errorf("estimator %s: -estimator-fixed (%s) applies to the fixed estimator only", kind, cfg.Fixed)
	}
	switch kind {
	case KindNoop:
		return noop{}, nil
	case KindFixed:
		return newFixed(cfg)
	case KindUsage:
		return newUsage(cfg)
	default:
		return nil, fmt.Errorf("unknown estimator %q: want %s, %s or %s", cfg.Kind, KindNoop, KindFixed, KindUsage)
	}
}

// kinds are the resources an estimator with this config lends.
func kinds(cfg Config) []string {
	if cfg.Memory {
		return []string{"cpus", "mem"}
	}
	return []string{"cpus"}
}

type noop struct{}

func (noop) Name() string                  { return KindNoop }
func (noop) Estimate(Sample) api.Resources { return api.Resources{} }

type fixed struct{ lend api.Resources }

func newFixed(cfg Config) (Estimator, error) {
	if len(cfg.Fixed) == 0 {
		return nil, errors.New("estimator fixed: -estimator-fixed names no resources (e.g. cpus:2)")
	}
	if err := cfg.Fixed.Validate("estimator fixed: -estimator-fixed"); err != nil {
		return nil, err
	}
	for _, name := range cfg.Fixed.Names() {
		switch {
		case name == "cpus":
		case name == "mem" && !cfg.Memory:
			return nil, errors.New("estimator fixed: -estimator-fixed lends mem, which is not compressible: set -estimator-memory to lend it")
		case name == "mem":
		default:
			return nil, fmt.Errorf("estimator fixed: -estimator-fixed names %q: only cpus and mem can be lent", name)
		}
	}
	return fixed{lend: cfg.Fixed.Normalized()}, nil
}

func (fixed) Name() string                    { return KindFixed }
func (f fixed) Estimate(Sample) api.Resources { return f.lend.Clone() }

// usage lends the smallest slack of the last window's samples.
type usage struct {
	kinds  []string
	margin float64
	window time.Duration

	mu      sync.Mutex
	first   time.Time // time of the first sample seen: lend only once a window has passed since
	samples []slackAt // oldest first
}

type slackAt struct {
	time  time.Time
	slack api.Resources
}

func newUsage(cfg Config) (Estimator, error) {
	if math.IsNaN(cfg.Margin) || cfg.Margin < 0 || cfg.Margin >= 1 {
		return nil, fmt.Errorf("estimator usage: -estimator-margin %v: want a fraction from 0 to below 1", cfg.Margin)
	}
	if cfg.Window < 0 {
		return nil, fmt.Errorf("estimator usage: -estimator-window %v must not be negative", cfg.Window)
	}
	return &usage{kinds: kinds(cfg), margin: cfg.Margin, window: cfg.Window}, nil
}

func (*usage) Name() string { return KindUsage }

func (u *usage) Estimate(s Sample) api.Resources {
	now := u.slack(s)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.first.IsZero() {
		u.first = s.Time
	}
	u.samples = append(u.samples, slackAt{time: s.Time, slack: now})
	// A clock stepped back must not keep a stale sample forever: the window
	// is measured from the newest time seen.
	newest := s.Time
	for _, old := range u.samples {
		if old.time.After(newest) {
			newest = old.time
		}
	}
	kept := u.samples[:0]
	for _, old := range u.samples {
		if newest.Sub(old.time) <= u.window {
			kept = append(kept, old)
		}
	}
	// Drop references the truncation left behind.
	clear(u.samples[len(kept):])
	u.samples = kept

	out := make(api.Resources, len(u.kinds))
	if newest.Sub(u.first) < u.window {
		// The samples do not yet cover a window: the tasks' peaks are
		// not known, so nothing is lent.
		for _, kind := range u.kinds {
			out[kind] = 0
		}
		return out
	}
	for _, kind := range u.kinds {
		least := math.Inf(1)
		for _, old := range u.samples {
			least = math.Min(least, old.slack[kind])
		}
		out[kind] = roundDown(kind, least)
	}
	return out
}

// slack is one sample's slack per kind, never negative. A broken reading
// (NaN, infinite) lends nothing of its kind: better to lend nothing than to
// lend from a measurement that is not one.
func (u *usage) slack(s Sample) api.Resources {
	out := make(api.Resources, len(u.kinds))
	for _, kind := range u.kinds {
		allocated, used := s.Allocated[kind], s.Used[kind]
		if !finite(allocated) || !finite(used) {
			out[kind] = 0
			continue
		}
		allocated, used = math.Max(allocated, 0), math.Max(used, 0)
		out[kind] = math.Max(allocated-used-u.margin*allocated, 0)
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func roundDown(kind string, v float64) float64 {
	step := cpuStep
	if kind == "mem" {
		step = memStep
	}
	// The small epsilon keeps 0.3 (stored as 0.29999…) from rounding to 0.2.
	return api.RoundScalar(math.Floor(v/step+1e-9) * step)
}
