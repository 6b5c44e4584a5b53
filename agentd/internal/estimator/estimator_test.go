package estimator

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/api"
)

func TestNewRejectsBadConfig(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"unknown kind":            {cfg: Config{Kind: "magic"}, want: `unknown estimator "magic"`},
		"fixed without resources": {cfg: Config{Kind: KindFixed}, want: "names no resources"},
		"fixed negative":          {cfg: Config{Kind: KindFixed, Fixed: api.Resources{"cpus": -1}}, want: "must not be negative"},
		"fixed NaN":               {cfg: Config{Kind: KindFixed, Fixed: api.Resources{"cpus": math.NaN()}}, want: "finite"},
		"fixed mem without opt-in": {cfg: Config{Kind: KindFixed, Fixed: api.Resources{"cpus": 1, "mem": 512}},
			want: "set -estimator-memory"},
		"fixed disk":            {cfg: Config{Kind: KindFixed, Fixed: api.Resources{"disk": 10}}, want: `names "disk"`},
		"fixed given to noop":   {cfg: Config{Kind: KindNoop, Fixed: api.Resources{"cpus": 1}}, want: "fixed estimator only"},
		"fixed given to usage":  {cfg: Config{Kind: KindUsage, Fixed: api.Resources{"cpus": 1}}, want: "fixed estimator only"},
		"usage negative margin": {cfg: Config{Kind: KindUsage, Margin: -0.1}, want: "-estimator-margin"},
		"usage margin of one":   {cfg: Config{Kind: KindUsage, Margin: 1}, want: "-estimator-margin"},
		"usage NaN margin":      {cfg: Config{Kind: KindUsage, Margin: math.NaN()}, want: "-estimator-margin"},
		"usage negative window": {cfg: Config{Kind: KindUsage, Window: -time.Second}, want: "-estimator-window"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := New(tc.cfg)
			if err == nil {
				t.Fatalf("New(%+v) = %v, want an error", tc.cfg, e.Name())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) error %q, want it to say %q", tc.cfg, err, tc.want)
			}
		})
	}
}

func TestNoop(t *testing.T) {
	for _, kind := range []string{"", KindNoop} {
		e, err := New(Config{Kind: kind})
		if err != nil {
			t.Fatalf("New(%q): %v", kind, err)
		}
		if e.Name() != KindNoop {
			t.Errorf("New(%q).Name() = %q, want noop", kind, e.Name())
		}
		got := e.Estimate(Sample{Time: time.Now(), Allocated: api.Resources{"cpus": 4}})
		if got == nil || len(got) != 0 {
			t.Errorf("noop estimate %v, want empty", got)
		}
	}
}

func TestFixed(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want api.Resources
	}{
		"cpus":            {cfg: Config{Fixed: api.Resources{"cpus": 2}}, want: api.Resources{"cpus": 2}},
		"rounded":         {cfg: Config{Fixed: api.Resources{"cpus": 0.5004}}, want: api.Resources{"cpus": 0.5}},
		"mem with opt-in": {cfg: Config{Fixed: api.Resources{"cpus": 1, "mem": 512}, Memory: true}, want: api.Resources{"cpus": 1, "mem": 512}},
		"zero is allowed": {cfg: Config{Fixed: api.Resources{"cpus": 0}}, want: api.Resources{"cpus": 0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.cfg.Kind = KindFixed
			e, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := e.Estimate(Sample{Time: time.Now(), Allocated: api.Resources{"cpus": 8}, Used: api.Resources{"cpus": 7.5}})
			if got.String() != tc.want.String() {
				t.Errorf("estimate %v, want %v", got, tc.want)
			}
			// The caller may change what it gets; the next estimate is unchanged.
			got["cpus"] = 99
			if again := e.Estimate(Sample{}); again.String() != tc.want.String() {
				t.Errorf("after changing the returned map, estimate %v, want %v", again, tc.want)
			}
		})
	}
}

