package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/web"
)

// setupWeb adds the dashboard under /ui/ (issue 9). Its views call the
// read API in-process through mux itself, so they see every /api/ route
// registered on it (the diagnosis endpoint included) with the caller's
// key and the API's own access rules.
func (s *Server) setupWeb(mux *http.ServeMux) error {
	if t := s.cfg.Telemetry.TraceURL; t != "" {
		u, err := url.Parse(strings.ReplaceAll(t, "{trace_id}", "0"))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !strings.Contains(t, "{trace_id}") {
			return fmt.Errorf("telemetry.trace_url %q: want an http(s) URL with {trace_id} where the id goes, e.g. http://127.0.0.1:16686/trace/{trace_id}", t)
		}
	}
	var groups []string
	for _, e := range s.keys.Entries() {
		if g := e.Principal.Group; g != "" && !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	slices.Sort(groups)
	web.New(web.Options{
		API:     mux,
		Resolve: api.KeyringResolver(s.keys),
		Channels: func() []web.Channel {
			var out []web.Channel
			live := s.router.Live()
			for i, c := range s.router.Channels() {
				ch := web.Channel{Name: c.Name, Protocol: c.Protocol, Region: c.Region, Provider: c.Provider,
					Groups: c.Groups, Inflight: c.Inflight(), State: "serving"}
				l := live[i]
				var ej []string
				for _, m := range l.Models {
					if m.State == "healthy" {
						continue
					}
					e := m.Model + " " + m.State
					if m.EjectedUntil != nil {
						e += " until " + m.EjectedUntil.Format("15:04:05 UTC")
					}
					ej = append(ej, e+": "+m.Reason)
				}
				if len(ej) > 0 {
					ch.State, ch.Ejection = "ejected", strings.Join(ej, "; ")
				}
				if op := l.Op; op.By != "" {
					ch.Operator = op.State.String() + " by " + op.By + " at " + op.At.UTC().Format("15:04:05 UTC")
					if op.State != route.OpServing {
						ch.State = op.State.String()
					}
				}
				out = append(out, ch)
			}
			return out
		},
		Routing:  s.router.Report,
		Groups:   groups,
		Rules:    s.rules,
		TraceURL: s.cfg.Telemetry.TraceURL,
		Log:      s.log,
	}).Register(mux)
	return nil
}
