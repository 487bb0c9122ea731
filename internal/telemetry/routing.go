package telemetry

import "github.com/prometheus/client_golang/prometheus"

// Routing metrics (issue 13): outlier ejection per channel and model, and
// hedged first output. They are read from the router when /metrics is
// scraped; the relay pushes nothing for them.

// ChannelEjection is one channel and model's ejection state.
type ChannelEjection struct {
	Channel, Model string
	Ejected        bool   // skipped now (ejected, or being probed)
	Ejections      uint64 // ejections since start
}

// RoutingStats is what the routing metrics report.
type RoutingStats struct {
	Channels []ChannelEjection
	// Hedges over all routes: started, won (the hedge was relayed) and
	// lost (the primary won, or the hedge failed). Started − won − lost
	// are running now.
	HedgesStarted, HedgesWon, HedgesLost uint64
	// Decisions counts the plans that put each channel first, by the
	// strategy that ordered them.
	Decisions []RouteDecision
	// Skips counts the plans that passed over each channel, by reason.
	Skips []RouteSkip
}

// RouteSkip is one channel and reason's count of plans that passed over it.
type RouteSkip struct {
	Channel, Reason string
	Plans           uint64
}

// RouteDecision is one strategy and channel's count of plans.
type RouteDecision struct {
	Strategy, Channel string
	Plans             uint64
}

// RegisterRouting adds ttfx_channel_ejected{channel,model},
// ttfx_channel_ejections_total{channel,model} and
// ttfx_hedges_total{outcome} (started, won, lost) and
// ttfx_route_decisions_total{strategy,channel} and
// ttfx_route_skipped_total{channel,reason}, read from f at scrape time.
func (m *Metrics) RegisterRouting(f func() RoutingStats) {
	m.reg.MustRegister(&routingCollector{f: f,
		ejected: prometheus.NewDesc("ttfx_channel_ejected",
			"1 while the channel is ejected as an outlier for the model (skipped, or being probed after its back-off), 0 otherwise.",
			[]string{"channel", "model"}, nil),
		ejections: prometheus.NewDesc("ttfx_channel_ejections_total",
			"Times the channel was ejected for the model: consecutive connect errors, 5xx, header or first-output timeouts, or a failed probe.",
			[]string{"channel", "model"}, nil),
		hedges: prometheus.NewDesc("ttfx_hedges_total",
			"Hedged first-output attempts: outcome=started when one starts, won when it reached first output first and was relayed, lost when the primary won or the hedge failed.",
			[]string{"outcome"}, nil),
		decisions: prometheus.NewDesc("ttfx_route_decisions_total",
			"Requests whose routing plan put the channel first, by the strategy that ordered it (priority, weighted, latency; models without a route count under priority).",
			[]string{"strategy", "channel"}, nil),
		skipped: prometheus.NewDesc("ttfx_route_skipped_total",
			"Requests whose routing plan passed over the channel: reason=rate_limited when its provider budget (the rate-limit headers its answers told, or a 429's Retry-After) could not hold the request, ejected when it was ejected as an outlier.",
			[]string{"channel", "reason"}, nil),
	})
}

type routingCollector struct {
	f                                              func() RoutingStats
	ejected, ejections, hedges, decisions, skipped *prometheus.Desc
}

func (c *routingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.ejected
	ch <- c.ejections
	ch <- c.hedges
	ch <- c.decisions
	ch <- c.skipped
}

func (c *routingCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.f()
	for _, e := range st.Channels {
		v := 0.0
		if e.Ejected {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.ejected, prometheus.GaugeValue, v, safeLabel(e.Channel), safeLabel(e.Model))
		ch <- prometheus.MustNewConstMetric(c.ejections, prometheus.CounterValue, float64(e.Ejections), safeLabel(e.Channel), safeLabel(e.Model))
	}
	ch <- prometheus.MustNewConstMetric(c.hedges, prometheus.CounterValue, float64(st.HedgesStarted), "started")
	ch <- prometheus.MustNewConstMetric(c.hedges, prometheus.CounterValue, float64(st.HedgesWon), "won")
	ch <- prometheus.MustNewConstMetric(c.hedges, prometheus.CounterValue, float64(st.HedgesLost), "lost")
	for _, d := range st.Decisions {
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(d.Plans), d.Strategy, safeLabel(d.Channel))
	}
	for _, s := range st.Skips {
		ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(s.Plans), safeLabel(s.Channel), s.Reason)
	}
}
