// Package cgroups is agentd's one interface to Linux control groups, with a
// cgroup v1 implementation (v1 and hybrid hosts) and a cgroup v2 one
// (unified hosts), both on github.com/containerd/cgroups/v3. The mode is
// detected once; callers never branch on it.
//
// Paths are relative to the hierarchy's mount point and the same in every v1
// controller: "/allot", "/allot/<container>", "/allot/<executor>/<task>".
package cgroups

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// Mode is the cgroup layout of a host.
type Mode int

const (
	// Unavailable: no writable cgroup hierarchy this package can use.
	Unavailable Mode = iota
	// V1 covers legacy and hybrid hosts: controllers on their own v1 mounts.
	V1
	// V2 is the unified hierarchy with its controllers enabled.
	V2
)

func (m Mode) String() string {
	switch m {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return "unavailable"
}

// Unlimited is the value of CPUQuotaMicros and MemoryLimitBytes that sets no
// limit ("Infinity" in a task's limits): -1 in v1 files, "max" in v2 files.
const Unlimited int64 = -1

// DefaultCPUPeriodMicros is the CFS period limits are expressed over.
const DefaultCPUPeriodMicros uint64 = 100000

// Spec is what one cgroup enforces, in kernel units. Zero values leave the
// kernel's default in place, except where a field says otherwise.
type Spec struct {
	// CPUShares is the cpu request as v1 shares (1024 per cpu); v2 writes
	// the equivalent cpu.weight. 0 leaves the default.
	CPUShares uint64
	// CPUQuotaMicros is the cpu limit as CFS quota per CPUPeriodMicros;
	// Unlimited or 0 sets none.
	CPUQuotaMicros  int64
	CPUPeriodMicros uint64 // 0 means DefaultCPUPeriodMicros
	// MemorySoftBytes is the memory request: memory.soft_limit_in_bytes (v1)
	// or memory.low (v2). 0 sets none.
	MemorySoftBytes int64
	// MemoryLimitBytes is the hard memory limit: memory.limit_in_bytes (v1)
	// or memory.max (v2). Unlimited or 0 sets none.
	MemoryLimitBytes int64
}

// Stats are a cgroup's own statistics (its descendants included).
type Stats struct {
	CPUUsageNanos    uint64 // cpuacct.usage / cpu.stat usage_usec × 1000
	MemoryUsageBytes uint64 // memory.usage_in_bytes / memory.current
	MemoryMaxBytes   uint64 // v1 memory.max_usage_in_bytes; v2 memory.peak when present
	// OOMKills counts processes of this cgroup the kernel OOM killer killed,
	// whatever cgroup ran out of memory (v1 memory.oom_control oom_kill;
	// v2 memory.events oom_kill).
	OOMKills uint64
	// LimitOOMs counts the times this cgroup itself ran out of memory at its
	// own limit, counted in both modes from when this Cgroup was opened by
	// Create or Load, so hold one from before the task starts (v1: OOM
	// events on its memory.oom_control eventfd minus those on its
	// parent's; v2: memory.events.local oom, else memory.events oom).
	LimitOOMs uint64
}

// Manager creates and loads cgroups in one host's hierarchy.
type Manager interface {
	Mode() Mode
	// Create makes the cgroup at path (its parent must exist) and writes
	// spec; it is not an error when the cgroup exists already (spec is
	// written again).
	Create(path string, spec Spec) (Cgroup, error)
	// Load opens an existing cgroup; errors.Is(err, ErrNotExist) when none.
	Load(path string) (Cgroup, error)
}

// Cgroup is one control group. Every error names its path.
type Cgroup interface {
	Path() string
	// Update writes spec again (all fields, as Create does).
	Update(spec Spec) error
	// Start starts cmd with its process already inside this cgroup, so that
	// no code of cmd ever runs outside it (v2: clone3 CLONE_INTO_CGROUP
	// through SysProcAttr.UseCgroupFD; v1: the forking thread joins the
	// cgroup alone, forks, and leaves it). cmd must not have been started.
	Start(cmd *exec.Cmd) error
	// Pids lists the processes in this cgroup and its descendants.
	Pids() ([]int, error)
	// Signal sends sig to every process in this cgroup and its descendants.
	Signal(sig syscall.Signal) error
	// KillAll kills every process in this cgroup and its descendants
	// without letting any escape by forking (v2 cgroup.kill where the
	// kernel has it, else freeze, SIGKILL, thaw), and returns once none is
	// left.
	KillAll() error
	Stats() (Stats, error)
	// Memory reads this cgroup's memory use now, its descendants included:
	// one small file each, cheap enough to call on every event (Stats walks
	// the descendants for their OOM counts).
	Memory() (MemoryUsage, error)
	// WatchMemory calls notify with the side of thresholdBytes this
	// cgroup's memory usage (MemoryUsage.UsageBytes) is on when the watch
	// starts, and again each time it changes sides, driven by the kernel's
	// notifications rather than a slow poll:
	//
	//   - v1: a memory threshold on memory.usage_in_bytes registered
	//     through cgroup.event_control with an eventfd. The kernel signals
	//     it when usage crosses the threshold in either direction, checked
	//     from the charging or uncharging task itself, at most every 128
	//     page events per CPU of the cgroup that charged (so a crossing is
	//     seen within about 512 KiB per CPU of further charges or
	//     uncharges, microseconds after it in time).
	//   - v2: the kernel has no usage thresholds. The watch re-reads
	//     memory.current on each "file modified" notification of
	//     memory.events (inotify; the kernel raises it for this cgroup and
	//     its ancestors whenever a low, high, max, oom or oom_kill event is
	//     counted: usage reaching memory.high or memory.max is seen at
	//     once, before any OOM kill) and, between those, every
	//     V2MemoryPollInterval. A crossing that raises no event is seen
	//     within that interval; each poll is one pread of memory.current.
	//     All the watches of a Manager share one inotify instance (the
	//     kernel allows 128 per user by default).
	//
	// Registering costs time on v1: the kernel waits for an RCU grace
	// period (measured here: 20 ms at the median), so callers on a
	// latency path register from a goroutine of their own. A watch holds
	// two file descriptors (v1) or one and an inotify watch (v2).
	//
	// Calls of notify come one at a time from a goroutine of the watch;
	// the first reports the level at the start. A level that crossed and
	// came back between two readings is not reported: notify sees the
	// sides the usage was read on. The watch ends by itself once the
	// cgroup is gone; Close ends it in any case and returns once notify is
	// no longer running (so notify must not call Close).
	WatchMemory(thresholdBytes int64, notify func(MemoryLevel)) (MemoryWatch, error)
	// SetOOMScoreAdj writes adj (-1000…1000) to /proc/<pid>/oom_score_adj
	// of every process in this cgroup and its descendants. A process that
	// exits meanwhile is skipped; one forked while the value is written
	// either inherits it from its parent (the kernel copies oom_score_adj
	// at fork) or shows in the next listing, which is written too, so no
	// process of the cgroup is left with the old value. Each pid is pinned
	// (a /proc/<pid> directory descriptor) and listed again before the
	// write, so a reused pid never gets the value.
	SetOOMScoreAdj(adj int) error
	// Delete removes the cgroup (and empty descendants) from every
	// hierarchy; deleting a cgroup that does not exist is not an error.
	Delete() error
}

// ErrNotExist is returned by Load for a cgroup that does not exist.
var ErrNotExist = errors.New("cgroup does not exist")

// MemoryUsage is a cgroup's memory use, its descendants included.
type MemoryUsage struct {
	// UsageBytes is what the kernel charges the cgroup: anonymous memory
	// and page cache (v1 memory.usage_in_bytes, v2 memory.current).
	UsageBytes uint64
	// InactiveFileBytes is the page cache the kernel reclaims first
	// (v1 memory.stat total_inactive_file, v2 memory.stat inactive_file).
	InactiveFileBytes uint64
}

// WorkingSetBytes is the usage the kernel cannot simply drop: usage minus
// inactive page cache, as the kubelet and cAdvisor count it. A cgroup near
// its limit by usage alone may only be full of cache it reclaims at will;
// near its limit by working set, it is about to reclaim hard or OOM-kill.
func (u MemoryUsage) WorkingSetBytes() uint64 {
	if u.InactiveFileBytes >= u.UsageBytes {
		return 0
	}
	return u.UsageBytes - u.InactiveFileBytes
}

// MemoryLevel is one report of a WatchMemory: which side of the threshold
// the usage was on when it was read.
type MemoryLevel struct {
	// Above: UsageBytes ≥ the threshold (the kernel's v1 threshold rule).
	Above      bool
	UsageBytes uint64
}

// MemoryWatch is a running WatchMemory.
type MemoryWatch interface {
	// Close stops the watch and returns once its notify is not running;
	// closing twice is not an error.
	Close() error
}

// V2MemoryPollInterval is how often a cgroup v2 WatchMemory re-reads
// memory.current between the kernel's memory.events notifications: the
// longest a v2 crossing that raises no memory event goes unseen.
const V2MemoryPollInterval = 100 * time.Millisecond
