package ratelimit

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allot/allot/masterd/internal/ratelimit/fakeclock"
)

// call is one Wait of a framework of principal with label.
type call struct{ principal, label string }

func TestLabelRouting(t *testing.T) {
	tests := map[string]struct {
		cfg   Config
		calls []call
		want  []bool // passed, else rejected
		// wantRetryAfter is the rejections' RetryAfter, in call order, and
		// wantByLabel whether the label's limit (else the principal's)
		// rejected each.
		wantRetryAfter []time.Duration
		wantByLabel    []bool
		wantStats      []Stats
	}{
		"a labeled limit throttles only its label": {
			cfg: Config{Limits: []Limit{
				{Principal: "spark", QPS: qps(10), Burst: 5},
				{Principal: "spark", Label: "batch", QPS: qps(2), Burst: 1},
			}},
			calls:          []call{{"spark", "batch"}, {"spark", "batch"}, {"spark", ""}, {"spark", "web"}},
			want:           []bool{true, false, true, true},
			wantRetryAfter: []time.Duration{500 * time.Millisecond},
			wantByLabel:    []bool{true},
			wantStats: []Stats{
				{Principal: "spark", Received: 1, Processed: 1},
				{Principal: "spark", Label: "batch", Received: 2, Processed: 1, Rejected: 1},
				{Principal: "spark", Label: "web", Received: 1, Processed: 1},
			},
		},
		"the principal's limit caps its labels together": {
			cfg: Config{Limits: []Limit{
				{Principal: "spark", QPS: qps(1), Burst: 2},
				{Principal: "spark", Label: "a", QPS: qps(10), Burst: 10},
				{Principal: "spark", Label: "b", QPS: qps(10), Burst: 10},
			}},
			calls: []call{{"spark", "a"}, {"spark", "b"}, {"spark", "a"}, {"spark", ""}},
			want:  []bool{true, true, false, false},
			// The principal's first token comes back after 1s.
			wantRetryAfter: []time.Duration{time.Second, time.Second},
			wantByLabel:    []bool{false, false},
			wantStats: []Stats{
				{Principal: "spark", Received: 1, Rejected: 1},
				{Principal: "spark", Label: "a", Received: 2, Processed: 1, Rejected: 1},
				{Principal: "spark", Label: "b", Received: 1, Processed: 1},
			},
		},
		"a label without a limit is counted apart and throttled with its principal": {
			cfg:            Config{Limits: []Limit{{Principal: "spark", QPS: qps(1)}}},
			calls:          []call{{"spark", "web"}, {"spark", ""}, {"spark", "web"}},
			want:           []bool{true, false, false},
			wantRetryAfter: []time.Duration{time.Second, time.Second},
			wantByLabel:    []bool{false, false},
			wantStats: []Stats{
				{Principal: "spark", Received: 1, Rejected: 1},
				{Principal: "spark", Label: "web", Received: 2, Processed: 1, Rejected: 1},
			},
		},
		"a labeled principal without a limit of its own waits in the default": {
			cfg: Config{
				Limits:  []Limit{{Principal: "spark", Label: "batch", QPS: qps(10)}},
				Default: &Default{QPS: qps(1)},
			},
			calls:          []call{{"spark", "batch"}, {"anon", ""}, {"spark", ""}},
			want:           []bool{true, false, false},
			wantRetryAfter: []time.Duration{time.Second, time.Second},
			wantByLabel:    []bool{false, false},
			wantStats: []Stats{
				{Principal: "anon", Received: 1, Rejected: 1},
				{Principal: "spark", Received: 1, Rejected: 1},
				{Principal: "spark", Label: "batch", Received: 1, Processed: 1},
			},
		},
		"a principal without qps is capped only by its label's limit": {
			cfg: Config{
				Limits:  []Limit{{Principal: "spark"}, {Principal: "spark", Label: "batch", QPS: qps(1)}},
				Default: &Default{QPS: qps(1)},
			},
			calls:          []call{{"spark", "batch"}, {"spark", "batch"}, {"spark", ""}, {"spark", ""}},
			want:           []bool{true, false, true, true},
			wantRetryAfter: []time.Duration{time.Second},
			wantByLabel:    []bool{true},
			wantStats: []Stats{
				{Principal: "spark", Received: 2, Processed: 2},
				{Principal: "spark", Label: "batch", Received: 2, Processed: 1, Rejected: 1},
			},
		},
		"a labeled limit without qps is counted, the principal still throttles": {
			cfg: Config{Limits: []Limit{
				{Principal: "spark", QPS: qps(1)},
				{Principal: "spark", Label: "batch"},
			}},
			calls:          []call{{"spark", "batch"}, {"spark", "batch"}},
			want:           []bool{true, false},
			wantRetryAfter: []time.Duration{time.Second},
			wantByLabel:    []bool{false},
			wantStats: []Stats{
				{Principal: "spark"},
				{Principal: "spark", Label: "batch", Received: 2, Processed: 1, Rejected: 1},
			},
		},
		"the same label of another principal is another limit": {
			cfg: Config{Limits: []Limit{
				{Principal: "spark", Label: "batch", QPS: qps(1)},
			}},
			calls: []call{{"spark", "batch"}, {"flink", "batch"}, {"flink", "batch"}, {"spark", "batch"}},
			want:  []bool{true, true, true, false},
			// Not throttled at the principal's level: no limit, no default.
			wantRetryAfter: []time.Duration{time.Second},
			wantByLabel:    []bool{true},
			wantStats: []Stats{
				{Principal: "flink", Label: "batch", Received: 2, Processed: 2},
				{Principal: "spark", Label: "batch", Received: 2, Processed: 1, Rejected: 1},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, _ := newHarness(t, tc.cfg)
			// A call that queued by mistake returns at once with this
			// context instead of hanging the test.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			var (
				retryAfter []time.Duration
				byLabel    []bool
			)
			for i, c := range tc.calls {
				err := h.limiter.Wait(ctx, c.principal, c.label)
				var rej *RejectedError
				switch {
				case tc.want[i] && err != nil:
					t.Errorf("call %d (%+v): %v, want it to pass", i, c, err)
				case !tc.want[i] && !errors.As(err, &rej):
					t.Errorf("call %d (%+v): %v, want a rejection", i, c, err)
				case !tc.want[i]:
					if rej.Principal != c.principal || (rej.Label != "" && rej.Label != c.label) {
						t.Errorf("call %d (%+v): rejection names %q/%q", i, c, rej.Principal, rej.Label)
					}
					retryAfter = append(retryAfter, rej.RetryAfter)
					byLabel = append(byLabel, rej.Label != "")
				}
			}
			if !slices.Equal(retryAfter, tc.wantRetryAfter) {
				t.Errorf("RetryAfter %v, want %v", retryAfter, tc.wantRetryAfter)
			}
			if !slices.Equal(byLabel, tc.wantByLabel) {
				t.Errorf("rejected by the label's limit: %v, want %v", byLabel, tc.wantByLabel)
			}
			if got := h.limiter.Stats(); !slices.Equal(got, tc.wantStats) {
				t.Errorf("stats:\n got %+v\nwant %+v", got, tc.wantStats)
			}
		})
	}
}

