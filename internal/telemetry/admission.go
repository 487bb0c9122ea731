package telemetry

import "github.com/prometheus/client_golang/prometheus"

// AdmissionStats are the gateway's admission counts (issue 49).
type AdmissionStats struct {
	Limits []AdmissionLimit
	Shared *AdmissionShared // nil when the limits are kept in memory
}

// AdmissionShared is the state of limits shared through Redis.
type AdmissionShared struct {
	Up                  bool // Redis answers; false: each replica holds its share
	Replicas            int  // replicas alive at the last heartbeat
	Fallbacks, Failures uint64
}

// AdmissionLimit counts one limit's decisions. Limit names the rule's
// subject ("key:alice", "group:team-a", "model:gpt-4o*"), from the
// configuration and the configured key names only.
type AdmissionLimit struct {
	Limit, Kind                string
	Admitted, Queued, Rejected uint64
}

// RegisterAdmission adds ttfx_admission_total{limit,kind,outcome} to the
// registry, read from f at each scrape.
func (m *Metrics) RegisterAdmission(f func() AdmissionStats) {
	m.reg.MustRegister(&admissionCollector{f: f,
		total: prometheus.NewDesc("ttfx_admission_total",
			"Admission decisions by limit (key:NAME, group:NAME, model:PATTERN) and kind (requests_per_minute, tokens_per_minute, concurrent): outcome=admitted (at once), queued (after waiting for the limit), rejected (answered 429, status rate_limited). A request counted on several limits counts under each; a rejection only under the limit that refused it.",
			[]string{"limit", "kind", "outcome"}, nil),
		up: prometheus.NewDesc("ttfx_admission_shared_up",
			"1 while the shared limits' Redis (limits.shared) answers; 0 while each replica falls back to its share of every limit (limit ÷ ttfx_admission_replicas).", nil, nil),
		replicas: prometheus.NewDesc("ttfx_admission_replicas",
			"Replicas sharing the limits, counted from their heartbeats in Redis (as last seen).", nil, nil),
		fallbacks: prometheus.NewDesc("ttfx_admission_fallback_total",
			"Admission decisions made by the replica alone, its share of each limit, because Redis could not be reached.", nil, nil),
	})
}

type admissionCollector struct {
	f                              func() AdmissionStats
	total, up, replicas, fallbacks *prometheus.Desc
}

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.total
	ch <- c.up
	ch <- c.replicas
	ch <- c.fallbacks
}

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.f()
	for _, l := range st.Limits {
		limit := safeLabel(l.Limit)
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(l.Admitted), limit, l.Kind, "admitted")
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(l.Queued), limit, l.Kind, "queued")
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(l.Rejected), limit, l.Kind, "rejected")
	}
	if s := st.Shared; s != nil {
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
		ch <- prometheus.MustNewConstMetric(c.replicas, prometheus.GaugeValue, float64(s.Replicas))
		ch <- prometheus.MustNewConstMetric(c.fallbacks, prometheus.CounterValue, float64(s.Fallbacks))
	}
}
