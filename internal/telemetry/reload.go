package telemetry

import "github.com/prometheus/client_golang/prometheus"

// ReloadStats are the configuration reloads of a gateway (issue 48).
type ReloadStats struct {
	OK, Failed uint64
	// LastOK is when the configuration in use was loaded (Unix seconds).
	LastOK float64
	// LastFailed is set while the newest reload attempt failed: the file
	// on disk is not the configuration in use.
	LastFailed bool
}

// RegisterReloads adds ttfx_config_reloads_total{result},
// ttfx_config_last_reload_success_timestamp_seconds and
// ttfx_config_last_reload_failed, read from f at each scrape.
func (m *Metrics) RegisterReloads(f func() ReloadStats) {
	for _, result := range []string{"ok", "error"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "ttfx_config_reloads_total",
			Help:        "Configuration reloads by result: ok (the new configuration is in use) or error (it was invalid and nothing changed).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 {
			if s := f(); result == "ok" {
				return float64(s.OK)
			} else {
				return float64(s.Failed)
			}
		}))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ttfx_config_last_reload_success_timestamp_seconds",
		Help: "When the configuration in use was loaded (start or last successful reload), in Unix seconds.",
	}, func() float64 { return f().LastOK }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ttfx_config_last_reload_failed",
		Help: "1 while the newest reload attempt failed (the gateway runs on the configuration loaded before), else 0.",
	}, func() float64 {
		if f().LastFailed {
			return 1
		}
		return 0
	}))
}