func TestRejectedErrorNamesTheLabel(t *testing.T) {
	err := (&RejectedError{Principal: "spark", Label: "batch", RetryAfter: time.Second}).Error()
	if !strings.Contains(err, `"spark"`) || !strings.Contains(err, `"batch"`) {
		t.Errorf("%q names neither principal nor label", err)
	}
	err = (&RejectedError{Principal: "spark", RetryAfter: time.Second}).Error()
	if strings.Contains(err, "label") {
		t.Errorf("%q names a label the call had not", err)
	}
}

// runSettled advances the clock by step until end. After each step it lets
// every call released at that instant reach its next queue, or return,
// before the clock moves on: a labeled call leaves its label's queue for its
// principal's in its own goroutine. It returns when each call proceeded,
// after fakeclock.Epoch.
func (h *harness) runSettled(clock *fakeclock.Clock, step, end time.Duration, calls int) map[int]time.Duration {
	h.t.Helper()
	got := map[int]time.Duration{}
	for {
		var processed uint64
		waitFor(h.t, func() bool {
			var waiting uint64
			processed = 0
			for _, s := range h.limiter.Stats() {
				processed += s.Processed
				waiting += uint64(s.QueueDepth)
			}
			return processed+waiting == uint64(calls)
		})
		for uint64(len(got)) < processed {
			o := h.next()
			if o.err != nil {
				h.t.Fatalf("call %d: %v", o.index, o.err)
			}
			got[o.index] = o.at.Sub(fakeclock.Epoch)
		}
		if clock.Elapsed() >= end {
			h.expectNone()
			return got
		}
		clock.Advance(step)
	}
}

