package relay

import (
	"net/http"
	"slices"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// maxPathInReply bounds how much of a client's path or method the gateway
// echoes in an error message or record.
const maxPathInReply = 200

// registerFallbacks makes every other path under the model APIs' prefixes
// answer in the protocol's own error format, as the providers do, rather
// than with net/http's plain-text "404 page not found" or "Method Not
// Allowed", which SDKs cannot parse (issue 14). A path the gateway serves
// with another method gets 405 and an Allow header.
func (g *Gateway) registerFallbacks(mux *http.ServeMux) {
	h := http.HandlerFunc(g.unknownRoute)
	for _, p := range wire.Prefixes() {
		mux.Handle(p, h)
	}
}

func (g *Gateway) unknownRoute(w http.ResponseWriter, r *http.Request) {
	tl := timeline.New(g.opts.Now)
	unit := wire.Guess(r)
	method, path := bound(r.Method), bound(r.URL.Path)
	herr := &HTTPError{Code: http.StatusNotFound, Type: "invalid_request_error", Status: record.StatusBadRequest,
		Msg: "unknown path: " + method + " " + path + " is not an endpoint of this gateway"}
	code := "unknown_url"
	if allow := allowedMethods(r.URL.Path); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		herr.Code = http.StatusMethodNotAllowed
		herr.Msg = "method " + method + " is not allowed on " + path + " (use " + strings.Join(allow, " or ") + ")"
		code = "method_not_allowed"
	}
	api := unit.Name
	x := &exchange{g: g, ep: endpoint{api: api, proto: unit.Family, unit: unit}, w: w, r: r, tl: tl, proto: unit.Family, unit: unit}
	x.rec = record.Record{RequestID: NewRequestID(), Timestamp: tl.Start().UTC(), API: api, SkippedEjected: []string{}}
	w.Header().Set("X-Request-Id", x.rec.RequestID)
	x.rec.Status, x.rec.Error, x.rec.HTTPStatus = herr.Status, herr.Msg, herr.Code
	x.committed = true
	body := unit.ErrorBody(protocol.ErrorResponse{Status: herr.Code, Message: herr.Msg, Type: herr.Type, Code: code})
	w.Header().Set("Content-Type", "application/json")
	if unit.ErrorHeaders != nil {
		unit.ErrorHeaders(w.Header(), herr.Code)
	}
	w.WriteHeader(herr.Code)
	w.Write(body)
	x.finish()
}

// allowedMethods returns the methods the gateway serves path with.
func allowedMethods(path string) []string {
	var out []string
	for _, ep := range endpoints() {
		method, pat, _ := strings.Cut(ep.pattern, " ")
		if patternMatches(pat, path) {
			if !slices.Contains(out, method) {
				out = append(out, method)
			}
		}
	}
	return out
}

// patternMatches reports whether path is one of pat's paths: segment by
// segment, a {wildcard} matching any one non-empty segment (the ServeMux
// patterns of wire.Endpoint have no {x...} or {$}).
func patternMatches(pat, path string) bool {
	for {
		ps, prest, pmore := strings.Cut(pat, "/")
		s, rest, more := strings.Cut(path, "/")
		if pmore != more {
			return false
		}
		if ps != s && !(len(ps) > 2 && ps[0] == '{' && ps[len(ps)-1] == '}' && s != "") {
			return false
		}
		if !more {
			return true
		}
		pat, path = prest, rest
	}
}

// bound cuts a client-sent string to maxPathInReply bytes.
func bound(s string) string {
	if len(s) > maxPathInReply {
		return s[:maxPathInReply] + "…"
	}
	return s
}

// missingKeyText says why no key was found: an Authorization header
// without the Bearer scheme (`Authorization: KEY`) is the common slip, and
// "missing API key" would send its sender looking in the wrong place.
func missingKeyText(r *http.Request) string {
	if h := strings.TrimSpace(r.Header.Get("Authorization")); h != "" {
		scheme, _, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "the Authorization header has no Bearer scheme: use Authorization: Bearer KEY"
		}
		return "the Authorization header holds no key: use Authorization: Bearer KEY"
	}
	return "missing API key (send Authorization: Bearer KEY, x-api-key or x-goog-api-key)"
}
