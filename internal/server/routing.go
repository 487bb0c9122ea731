package server

import (
	"encoding/json"
	"net/http"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// buildRoutes turns the configured routes into the router's (issue 13).
func buildRoutes(rs []config.Route) []*route.Route {
	var out []*route.Route
	for _, r := range rs {
		rt := &route.Route{Models: r.Models, Strategy: route.Strategy(r.Strategy)}
		if l := r.Latency; l != nil {
			rt.Latency = route.LatencyPolicy{Definition: route.Definition(l.Definition), Percentile: l.Percentile}
			if l.Explore != nil {
				rt.Latency.Explore = *l.Explore
			}
		}
		if e := r.Eject; e != nil {
			rt.Eject = &route.EjectPolicy{ConsecutiveFailures: e.ConsecutiveFailures, Base: e.Base.D(), Max: e.Max.D()}
		}
		if h := r.Hedge; h != nil {
			rt.Hedge = &route.HedgePolicy{After: h.After.Delay, Percentile: h.After.Percentile, Floor: h.Floor.D(), MaxShare: h.MaxShare}
		}
		out = append(out, rt)
	}
	return out
}

// registerChannelHealth adds GET /api/channels/health: the router's live
// health per channel and model, ejections and hedges. Admin only: it names
// every channel and the models clients asked for.
func (s *Server) registerChannelHealth(mux *http.ServeMux) {
	resolve := api.KeyringResolver(s.keys)
	mux.HandleFunc("GET /api/channels/health", func(w http.ResponseWriter, r *http.Request) {
		_, ok := adminOnly(w, r, resolve, "channel health is readable with an admin key only")
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(s.router.Report())
	})
}

// routingStats reads the router for the routing metrics.
func (s *Server) routingStats() telemetry.RoutingStats {
	var st telemetry.RoutingStats
	for _, e := range s.router.Ejections() {
		st.Channels = append(st.Channels, telemetry.ChannelEjection{Channel: e.Channel, Model: e.Model, Ejected: e.Ejected, Ejections: e.Ejections})
	}
	st.HedgesStarted, st.HedgesWon, st.HedgesLost = s.router.Hedges()
	for _, d := range s.router.Decisions() {
		st.Decisions = append(st.Decisions, telemetry.RouteDecision{Strategy: d.Strategy, Channel: d.Channel, Plans: d.Plans})
	}
	for _, k := range s.router.Skips() {
		st.Skips = append(st.Skips, telemetry.RouteSkip{Channel: k.Channel, Reason: k.Reason, Plans: k.Plans})
	}
	return st
}

// adminOnly resolves the request's key and answers 401 without a valid one
// or 403 (forbidden, the reason) when it is not an admin's; ok is false
// when it answered.
func adminOnly(w http.ResponseWriter, r *http.Request, resolve api.Resolver, forbidden string) (auth.Principal, bool) {
	p, ok := resolve(r)
	switch {
	case !ok:
		api.WriteError(w, http.StatusUnauthorized, api.TypeAuthentication, "a valid admin key is required (Authorization: Bearer KEY)")
		return p, false
	case p.Role != auth.RoleAdmin:
		api.WriteError(w, http.StatusForbidden, api.TypePermission, forbidden)
		return p, false
	}
	return p, true
}
