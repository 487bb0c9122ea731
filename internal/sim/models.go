package sim

import (
	"net/http"

	"github.com/ttfx/ttfx/internal/wire"
)

// The model-listing paths (Unit.ModelPaths) list the profiles, and name one,
// in the form of the API whose client the request comes from (wire.Guess:
// by its path, or a header its SDKs always send), or else of the default
// API.

// modelUnit returns the API a models request is answered for and the unit
// that writes its form.
func modelUnit(r *http.Request) (*wire.API, *Unit) {
	a := wire.Guess(r)
	if a != nil {
		if u := units[API(a.Name)]; u != nil && u.ModelList != nil {
			return a, u
		}
	}
	if d := wire.Default(); d != nil {
		return a, units[API(d.Name)]
	}
	return a, nil
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	a, u := modelUnit(r)
	if r.Method != http.MethodGet {
		s.methodNotAllowed(w, a, "GET")
		return
	}
	if u == nil || u.ModelList == nil {
		writeError(w, a, errorf(http.StatusNotFound, "The simulator lists no models in this API's form."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(u.ModelList(s.Profiles()))
}

// model serves GET of one model's path.
func (s *Server) model(w http.ResponseWriter, r *http.Request, name string) {
	a, u := modelUnit(r)
	if _, ok := s.profiles[name]; !ok || u == nil || u.ModelObject == nil {
		writeError(w, a, errorf(http.StatusNotFound, "The model '"+name+"' does not exist."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(u.ModelObject(name))
}
