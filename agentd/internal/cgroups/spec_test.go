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
