package ratelimit

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gather returns every sample the registry exports as
// "metric{principal}" → value, or "metric{principal,label}" for a label
// other than "".
func gather(t *testing.T, l *Limiter) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(l); err != nil {
		t.Fatalf("register: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := fmt.Sprintf("%s{%s}", f.GetName(), principalLabel(m))
			switch label := labelOf(m); label {
			case "":
			case "-":
				t.Fatalf("%s has no label label", key)
			default:
				key = fmt.Sprintf("%s{%s,%s}", f.GetName(), principalLabel(m), label)
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s has type %v", key, f.GetType())
			}
		}
	}
	return out
}

func principalLabel(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "principal" {
			return l.GetValue()
		}
	}
	return "-"
}

func labelOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "label" {
			return l.GetValue()
		}
	}
	return "-"
}

func TestCollectorLabels(t *testing.T) {
	h, _ := newHarness(t, Config{Limits: []Limit{
		{Principal: "spark", QPS: qps(1), Burst: 2, Capacity: 1},
		{Principal: "spark", Label: "batch", QPS: qps(1), Capacity: 1},
		{Principal: "spark", Label: "idle", QPS: qps(1)},
	}})
	calls := []call{{"spark", "batch"}, {"spark", "batch"}, {"spark", "batch"}, {"spark", "web"}, {"spark", ""}, {"spark", ""}}
	for i, c := range calls {
		h.startLabeled(t.Context(), c.principal, c.label, i)
	}
	got := gather(t, h.limiter)
	want := map[string]float64{
		// One passed both buckets, one waits under batch, one found
		// batch's queue full.
		"allot_framework_messages_received_total{spark,batch}":  3,
		"allot_framework_messages_processed_total{spark,batch}": 1,
		"allot_ratelimit_rejected_total{spark,batch}":           1,
		"allot_ratelimit_queue_depth{spark,batch}":              1,
		// web has no limit: spark's second token.
		"allot_framework_messages_received_total{spark,web}":  1,
		"allot_framework_messages_processed_total{spark,web}": 1,
		"allot_ratelimit_rejected_total{spark,web}":           0,
		"allot_ratelimit_queue_depth{spark,web}":              0,
		// spark's own calls: one queued, one rejected.
		"allot_framework_messages_received_total{spark}":  2,
		"allot_framework_messages_processed_total{spark}": 0,
		"allot_ratelimit_rejected_total{spark}":           1,
		"allot_ratelimit_queue_depth{spark}":              1,
		// A configured label is exported before its first call.
		"allot_framework_messages_received_total{spark,idle}":  0,
		"allot_framework_messages_processed_total{spark,idle}": 0,
		"allot_ratelimit_rejected_total{spark,idle}":           0,
		"allot_ratelimit_queue_depth{spark,idle}":              0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics:\n got %v\nwant %v", got, want)
	}
}

func TestCollector(t *testing.T) {
	h, _ := newHarness(t, Config{
		Limits:  []Limit{{Principal: "spark", QPS: qps(1), Capacity: 1}, {Principal: "idle", QPS: qps(1)}},
		Default: &Default{QPS: qps(1)},
	})
	for i, p := range []string{"spark", "spark", "spark", "a", "a", ""} {
		h.start(t.Context(), p, i)
	}
	got := gather(t, h.limiter)
	want := map[string]float64{
		"allot_framework_messages_received_total{spark}":  3,
		"allot_framework_messages_processed_total{spark}": 1,
		"allot_ratelimit_rejected_total{spark}":           1,
		"allot_ratelimit_queue_depth{spark}":              1,
		"allot_framework_messages_received_total{a}":      2,
		"allot_framework_messages_processed_total{a}":     1,
		"allot_ratelimit_rejected_total{a}":               1,
		"allot_ratelimit_queue_depth{a}":                  0,
		// The empty principal exports an empty label.
		"allot_framework_messages_received_total{}":  1,
		"allot_framework_messages_processed_total{}": 0,
		"allot_ratelimit_rejected_total{}":           1,
		"allot_ratelimit_queue_depth{}":              0,
		// A configured principal is exported before its first call.
		"allot_framework_messages_received_total{idle}":  0,
		"allot_framework_messages_processed_total{idle}": 0,
		"allot_ratelimit_rejected_total{idle}":           0,
		"allot_ratelimit_queue_depth{idle}":              0,
	}
	if !maps.Equal(got, want) {
		t.Errorf("metrics:\n got %v\nwant %v", got, want)
	}
}