func TestUsageSample(t *testing.T) {
	cases := map[string]struct {
		memory         bool
		margin         float64
		allocated, use api.Resources
		want           api.Resources
	}{
		"idle task lends its allocation":    {allocated: api.Resources{"cpus": 4, "mem": 1024}, use: api.Resources{}, want: api.Resources{"cpus": 4}},
		"margin kept back":                  {margin: 0.25, allocated: api.Resources{"cpus": 4}, use: api.Resources{"cpus": 1}, want: api.Resources{"cpus": 2}},
		"over its request lends nothing":    {margin: 0.1, allocated: api.Resources{"cpus": 1}, use: api.Resources{"cpus": 1.7}, want: api.Resources{"cpus": 0}},
		"no tasks":                          {margin: 0.1, allocated: nil, use: nil, want: api.Resources{"cpus": 0}},
		"rounded down to 0.1 cpus":          {allocated: api.Resources{"cpus": 2}, use: api.Resources{"cpus": 0.7049}, want: api.Resources{"cpus": 1.2}},
		"exact step is kept":                {allocated: api.Resources{"cpus": 1}, use: api.Resources{"cpus": 0.7}, want: api.Resources{"cpus": 0.3}},
		"memory with opt-in, 32 MiB steps":  {memory: true, allocated: api.Resources{"cpus": 1, "mem": 1000}, use: api.Resources{"cpus": 1, "mem": 200}, want: api.Resources{"cpus": 0, "mem": 800}},
		"memory rounds down":                {memory: true, allocated: api.Resources{"mem": 1000}, use: api.Resources{"mem": 201}, want: api.Resources{"cpus": 0, "mem": 768}},
		"NaN usage lends nothing":           {allocated: api.Resources{"cpus": 4}, use: api.Resources{"cpus": math.NaN()}, want: api.Resources{"cpus": 0}},
		"infinite allocation lends nothing": {allocated: api.Resources{"cpus": math.Inf(1)}, use: api.Resources{}, want: api.Resources{"cpus": 0}},
		"negative usage reads as none":      {allocated: api.Resources{"cpus": 1}, use: api.Resources{"cpus": -3}, want: api.Resources{"cpus": 1}},
		"negative allocation reads as none": {allocated: api.Resources{"cpus": -2}, use: api.Resources{}, want: api.Resources{"cpus": 0}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Window 0 judges by this one sample (a window lends nothing before it is covered).
			e, err := New(Config{Kind: KindUsage, Memory: tc.memory, Margin: tc.margin})
			if err != nil {
				t.Fatal(err)
			}
			got := e.Estimate(Sample{Time: time.Unix(1000, 0), Allocated: tc.allocated, Used: tc.use})
			if got.String() != tc.want.String() {
				t.Errorf("estimate %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUsageSmoothing drives the estimator through a task that idles between
// bursts: the estimate drops at once with a burst, stays down while the burst
// is in the window, and rises only when the window has seen none.
func TestUsageSmoothing(t *testing.T) {
	e, err := New(Config{Kind: KindUsage, Margin: DefaultMargin, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_000_000, 0)
	allocated := api.Resources{"cpus": 4}
	steps := []struct {
		at   time.Duration
		used float64
		want float64
	}{
		{at: 0, used: 0.5, want: 0},                   // no window seen yet: nothing lent
		{at: 59 * time.Second, used: 0.5, want: 0},    // still short of a window
		{at: 60 * time.Second, used: 0.4, want: 3.1},  // a window covered: 4 − 0.5 − 0.4
		{at: 70 * time.Second, used: 3, want: 0.6},    // a burst: down at once
		{at: 80 * time.Second, used: 0.2, want: 0.6},  // idle again: the burst is remembered
		{at: 129 * time.Second, used: 0.2, want: 0.6}, // 59 s after the burst
		{at: 131 * time.Second, used: 0.2, want: 3.4}, // the burst left the window; the smallest since is 4 − 0.2 − 0.4
		{at: 132 * time.Second, used: 5, want: 0},     // more than allocated: nothing to lend, never negative
	}
	for _, step := range steps {
		got := e.Estimate(Sample{Time: start.Add(step.at), Allocated: allocated, Used: api.Resources{"cpus": step.used}})
		if got["cpus"] != step.want || len(got) != 1 {
			t.Errorf("at %v using %v: estimate %v, want cpus:%v", step.at, step.used, got, step.want)
		}
	}
}

// TestUsageTaskEnds: when a non-revocable task ends, its allocation is no
// longer there to lend, and the estimate must drop with the very next sample.
func TestUsageTaskEnds(t *testing.T) {
	e, err := New(Config{Kind: KindUsage, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	e.Estimate(Sample{Time: now.Add(-time.Hour), Allocated: api.Resources{"cpus": 6}, Used: api.Resources{"cpus": 1}})
	if got := e.Estimate(Sample{Time: now, Allocated: api.Resources{"cpus": 6}, Used: api.Resources{"cpus": 1}}); got["cpus"] != 5 {
		t.Fatalf("estimate %v, want cpus:5", got)
	}
	if got := e.Estimate(Sample{Time: now.Add(time.Second), Allocated: api.Resources{"cpus": 2}, Used: api.Resources{"cpus": 1}}); got["cpus"] != 1 {
		t.Fatalf("after a task ended, estimate %v, want cpus:1", got)
	}
}

// TestUsageClockStepsBack: the window is measured from the newest sample, so
// a wall clock stepped back neither keeps an old sample forever nor lets a
// sample from "before" the newest one outlive the window.
func TestUsageClockStepsBack(t *testing.T) {
	e, err := New(Config{Kind: KindUsage, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	allocated := api.Resources{"cpus": 2}
	if got := e.Estimate(Sample{Time: now, Allocated: allocated, Used: api.Resources{"cpus": 2}}); got["cpus"] != 0 {
		t.Fatalf("estimate %v, want cpus:0", got)
	}
	// Stepped back an hour: the fully used sample at now is still the newest
	// and in the window; the stepped-back one is outside it.
	if got := e.Estimate(Sample{Time: now.Add(-time.Hour), Allocated: allocated, Used: api.Resources{"cpus": 0.5}}); got["cpus"] != 0 {
		t.Fatalf("after a step back, estimate %v, want cpus:0", got)
	}
	if got := e.Estimate(Sample{Time: now.Add(61 * time.Second), Allocated: allocated, Used: api.Resources{"cpus": 0.5}}); got["cpus"] != 1.5 {
		t.Fatalf("a window after the full sample, estimate %v, want cpus:1.5", got)
	}
	if n := len(e.(*usage).samples); n != 1 {
		t.Errorf("the window keeps %d samples, want 1", n)
	}
}

// TestUsageWarmUp: at agent start the tasks' peaks are unknown, so "usage"
// lends nothing until its samples cover a whole window, however idle the
// tasks look.
func TestUsageWarmUp(t *testing.T) {
	e, err := New(Config{Kind: KindUsage, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Unix(1_000_000, 0)
	idle := Sample{Allocated: api.Resources{"cpus": 4}, Used: api.Resources{}}
	for _, at := range []time.Duration{0, time.Second, 30 * time.Second, 59 * time.Second} {
		idle.Time = start.Add(at)
		if got := e.Estimate(idle); got["cpus"] != 0 || len(got) != 1 {
			t.Errorf("%v after start: estimate %v, want cpus:0", at, got)
		}
	}
	idle.Time = start.Add(time.Minute)
	if got := e.Estimate(idle); got["cpus"] != 4 {
		t.Errorf("a window after start: estimate %v, want cpus:4", got)
	}
}

// TestUsageNoWindow: Window 0 judges by the latest sample alone.
func TestUsageNoWindow(t *testing.T) {
	e, err := New(Config{Kind: KindUsage})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	for i, used := range []float64{2, 0.5, 1.3} {
		got := e.Estimate(Sample{Time: now.Add(time.Duration(i) * time.Second), Allocated: api.Resources{"cpus": 2}, Used: api.Resources{"cpus": used}})
		if want := api.RoundScalar(2 - used); got["cpus"] != want {
			t.Errorf("using %v: estimate %v, want cpus:%v", used, got, want)
		}
	}
}

func BenchmarkUsageEstimate(b *testing.B) {
	// One sample a second: a window of n seconds holds n samples.
	for _, window := range []int{60, 3600} {
		b.Run("window_samples="+strconv.Itoa(window), func(b *testing.B) {
			e, _ := New(Config{Kind: KindUsage, Memory: true, Margin: DefaultMargin, Window: time.Duration(window) * time.Second})
			start := time.Unix(1_000_000, 0)
			allocated := api.Resources{"cpus": 16, "mem": 65536}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				used := api.Resources{"cpus": float64(i%16) / 2, "mem": float64(i%1000) * 32}
				e.Estimate(Sample{Time: start.Add(time.Duration(i) * time.Second), Allocated: allocated, Used: used})
			}
		})
	}
}
