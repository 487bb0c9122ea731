// Package web serves the dashboard of SPEC.md §8 at /ui/: percentiles of
// the four time-to-first-X definitions with each definition written out,
// their time series, the visible-TPS distribution, statuses and verdicts
// (Overview); the request list with a waterfall per row (Requests); the
// t0…t7 waterfall, attempts, events, tokens and verdicts of one request
// (Request detail); and p50/p95 per channel and model (Channels).
//
// Every view is made on the server from the answers of the read API
// (internal/api), called in-process with the caller's own key: the access
// rules are the API's, not a copy of them (an admin reads all, a viewer its
// group, a client nothing here), and every number comes from the store's
// queries — a page of List or the percentiles of Stats — never from rows
// loaded into the browser. The views are HTML fragments with server-made
// SVG charts; a small script in the page (assets/app.js) logs in, swaps the
// fragments in, and polls the live parts.
//
// Why server-made SVG rather than a vendored chart library: the charts are
// few and simple (lines with gaps, bars, box plots, waterfalls); made in Go
// they see the typed "absent" of the records and draw it as a gap, never as
// 0; they are checked by Go tests without a browser; they are DOM, so the
// browser tests can find a drawn gap by its attribute; and there is no
// third-party script to keep patched.
//
// Why the key lives in sessionStorage rather than a cookie: the read API
// takes Authorization: Bearer and nothing ambient, so no request can be
// forged from another site (no CSRF on any endpoint, present or future); a
// cookie would need the API to accept one. sessionStorage is per tab and
// gone when the tab closes. The price — script can read the key — is paid
// down by a strict Content-Security-Policy (scripts from this origin only,
// no inline script or style) and by escaping every string the server puts
// in a page (html/template and escaped SVG text).
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"slices"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/route"
)

//go:embed assets
var assetFS embed.FS

// Channel is a channel as the Channels view shows it, with its live
// inflight count.
type Channel struct {
	Name     string
	Protocol string
	Region   string
	Provider string
	Groups   []string // client groups allowed; empty allows all
	Inflight int64    // requests on the channel now
	// State is serving, ejected, drained or disabled (GET /api/channels);
	// Operator says who set an operator's state ("drained by ops"), and
	// Ejection the models it is ejected for, until when and why.
	State, Operator, Ejection string
}

// Options configure a Handler.
type Options struct {
	// API serves the read API (/api/requests, /api/stats, …, and
	// /api/requests/{id}/diagnosis when it exists). The views call it
	// in-process with the caller's key.
	API http.Handler
	// Resolve identifies the caller from its key.
	Resolve api.Resolver
	// Channels returns the configured channels with their inflight counts
	// now; nil means none are shown.
	Channels func() []Channel
	// Routing returns the router's live health, ejections and hedges
	// (route.Router.Report); nil leaves the live routing tables out.
	Routing func() route.HealthReport
	// Groups are the client groups the keys name, offered as filter values
	// to admins.
	Groups []string
	// Rules are the diagnosis thresholds, used to show the value that
	// fired each verdict while the gateway has no diagnosis endpoint; nil
	// shows the verdicts and their advice without values.
	Rules *diagnose.Rules
	// Now anchors time ranges; nil means time.Now.
	Now func() time.Time
	// Log receives failures of the read API; nil discards.
	Log *slog.Logger
	// TraceURL links a request's trace id to a tracing UI from its detail
	// (issue 17): an http(s) URL with {trace_id} where the id goes. Empty:
	// the trace id is shown without a link.
	TraceURL string
}

// Handler serves the dashboard.
type Handler struct {
	opts   Options
	log    *slog.Logger
	assets map[string]asset
	mux    *http.ServeMux // the routes of Register, for ServeHTTP
}

// asset is an embedded file with its validator.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// New returns the dashboard handler.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Channels == nil {
		opts.Channels = func() []Channel { return nil }
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts, log: log, assets: map[string]asset{}}
	sub, _ := fs.Sub(assetFS, "assets")
	fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(sub, p)
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.assets[p] = asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	h.mux = http.NewServeMux()
	h.Register(h.mux)
	return h
}