// TestLabelServiceTimes runs the two levels with a fake clock: labeled calls
// are served at their label's rate and, with every call of the principal,
// at the principal's; unlabeled calls only at the principal's.
func TestLabelServiceTimes(t *testing.T) {
	const step = 100 * time.Millisecond
	tests := map[string]struct {
		cfg   Config
		calls []call
		end   time.Duration
		want  map[int]time.Duration
	}{
		// spark 10/s; its batch frameworks 2/s. The batch calls go on at
		// the label's pace, the unlabeled ones at the principal's between
		// them.
		"label slower than its principal": {
			cfg: Config{Limits: []Limit{
				{Principal: "spark", QPS: qps(10), Burst: 1, Capacity: 100},
				{Principal: "spark", Label: "batch", QPS: qps(2), Burst: 1, Capacity: 100},
			}},
			calls: []call{
				{"spark", "batch"}, {"spark", "batch"}, {"spark", "batch"},
				{"spark", ""}, {"spark", ""}, {"spark", ""},
			},
			end: 1500 * time.Millisecond,
			want: map[int]time.Duration{
				0: 0, 1: 500 * time.Millisecond, 2: 1000 * time.Millisecond,
				3: 100 * time.Millisecond, 4: 200 * time.Millisecond, 5: 300 * time.Millisecond,
			},
		},
		// spark 2/s caps its labels a (10/s) and b (5/s) together: each
		// label's call joins the principal's queue when its label lets it
		// go, and the principal serves them in that order.
		"labels faster than their principal": {
			cfg: Config{Limits: []Limit{
				{Principal: "spark", QPS: qps(2), Burst: 1, Capacity: 100},
				{Principal: "spark", Label: "a", QPS: qps(10), Burst: 1, Capacity: 100},
				{Principal: "spark", Label: "b", QPS: qps(5), Burst: 1, Capacity: 100},
			}},
			calls: []call{{"spark", "a"}, {"spark", "b"}, {"spark", "a"}, {"spark", "b"}, {"spark", ""}},
			end:   2500 * time.Millisecond,
			want: map[int]time.Duration{
				0: 0,                       // a's token, spark's token
				1: 500 * time.Millisecond,  // b's token, first in spark's queue
				4: 1000 * time.Millisecond, // queued in spark's at once
				2: 1500 * time.Millisecond, // a lets it go at 100ms
				3: 2000 * time.Millisecond, // b lets it go at 200ms
			},
		},
		// The aggregate default caps a labeled principal that has no
		// limit of its own, together with the other unnamed principals.
		"label of an unnamed principal under the default": {
			cfg: Config{
				Limits:  []Limit{{Principal: "spark", Label: "batch", QPS: qps(5), Burst: 1, Capacity: 100}},
				Default: &Default{QPS: qps(10), Burst: 1, Capacity: 100},
			},
			calls: []call{{"spark", "batch"}, {"spark", "batch"}, {"anon", ""}, {"anon", ""}, {"anon", ""}},
			end:   time.Second,
			want: map[int]time.Duration{
				0: 0, 2: 100 * time.Millisecond, 3: 200 * time.Millisecond,
				// batch lets it go at 200ms, behind anon's third call.
				4: 300 * time.Millisecond, 1: 400 * time.Millisecond,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, clock := newHarness(t, tc.cfg)
			for i, c := range tc.calls {
				h.startLabeled(t.Context(), c.principal, c.label, i)
			}
			got := h.runSettled(clock, step, tc.end, len(tc.calls))
			if !maps.Equal(got, tc.want) {
				t.Errorf("served at\n got %v\nwant %v", got, tc.want)
			}
			for _, s := range h.limiter.Stats() {
				if s.Received != s.Processed || s.QueueDepth != 0 || s.Rejected != 0 {
					t.Errorf("after the run: %+v", s)
				}
			}
			if n := clock.Pending(); n != 0 {
				t.Errorf("%d timers left with empty queues", n)
			}
		})
	}
}

