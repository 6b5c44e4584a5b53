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
	// own limit (v1: OOM events on its memory.oom_control eventfd minus
	// those on its parent's, counted from when this Cgroup was opened by
	// Create or Load, so hold one from before the task starts; v2:
	// memory.events.local oom, else memory.events oom).
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
	// Delete removes the cgroup (and empty descendants) from every
	// hierarchy; deleting a cgroup that does not exist is not an error.
	Delete() error
}

// ErrNotExist is returned by Load for a cgroup that does not exist.
var ErrNotExist = errors.New("cgroup does not exist")