// csp keeps the page to its own origin: no inline script or style, no
// frames, no other hosts. The charts are inline SVG with presentation
// attributes and classes, which a style-src without 'unsafe-inline'
// allows; the favicon is an empty data: URL so Chromium does not fetch
// /favicon.ico.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Register adds the dashboard's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /ui/{$}", h.page("index.html"))
	mux.HandleFunc("GET /ui/assets/{file}", func(w http.ResponseWriter, r *http.Request) {
		h.page(r.PathValue("file"))(w, r)
	})
	mux.HandleFunc("GET /ui/view/session", h.view(h.session))
	mux.HandleFunc("GET /ui/view/overview", h.view(h.overview))
	mux.HandleFunc("GET /ui/view/requests", h.view(h.requests))
	mux.HandleFunc("GET /ui/view/request/{id}", h.view(h.request))
	mux.HandleFunc("GET /ui/view/channels", h.view(h.channels))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header())
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, http.StatusMethodNotAllowed, api.TypeInvalidRequest, r.Method+" is not allowed here; the dashboard is GET only")
			return
		}
		api.WriteError(w, http.StatusNotFound, api.TypeNotFound, "no such page: "+api.Clip(r.URL.Path, api.MaxEcho))
	})
}

// ServeHTTP serves the dashboard's routes alone (tests and embedding).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func secure(hd http.Header) {
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
}

// page serves an embedded asset. The page and its script carry no data, so
// they need no key; everything with data comes from /ui/view/.
func (h *Handler) page(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header())
		a, ok := h.assets[name]
		if !ok {
			api.WriteError(w, http.StatusNotFound, api.TypeNotFound, "no such asset: "+name)
			return
		}
		w.Header().Set("Content-Type", a.ctype)
		w.Header().Set("ETag", a.etag)
		// Revalidate every time: a new binary must not be hidden behind
		// a cached script, and the 304 costs one round trip on loopback.
		w.Header().Set("Cache-Control", "no-cache")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write(a.body)
	}
}

// viewFunc makes one view for an authenticated dashboard user. It returns
// the HTML fragment, or an error (an *apiError keeps its status).
type viewFunc func(r *http.Request, p auth.Principal, q viewQuery) ([]byte, error)

// view wraps a view: a valid admin or viewer key, known parameters, and
// errors in the read API's JSON format.
func (h *Handler) view(fn viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header())
		p, ok := h.opts.Resolve(r)
		if !ok {
			msg := "a valid admin or viewer key is required (Authorization: Bearer KEY)"
			if auth.FromRequest(r) == "" {
				msg = "no key: send Authorization: Bearer KEY"
			}
			api.WriteError(w, http.StatusUnauthorized, api.TypeAuthentication, msg)
			return
		}
		if p.Role != auth.RoleAdmin && p.Role != auth.RoleViewer {
			api.WriteError(w, http.StatusForbidden, api.TypePermission, "client keys cannot open the dashboard; use an admin or viewer key")
			return
		}
		q, err := parseViewQuery(r.URL.Query(), h.opts.Now())
		if err != nil {
			api.WriteError(w, http.StatusBadRequest, api.TypeInvalidRequest, err.Error())
			return
		}
		body, err := fn(r, p, q)
		if err != nil {
			h.writeErr(w, r, err)
			return
		}
		// The session view answers JSON; every other view is an HTML
		// fragment, which never starts with '{'.
		ct := "text/html; charset=utf-8"
		if len(body) > 0 && body[0] == '{' {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body)
	}
}

func (h *Handler) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if asAPIError(err, &ae) {
		api.WriteError(w, ae.Code, ae.Type, ae.Message)
		return
	}
	if r.Context().Err() != nil {
		return // the browser left
	}
	h.log.Error("web: view failed", "path", api.Clip(r.URL.Path, api.MaxEcho), "err", err)
	api.WriteError(w, http.StatusInternalServerError, api.TypeAPI, "the dashboard could not make this view; see the gateway's log")
}

// sessionInfo is the answer of /ui/view/session: who the key is.
type sessionInfo struct {
	Name  string   `json:"name"`
	Role  string   `json:"role"`
	Group string   `json:"group"`
	Views []string `json:"views"`
}

func (h *Handler) session(r *http.Request, p auth.Principal, q viewQuery) ([]byte, error) {
	b, err := json.Marshal(sessionInfo{Name: p.Name, Role: string(p.Role), Group: p.Group,
		Views: []string{"overview", "requests", "channels"}})
	return append(b, '\n'), err
}

// visibleChannels are the channels p may see: all for an admin; for a
// viewer, those its group can be routed to.
func (h *Handler) visibleChannels(p auth.Principal) []Channel {
	var out []Channel
	for _, c := range h.opts.Channels() {
		if p.Role == auth.RoleAdmin || len(c.Groups) == 0 || slices.Contains(c.Groups, p.Group) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Channel) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// groups are the group filter values p may pick.
func (h *Handler) groups(p auth.Principal) []string {
	if p.Role != auth.RoleAdmin {
		return []string{p.Group}
	}
	return h.opts.Groups
}

// render executes a template into a fresh buffer.
func render(name string, data any) ([]byte, error) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
