package ratelimit

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/allot/allot/masterd/internal/ratelimit/fakeclock"
)

func TestFlood(t *testing.T) {
	const interval = time.Second / 50
	h, clock := newHarness(t, Config{Limits: []Limit{{Principal: "spark", QPS: qps(50), Capacity: 100}}})

	for i := range 1000 {
		h.start(t.Context(), "spark", i)
	}
	var passed, rejected []int
	for range 50 {
		o := h.next()
		if o.err != nil {
			t.Fatalf("call %d: %v", o.index, o.err)
		}
		passed = append(passed, o.index)
	}
	for range 850 {
		o := h.nextRejected()
		rejected = append(rejected, o.index)
		var rej *RejectedError
		if !errors.As(o.err, &rej) || rej.Principal != "spark" {
			t.Fatalf("call %d: rejection %v does not identify itself", o.index, o.err)
		}
		// The head of the queue leaves one interval from now, freeing a slot.
		if rej.RetryAfter != interval {
			t.Errorf("call %d: RetryAfter %v, want %v", o.index, rej.RetryAfter, interval)
		}
	}
	slices.Sort(passed)
	slices.Sort(rejected)
	if !slices.Equal(passed, indexes(0, 50)) {
		t.Errorf("passed at once: %v, want the first 50 calls", passed)
	}
	if !slices.Equal(rejected, indexes(150, 1000)) {
		t.Errorf("rejected: %d calls from %d, want calls 150..999", len(rejected), rejected[0])
	}
	want := Stats{Principal: "spark", Received: 1000, Processed: 50, Rejected: 850, QueueDepth: 100}
	if got := statsOf(h.limiter, "spark"); got != want {
		t.Errorf("after the flood: %+v, want %+v", got, want)
	}

	// One interval at a time, exactly one queued call proceeds, in arrival
	// order.
	for k := range 100 {
		clock.Advance(interval)
		o := h.next()
		if o.err != nil || o.index != 50+k {
			t.Fatalf("step %d: call %d (%v), want call %d", k, o.index, o.err, 50+k)
		}
		if got, want := o.at.Sub(fakeclock.Epoch), time.Duration(k+1)*interval; got != want {
			t.Fatalf("call %d served at %v, want %v", o.index, got, want)
		}
	}
	h.expectNone()
	want = Stats{Principal: "spark", Received: 1000, Processed: 150, Rejected: 850, QueueDepth: 0}
	if got := statsOf(h.limiter, "spark"); got != want {
		t.Errorf("after the queue drained: %+v, want %+v", got, want)
	}
	if n := clock.Pending(); n != 0 {
		t.Errorf("%d timers left with an empty queue", n)
	}
}

