package agent

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// agentStats are the agent's counters; Collector exposes them with the
// live gauges.
type agentStats struct {
	registrations atomic.Int64
	updates       atomic.Int64
	refused       atomic.Int64
	// dropped counts borrowers' launches that no longer fit; preempted the
	// tasks the agent killed to make room.
	dropped   atomic.Int64
	preempted atomic.Int64
	// estimates and qosRounds count the estimator's and the QoS
	// controller's rounds (tests wait on them).
	estimates atomic.Int64
	qosRounds atomic.Int64
	// launchSeconds times a LAUNCH event to the task's process running in
	// its cgroup.
	launchSeconds prometheus.Histogram
	// onLaunch, when set (by benchmarks), sees every launch time too;
	// onPreempt every task the agent decides to kill to make room.
	onLaunch  atomic.Pointer[func(time.Duration)]
	onPreempt atomic.Pointer[func(containerID string)]
}

func newAgentStats() agentStats {
	return agentStats{launchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "allot_agent_launch_seconds",
		Help:    "Time from a LAUNCH event to the task's process running in its cgroup.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	})}
}

func (s *agentStats) observeLaunch(d time.Duration) {
	s.launchSeconds.Observe(d.Seconds())
	if f := s.onLaunch.Load(); f != nil {
		(*f)(d)
	}
}

// Collector returns the agent's Prometheus metrics.
func (a *Agent) Collector() prometheus.Collector { return &collector{a: a} }

type collector struct{ a *Agent }

var (
	descTasks         = prometheus.NewDesc("allot_agent_tasks", "Tasks the agent has not settled, by state.", []string{"state"}, nil)
	descPending       = prometheus.NewDesc("allot_agent_pending_updates", "Status updates waiting for the master's acknowledgement.", nil, nil)
	descConnected     = prometheus.NewDesc("allot_agent_connected", "1 while the agent has a session with the leading master.", nil, nil)
	descRegistrations = prometheus.NewDesc("allot_agent_registrations_total", "Registrations with a master.", nil, nil)
	descUpdates       = prometheus.NewDesc("allot_agent_status_updates_total", "Task status updates made.", nil, nil)
	descRefused       = prometheus.NewDesc("allot_agent_tasks_refused_total", "Tasks refused with TASK_ERROR.", nil, nil)
	descDropped       = prometheus.NewDesc("allot_agent_revocable_launches_dropped_total", "Launches on lent resources dropped (TASK_DROPPED) because their role took them back.", nil, nil)
	descPreempted     = prometheus.NewDesc("allot_agent_tasks_preempted_total", "Tasks the agent killed to make room: evicted for a lender or by its QoS controller.", nil, nil)
	descWaiting       = prometheus.NewDesc("allot_agent_launches_waiting", "Launches waiting for evicted tasks to be gone.", nil, nil)
	descSlack         = prometheus.NewDesc("allot_agent_oversubscribed", "The estimator's latest estimate of the usage slack the agent lends, by resource.", []string{"resource"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descPending, descConnected, descRegistrations, descUpdates, descRefused, descDropped, descPreempted, descWaiting, descSlack} {
		ch <- d
	}
	c.a.stats.launchSeconds.Describe(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	a.mu.Lock()
	byState := map[string]int{}
	for _, t := range a.tasks {
		byState[t.rec.Task.State]++
	}
	waiting := len(a.waiting)
	slack := a.slack.Clone()
	a.mu.Unlock()
	for _, kind := range slack.Names() {
		ch <- prometheus.MustNewConstMetric(descSlack, prometheus.GaugeValue, slack[kind], kind)
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(n), state)
	}
	connected := 0.0
	if a.client.Connected() {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(a.client.PendingUpdates()))
	ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, connected)
	ch <- prometheus.MustNewConstMetric(descRegistrations, prometheus.CounterValue, float64(a.stats.registrations.Load()))
	ch <- prometheus.MustNewConstMetric(descUpdates, prometheus.CounterValue, float64(a.stats.updates.Load()))
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(a.stats.refused.Load()))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(a.stats.dropped.Load()))
	ch <- prometheus.MustNewConstMetric(descPreempted, prometheus.CounterValue, float64(a.stats.preempted.Load()))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(waiting))
	a.stats.launchSeconds.Collect(ch)
}
