package route

import (
	"slices"
	"strings"
	"time"
)

// HealthView is the live health of one channel for one model, as
// GET /api/channels/health and the dashboard show it.
type HealthView struct {
	Channel  string `json:"channel"`
	Model    string `json:"model"`    // the channel's model pattern that served the requests
	Group    string `json:"group"`    // the clients' group; health is kept per group
	Route    string `json:"route"`    // the matched route's model patterns; empty: the default
	Strategy string `json:"strategy"` // of that route
	Inflight int64  `json:"inflight"` // attempts for this model on the channel now

	// Recent percentiles (R-7 over the last ringSize samples of the last
	// window), from the attempt's own upstream start; streaming requests
	// that got an answer only.
	UpstreamHeaders FieldStats `json:"upstream_headers_ms"`
	FirstResponse   FieldStats `json:"first_response_ms"`
	FirstText       FieldStats `json:"first_text_delta_ms"`

	Counts      Counts   `json:"counts"`
	ErrorRate   *float64 `json:"error_rate"`   // errors / (attempts − cancelled); null with none
	TimeoutRate *float64 `json:"timeout_rate"` // timeouts / (attempts − cancelled); null with none

	Ejection
	EjectedForMs float64 `json:"ejected_for_ms"` // until the probe may start; 0 unless ejected
	// RateLimit is the provider's budget as the channel's last answers
	// told it (budget.go); nil when none told one that still holds.
	RateLimit *BudgetView `json:"rate_limit,omitempty"`
}

// RouteView is one configured route with its decisions and hedges.
type RouteView struct {
	Route     string `json:"route"`
	Strategy  string `json:"strategy"`
	Decisions uint64 `json:"decisions"` // plans made
	Explored  uint64 `json:"explored"`  // of which put another channel first to explore
	Hedging   bool   `json:"hedging"`
	Hedges    struct {
		Started  uint64 `json:"started"`
		Won      uint64 `json:"won"`
		Lost     uint64 `json:"lost"`
		Denied   uint64 `json:"denied"`   // wanted but over the cap
		Inflight int64  `json:"inflight"` // running now
	} `json:"hedges"`
}

// HealthReport is the whole live view.
type HealthReport struct {
	Window     string       `json:"window"` // how far back samples count
	Samples    int          `json:"samples_per_field"`
	Percentile string       `json:"percentile_method"`
	Channels   []HealthView `json:"channels"`
	Routes     []RouteView  `json:"routes"`
	// Ejections counts every ejection since start.
	Ejections uint64 `json:"ejections_total"`
}