func indexes(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestRouting covers which limiter a principal's calls meet. No call here can
// queue (capacity 0 or no throttling), so all calls are made at one instant
// in this goroutine.
func TestRouting(t *testing.T) {
	tests := map[string]struct {
		cfg            Config
		calls          []string
		want           []bool // passed, else rejected
		wantRetryAfter time.Duration
		wantStats      []Stats
	}{
		"default limiter is shared by unnamed principals": {
			cfg:            Config{Default: &Default{QPS: qps(10), Burst: 2}},
			calls:          []string{"a", "b", "a", "b"},
			want:           []bool{true, true, false, false},
			wantRetryAfter: 100 * time.Millisecond,
			wantStats: []Stats{
				{Principal: "a", Received: 2, Processed: 1, Rejected: 1},
				{Principal: "b", Received: 2, Processed: 1, Rejected: 1},
			},
		},
		"empty principal uses the default limiter": {
			cfg:            Config{Default: &Default{QPS: qps(1)}},
			calls:          []string{"", "", "a"},
			want:           []bool{true, false, false},
			wantRetryAfter: time.Second,
			wantStats: []Stats{
				{Principal: "", Received: 2, Processed: 1, Rejected: 1},
				{Principal: "a", Received: 1, Rejected: 1},
			},
		},
		"named principal has its own limiter": {
			cfg: Config{
				Limits:  []Limit{{Principal: "spark", QPS: qps(1)}},
				Default: &Default{QPS: qps(1)},
			},
			calls:          []string{"spark", "a", "spark", "a"},
			want:           []bool{true, true, false, false},
			wantRetryAfter: time.Second,
			wantStats: []Stats{
				{Principal: "a", Received: 2, Processed: 1, Rejected: 1},
				{Principal: "spark", Received: 2, Processed: 1, Rejected: 1},
			},
		},
		"principal without qps is counted, not throttled": {
			cfg: Config{
				Limits:  []Limit{{Principal: "free"}},
				Default: &Default{QPS: qps(1)},
			},
			calls: []string{"free", "free", "free", "free", "a", "a"},
			want:  []bool{true, true, true, true, true, false},
			// The default's one token went to "a".
			wantRetryAfter: time.Second,
			wantStats: []Stats{
				{Principal: "a", Received: 2, Processed: 1, Rejected: 1},
				{Principal: "free", Received: 4, Processed: 4},
			},
		},
		"without a default unnamed principals are not throttled": {
			cfg:   Config{Limits: []Limit{{Principal: "spark", QPS: qps(1)}}},
			calls: []string{"a", "a", "a", ""},
			want:  []bool{true, true, true, true},
			wantStats: []Stats{
				{Principal: "", Received: 1, Processed: 1},
				{Principal: "a", Received: 3, Processed: 3},
				{Principal: "spark"},
			},
		},
		"default without qps does not throttle": {
			cfg:       Config{Default: &Default{}},
			calls:     []string{"a", "a"},
			want:      []bool{true, true},
			wantStats: []Stats{{Principal: "a", Received: 2, Processed: 2}},
		},
		"capacity 0 rejects as soon as no token is left": {
			cfg:   Config{Limits: []Limit{{Principal: "spark", QPS: qps(1), Burst: 2}}},
			calls: []string{"spark", "spark", "spark"},
			want:  []bool{true, true, false},
			// Two tokens spent at once: the first comes back after 1s.
			wantRetryAfter: time.Second,
			wantStats:      []Stats{{Principal: "spark", Received: 3, Processed: 2, Rejected: 1}},
		},
		"burst 0 means max(1, ceil(qps))": {
			cfg:            Config{Limits: []Limit{{Principal: "spark", QPS: qps(2.5)}}},
			calls:          []string{"spark", "spark", "spark", "spark"},
			want:           []bool{true, true, true, false},
			wantRetryAfter: 400 * time.Millisecond,
			wantStats:      []Stats{{Principal: "spark", Received: 4, Processed: 3, Rejected: 1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, _ := newHarness(t, tc.cfg)
			// A call that queued by mistake returns at once with this
			// context instead of hanging the test.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			for i, p := range tc.calls {
				err := h.limiter.Wait(ctx, p, "")
				var rej *RejectedError
				switch {
				case tc.want[i] && err != nil:
					t.Errorf("call %d (%q): %v, want it to pass", i, p, err)
				case !tc.want[i] && !errors.As(err, &rej):
					t.Errorf("call %d (%q): %v, want a rejection", i, p, err)
				case !tc.want[i] && rej.RetryAfter != tc.wantRetryAfter:
					t.Errorf("call %d (%q): RetryAfter %v, want %v", i, p, rej.RetryAfter, tc.wantRetryAfter)
				}
			}
			if got := h.limiter.Stats(); !slices.Equal(got, tc.wantStats) {
				t.Errorf("stats:\n got %+v\nwant %+v", got, tc.wantStats)
			}
		})
	}
}

func TestCancelLeavesTheQueue(t *testing.T) {
	tests := map[string]struct {
		cancelled int // which of the three queued calls (1..3) gives up
		want      []served
	}{
		"head":   {cancelled: 1, want: []served{{2, 100 * time.Millisecond}, {3, 200 * time.Millisecond}}},
		"middle": {cancelled: 2, want: []served{{1, 100 * time.Millisecond}, {3, 200 * time.Millisecond}}},
		"tail":   {cancelled: 3, want: []served{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, clock := newHarness(t, Config{Limits: []Limit{{Principal: "spark", QPS: qps(10), Burst: 1, Capacity: 10}}})
			h.start(t.Context(), "spark", 0)
			if o := h.next(); o.index != 0 || o.err != nil {
				t.Fatalf("first call: %+v", o)
			}
			ctx, cancel := context.WithCancel(t.Context())
			for i := 1; i <= 3; i++ {
				callCtx := t.Context()
				if i == tc.cancelled {
					callCtx = ctx
				}
				h.start(callCtx, "spark", i)
			}
			cancel()
			o := h.next()
			if o.index != tc.cancelled || !errors.Is(o.err, context.Canceled) {
				t.Fatalf("after cancel: %+v, want call %d cancelled", o, tc.cancelled)
			}
			want := Stats{Principal: "spark", Received: 4, Processed: 1, QueueDepth: 2}
			if got := statsOf(h.limiter, "spark"); got != want {
				t.Errorf("after cancel: %+v, want %+v", got, want)
			}
			h.expectServed(clock, tc.want)
			want = Stats{Principal: "spark", Received: 4, Processed: 3}
			if got := statsOf(h.limiter, "spark"); got != want {
				t.Errorf("at the end: %+v, want %+v", got, want)
			}
			if n := clock.Pending(); n != 0 {
				t.Errorf("%d timers left with an empty queue", n)
			}
		})
	}
}

// TestUpdateWithQueuedCalls changes the configuration while calls wait, at
// the instant they arrived.
func TestUpdateWithQueuedCalls(t *testing.T) {
	spark := func(rate float64, capacity int) Limit {
		return Limit{Principal: "spark", QPS: qps(rate), Burst: 1, Capacity: capacity}
	}
	slowDefault := &Default{QPS: qps(1), Burst: 1, Capacity: 10}
	tests := map[string]struct {
		initial, update Config
		calls           []string // before the update
		wantDepth       map[string]int
		late            []string // right after the update
		wantRejected    []int
		wantRetryAfter  time.Duration
		want            []served
	}{
		"qps change serves the queue at the new rate": {
			initial: Config{Limits: []Limit{spark(10, 10)}},
			calls:   []string{"spark", "spark", "spark", "spark"},
			// The new capacity is below the queue: the queued calls stay,
			// a new one is rejected.
			update:       Config{Limits: []Limit{spark(20, 1)}},
			wantDepth:    map[string]int{"spark": 3},
			late:         []string{"spark"},
			wantRejected: []int{4},
			// A slot frees once three calls left, at the new rate.
			wantRetryAfter: 150 * time.Millisecond,
			want: []served{
				{0, 0}, {1, 50 * time.Millisecond}, {2, 100 * time.Millisecond}, {3, 150 * time.Millisecond},
			},
		},
		"capacity change keeps the pace": {
			initial:   Config{Limits: []Limit{spark(10, 10)}},
			calls:     []string{"spark", "spark", "spark"},
			update:    Config{Limits: []Limit{spark(10, 3)}},
			wantDepth: map[string]int{"spark": 2},
			late:      []string{"spark", "spark"},
			// The queue holds 2 and takes one more.
			wantRejected:   []int{4},
			wantRetryAfter: 100 * time.Millisecond,
			want: []served{
				{0, 0}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {3, 300 * time.Millisecond},
			},
		},
		"removed principal queues behind the default's calls": {
			initial:   Config{Limits: []Limit{spark(10, 10)}, Default: slowDefault},
			calls:     []string{"spark", "spark", "spark", "a", "a"},
			update:    Config{Default: slowDefault},
			wantDepth: map[string]int{"spark": 2, "a": 1},
			// A new call of the principal queues behind its moved calls.
			late: []string{"spark"},
			want: []served{
				{0, 0}, {3, 0}, {4, time.Second}, {1, 2 * time.Second}, {2, 3 * time.Second}, {5, 4 * time.Second},
			},
		},
		"removed principal without a default proceeds": {
			initial: Config{Limits: []Limit{spark(10, 10)}},
			calls:   []string{"spark", "spark", "spark"},
			update:  Config{},
			want:    []served{{0, 0}, {1, 0}, {2, 0}},
		},
		"principal losing its qps proceeds": {
			initial: Config{Limits: []Limit{spark(10, 10)}},
			calls:   []string{"spark", "spark", "spark"},
			update:  Config{Limits: []Limit{{Principal: "spark"}}},
			want:    []served{{0, 0}, {1, 0}, {2, 0}},
		},
		"removed default releases its queue": {
			initial: Config{Default: slowDefault},
			calls:   []string{"a", "b", "a"},
			update:  Config{},
			want:    []served{{0, 0}, {1, 0}, {2, 0}},
		},
		"default qps change serves its queue at the new rate": {
			initial:   Config{Default: slowDefault},
			calls:     []string{"a", "b", "a"},
			update:    Config{Default: &Default{QPS: qps(2), Burst: 1, Capacity: 10}},
			wantDepth: map[string]int{"a": 1, "b": 1},
			want:      []served{{0, 0}, {1, 500 * time.Millisecond}, {2, time.Second}},
		},
		"newly named principal leaves its queued calls to the default": {
			initial:   Config{Default: slowDefault},
			calls:     []string{"spark", "spark"},
			update:    Config{Limits: []Limit{spark(10, 10)}, Default: slowDefault},
			wantDepth: map[string]int{"spark": 1},
			late:      []string{"spark"},
			want:      []served{{0, 0}, {2, 0}, {1, time.Second}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, clock := newHarness(t, tc.initial)
			for i, p := range tc.calls {
				h.start(t.Context(), p, i)
			}
			if err := h.limiter.Update(tc.update); err != nil {
				t.Fatalf("Update: %v", err)
			}
			for p, want := range tc.wantDepth {
				if got := statsOf(h.limiter, p).QueueDepth; got != want {
					t.Errorf("queue depth of %q after the update: %d, want %d", p, got, want)
				}
			}
			for i, p := range tc.late {
				h.start(t.Context(), p, len(tc.calls)+i)
			}
			var rejected []int
			for range tc.wantRejected {
				o := h.nextRejected()
				rejected = append(rejected, o.index)
				var rej *RejectedError
				if errors.As(o.err, &rej); rej.RetryAfter != tc.wantRetryAfter {
					t.Errorf("late call %d: RetryAfter %v, want %v", o.index, rej.RetryAfter, tc.wantRetryAfter)
				}
			}
			slices.Sort(rejected)
			if !slices.Equal(rejected, tc.wantRejected) {
				t.Errorf("rejected late calls %v, want %v", rejected, tc.wantRejected)
			}
			h.expectServed(clock, tc.want)
			for _, s := range h.limiter.Stats() {
				if s.QueueDepth != 0 || s.Received != s.Processed+s.Rejected {
					t.Errorf("at the end: %+v", s)
				}
			}
			if n := clock.Pending(); n != 0 {
				t.Errorf("%d timers left with empty queues", n)
			}
		})
	}
}

// TestUpdateCarriesTokens checks that a reconfiguration neither refills a
// spent bucket nor empties a full one.
func TestUpdateCarriesTokens(t *testing.T) {
	limit := func(rate float64, burst int) Config {
		return Config{Limits: []Limit{{Principal: "spark", QPS: qps(rate), Burst: burst}}}
	}
	tests := map[string]struct {
		initial, update Config
		before          int // calls before the update
		wantPassed      int // calls that pass right after it
		wantRetryAfter  time.Duration
	}{
		"full bucket grows to the new burst":   {initial: limit(1, 2), update: limit(1, 5), wantPassed: 5, wantRetryAfter: time.Second},
		"empty bucket stays empty":             {initial: limit(1, 2), before: 2, update: limit(1, 5), wantRetryAfter: time.Second},
		"tokens left are kept":                 {initial: limit(1, 4), before: 1, update: limit(1, 8), wantPassed: 3, wantRetryAfter: time.Second},
		"tokens left are capped by the burst":  {initial: limit(1, 4), before: 1, update: limit(1, 2), wantPassed: 2, wantRetryAfter: time.Second},
		"faster rate brings the next sooner":   {initial: limit(1, 2), before: 2, update: limit(10, 2), wantRetryAfter: 100 * time.Millisecond},
		"slower rate brings the next later":    {initial: limit(10, 2), before: 2, update: limit(1, 2), wantRetryAfter: time.Second},
		"half a token survives a rate change":  {initial: limit(1, 1), before: 1, update: limit(2, 1), wantRetryAfter: 500 * time.Millisecond},
		"unchanged settings keep their tokens": {initial: limit(1, 3), before: 1, update: limit(1, 3), wantPassed: 2, wantRetryAfter: time.Second},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, _ := newHarness(t, tc.initial)
			for i := range tc.before {
				if err := h.limiter.Wait(t.Context(), "spark", ""); err != nil {
					t.Fatalf("call %d before the update: %v", i, err)
				}
			}
			if err := h.limiter.Update(tc.update); err != nil {
				t.Fatalf("Update: %v", err)
			}
			passed := 0
			for {
				err := h.limiter.Wait(t.Context(), "spark", "")
				if err == nil {
					passed++
					continue
				}
				var rej *RejectedError
				if !errors.As(err, &rej) {
					t.Fatalf("call after the update: %v", err)
				}
				if rej.RetryAfter != tc.wantRetryAfter {
					t.Errorf("RetryAfter %v, want %v", rej.RetryAfter, tc.wantRetryAfter)
				}
				break
			}
			if passed != tc.wantPassed {
				t.Errorf("%d calls passed after the update, want %d", passed, tc.wantPassed)
			}
		})
	}
}

