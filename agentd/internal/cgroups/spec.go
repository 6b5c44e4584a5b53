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

// Add sums two specs, for the executor cgroup of a task group whose tasks
// have their own nested cgroups: requests (shares, soft bytes) add up, and
// so do hard limits, where Unlimited absorbs everything. A spec without a
// hard limit (0) contributes its request to the other's limit, as the
// Mesos design counts a task without a limit into its executor's hard
// limit with its request; when neither has one the sum has none either.
// Spec{} is the empty sum. Add is commutative and associative (up to
// rounding to whole microseconds and bytes).
func (s Spec) Add(o Spec) Spec {
	period := s.period()
	if o.period() != period {
		period = DefaultCPUPeriodMicros
	}
	sum := Spec{
		CPUShares:       min(s.CPUShares+o.CPUShares, maxCPUShares),
		MemorySoftBytes: addBytes(positiveOrZero(s.MemorySoftBytes), positiveOrZero(o.MemorySoftBytes)),
	}
	switch {
	case s.CPUQuotaMicros == Unlimited || o.CPUQuotaMicros == Unlimited:
		sum.CPUQuotaMicros = Unlimited
	case s.CPUQuotaMicros > 0 || o.CPUQuotaMicros > 0:
		cores := s.cpuLimitOrRequest() + o.cpuLimitOrRequest()
		sum.CPUQuotaMicros = cpuQuota(cores, period)
		if period != DefaultCPUPeriodMicros {
			sum.CPUPeriodMicros = period
		}
	}
	switch {
	case s.MemoryLimitBytes == Unlimited || o.MemoryLimitBytes == Unlimited:
		sum.MemoryLimitBytes = Unlimited
	case s.MemoryLimitBytes > 0 || o.MemoryLimitBytes > 0:
		sum.MemoryLimitBytes = addBytes(s.memoryLimitOrRequest(), o.memoryLimitOrRequest())
	}
	return sum
}

func (s Spec) period() uint64 {
	if s.CPUPeriodMicros == 0 {
		return DefaultCPUPeriodMicros
	}
	return s.CPUPeriodMicros
}

// cpuLimitOrRequest is the spec's cpu limit in cores, or its request (from
// its shares) when it has no quota.
func (s Spec) cpuLimitOrRequest() float64 {
	if s.CPUQuotaMicros > 0 {
		return float64(s.CPUQuotaMicros) / float64(s.period())
	}
	return float64(s.CPUShares) / float64(defaultCPUShares)
}

func (s Spec) memoryLimitOrRequest() int64 {
	if s.MemoryLimitBytes > 0 {
		return s.MemoryLimitBytes
	}
	return positiveOrZero(s.MemorySoftBytes)
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

// addBytes adds without overflowing into a negative (which would read as
// Unlimited or as an invalid value).
func addBytes(a, b int64) int64 {
	if a > math.MaxInt64/2-b {
		return math.MaxInt64 / 2
	}
	return a + b
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

func positiveOrZero(v int64) int64 { return max(v, 0) }