// Report returns the live health of every channel and model seen, sorted
// by channel then model, and the routes.
func (r *Router) Report() HealthReport {
	now := r.since()
	rep := HealthReport{Window: window.String(), Samples: ringSize,
		Percentile: "R-7 over the most recent samples", Ejections: r.ejectionsTotal.Load(),
		Channels: []HealthView{}, Routes: []RouteView{}}
	for _, c := range r.Channels() {
		c.health.Range(func(_, v any) bool {
			h := v.(*Health)
			s := h.snapshot(true)
			hv := HealthView{Channel: c.Name, Model: h.Model, Group: h.Group, Strategy: string(StrategyPriority), Inflight: h.Inflight(),
				UpstreamHeaders: s.fields[FieldHeaders], FirstResponse: s.fields[FieldFirstResponse], FirstText: s.fields[FieldFirstText],
				Counts: s.counts, Ejection: h.ejection(now), RateLimit: h.budgetView(now)}
			if rt := h.route.Load(); rt != nil {
				hv.Route, hv.Strategy = rt.Name(), string(rt.Strategy)
			}
			if n := s.counts.Attempts - s.counts.Cancelled; n > 0 {
				e, t := float64(s.counts.Errors)/float64(n), float64(s.counts.Timeouts)/float64(n)
				hv.ErrorRate, hv.TimeoutRate = &e, &t
			}
			hv.EjectedForMs = float64(hv.Remaining) / float64(time.Millisecond)
			rep.Channels = append(rep.Channels, hv)
			return true
		})
	}
	slices.SortFunc(rep.Channels, func(a, b HealthView) int {
		if c := strings.Compare(a.Channel, b.Channel); c != 0 {
			return c
		}
		if c := strings.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		if c := strings.Compare(a.Route, b.Route); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	for _, rt := range r.Routes() {
		v := RouteView{Route: rt.Name(), Strategy: string(rt.Strategy), Decisions: rt.decisions.Load(), Explored: rt.explored.Load(), Hedging: rt.Hedge != nil}
		v.Hedges.Started, v.Hedges.Won, v.Hedges.Lost = rt.hedgesStarted.Load(), rt.hedgesWon.Load(), rt.hedgesLost.Load()
		v.Hedges.Denied, v.Hedges.Inflight = rt.hedgesDenied.Load(), rt.hedgesInflight.Load()
		rep.Routes = append(rep.Routes, v)
	}
	return rep
}

// EjectionGauge is one channel and model's ejection state for metrics.
type EjectionGauge struct {
	Channel, Model string
	Ejected        bool
	Ejections      uint64
}

// Ejections returns the ejection state of every channel and model pattern
// that has health, for the ttfx_channel_ejected gauge and
// ttfx_channel_ejections_total: over its routes and groups, ejected when
// it is ejected for any, and the sum of their ejections. The label sets
// are the configured channels and patterns, never a client's model name.
func (r *Router) Ejections() []EjectionGauge {
	var out []EjectionGauge
	for _, c := range r.Channels() {
		at := map[string]int{}
		c.health.Range(func(_, v any) bool {
			h := v.(*Health)
			i, ok := at[h.Model]
			if !ok {
				i = len(out)
				at[h.Model] = i
				out = append(out, EjectionGauge{Channel: c.Name, Model: h.Model})
			}
			out[i].Ejected = out[i].Ejected || h.Ejected()
			out[i].Ejections += h.ejections.Load()
			return true
		})
	}
	return out
}

// Hedges returns the hedges started, won and lost over all routes.
func (r *Router) Hedges() (started, won, lost uint64) {
	for _, rt := range r.Routes() {
		started += rt.hedgesStarted.Load()
		won += rt.hedgesWon.Load()
		lost += rt.hedgesLost.Load()
	}
	return
}

// Decision counts the plans that put a channel first under a strategy.
type Decision struct {
	Strategy, Channel string
	Plans             uint64
}

// Decisions returns, for each channel and strategy that made a plan, how
// many plans put the channel first (ttfx_route_decisions_total).
func (r *Router) Decisions() []Decision {
	var out []Decision
	for _, c := range r.Channels() {
		for i, s := range strategies {
			if n := c.decisions[i].Load(); n > 0 {
				out = append(out, Decision{Strategy: string(s), Channel: c.Name, Plans: n})
			}
		}
	}
	return out
}

// SkipReason is why a plan passed over a channel.
type SkipReason uint8

const (
	SkipRateLimited SkipReason = iota // its provider budget could not hold the request (budget.go)
	SkipEjected                       // ejected as an outlier (eject.go)
	numSkipReasons
)

func (s SkipReason) String() string { return [...]string{"rate_limited", "ejected"}[s] }

// Skips counts the plans that passed over a channel for one reason.
type Skips struct {
	Channel, Reason string
	Plans           uint64
}

// Skips returns, for every configured channel and each reason, how many
// plans passed over it (ttfx_route_skipped_total); a channel a plan still
// tried because every other was out too is not counted.
func (r *Router) Skips() []Skips {
	var out []Skips
	for _, c := range r.Channels() {
		for s := range numSkipReasons {
			out = append(out, Skips{Channel: c.Name, Reason: s.String(), Plans: c.skips[s].Load()})
		}
	}
	return out
}
