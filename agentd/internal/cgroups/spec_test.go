package cgroups

import (
	"math"
	"testing"

	"github.com/allot/allot/masterd/api"
)

const mib = 1 << 20

func TestSpecFor(t *testing.T) {
	for name, tc := range map[string]struct {
		requests api.Resources
		limits   api.Limits
		want     Spec
	}{
		"requests only: hard memory limit is the request": {
			requests: api.Resources{"cpus": 0.5, "mem": 128},
			want:     Spec{CPUShares: 512, MemorySoftBytes: 128 * mib, MemoryLimitBytes: 128 * mib},
		},
		"cpu and memory limits": {
			requests: api.Resources{"cpus": 1, "mem": 64},
			limits:   api.Limits{"cpus": {Value: 2.5}, "mem": {Value: 256}},
			want:     Spec{CPUShares: 1024, CPUQuotaMicros: 250000, MemorySoftBytes: 64 * mib, MemoryLimitBytes: 256 * mib},
		},
		"Infinity limits": {
			requests: api.Resources{"cpus": 0.25, "mem": 32},
			limits:   api.Limits{"cpus": {Infinite: true}, "mem": {Infinite: true}},
			want:     Spec{CPUShares: 256, CPUQuotaMicros: Unlimited, MemorySoftBytes: 32 * mib, MemoryLimitBytes: Unlimited},
		},
		"tiny cpu request gets the kernel's minimum shares": {
			requests: api.Resources{"cpus": 0.001},
			want:     Spec{CPUShares: 2},
		},
		"no cpu request gets the minimum shares, not the default": {
			requests: api.Resources{"mem": 1},
			want:     Spec{CPUShares: 2, MemorySoftBytes: mib, MemoryLimitBytes: mib},
		},
		"tiny cpu limit gets the kernel's minimum quota": {
			requests: api.Resources{"cpus": 0.001},
			limits:   api.Limits{"cpus": {Value: 0.001}},
			want:     Spec{CPUShares: 2, CPUQuotaMicros: 1000},
		},
		"huge cpu request is capped at the kernel's maximum shares": {
			requests: api.Resources{"cpus": 1e6},
			want:     Spec{CPUShares: 262144},
		},
		"fractional MiB round to bytes": {
			requests: api.Resources{"cpus": 1, "mem": 0.5},
			want:     Spec{CPUShares: 1024, MemorySoftBytes: mib / 2, MemoryLimitBytes: mib / 2},
		},
		"memory limit without request": {
			requests: api.Resources{"cpus": 1},
			limits:   api.Limits{"mem": {Value: 10}},
			want:     Spec{CPUShares: 1024, MemoryLimitBytes: 10 * mib},
		},
		"values that are not positive finite numbers are ignored": {
			requests: api.Resources{"cpus": math.NaN(), "mem": -5},
			limits:   api.Limits{"cpus": {Value: math.Inf(1)}, "mem": {Value: -1}},
			want:     Spec{CPUShares: 2},
		},
		"nothing at all": {
			want: Spec{CPUShares: 2},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := SpecFor(tc.requests, tc.limits); got != tc.want {
				t.Errorf("SpecFor(%v, %v)\n got %+v\nwant %+v", tc.requests, tc.limits, got, tc.want)
			}
		})
	}
}

func TestSpecAdd(t *testing.T) {
	limited := Spec{CPUShares: 1024, CPUQuotaMicros: 150000, MemorySoftBytes: 64 * mib, MemoryLimitBytes: 128 * mib}
	unlimited := Spec{CPUShares: 512, CPUQuotaMicros: Unlimited, MemorySoftBytes: 32 * mib, MemoryLimitBytes: Unlimited}
	requestsOnly := Spec{CPUShares: 512, MemorySoftBytes: 32 * mib, MemoryLimitBytes: 32 * mib}
	noLimits := Spec{CPUShares: 256}
	for name, tc := range map[string]struct {
		a, b, want Spec
	}{
		"limits and requests add up": {
			a: limited, b: limited,
			want: Spec{CPUShares: 2048, CPUQuotaMicros: 300000, MemorySoftBytes: 128 * mib, MemoryLimitBytes: 256 * mib},
		},
		"Unlimited absorbs": {
			a: limited, b: unlimited,
			want: Spec{CPUShares: 1536, CPUQuotaMicros: Unlimited, MemorySoftBytes: 96 * mib, MemoryLimitBytes: Unlimited},
		},
		"a spec without a cpu limit adds its request to the other's limit": {
			a: limited, b: requestsOnly,
			want: Spec{CPUShares: 1536, CPUQuotaMicros: 200000, MemorySoftBytes: 96 * mib, MemoryLimitBytes: 160 * mib},
		},
		"without any limit the sum has none": {
			a: noLimits, b: noLimits,
			want: Spec{CPUShares: 512},
		},
		"the zero Spec is the empty sum": {
			a: Spec{}, b: limited,
			want: limited,
		},
		"periods that differ are summed over the default period": {
			a:    Spec{CPUQuotaMicros: 50000, CPUPeriodMicros: 50000},
			b:    Spec{CPUQuotaMicros: 100000},
			want: Spec{CPUQuotaMicros: 200000},
		},
		"a shared period is kept": {
			a:    Spec{CPUQuotaMicros: 20000, CPUPeriodMicros: 50000},
			b:    Spec{CPUQuotaMicros: 30000, CPUPeriodMicros: 50000},
			want: Spec{CPUQuotaMicros: 50000, CPUPeriodMicros: 50000},
		},
		"shares saturate at the kernel's maximum": {
			a: Spec{CPUShares: 200000}, b: Spec{CPUShares: 200000},
			want: Spec{CPUShares: 262144},
		},
		"memory sums do not overflow into Unlimited": {
			a: Spec{MemoryLimitBytes: math.MaxInt64 / 2}, b: Spec{MemoryLimitBytes: math.MaxInt64 / 2},
			want: Spec{MemoryLimitBytes: math.MaxInt64 / 2},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.Add(tc.b); got != tc.want {
				t.Errorf("%+v.Add(%+v)\n got %+v\nwant %+v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Add(tc.a); got != tc.want {
				t.Errorf("%+v.Add(%+v) (swapped)\n got %+v\nwant %+v", tc.b, tc.a, got, tc.want)
			}
		})
	}
}

// A task group's executor spec is the same whatever order its tasks come in.
func TestSpecAddIsAssociative(t *testing.T) {
	specs := []Spec{
		SpecFor(api.Resources{"cpus": 0.5, "mem": 100}, api.Limits{"cpus": {Value: 1}}),
		SpecFor(api.Resources{"cpus": 0.25, "mem": 50}, nil),
		SpecFor(api.Resources{"cpus": 1, "mem": 10}, api.Limits{"mem": {Value: 20}}),
	}
	left := specs[0].Add(specs[1]).Add(specs[2])
	right := specs[0].Add(specs[1].Add(specs[2]))
	var folded Spec
	for _, s := range []Spec{specs[2], specs[0], specs[1]} {
		folded = folded.Add(s)
	}
	if left != right || left != folded {
		t.Errorf("sums differ: (a+b)+c %+v, a+(b+c) %+v, fold %+v", left, right, folded)
	}
	want := Spec{CPUShares: 1792, CPUQuotaMicros: 225000, MemorySoftBytes: 160 * mib, MemoryLimitBytes: 170 * mib}
	if left != want {
		t.Errorf("sum %+v, want %+v", left, want)
	}
}
