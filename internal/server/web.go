package server

import (
	"net/http"
	"slices"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/web"
)

// setupWeb adds the dashboard under /ui/ (issue 9). Its views call the
// read API in-process through mux itself, so they see every /api/ route
// registered on it (the diagnosis endpoint included) with the caller's
// key and the API's own access rules.
func (s *Server) setupWeb(mux *http.ServeMux) error {
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
			for _, c := range s.router.Channels() {
				out = append(out, web.Channel{Name: c.Name, Protocol: c.Protocol, Region: c.Region, Provider: c.Provider,
					Groups: c.Groups, Inflight: c.Inflight()})
			}
			return out
		},
		Routing: s.router.Report,
		Groups:  groups,
		Rules:   s.rules,
		Log:     s.log,
	}).Register(mux)
	return nil
}
