package server

import (
	"log/slog"

	"github.com/ttfx/ttfx/internal/admission"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// buildLimiter returns the admission limiter of the configuration's
// limits, or nil when it has none (the relay then skips admission).
func buildLimiter(cfg config.Limits, log *slog.Logger) (*admission.Limiter, error) {
	if len(cfg.Rules) == 0 {
		return nil, nil
	}
	rules := make([]admission.Rule, len(cfg.Rules))
	for i, l := range cfg.Rules {
		r := admission.Rule{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute,
			Concurrent: l.Concurrent, Queue: l.Queue.D()}
		switch {
		case l.Key != "":
			r.Scope, r.Match = admission.ScopeKey, l.Key
		case l.Group != "":
			r.Scope, r.Match = admission.ScopeGroup, l.Group
		default:
			r.Scope, r.Match = admission.ScopeModel, l.Model
		}
		rules[i] = r
	}
	if cfg.Shared != "" {
		return admission.NewShared(rules, admission.SharedOptions{URL: cfg.Shared, Password: cfg.Password, Log: log})
	}
	return admission.New(rules, admission.Options{})
}

// admissionStats reads the limiter's counts for /metrics.
func admissionStats(l *admission.Limiter) func() telemetry.AdmissionStats {
	return func() telemetry.AdmissionStats {
		var out telemetry.AdmissionStats
		for _, s := range l.Stats() {
			out.Limits = append(out.Limits, telemetry.AdmissionLimit{Limit: s.Limit, Kind: s.Kind,
				Admitted: s.Admitted, Queued: s.Queued, Rejected: s.Rejected})
		}
		if st, ok := l.Shared(); ok {
			out.Shared = &telemetry.AdmissionShared{Up: st.Up, Replicas: st.Replicas, Fallbacks: st.Fallbacks, Failures: st.Failures}
		}
		return out
	}
}