// TestLabelQueueCapacity checks that each bucket has its own queue: a label's
// full queue rejects its calls while the principal's still has room.
func TestLabelQueueCapacity(t *testing.T) {
	h, clock := newHarness(t, Config{Limits: []Limit{
		{Principal: "spark", QPS: qps(10), Burst: 1, Capacity: 5},
		{Principal: "spark", Label: "batch", QPS: qps(1), Burst: 1, Capacity: 1},
	}})
	h.startLabeled(t.Context(), "spark", "batch", 0) // passes both
	h.startLabeled(t.Context(), "spark", "batch", 1) // queued under batch
	h.startLabeled(t.Context(), "spark", "batch", 2) // batch's queue is full
	h.start(t.Context(), "spark", 3)                 // queued under spark
	rej := h.nextRejected()
	var re *RejectedError
	if rej.index != 2 || !errors.As(rej.err, &re) || re.Label != "batch" || re.RetryAfter != time.Second {
		t.Fatalf("rejection %+v, want call 2 of batch told to retry after 1s", rej)
	}
	got := h.runSettled(clock, 100*time.Millisecond, time.Second, 3)
	want := map[int]time.Duration{0: 0, 3: 100 * time.Millisecond, 1: time.Second}
	if !maps.Equal(got, want) {
		t.Errorf("served at %v, want %v", got, want)
	}
	wantStats := []Stats{
		{Principal: "spark", Received: 1, Processed: 1},
		{Principal: "spark", Label: "batch", Received: 3, Processed: 2, Rejected: 1},
	}
	if got := h.limiter.Stats(); !slices.Equal(got, wantStats) {
		t.Errorf("stats:\n got %+v\nwant %+v", got, wantStats)
	}
}

// TestLabelUpdateWithQueuedCalls changes labeled limits while calls wait.
func TestLabelUpdateWithQueuedCalls(t *testing.T) {
	spark := Limit{Principal: "spark", QPS: qps(10), Burst: 1, Capacity: 100}
	batch := Limit{Principal: "spark", Label: "batch", QPS: qps(1), Burst: 1, Capacity: 100}
	tests := map[string]struct {
		initial, update Config
		want            map[int]time.Duration
	}{
		// Calls queued under batch move to the back of spark's queue,
		// their last wait.
		"label loses its limit": {
			initial: Config{Limits: []Limit{spark, batch}},
			update:  Config{Limits: []Limit{spark}},
			want:    map[int]time.Duration{0: 0, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond},
		},
		"label's limit becomes unthrottled": {
			initial: Config{Limits: []Limit{spark, batch}},
			update:  Config{Limits: []Limit{spark, {Principal: "spark", Label: "batch"}}},
			want:    map[int]time.Duration{0: 0, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond},
		},
		// Without any limit for spark the calls go on at once.
		"label and principal lose their limits": {
			initial: Config{Limits: []Limit{spark, batch}},
			update:  Config{},
			want:    map[int]time.Duration{0: 0, 1: 0, 2: 0},
		},
		// A faster label serves its queue at the new rate; the principal
		// still spaces the calls.
		"label's limit is raised": {
			initial: Config{Limits: []Limit{spark, batch}},
			update:  Config{Limits: []Limit{spark, {Principal: "spark", Label: "batch", QPS: qps(5), Burst: 1, Capacity: 100}}},
			want:    map[int]time.Duration{0: 0, 1: 200 * time.Millisecond, 2: 400 * time.Millisecond},
		},
		// The principal's limit is removed: the label alone throttles.
		"principal loses its limit": {
			initial: Config{Limits: []Limit{spark, batch}},
			update:  Config{Limits: []Limit{batch}},
			want:    map[int]time.Duration{0: 0, 1: time.Second, 2: 2 * time.Second},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, clock := newHarness(t, tc.initial)
			for i := range 3 {
				h.startLabeled(t.Context(), "spark", "batch", i)
			}
			if err := h.limiter.Update(tc.update); err != nil {
				t.Fatalf("Update: %v", err)
			}
			got := h.runSettled(clock, 100*time.Millisecond, 2*time.Second, 3)
			if !maps.Equal(got, tc.want) {
				t.Errorf("served at\n got %v\nwant %v", got, tc.want)
			}
			if s := statsOfLabel(h.limiter, "spark", "batch"); s.Received != 3 || s.Processed != 3 || s.QueueDepth != 0 {
				t.Errorf("batch's counters: %+v", s)
			}
		})
	}
}

