package containerizer

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/allot/allot/agentd/internal/cgroups"
)

// Memory: before the OOM killer.
//
// Each task with a cgroup of its own and room to burst (a memory request
// below its limit, or no limit) has a cgroups.WatchMemory on its request:
// while its usage is at or above the request its processes' oom_score_adj
// is 1000, first in line for the OOM killer; below it, back to the formula
// (oomScoreAdj) the task started with. Container.OOMScoreAdj shows the
// value in force. Usage is the kernel's charge, page cache included, as in
// the Mesos design's stretch goal: it is what the kernel's thresholds see.
// Tasks sharing their group's cgroup keep the formula: the group's usage
// cannot be told apart per task.
//
// The agent's root cgroup has one watch at RootMemoryHighFraction of its
// limit, which drives Config.OnRootMemoryHigh.

// DefaultRootMemoryHighFraction is Config.RootMemoryHighFraction when it is
// 0: the root cgroup counts as near its limit with 90% of it in use, which
// at the usual node sizes leaves hundreds of MiB for the agent to act on
// before the kernel reclaims hard.
const DefaultRootMemoryHighFraction = 0.9

// rootMemoryPoll is how often the root cgroup's working set is read while
// its usage is above the threshold: page cache fills a cgroup up to its
// limit, so usage alone cannot say whether the room is really gone, and
// once it is above, the kernel's threshold says nothing more until it
// falls below. While usage is below the threshold nothing is polled.
const rootMemoryPoll = 100 * time.Millisecond

// watchTaskMemory starts the oom_score_adj watch of a container whose own
// cgroup is ct.cg, when it can burst past its request. The formula's value
// is base. limit is the cgroup's memory limit (0 or cgroups.Unlimited for
// none). atLaunch says the task's processes hold base already (the monitor
// gave it to the task at fork), so a first report below the request
// writes nothing.
//
// The watch is registered off the caller's path: on v1 the kernel waits
// for an RCU grace period in every threshold registration (measured here:
// a launch took 20 ms instead of 8 with it inline). A crossing before the
// registration is not lost: the watch's first report reads the usage
// after it.
func (c *Containerizer) watchTaskMemory(ct *container, request, limit int64, base int, atLaunch bool) {
	if !ct.own || ct.cg == nil || request <= 0 || (limit > 0 && limit <= request) {
		return
	}
	id := ct.info.ID
	log := c.log.With("container_id", id)
	c.mu.Lock()
	if c.closed { // Close waits for the registrations it knows of
		c.mu.Unlock()
		return
	}
	ct.memWatching = true
	c.memWatches.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.memWatches.Done()
		first := true // reports come one at a time: no lock needed
		w, err := ct.cg.WatchMemory(request, func(level cgroups.MemoryLevel) {
			adj := base
			if level.Above {
				adj = 1000
			}
			// After agentd's restart the processes may hold the value
			// of a crossing the previous agentd saw: only a fresh
			// launch may skip the first write.
			if !first || !atLaunch || level.Above {
				if err := ct.cg.SetOOMScoreAdj(adj); err != nil {
					log.Warn("set oom_score_adj", "oom_score_adj", adj, "error", err)
					return
				}
			}
			first = false
			c.mu.Lock()
			changed := ct.info.OOMScoreAdj != adj
			ct.info.OOMScoreAdj = adj
			seen := c.oomScoreAdjSet
			c.mu.Unlock()
			if seen != nil {
				seen(id, adj)
			}
			if changed {
				log.Debug("memory request crossed", "above", level.Above, "usage_bytes", level.UsageBytes,
					"request_bytes", request, "oom_score_adj", adj)
			}
		})
		c.mu.Lock()
		stopped := ct.memStopped
		if err == nil && !stopped {
			ct.memWatch = w
		}
		c.mu.Unlock()
		switch {
		case err != nil && !stopped:
			// The task runs with the formula's value, as without the
			// watch.
			log.Warn("watch memory against the request; oom_score_adj stays the formula's", "error", err)
		case err == nil && stopped: // the container ended meanwhile
			_ = w.Close()
		}
	}()
}

// stopTaskMemory ends a container's memory watch, if any, also one still
// being registered.
func (c *Containerizer) stopTaskMemory(ct *container) {
	c.mu.Lock()
	w := ct.memWatch
	ct.memWatch, ct.memStopped = nil, true
	c.mu.Unlock()
	if w != nil {
		_ = w.Close()
	}
}

