package ratelimit

import (
	"cmp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// statsKey names the calls counted together: a principal's frameworks
// with one label, or without one (Label "").
type statsKey struct {
	Principal string
	Label     string
}

// principalStats are the counters of one principal and label. For
// principals served by the aggregate default limiter they are still kept
// per principal, and a label's calls apart from the principal's others,
// so that the operator sees who fills a shared queue.
//
// A call that needs no wait is received and processed at one instant, so it
// is counted once, in passed: the request path pays one atomic add, not two.
// received and processed count the other calls. Whose counters they are is
// the key they are kept under (Limiter.stats), not a field: the request path
// touches thousands of these, and smaller ones stay in cache.
type principalStats struct {
	passed     atomic.Uint64
	received   atomic.Uint64
	processed  atomic.Uint64
	rejected   atomic.Uint64
	queueDepth atomic.Int64
}

// snapshot reads the counters. Processed is read before received, so that
// a reader never sees more calls processed than received.
func (st *principalStats) snapshot(k statsKey) Stats {
	processed := st.passed.Load() + st.processed.Load()
	rejected := st.rejected.Load()
	depth := st.queueDepth.Load()
	return Stats{
		Principal:  k.Principal,
		Label:      k.Label,
		Received:   st.passed.Load() + st.received.Load(),
		Processed:  processed,
		Rejected:   rejected,
		QueueDepth: int(depth),
	}
}

// Stats are the counters of one principal and label at one moment.
type Stats struct {
	Principal string
	// Label is the frameworks' label, "" for calls without one (and for
	// labels counted with their principal once too many are tracked).
	Label string
	// Received counts calls before any wait, Processed those that went on
	// after it, Rejected those refused because the queue was full.
	Received  uint64
	Processed uint64
	Rejected  uint64
	// QueueDepth is the number of these calls waiting now, in either of
	// their queues.
	QueueDepth int
}

// Stats returns the counters of every tracked principal and label, sorted
// by principal, then label.
func (l *Limiter) Stats() []Stats {
	l.mu.Lock()
	keys := make([]statsKey, 0, len(l.stats))
	all := make([]*principalStats, 0, len(l.stats))
	for k, st := range l.stats {
		keys = append(keys, k)
		all = append(all, st)
	}
	l.mu.Unlock()
	out := make([]Stats, 0, len(all))
	for i, st := range all {
		out = append(out, st.snapshot(keys[i]))
	}
	slices.SortFunc(out, func(a, b Stats) int {
		return cmp.Or(strings.Compare(a.Principal, b.Principal), strings.Compare(a.Label, b.Label))
	})
	return out
}

// metricLabels are the variable labels of every series: a query by
// principal alone sums over its labels.
var metricLabels = []string{"principal", "label"}

var (
	receivedDesc = prometheus.NewDesc("allot_framework_messages_received_total",
		"Calls received per principal and label, counted before any rate-limit wait.", metricLabels, nil)
	processedDesc = prometheus.NewDesc("allot_framework_messages_processed_total",
		"Calls per principal and label that went on after their rate-limit waits.", metricLabels, nil)
	rejectedDesc = prometheus.NewDesc("allot_ratelimit_rejected_total",
		"Calls per principal and label rejected with 429 because a rate-limit queue was full.", metricLabels, nil)
	queueDepthDesc = prometheus.NewDesc("allot_ratelimit_queue_depth",
		"Calls per principal and label waiting in a rate-limit queue.", metricLabels, nil)
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
		ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(st.Received), st.Principal, st.Label)
		ch <- prometheus.MustNewConstMetric(processedDesc, prometheus.CounterValue, float64(st.Processed), st.Principal, st.Label)
		ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(st.Rejected), st.Principal, st.Label)
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(st.QueueDepth), st.Principal, st.Label)
	}
}