func TestClose(t *testing.T) {
	h, _ := newHarness(t, Config{Limits: []Limit{{Principal: "spark", QPS: qps(1), Capacity: 10}}, Default: &Default{QPS: qps(1), Capacity: 10}})
	for i, p := range []string{"spark", "spark", "a", "a"} {
		h.start(t.Context(), p, i)
	}
	h.limiter.Close()
	got := map[int]error{}
	for range 4 {
		o := h.next()
		got[o.index] = o.err
	}
	for i, want := range []error{nil, ErrClosed, nil, ErrClosed} {
		if !errors.Is(got[i], want) {
			t.Errorf("call %d: %v, want %v", i, got[i], want)
		}
	}
	if err := h.limiter.Wait(t.Context(), "spark", ""); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if err := h.limiter.Update(Config{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	for _, s := range h.limiter.Stats() {
		if s.QueueDepth != 0 {
			t.Errorf("%q still has %d calls queued", s.Principal, s.QueueDepth)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		cfg     Config
		wantErr bool
	}{
		"empty":                 {cfg: Config{}},
		"full":                  {cfg: Config{Limits: []Limit{{Principal: "a", QPS: qps(55.5), Burst: 10, Capacity: 1000}, {Principal: "b"}}, Default: &Default{QPS: qps(33.3)}}},
		"duplicate principal":   {cfg: Config{Limits: []Limit{{Principal: "a"}, {Principal: "a", QPS: qps(1)}}}, wantErr: true},
		"zero qps":              {cfg: Config{Limits: []Limit{{Principal: "a", QPS: qps(0)}}}, wantErr: true},
		"negative qps":          {cfg: Config{Limits: []Limit{{Principal: "a", QPS: qps(-1)}}}, wantErr: true},
		"infinite qps":          {cfg: Config{Default: &Default{QPS: qps(math.Inf(1))}}, wantErr: true},
		"NaN qps":               {cfg: Config{Default: &Default{QPS: qps(math.NaN())}}, wantErr: true},
		"negative burst":        {cfg: Config{Limits: []Limit{{Principal: "a", QPS: qps(1), Burst: -1}}}, wantErr: true},
		"negative capacity":     {cfg: Config{Default: &Default{QPS: qps(1), Capacity: -1}}, wantErr: true},
		"tiny qps":              {cfg: Config{Default: &Default{QPS: qps(1e-9)}}},
		"huge qps and burst":    {cfg: Config{Default: &Default{QPS: qps(1e300), Burst: 1 << 60}}},
		"empty principal named": {cfg: Config{Limits: []Limit{{Principal: "", QPS: qps(1)}}}},
		"principal not UTF-8":   {cfg: Config{Limits: []Limit{{Principal: "a\xff", QPS: qps(1)}}}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate: %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%v does not wrap ErrInvalidConfig", err)
			}
			_, err = New(tc.cfg, WithClock(fakeclock.New()))
			if (err != nil) != tc.wantErr {
				t.Errorf("New: %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestExtremeSettingsStillServe(t *testing.T) {
	h, _ := newHarness(t, Config{
		Limits: []Limit{
			{Principal: "fast", QPS: qps(1e300), Burst: 1 << 60},
			{Principal: "fast-default-burst", QPS: qps(1e300)},
		},
		Default: &Default{QPS: qps(1e-9)},
	})
	for i := range 1000 {
		for _, p := range []string{"fast", "fast-default-burst"} {
			if err := h.limiter.Wait(t.Context(), p, ""); err != nil {
				t.Fatalf("%s call %d: %v", p, i, err)
			}
		}
	}
	if err := h.limiter.Wait(t.Context(), "a", ""); err != nil {
		t.Fatalf("first slow call: %v", err)
	}
	var rej *RejectedError
	if err := h.limiter.Wait(t.Context(), "a", ""); !errors.As(err, &rej) || rej.RetryAfter <= 0 {
		t.Fatalf("second slow call: %v, want a rejection with a positive RetryAfter", err)
	}
}
