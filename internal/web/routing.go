package web

import (
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/route"
)

// The Channels view's live routing part (issue 13): the router's health per
// channel and model, ejections, and each route's hedges.

// healthRow is one channel and model of the live health table.
type healthRow struct {
	Channel, Model, Route, Strategy string
	State                           string // healthy | ejected | probing
	Ejected                         bool
	EjectedFor                      string // time left before the probe; "" unless ejected
	Ejections                       uint64
	Inflight                        int64
	Headers, FirstResponse, First   [2]string // p50, p95
	Samples                         int
	Censored                        int // hedge losers' lower bounds, not in the percentiles
	ErrorRate, TimeoutRate          string
	Attempts                        int
	// Budget is the provider's remaining budget ("12 requests, 3400
	// tokens left · whole in 4.2 s"); "—" when no answer told one.
	Budget string
}

// routeRow is one configured route.
type routeRow struct {
	Route, Strategy            string
	Decisions, Explored        uint64
	Hedging                    bool
	Started, Won, Lost, Denied uint64
	WinRate                    string // won / (won + lost)
}

// routing returns the live rows for an admin. Health is kept per channel
// and model across all groups, so a group's viewer would see the models
// other groups ask for: like GET /api/channels/health, it is admin only.
func (h *Handler) routing(p auth.Principal, visible []Channel) (rows []healthRow, routes []routeRow) {
	if h.opts.Routing == nil || p.Role != auth.RoleAdmin {
		return nil, nil
	}
	rep := h.opts.Routing()
	seen := map[string]bool{}
	for _, c := range visible {
		seen[c.Name] = true
	}
	pair := func(f route.FieldStats) [2]string {
		if f.Count == 0 {
			return [2]string{"—", "—"}
		}
		return [2]string{ms(f.P50), ms(f.P95)}
	}
	rate := func(r *float64) string {
		if r == nil {
			return "—"
		}
		return percent(*r)
	}
	for _, v := range rep.Channels {
		if !seen[v.Channel] {
			continue
		}
		row := healthRow{Channel: v.Channel, Model: v.Model, Route: v.Route, Strategy: v.Strategy, State: v.State,
			Ejected: v.State != "healthy", Ejections: v.Ejections, Inflight: v.Inflight,
			Headers: pair(v.UpstreamHeaders), FirstResponse: pair(v.FirstResponse), First: pair(v.FirstText),
			Samples: v.FirstResponse.Count, Censored: v.FirstResponse.Censored, ErrorRate: rate(v.ErrorRate), TimeoutRate: rate(v.TimeoutRate), Attempts: v.Counts.Attempts}
		if row.Route == "" {
			row.Route = "default"
		}
		if v.EjectedForMs > 0 {
			row.EjectedFor = strconv.FormatFloat(v.EjectedForMs/1000, 'f', 1, 64) + " s"
		}
		row.Budget = budgetText(v.RateLimit)
		rows = append(rows, row)
	}
	for _, r := range rep.Routes {
		row := routeRow{Route: r.Route, Strategy: r.Strategy, Decisions: r.Decisions, Explored: r.Explored, Hedging: r.Hedging,
			Started: r.Hedges.Started, Won: r.Hedges.Won, Lost: r.Hedges.Lost, Denied: r.Hedges.Denied, WinRate: "—"}
		if n := r.Hedges.Won + r.Hedges.Lost; n > 0 {
			row.WinRate = percent(float64(r.Hedges.Won) / float64(n))
		}
		routes = append(routes, row)
	}
	return rows, routes
}

// budgetText is a channel's provider budget for the live table.
func budgetText(b *route.BudgetView) string {
	if b == nil {
		return "—"
	}
	var parts []string
	var reset float64
	for _, d := range []struct {
		name string
		n    *int64
		r    *float64
	}{{"requests", b.RemainingRequests, b.RequestsResetMs}, {"tokens", b.RemainingTokens, b.TokensResetMs}} {
		if d.n == nil {
			continue
		}
		parts = append(parts, strconv.FormatInt(*d.n, 10)+" "+d.name)
		if d.r != nil {
			reset = max(reset, *d.r)
		}
	}
	return strings.Join(parts, ", ") + " left · whole in " + strconv.FormatFloat(reset/1000, 'f', 1, 64) + " s"
}
