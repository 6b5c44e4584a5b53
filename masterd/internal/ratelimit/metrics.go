package ratelimit

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// principalStats are one principal's counters. For principals served by the
// aggregate default limiter they are still kept per principal, so that the
// operator sees who fills the shared queue.
//
// A call that needs no wait is received and processed at one instant, so it
// is counted once, in passed: the request path pays one atomic add, not two.
// received and processed count the other calls.
type principalStats struct {
	principal  string
	passed     atomic.Uint64
	received   atomic.Uint64
	processed  atomic.Uint64
	rejected   atomic.Uint64
	queueDepth atomic.Int64
}

// snapshot reads the counters. Processed is read before received, so that
// a reader never sees more calls processed than received.
func (st *principalStats) snapshot() Stats {
	processed := st.passed.Load() + st.processed.Load()
	rejected := st.rejected.Load()
	depth := st.queueDepth.Load()
	return Stats{
		Principal:  st.principal,
		Received:   st.passed.Load() + st.received.Load(),
		Processed:  processed,
		Rejected:   rejected,
		QueueDepth: int(depth),
	}
}

// Stats are one principal's counters at one moment.
type Stats struct {
	Principal string
	// Received counts calls before any wait, Processed those that went on
	// after it, Rejected those refused because the queue was full.
	Received  uint64
	Processed uint64
	Rejected  uint64
	// QueueDepth is the number of the principal's calls waiting now.
	QueueDepth int
}

// Stats returns the counters of every tracked principal, sorted by principal.
func (l *Limiter) Stats() []Stats {
	l.mu.Lock()
	all := make([]*principalStats, 0, len(l.stats))
	for _, st := range l.stats {
		all = append(all, st)
	}
	l.mu.Unlock()
	out := make([]Stats, 0, len(all))
	for _, st := range all {
		out = append(out, st.snapshot())
	}
	slices.SortFunc(out, func(a, b Stats) int { return strings.Compare(a.Principal, b.Principal) })
	return out
}

var (
	receivedDesc = prometheus.NewDesc("allot_framework_messages_received_total",
		"Calls received per principal, counted before any rate-limit wait.", []string{"principal"}, nil)
	processedDesc = prometheus.NewDesc("allot_framework_messages_processed_total",
		"Calls per principal that went on after their rate-limit wait.", []string{"principal"}, nil)
	rejectedDesc = prometheus.NewDesc("allot_ratelimit_rejected_total",
		"Calls per principal rejected with 429 because the rate-limit queue was full.", []string{"principal"}, nil)
	queueDepthDesc = prometheus.NewDesc("allot_ratelimit_queue_depth",
		"Calls per principal waiting in a rate-limit queue.", []string{"principal"}, nil)
)

var _ prometheus.Collector = (*Limiter)(nil)

// Describe implements prometheus.Collector.
func (l *Limiter) Describe(ch chan<- *prometheus.Desc) {
	ch <- receivedDesc
	ch <- processedDesc
	ch <- rejectedDesc
	ch <- queueDepthDesc
}

// Collect implements prometheus.Collector.
func (l *Limiter) Collect(ch chan<- prometheus.Metric) {
	for _, st := range l.Stats() {
		ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(st.Received), st.Principal)
		ch <- prometheus.MustNewConstMetric(processedDesc, prometheus.CounterValue, float64(st.Processed), st.Principal)
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(st.Rejected), st.Principal)
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(st.QueueDepth), st.Principal)
	}
}