func TestUnnamedPrincipalsAreBounded(t *testing.T) {
	tests := map[string]struct {
		cfg        Config
		wantOther  Stats
		wantPassed int
	}{
		// Overflowing principals still meet the default limiter.
		"with a default limiter": {
			cfg:        Config{Default: &Default{QPS: qps(1), Burst: 5}},
			wantOther:  Stats{Principal: OverflowPrincipal, Received: 7, Processed: 2, Rejected: 5},
			wantPassed: 5,
		},
		"without one": {
			cfg:        Config{},
			wantOther:  Stats{Principal: OverflowPrincipal, Received: 7, Processed: 7},
			wantPassed: 10,
		},
		// A principal literally called "other" shares its counters with
		// the overflow, so that no two series carry the same label.
		"with a principal called other": {
			cfg: Config{
				Limits:  []Limit{{Principal: OverflowPrincipal, QPS: qps(100)}},
				Default: &Default{QPS: qps(1), Burst: 5},
			},
			wantOther:  Stats{Principal: OverflowPrincipal, Received: 8, Processed: 3, Rejected: 5},
			wantPassed: 5,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, _ := newHarness(t, tc.cfg, WithMaxTrackedPrincipals(3))
			passed := 0
			for i := range 10 {
				if h.limiter.Wait(t.Context(), fmt.Sprintf("p%d", i), "") == nil {
					passed++
				}
			}
			if tc.cfg.Limits != nil {
				if err := h.limiter.Wait(t.Context(), OverflowPrincipal, ""); err != nil {
					t.Fatalf("call of the principal named %q: %v", OverflowPrincipal, err)
				}
			}
			if passed != tc.wantPassed {
				t.Errorf("%d calls passed, want %d", passed, tc.wantPassed)
			}
			var names []string
			for _, s := range h.limiter.Stats() {
				names = append(names, s.Principal)
			}
			if want := fmt.Sprint([]string{OverflowPrincipal, "p0", "p1", "p2"}); fmt.Sprint(names) != want {
				t.Errorf("tracked principals %v, want %v", names, want)
			}
			if got := statsOf(h.limiter, OverflowPrincipal); got != tc.wantOther {
				t.Errorf("overflow: %+v, want %+v", got, tc.wantOther)
			}
			// The registry refuses duplicate series, so gathering is the check.
			gather(t, h.limiter)
		})
	}
}

func TestUntrackablePrincipalsUseOverflow(t *testing.T) {
	h, _ := newHarness(t, Config{Default: &Default{QPS: qps(1), Burst: 1}})
	for _, p := range []string{strings.Repeat("x", 257), "a\xff", "a\xfe"} {
		if err := h.limiter.Wait(t.Context(), p, ""); err != nil && !errors.Is(err, ErrRejected) {
			t.Fatalf("call of %q: %v", p, err)
		}
	}
	// They still share the default limiter: one token for three calls.
	want := []Stats{{Principal: OverflowPrincipal, Received: 3, Processed: 1, Rejected: 2}}
	if got := h.limiter.Stats(); !slices.Equal(got, want) {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	gather(t, h.limiter)
}

// TestManyPrincipalsAreTracked checks that principals seen between two
// promotions of the snapshot are counted as exactly as the others.
func TestManyPrincipalsAreTracked(t *testing.T) {
	h, _ := newHarness(t, Config{})
	const n = 2000
	for round := range 3 {
		for i := range n {
			if err := h.limiter.Wait(t.Context(), fmt.Sprintf("p%d", i), ""); err != nil {
				t.Fatalf("round %d, call %d: %v", round, i, err)
			}
		}
	}
	got := h.limiter.Stats()
	if len(got) != n {
		t.Fatalf("%d principals tracked, want %d", len(got), n)
	}
	for _, s := range got {
		if s.Received != 3 || s.Processed != 3 {
			t.Errorf("%+v, want 3 calls received and processed", s)
		}
	}
	if s := h.limiter.snapshot.Load(); len(s.entries) != n {
		t.Errorf("snapshot holds %d principals, want all %d", len(s.entries), n)
	}
}
