// Package qos holds the agent's QoS controllers: they watch the node and
// name the tasks the agent kills (TASK_KILLED, REASON_CONTAINER_PREEMPTED)
// when tasks running on lent room hurt the tasks the room was lent from.
//
// Controllers (Config.Kind, agentd flag -qos, default "noop"):
//
//   - noop: never corrects; the kernel is left to act (as Mesos's default).
//   - load: the 5- and 15-minute load averages of <ProcDir>/loadavg against
//     -qos-load-5min and -qos-load-15min, as Mesos's LoadQoSController; either
//     over its threshold triggers. Unlike Mesos, which kills every revocable
//     task, it kills the fewest revocable tasks, youngest first, whose cpu
//     usage brings the load estimate back under the threshold.
//   - pressure: Linux PSI (pressure stall information): the avg10 of the
//     "some" and "full" lines of <ProcDir>/pressure/cpu and
//     <ProcDir>/pressure/memory, and of the agent's root cgroup's
//     cpu.pressure and memory.pressure where the kernel has them, against
//     thresholds in percent; memory also counts as under pressure when the
//     root cgroup's memory use passes a fraction of its limit. Cpu pressure
//     kills revocable tasks as "load" does; memory pressure kills revocable
//     tasks first, then tasks furthest above their memory request, before the
//     kernel's OOM killer has to.
//
// Flags and their defaults (the agent's names for the Config fields):
//
//	-qos                            noop | load | pressure (default "noop")
//	-qos-load-5min                  5-minute load average threshold (default 0: unset)
//	-qos-load-15min                 15-minute load average threshold (default 0: unset)
//	-qos-pressure-cpu-some          cpu some avg10 threshold, percent (default 50)
//	-qos-pressure-cpu-full          cpu full avg10 threshold, percent (default 0: off)
//	-qos-pressure-memory-some       memory some avg10 threshold, percent (default 20)
//	-qos-pressure-memory-full       memory full avg10 threshold, percent (default 10)
//	-qos-pressure-memory-fraction   root cgroup memory used/limit threshold (default 0.9)
//
// A threshold of 0 turns its signal off; "load" needs one of its two and
// "pressure" one of its five. Like Mesos's, the load thresholds have no
// default: what load is too much depends on the node. The node-wide cpu
// "full" line is not a signal worth acting on (the kernel reports it only
// for cgroups in any meaningful way), hence off by default.
//
// # What "back under the threshold" means
//
// Averages lag: a 5-minute load average stays up for minutes after the load
// is gone, and an avg10 for seconds. So a controller judges an estimate,
// not the raw reading: the reading less what its own recent kills still
// hold in it. An exponential average of a task's share c that ran from its
// start s until it was gone at g holds c·(e^(−(t−g)/τ) − e^(−(t−s)/τ)) of it
// at t (τ = 300 s for the 5-minute load, 900 s for the 15-minute, 10 s for
// avg10); while the killed task is still listed, all it has added so far
// counts. Without that, every round would kill again until the average
// catches up, and a task that ran a minute would be credited with a load it
// never added. Mesos's load controller kills every revocable task at once
// for want of this.
//
// A task's share of a reading is its cpu usage in cores for the load, and
// its cpu usage as a share of the node's cores (Config.CPUs) for cpu
// pressure: with D runnable threads on N cores the kernel reports some
// pressure of about (D − N)/N, so taking c cores of demand away lowers it by
// about c/N. Memory over its fraction is covered by the tasks' memory use in
// MiB. Memory PSI has no such measure (stalls in reclaim say that memory is
// short, not by how much), so a round under memory PSI alone kills one task,
// and no other is killed for stalls until that task is gone and the
// average has had an update to show what its death did.
//
// Tasks are picked in tiers: throttleable tasks (on usage slack) first, then
// other revocable tasks (on lent reservations), and for memory then
// non-revocable tasks above their memory request. Within a revocable tier a
// round kills the fewest tasks that cover what must be freed, the youngest
// such set; when a tier cannot cover it, the whole tier goes (only tasks
// that use what is short) and the next tier covers the rest. Non-revocable
// tasks go furthest above their request first. A task using none of what is
// short is never killed for it: its death would free nothing.
//
// # What the agent passes
//
// Node.Tasks lists every running task, killed ones included until they are
// gone: a controller remembers its kills and credits them while they are
// listed. Task.Used and Node.MemoryUsed are best the working set (memory in
// use less inactive file pages, as the kubelet counts it): page cache the
// kernel can drop is no reason to kill. Corrections may be called from
// several goroutines; now should not go backwards.
package qos

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/allot/allot/masterd/api"
)

