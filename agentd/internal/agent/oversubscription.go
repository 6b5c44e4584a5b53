package agent

import (
	"context"
	"time"

	"github.com/allot/allot/agentd/internal/estimator"
	"github.com/allot/allot/agentd/internal/qos"
	"github.com/allot/allot/masterd/api"
)

// Oversubscription (usage slack): every -oversubscribed-interval the agent
// measures its tasks in their cgroups, asks its estimator what it can lend
// and reports it to the master (UPDATE_OVERSUBSCRIBED, sent by the client
// when it changed and after every registration). Every -qos-interval, and
// at once when the containerizer sees the root cgroup's memory near its
// limit, the QoS controller reads the node and names tasks to kill; the
// agent kills them as preempted (TASK_KILLED, REASON_CONTAINER_PREEMPTED,
// the controller's message).

// Defaults of the intervals (agentd's flag defaults).
const (
	DefaultOversubscribedInterval = 15 * time.Second
	DefaultQoSInterval            = 5 * time.Second
)

// liveTask is a task with a container, as the usage loops see it.
type liveTask struct {
	containerID, taskID     string
	revocable, throttleable bool
	started                 time.Time
	requests                api.Resources
}

// revocability says whether a task uses revocable resources and whether
// any of them is usage slack (throttleable).
func revocability(at api.AgentTask) (revocable, throttleable bool) {
	if len(at.Allocation) == 0 {
		return at.Task.Revocable, false
	}
	for _, p := range at.Allocation {
		revocable = revocable || p.Revocable
		throttleable = throttleable || (p.Revocable && p.Throttleable)
	}
	return revocable, throttleable
}

// liveTasks lists the tasks whose containers run (those being killed too:
// they still use the node until they are gone).
func (a *Agent) liveTasks() []liveTask {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]liveTask, 0, len(a.tasks))
	for _, t := range a.tasks {
		if t.rec.Ended || t.rec.Waiting || t.launching {
			continue
		}
		revocable, throttleable := revocability(t.rec.Task)
		out = append(out, liveTask{
			containerID: t.rec.ContainerID, taskID: t.rec.Task.Task.TaskID,
			revocable: revocable, throttleable: throttleable,
			started: t.rec.Started, requests: t.rec.Task.Task.Resources,
		})
	}
	return out
}

// usageSampler measures containers' usage from their cgroups: cpus in
// cores averaged since its previous sample of the container (since the
// container started for the first), mem in MiB now: the working set
// (usage less inactive page cache), as the root cgroup's memory is judged;
// page cache the kernel drops at will is no task's memory to kill it for.
// Each loop has its own.
type usageSampler struct {
	prev map[string]cpuReading
}

type cpuReading struct {
	at    time.Time
	nanos uint64
}

func newUsageSampler() *usageSampler { return &usageSampler{prev: map[string]cpuReading{}} }

// sample returns the usage of each task it could read, by container id.
func (s *usageSampler) sample(a *Agent, tasks []liveTask, now time.Time) map[string]api.Resources {
	out := make(map[string]api.Resources, len(tasks))
	seen := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		st, err := a.ctz.Stats(t.containerID)
		if err != nil {
			continue // gone meanwhile
		}
		mem, err := a.ctz.Memory(t.containerID)
		if err != nil {
			continue
		}
		seen[t.containerID] = true
		prev, ok := s.prev[t.containerID]
		if !ok || st.CPUUsageNanos < prev.nanos {
			prev = cpuReading{at: t.started}
		}
		s.prev[t.containerID] = cpuReading{at: now, nanos: st.CPUUsageNanos}
		cpus := 0.0
		if elapsed := now.Sub(prev.at); elapsed > 0 && !prev.at.IsZero() {
			cpus = float64(st.CPUUsageNanos-prev.nanos) / float64(elapsed.Nanoseconds())
		}
		out[t.containerID] = api.Resources{"cpus": api.RoundScalar(cpus), "mem": api.RoundScalar(float64(mem.WorkingSetBytes()) / (1 << 20))}
	}
	for id := range s.prev {
		if !seen[id] {
			delete(s.prev, id)
		}
	}
	return out
}

