package cgroups

import (
	"math"

	"github.com/allot/allot/masterd/api"
)

// The kernel's bounds for cpu.shares (v1 MIN_SHARES, MAX_SHARES) and
// cpu.cfs_quota_us (1 ms): values outside them are refused with EINVAL.
const (
	minCPUShares     uint64 = 2
	maxCPUShares     uint64 = 1 << 18
	minCPUQuotaMicro int64  = 1000
	defaultCPUShares uint64 = 1024
	bytesPerMiB             = 1 << 20
)

// SpecFor maps a task's requests and limits (cpus in cores, mem in MiB) to
// what its cgroup enforces, as in the Mesos task-limits design:
//
//   - cpu request → CPUShares = 1024 × cpus (at least the kernel's 2, so
//     a task that asks for no cpu still runs, last in line);
//   - cpu limit → CPUQuotaMicros = cpus × period (at least the kernel's
//     1 ms); "Infinity" → Unlimited; no limit → no quota;
//   - mem request → MemorySoftBytes;
//   - mem limit → MemoryLimitBytes, or the request when there is no
//     limit (a task never bursts past its request unless its limit says
//     so); "Infinity" → Unlimited.
//
// Requests and limits are validated before they reach the agent; values
// that are not positive finite numbers are treated as absent here rather
// than written to the kernel.
func SpecFor(requests api.Resources, limits api.Limits) Spec {
	spec := Spec{CPUShares: cpuShares(requests["cpus"])}
	if limit, ok := limits["cpus"]; ok {
		switch {
		case limit.Infinite:
			spec.CPUQuotaMicros = Unlimited
		case positive(limit.Value):
			spec.CPUQuotaMicros = cpuQuota(limit.Value, DefaultCPUPeriodMicros)
		}
	}
	spec.MemorySoftBytes = mibToBytes(requests["mem"])
	spec.MemoryLimitBytes = spec.MemorySoftBytes
	if limit, ok := limits["mem"]; ok {
		switch {
		case limit.Infinite:
			spec.MemoryLimitBytes = Unlimited
		case positive(limit.Value):
			spec.MemoryLimitBytes = mibToBytes(limit.Value)
		}
	}
	return spec
}

// TaskResources are one task's requests and limits.
type TaskResources struct {
	Requests api.Resources
	Limits   api.Limits
}

// GroupSpecFor is what the executor cgroup of a task group enforces: the
// executor's own resources plus the sums of its tasks' requests (soft) and
// of their memory limits, or requests where a task has none (hard). A task
// without a cpu limit may burst, so the group gets a cpu quota only when
// every task has a finite one.
func GroupSpecFor(executor api.Resources, tasks []TaskResources) Spec {
	requests := api.Resources{}.Add(executor)
	memLimit := api.Limit{Value: requests["mem"]}
	cpuLimit := api.Limit{Value: requests["cpus"]}
	for _, t := range tasks {
		requests.Add(t.Requests)
		if l, ok := t.Limits["mem"]; ok {
			memLimit = api.Limit{Value: memLimit.Value + l.Value, Infinite: memLimit.Infinite || l.Infinite}
		} else {
			memLimit.Value += t.Requests["mem"]
		}
		if l, ok := t.Limits["cpus"]; ok && !l.Infinite {
			cpuLimit.Value += l.Value
		} else {
			cpuLimit.Infinite = true
		}
	}
	return SpecFor(requests, api.Limits{"mem": memLimit, "cpus": cpuLimit})
}

func (s Spec) period() uint64 {
	if s.CPUPeriodMicros == 0 {
		return DefaultCPUPeriodMicros
	}
	return s.CPUPeriodMicros
}

func cpuShares(cpus float64) uint64 {
	if !positive(cpus) {
		return minCPUShares
	}
	shares := math.Round(cpus * float64(defaultCPUShares))
	if shares >= float64(maxCPUShares) {
		return maxCPUShares
	}
	return max(uint64(shares), minCPUShares)
}

func cpuQuota(cores float64, period uint64) int64 {
	quota := math.Round(cores * float64(period))
	if quota >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return max(int64(quota), minCPUQuotaMicro)
}

func mibToBytes(mib float64) int64 {
	if !positive(mib) {
		return 0
	}
	b := math.Round(mib * bytesPerMiB)
	if b >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(b)
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
