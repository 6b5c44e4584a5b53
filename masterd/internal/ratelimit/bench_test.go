package ratelimit

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

// BenchmarkWait measures the request path when a call needs no wait: the
// check every scheduler and operator call pays. It runs the real clock.
func BenchmarkWait(b *testing.B) {
	// Enough tokens that no call ever waits: one per nanosecond and a burst
	// of about twenty minutes.
	plenty := func(principal string) Limit {
		return Limit{Principal: principal, QPS: qps(1e9), Burst: 1 << 40, Capacity: 1000}
	}
	plentyDefault := &Default{QPS: qps(1e9), Burst: 1 << 40, Capacity: 1000}
	labeled := func(principal, label string) Limit {
		l := plenty(principal)
		l.Label = label
		return l
	}
	cases := []struct {
		name       string
		cfg        Config
		principals []string
		label      string
	}{
		{"limiter=none", Config{Limits: []Limit{plenty("spark")}}, []string{"anon"}, ""},
		{"limiter=named-without-qps", Config{Limits: []Limit{{Principal: "spark"}}}, []string{"spark"}, ""},
		{"limiter=named", Config{Limits: []Limit{plenty("spark")}}, []string{"spark"}, ""},
		{"limiter=default", Config{Limits: []Limit{plenty("spark")}, Default: plentyDefault}, []string{"anon"}, ""},
		{"limiter=default/principals=1000", Config{Default: plentyDefault}, principalNames(1000), ""},
		// A labeled call waits in two buckets, its label's and its
		// principal's.
		{"limiter=labeled", Config{Limits: []Limit{plenty("spark"), labeled("spark", "batch")}}, []string{"spark"}, "batch"},
		// A label without a limit of its own only has counters apart.
		{"limiter=label-without-limit", Config{Limits: []Limit{plenty("spark")}}, []string{"spark"}, "batch"},
	}
	for _, c := range cases {
		for _, parallel := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/parallel=%t", c.name, parallel), func(b *testing.B) {
				l, err := New(c.cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				ctx := context.Background()
				// Every principal is tracked before timing starts.
				for _, p := range c.principals {
					if err := l.Wait(ctx, p, c.label); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				if !parallel {
					i := 0
					for b.Loop() {
						if err := l.Wait(ctx, c.principals[i], c.label); err != nil {
							b.Fatal(err)
						}
						if i++; i == len(c.principals) {
							i = 0
						}
					}
					return
				}
				var worker atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					// Workers start at different principals.
					i := int(worker.Add(1)*7919) % len(c.principals)
					for pb.Next() {
						if err := l.Wait(ctx, c.principals[i], c.label); err != nil {
							b.Error(err)
							return
						}
						if i++; i == len(c.principals) {
							i = 0
						}
					}
				})
			})
		}
	}
}

func principalNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("framework-%d", i)
	}
	return out
}
