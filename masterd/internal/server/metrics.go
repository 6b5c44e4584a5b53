package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/allot/allot/raftstore"
)

type metrics struct {
	registry *prometheus.Registry
	handler  http.Handler
	leader   prometheus.Gauge
	requests *prometheus.HistogramVec
	cycles   prometheus.Histogram
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "allot_raft_leader", Help: "1 on the Raft leader, 0 elsewhere.",
		}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "allot_http_request_duration_seconds",
			Help:    "Time to answer API requests, by method and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"method", "code"}),
		cycles: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "allot_allocation_cycle_seconds",
			Help:    "Time the leader's allocation cycles take.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	offers := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "allot_offers_outstanding", Help: "Offers sent and not yet accepted, declined, rescinded or expired (leader only).",
	}, func() float64 {
		if m := s.engine.current(); m != nil {
			return float64(m.OffersOutstanding())
		}
		return 0
	})
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.leader, m.requests, m.cycles, offers,
		&stateCollector{s: s},
		s.limiter,
	)
	m.handler = promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) setLeader(leading bool) {
	if leading {
		m.leader.Set(1)
	} else {
		m.leader.Set(0)
	}
}

func (m *metrics) observeRequest(r *http.Request, status int, d time.Duration) {
	m.requests.WithLabelValues(r.Method, strconv.Itoa(status)).Observe(d.Seconds())
}

// stateCollector exports the replicated policy and Raft progress at scrape time.
type stateCollector struct{ s *Server }

var (
	quotaGuaranteeDesc = prometheus.NewDesc("allot_quota_guarantee", "Quota guarantee by role and resource.", []string{"role", "resource"}, nil)
	quotaLimitDesc     = prometheus.NewDesc("allot_quota_limit", "Quota limit by role and resource.", []string{"role", "resource"}, nil)
	quotaConsumedDesc  = prometheus.NewDesc("allot_quota_consumed", "Resources counted against a role's quota (on the leader).", []string{"role", "resource"}, nil)
	appliedIndexDesc   = prometheus.NewDesc("allot_raft_applied_index", "Last Raft index applied to the state.", nil, nil)
	lastContactDesc    = prometheus.NewDesc("allot_raft_last_contact_seconds", "Time since this server last heard from the leader (0 on the leader).", nil, nil)
	agentsDesc         = prometheus.NewDesc("allot_agents_admitted", "Agents in the registry.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{quotaGuaranteeDesc, quotaLimitDesc, quotaConsumedDesc, appliedIndexDesc, lastContactDesc, agentsDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	leading := s.node.IsLeader()
	s.fsm.Read(func(st *raftstore.State) {
		for _, q := range st.Quotas() {
			for _, name := range q.Guarantees.Names() {
				ch <- prometheus.MustNewConstMetric(quotaGuaranteeDesc, prometheus.GaugeValue, q.Guarantees[name], q.Role, name)
			}
			for _, name := range q.Limits.Names() {
				ch <- prometheus.MustNewConstMetric(quotaLimitDesc, prometheus.GaugeValue, q.Limits[name], q.Role, name)
			}
			if leading {
				consumed := s.live.Consumption(q.Role)
				names := map[string]bool{}
				for _, n := range append(q.Guarantees.Names(), q.Limits.Names()...) {
					names[n] = true
				}
				for _, n := range consumed.Names() {
					names[n] = true
				}
				for _, name := range sortedSet(names) {
					ch <- prometheus.MustNewConstMetric(quotaConsumedDesc, prometheus.GaugeValue, consumed[name], q.Role, name)
				}
			}
		}
		ch <- prometheus.MustNewConstMetric(appliedIndexDesc, prometheus.GaugeValue, float64(st.Index()))
		ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(len(st.Agents())))
	})
	lastContact := 0.0
	if !leading {
		lastContact = time.Since(s.node.LastContact()).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(lastContactDesc, prometheus.GaugeValue, lastContact)
}
