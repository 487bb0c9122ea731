package server

import (
	"encoding/json"
	"net/http"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/store"
)

// registerDiagnosis adds GET /api/requests/{id}/diagnosis: the request's
// verdicts with advice and the context of its channel and model (SPEC.md
// §4, issue 6), under the same access rules as the record itself.
func (s *Server) registerDiagnosis(mux *http.ServeMux) {
	resolve := api.KeyringResolver(s.keys)
	mux.HandleFunc("GET /api/requests/{id}/diagnosis", func(w http.ResponseWriter, r *http.Request) {
		p, ok := resolve(r)
		if !ok {
			msg := "a valid API key is required (Authorization: Bearer KEY)"
			if auth.FromHeaders(r) == "" {
				msg = "no API key: send Authorization: Bearer KEY"
			}
			api.WriteError(w, http.StatusUnauthorized, api.TypeAuthentication, msg)
			return
		}
		rec, ok := s.api.ReadRecord(w, r, p, r.PathValue("id"))
		if !ok {
			return
		}
		// The context summarises only what the reader may read itself.
		var within store.Filter
		switch p.Role {
		case auth.RoleViewer:
			within.Group = p.Group
		case auth.RoleClient:
			within.KeyName = p.Name
		}
		rep, err := s.rules.Explain(r.Context(), s.store, rec, within)
		if err != nil {
			s.log.Error("diagnosis", "request_id", rec.RequestID, "err", err)
			api.WriteError(w, http.StatusServiceUnavailable, api.TypeAPI, "the store could not answer; try again")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(rep)
	})
}