// TestLabelAddedWhileQueued gives a label a limit while its calls wait in
// their principal's queue: they were admitted there and leave from there.
func TestLabelAddedWhileQueued(t *testing.T) {
	spark := Limit{Principal: "spark", QPS: qps(10), Burst: 1, Capacity: 100}
	h, clock := newHarness(t, Config{Limits: []Limit{spark}})
	for i := range 3 {
		h.startLabeled(t.Context(), "spark", "batch", i)
	}
	if err := h.limiter.Update(Config{Limits: []Limit{spark, {Principal: "spark", Label: "batch", QPS: qps(1), Capacity: 10}}}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	h.startLabeled(t.Context(), "spark", "batch", 3) // batch's token, then spark's queue
	h.startLabeled(t.Context(), "spark", "batch", 4) // batch's queue
	got := h.runSettled(clock, 100*time.Millisecond, 2*time.Second, 5)
	want := map[int]time.Duration{0: 0, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 300 * time.Millisecond, 4: time.Second}
	if !maps.Equal(got, want) {
		t.Errorf("served at\n got %v\nwant %v", got, want)
	}
}

func TestCloseReleasesLabeledCalls(t *testing.T) {
	h, _ := newHarness(t, Config{Limits: []Limit{{Principal: "spark", Label: "batch", QPS: qps(1), Capacity: 10}}})
	h.startLabeled(t.Context(), "spark", "batch", 0)
	h.startLabeled(t.Context(), "spark", "batch", 1)
	if o := h.next(); o.index != 0 || o.err != nil {
		t.Fatalf("first call: %+v", o)
	}
	h.limiter.Close()
	if o := h.next(); o.index != 1 || !errors.Is(o.err, ErrClosed) {
		t.Fatalf("queued call after Close: %+v, want ErrClosed", o)
	}
	if err := h.limiter.Wait(t.Context(), "spark", "batch"); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
}

// TestLabelsAreBounded checks that labels, which come from frameworks, cannot
// grow the counters without bound nor escape their principal's limit once
// too many are tracked.
func TestLabelsAreBounded(t *testing.T) {
	h, _ := newHarness(t, Config{Limits: []Limit{{Principal: "spark", QPS: qps(1), Burst: 3}}}, WithMaxTrackedPrincipals(2))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var passed int
	for _, label := range []string{"a", "b", "c", "d", strings.Repeat("x", 300)} {
		if err := h.limiter.Wait(ctx, "spark", label); err == nil {
			passed++
		} else if !errors.Is(err, ErrRejected) {
			t.Fatalf("label %.10q: %v", label, err)
		}
	}
	if passed != 3 {
		t.Errorf("%d calls passed, want spark's burst of 3 whatever their labels", passed)
	}
	want := []Stats{
		// Exported once the table is full, as for unnamed principals.
		{Principal: OverflowPrincipal},
		{Principal: "spark", Received: 3, Processed: 1, Rejected: 2},
		{Principal: "spark", Label: "a", Received: 1, Processed: 1},
		{Principal: "spark", Label: "b", Received: 1, Processed: 1},
	}
	if got := h.limiter.Stats(); !slices.Equal(got, want) {
		t.Errorf("stats:\n got %+v\nwant %+v", got, want)
	}
}

func TestValidateLabels(t *testing.T) {
	tests := map[string]struct {
		cfg     Config
		wantErr string
	}{
		"same label twice": {
			cfg:     Config{Limits: []Limit{{Principal: "spark", Label: "a"}, {Principal: "spark", Label: "a", QPS: qps(1)}}},
			wantErr: `principal "spark" with label "a" is listed twice`,
		},
		"label not UTF-8": {
			cfg:     Config{Limits: []Limit{{Principal: "spark", Label: "\xff"}}},
			wantErr: "not valid UTF-8",
		},
		"bad qps on a label": {
			cfg:     Config{Limits: []Limit{{Principal: "spark", Label: "a", QPS: qps(-1)}}},
			wantErr: `principal "spark" label "a"`,
		},
		"a label beside its principal is fine": {
			cfg: Config{Limits: []Limit{{Principal: "spark"}, {Principal: "spark", Label: "a"}, {Principal: "flink", Label: "a"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, _ := newHarness(t, Config{Limits: []Limit{{Principal: "spark", Label: "keep", QPS: qps(1)}}})
			err := h.limiter.Update(tc.cfg)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Update: %v, want %q", err, tc.wantErr)
			}
			// The old configuration still runs: keep's one token.
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := h.limiter.Wait(ctx, "spark", "keep"); err != nil {
				t.Fatalf("first call: %v", err)
			}
			if err := h.limiter.Wait(ctx, "spark", "keep"); !errors.Is(err, ErrRejected) {
				t.Fatalf("second call: %v, want the old limit to reject it", err)
			}
		})
	}
}
