package telemetry

import "github.com/prometheus/client_golang/prometheus"

// AdmissionStats are the gateway's admission counts (issue 49).
type AdmissionStats struct {
	Limits []AdmissionLimit
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
	})
}

type admissionCollector struct {
	f     func() AdmissionStats
	total *prometheus.Desc
}

func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.total }

func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.f()
	for _, l := range st.Limits {
		limit := safeLabel(l.Limit)
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(l.Admitted), limit, l.Kind, "admitted")
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(l.Queued), limit, l.Kind, "queued")
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(l.Rejected), limit, l.Kind, "rejected")
	}
}