// rootLimit is the root cgroup's memory limit in bytes, 0 when it has none.
func (c *Containerizer) rootLimit() int64 {
	return max(c.cfg.Root.MemoryLimitBytes, 0)
}

// RootMemory reads the agent's root cgroup now: its working set (usage
// minus inactive page cache, which the kernel reclaims before anything
// else; see cgroups.MemoryUsage) and its memory limit, 0 when it has none.
// It is what OnRootMemoryHigh reports.
func (c *Containerizer) RootMemory() (usedBytes, limitBytes int64, err error) {
	u, err := c.root.Memory()
	if err != nil {
		return 0, 0, fmt.Errorf("containerizer: root cgroup memory: %w", err)
	}
	return int64(min(u.WorkingSetBytes(), math.MaxInt64)), c.rootLimit(), nil
}

// Memory reads a container's cgroup memory now (for a task that shares
// its group's cgroup, the group's): its usage, page cache included, and
// the inactive page cache the kernel drops first. Its working set is what
// the agent judges a task's memory by, as RootMemory the node's.
func (c *Containerizer) Memory(id string) (cgroups.MemoryUsage, error) {
	cg, err := c.cgroupOf(id)
	if err != nil {
		return cgroups.MemoryUsage{}, err
	}
	return cg.Memory()
}

// rootMemoryWatch drives OnRootMemoryHigh.
type rootMemoryWatch struct {
	watch cgroups.MemoryWatch
	stop  chan struct{}
	done  chan struct{}
	// For tests, which wait on them: how many times the working set was
	// read, and whether it was at or above the threshold then.
	checks atomic.Int64
	high   atomic.Bool
}

// watchRootMemory starts the root cgroup's watch: a kernel threshold on
// its usage at fraction × limit arms it; once usage is above, the working
// set is read at once and every rootMemoryPoll until usage falls below
// again, and OnRootMemoryHigh is called each time the working set reaches
// the threshold from below. A node whose tasks only fill page cache thus
// never calls it; one whose anonymous memory grows calls it as the kernel
// reports the usage crossing (v1: at once; v2: within
// V2MemoryPollInterval), or within rootMemoryPoll when page cache held
// the usage above the threshold already.
func (c *Containerizer) watchRootMemory() (*rootMemoryWatch, error) {
	limit := c.rootLimit()
	if c.cfg.OnRootMemoryHigh == nil {
		return nil, nil
	}
	if limit == 0 {
		c.log.Info("the agent's root cgroup has no memory limit: OnRootMemoryHigh is never called")
		return nil, nil
	}
	threshold := int64(c.cfg.RootMemoryHighFraction * float64(limit))
	armed := make(chan bool, 1) // the latest side of the usage, a newer one replaces an unread one
	w, err := c.root.WatchMemory(threshold, func(level cgroups.MemoryLevel) {
		select {
		case <-armed:
		default:
		}
		armed <- level.Above
	})
	if err != nil {
		return nil, fmt.Errorf("containerizer: watch the root cgroup's memory: %w", err)
	}
	r := &rootMemoryWatch{watch: w, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		poll := time.NewTicker(rootMemoryPoll)
		poll.Stop()
		defer poll.Stop()
		high := false
		check := func() {
			defer r.checks.Add(1)
			used, _, err := c.RootMemory()
			if err != nil {
				c.log.Warn("read the root cgroup's memory", "error", err)
				return
			}
			if used < threshold {
				high = false
				r.high.Store(false)
				return
			}
			if !high {
				high = true
				r.high.Store(true)
				c.log.Info("the agent's root cgroup is near its memory limit", "working_set_bytes", used,
					"limit_bytes", limit, "threshold_bytes", threshold)
				c.cfg.OnRootMemoryHigh(used, limit)
			}
		}
		for {
			select {
			case <-r.stop:
				return
			case above := <-armed:
				if above {
					check()
					poll.Reset(rootMemoryPoll)
				} else {
					high = false
					r.high.Store(false)
					poll.Stop()
				}
			case <-poll.C:
				check()
			}
		}
	}()
	return r, nil
}

func (r *rootMemoryWatch) close() {
	if r == nil {
		return
	}
	_ = r.watch.Close()
	close(r.stop)
	<-r.done
}

// checkRootMemoryHighFraction accepts a fraction in (0, 1].
func checkRootMemoryHighFraction(f float64) error {
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("containerizer: root memory high fraction %v: want a number in (0, 1]", f)
	}
	return nil
}