// runEstimator reports the estimator's estimate every interval until ctx
// ends.
func (a *Agent) runEstimator(ctx context.Context) {
	sampler := newUsageSampler()
	ticker := time.NewTicker(a.oversubscribedInterval())
	defer ticker.Stop()
	for {
		a.estimateOnce(sampler, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// estimateOnce makes one estimate from the agent's non-revocable tasks and
// hands it to the client.
func (a *Agent) estimateOnce(sampler *usageSampler, now time.Time) api.Resources {
	tasks := a.liveTasks()
	usage := sampler.sample(a, tasks, now)
	s := estimator.Sample{Time: now, Allocated: api.Resources{"cpus": 0, "mem": 0}, Used: api.Resources{"cpus": 0, "mem": 0}}
	for _, t := range tasks {
		used, ok := usage[t.containerID]
		if t.revocable || !ok {
			continue
		}
		s.Allocated.Add(api.Resources{"cpus": t.requests["cpus"], "mem": t.requests["mem"]})
		s.Used.Add(used)
	}
	slack := a.estimator.Estimate(s)
	a.mu.Lock()
	a.slack = slack
	a.mu.Unlock()
	a.client.SetOversubscribed(slack)
	a.stats.estimates.Add(1)
	return slack
}

// memoryCheckInterval is how often the agent itself looks at the root
// cgroup's memory when the pressure controller watches it: the threshold
// event is what makes the agent act within a millisecond, but
// OnRootMemoryHigh comes once per crossing, when the working set reaches
// the line from below. A round whose kills do not bring it back under (a
// task still dying, one whose cgroup could not be read, another growing
// meanwhile) would otherwise leave the node there until -qos-interval.
// While the memory is at or above its fraction, each check is a QoS round,
// whatever -qos-interval says: memory that runs out kills. Below it, a
// check is one read of the root cgroup's usage and memory.stat.
const memoryCheckInterval = 100 * time.Millisecond

// runQoS runs a QoS round every interval, at once when the root cgroup's
// memory comes near its limit, and every memoryCheckInterval while it
// stays there, until ctx ends.
func (a *Agent) runQoS(ctx context.Context) {
	sampler := newUsageSampler()
	ticker := time.NewTicker(a.qosInterval())
	defer ticker.Stop()
	var memoryCheck <-chan time.Time
	if a.watchesRootMemory() {
		t := time.NewTicker(memoryCheckInterval)
		defer t.Stop()
		memoryCheck = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-a.qosNow:
		case <-memoryCheck:
			if !a.rootMemoryStillHigh() {
				continue
			}
		}
		a.qosRound(sampler, time.Now())
	}
}

// watchesRootMemory reports whether the pressure controller judges the
// root cgroup's memory against a fraction of its limit.
func (a *Agent) watchesRootMemory() bool {
	return a.cfg.QoS.Kind == qos.KindPressure && a.cfg.QoS.MemoryFraction > 0
}

// rootMemoryStillHigh reports whether the root cgroup's memory is at or
// above the pressure controller's fraction of its limit now.
func (a *Agent) rootMemoryStillHigh() bool {
	used, limit, err := a.ctz.RootMemory()
	return err == nil && limit > 0 && float64(used) >= a.cfg.QoS.MemoryFraction*float64(limit)
}

// rootMemoryHigh is the containerizer's OnRootMemoryHigh: a QoS round now,
// not at the next tick (memory that runs out kills).
func (a *Agent) rootMemoryHigh(usedBytes, limitBytes int64) {
	a.log.Debug("root cgroup memory near its limit: QoS round now", "used_bytes", usedBytes, "limit_bytes", limitBytes)
	select {
	case a.qosNow <- struct{}{}:
	default: // a round is already due
	}
}

// qosRound asks the QoS controller for corrections and kills the tasks it
// names. It returns how many it killed.
func (a *Agent) qosRound(sampler *usageSampler, now time.Time) int {
	tasks := a.liveTasks()
	usage := sampler.sample(a, tasks, now)
	node := qos.Node{Tasks: make([]qos.Task, 0, len(tasks))}
	for _, t := range tasks {
		used, ok := usage[t.containerID]
		if !ok {
			continue
		}
		node.Tasks = append(node.Tasks, qos.Task{
			ContainerID: t.containerID, TaskID: t.taskID,
			Revocable: t.revocable, Throttleable: t.throttleable,
			StartedAt: t.started, Requests: t.requests, Used: used,
		})
	}
	if used, limit, err := a.ctz.RootMemory(); err == nil {
		node.MemoryUsed, node.MemoryLimit = used, limit
	} else {
		a.log.Warn("qos: root cgroup memory", "error", err)
	}
	corrections, err := a.qos.Corrections(now, node)
	defer a.stats.qosRounds.Add(1)
	if err != nil {
		a.log.Warn("qos: no corrections this round", "controller", a.qos.Name(), "error", err)
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	killed := 0
	for _, c := range corrections {
		t := a.byID[c.ContainerID]
		if t == nil || t.rec.Ended || t.rec.Killing {
			continue // gone or going meanwhile
		}
		a.preemptLocked(t, c.Message)
		killed++
	}
	return killed
}

func (a *Agent) oversubscribedInterval() time.Duration {
	return orDefault(a.cfg.OversubscribedInterval, DefaultOversubscribedInterval)
}

func (a *Agent) qosInterval() time.Duration {
	return orDefault(a.cfg.QoSInterval, DefaultQoSInterval)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