// Controller kinds (Config.Kind).
const (
	KindNoop     = "noop"
	KindLoad     = "load"
	KindPressure = "pressure"
)

// Defaults of the pressure thresholds (the agent's flag defaults).
const (
	DefaultCPUSome        = 50.0 // percent, avg10
	DefaultCPUFull        = 0.0  // off
	DefaultMemorySome     = 20.0 // percent, avg10
	DefaultMemoryFull     = 10.0 // percent, avg10
	DefaultMemoryFraction = 0.9  // of the root cgroup's memory limit
	DefaultProcDir        = "/proc"
)

// Task is one of the agent's running tasks, as the controller sees it.
type Task struct {
	ContainerID  string
	TaskID       string
	Revocable    bool
	Throttleable bool // runs on usage slack
	StartedAt    time.Time
	Requests     api.Resources // cpus, mem MiB
	Used         api.Resources // cpus cores, mem MiB (as estimator.Sample.Used)
}

// Correction is one task to kill now.
type Correction struct {
	ContainerID string
	Message     string // names the controller and the reading, e.g. "qos load: 5-minute load 7.9 over 6"
}

// Node is what the agent knows of the node this round.
type Node struct {
	Tasks []Task
	// The agent's root cgroup memory (bytes); Limit 0 = unknown.
	MemoryUsed, MemoryLimit int64
}

// Config chooses and tunes a controller.
type Config struct {
	Kind          string  // "noop" (also ""), "load", "pressure"
	Load5, Load15 float64 // -qos-load-5min, -qos-load-15min (load: either over its threshold triggers; 0 unset)

	// Pressure thresholds: PSI avg10 in percent (0 off), and the root
	// cgroup's memory used/limit (0 off).
	CPUSome        float64 // -qos-pressure-cpu-some
	CPUFull        float64 // -qos-pressure-cpu-full
	MemorySome     float64 // -qos-pressure-memory-some
	MemoryFull     float64 // -qos-pressure-memory-full
	MemoryFraction float64 // -qos-pressure-memory-fraction

	// CPUs is how many cores cpu pressure is spread over, to turn a
	// pressure excess into cores to free; 0 (no flag) means
	// runtime.NumCPU().
	CPUs float64

	ProcDir   string // default "/proc" (tests point it at a fake)
	CgroupDir string // the agent's root cgroup dir to read cpu.pressure/memory.pressure from where present ("" none)
}

// Controller decides which tasks to kill.
type Controller interface {
	Name() string
	// Corrections reads the node's readings and returns the tasks to kill now: the fewest revocable
	// tasks, youngest first, whose removal brings the node back under the threshold (for memory
	// pressure: revocable first, then the tasks furthest above their memory request). Nil: none.
	Corrections(now time.Time, n Node) ([]Correction, error)
}

// New builds the controller cfg names, or says what is wrong with cfg.
func New(cfg Config) (Controller, error) {
	if cfg.ProcDir == "" {
		cfg.ProcDir = DefaultProcDir
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = float64(runtime.NumCPU())
	}
	switch cfg.Kind {
	case "", KindNoop:
		return noop{}, nil
	case KindLoad:
		return newLoad(cfg)
	case KindPressure:
		return newPressure(cfg)
	default:
		return nil, fmt.Errorf("unknown qos controller %q: want %s, %s or %s", cfg.Kind, KindNoop, KindLoad, KindPressure)
	}
}

type noop struct{}

func (noop) Name() string                                      { return KindNoop }
func (noop) Corrections(time.Time, Node) ([]Correction, error) { return nil, nil }

// checkThreshold rejects a threshold that is not a number from 0 to max.
func checkThreshold(controller, flag string, v, max float64) error {
	if math.IsNaN(v) || v < 0 || v > max {
		return fmt.Errorf("qos %s: %s %v: want a number from 0 (off) to %g", controller, flag, v, max)
	}
	return nil
}

func checkCPUs(controller string, cpus float64) error {
	if math.IsNaN(cpus) || math.IsInf(cpus, 0) || cpus < 0 {
		return fmt.Errorf("qos %s: cpus %v: want a positive number of cores", controller, cpus)
	}
	return nil
}
