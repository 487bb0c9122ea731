// Package api serves the read API of SPEC.md §8 over a store.Store:
// GET /api/requests, /api/requests/{id}, /api/stats and /api/health, with
// the access rules of §7.
//
// Access: an admin key reads everything; a viewer key reads its own group
// only, and another group's record is a 404, exactly like a missing one, so
// ids of other groups cannot be probed; /api/health, which is about the
// whole gateway, is for admins only; a client key reads only a request it
// made itself, by id; no key, or an unknown one, gets a 401. Errors are
// JSON: {"error": {"message", "type"}}.
package api

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
)

// Resolver identifies the caller of a request; false means no valid key.
type Resolver func(*http.Request) (auth.Principal, bool)

// KeyringResolver resolves callers by the key they present in a header
// (auth.FromHeaders: Authorization: Bearer, or x-api-key), looked up in k.
// A key in the URL is not looked at: admin and viewer keys must not reach
// access logs and Referer headers.
func KeyringResolver(k *auth.Keyring) Resolver {
	return func(r *http.Request) (auth.Principal, bool) {
		return k.Lookup(auth.FromHeaders(r))
	}
}

// Options configure a Handler.
type Options struct {
	Store   store.Store
	Writer  *store.Writer // reported by /api/health; nil if records are not written here
	Resolve Resolver
	Now     func() time.Time // anchors "since" and the default stats window; nil means time.Now
	Log     *slog.Logger     // store failures; nil discards
	// MaxAnswerValues bounds one /api/stats answer's groups × buckets ×
	// fields; 0 means store.DefaultMaxAnswerValues.
	MaxAnswerValues int
	// Timeout is the deadline of one read, waiting for its turn included;
	// 0 means DefaultReadTimeout.
	Timeout time.Duration
	// Concurrency is how many reads run at once; 0 means
	// DefaultReadConcurrency().
	Concurrency int
	// ReadShare is the share of the machine's CPU time reads may take at
	// full tilt; 0 means DefaultReadShare, 1 lets them run unrested.
	ReadShare float64
}

// Handler serves the read API.
type Handler struct {
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	budget *readBudget
}

// New returns the read API handler.
func New(opts Options) *Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultReadTimeout
	}
	if opts.ReadShare <= 0 || opts.ReadShare > 1 {
		opts.ReadShare = DefaultReadShare
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultReadConcurrency()
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts, log: log, mux: http.NewServeMux(), budget: newReadBudget(opts.Concurrency, opts.ReadShare, opts.Timeout/4)}
	h.Register(h.mux)
	return h
}

// Register adds the API's routes to mux. Method checks are the handlers'
// own so that a wrong method also gets a JSON error. Routes under /api/
// that are not the API's answer a JSON 404; more specific patterns
// registered by others (GET /api/requests/{id}/diagnosis) take precedence.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("/api/requests", h.get(h.list))
	mux.HandleFunc("/api/requests/{id}", h.get(h.one))
	mux.HandleFunc("/api/stats", h.get(h.stats))
	mux.HandleFunc("/api/health", h.get(h.health))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, TypeNotFound, "no such endpoint: "+Clip(r.URL.Path, MaxEcho))
	})
}

// ServeHTTP serves the API's routes (those Register adds).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Error types, as the "type" of a JSON error.
const (
	TypeAuthentication = "authentication_error"  // 401
	TypePermission     = "permission_error"      // 403
	TypeNotFound       = "not_found_error"       // 404
	TypeInvalidRequest = "invalid_request_error" // 400, 405
	TypeAPI            = "api_error"             // 500, 503
)

// ErrorBody is the JSON of an error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong; Message is meant for a person.
type ErrorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// WriteError writes a JSON error.
func WriteError(w http.ResponseWriter, status int, typ, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ttfx"`)
	}
	writeJSON(w, status, ErrorBody{ErrorDetail{Message: msg, Type: typ}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"cannot encode the answer","type":"api_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	// Records are access-controlled: no shared cache may keep them.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// CanRead reports whether p may read rec (SPEC.md §7): admins read all,
// viewers their group, clients the requests made with their own key. It is
// exported for other handlers that serve one record (the diagnosis view);
// answer 404 when it is false, as for a missing record.
func CanRead(p auth.Principal, rec *record.Record) bool {
	switch p.Role {
	case auth.RoleAdmin:
		return true
	case auth.RoleViewer:
		return p.Group != "" && rec.Group == p.Group
	case auth.RoleClient:
		return p.Name != "" && rec.KeyName == p.Name
	}
	return false
}

// handlerFunc is an endpoint after authentication.
type handlerFunc func(w http.ResponseWriter, r *http.Request, p auth.Principal)

// get wraps an endpoint: GET (and HEAD) only, a valid key required.
func (h *Handler) get(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			WriteError(w, http.StatusMethodNotAllowed, TypeInvalidRequest, r.Method+" is not allowed here; the read API is GET only")
			return
		}
		if r.URL.Query().Has("key") {
			// Refused before the key is even looked at, so that a
			// dashboard link or script that puts it there is fixed
			// rather than silently answered 401.
			WriteError(w, http.StatusBadRequest, TypeInvalidRequest,
				"the read API does not take the key as ?key=: URLs end up in access logs and Referer headers; send it in the Authorization header (Authorization: Bearer KEY)")
			return
		}
		if p, ok := h.Authenticate(w, r); ok {
			fn(w, r, p)
		}
	}
}

// Authenticate resolves the caller of r, or answers 401 and reports false.
// It is exported for other read endpoints (the diagnosis view) so that
// they authenticate, and word their 401, as the API does.
func (h *Handler) Authenticate(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	p, ok := h.opts.Resolve(r)
	if !ok {
		msg := "a valid API key is required (Authorization: Bearer KEY)"
		if auth.FromHeaders(r) == "" {
			msg = "no API key: send Authorization: Bearer KEY"
		}
		WriteError(w, http.StatusUnauthorized, TypeAuthentication, msg)
	}
	return p, ok
}

// ReadRecord returns the record of id if p may read it, answering the
// error itself (404 for a record p may not see) when it may not. It is
// exported for handlers of one record, such as the diagnosis view, so that
// they apply the same rules.
func (h *Handler) ReadRecord(w http.ResponseWriter, r *http.Request, p auth.Principal, id string) (record.Record, bool) {
	ctx, done, ok := h.begin(w, r)
	if !ok {
		return record.Record{}, false
	}
	defer done()
	rec, err := h.opts.Store.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !CanRead(p, &rec)) {
		WriteError(w, http.StatusNotFound, TypeNotFound, "no request with id "+quote(Clip(id, MaxEcho)))
		return record.Record{}, false
	}
	if err != nil {
		h.storeError(w, r, err)
		return record.Record{}, false
	}
	return rec, true
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (h *Handler) one(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	if rec, ok := h.ReadRecord(w, r, p, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, rec)
	}
}

// scope narrows f to what p may list. It reports false, having answered,
// when p may not list at all; empty is true when p may list but f asks
// for another group, so the answer is empty.
func scope(w http.ResponseWriter, p auth.Principal, f *store.Filter) (ok, empty bool) {
	switch p.Role {
	case auth.RoleAdmin:
		return true, false
	case auth.RoleViewer:
		if p.Group == "" {
			WriteError(w, http.StatusForbidden, TypePermission, "this viewer key has no group, so it can read nothing")
			return false, false
		}
		if f.Group != "" && f.Group != p.Group {
			return true, true
		}
		f.Group = p.Group
		return true, false
	}
	WriteError(w, http.StatusForbidden, TypePermission, "client keys can read only their own requests, by id: GET /api/requests/{id}")
	return false, false
}

// ListResponse is the answer of GET /api/requests.
type ListResponse struct {
	Requests    []record.Record   `json:"requests"`    // newest first
	NextCursor  *string           `json:"next_cursor"` // pass as cursor= for the next page; null on the last
	Definitions map[string]string `json:"definitions"` // what each timing field of a record measures
}

// fieldDefinitions are the definitions of the timing fields, for answers
// that carry records.
var fieldDefinitions = func() map[string]string {
	m := map[string]string{}
	for _, f := range store.StatFields {
		m[f.Name] = f.Definition
	}
	return m
}()

func (h *Handler) list(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	f, err := parseList(r.URL.Query(), h.opts.Now())
	if err != nil {
		h.badRequest(w, err)
		return
	}
	ok, empty := scope(w, p, &f)
	if !ok {
		return
	}
	resp := ListResponse{Requests: []record.Record{}, Definitions: fieldDefinitions}
	if !empty {
		ctx, done, ok := h.begin(w, r)
		if !ok {
			return
		}
		defer done()
		page, err := h.opts.Store.List(ctx, f)
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		resp.Requests = page.Records
		if page.Next != "" {
			resp.NextCursor = &page.Next
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

// Window is the time range an answer covers; a null end is open.
type Window struct {
	From *time.Time `json:"from"`
	To   *time.Time `json:"to"`
}

// StatsResponse is the answer of GET /api/stats: the window and filter it
// covers, the store's summary with its definitions, its method (rollups or
// rows) and its percentile method with its relative error.
type StatsResponse struct {
	Window Window            `json:"window"`
	Filter map[string]string `json:"filter"` // the filters applied, a viewer's group included
	store.Stats
}

// statsWindow is the span a stats query covers (parseStats always sets
// From; an open end is now).
func statsWindow(f store.Filter, now time.Time) time.Duration {
	end := f.To
	if end.IsZero() {
		end = now
	}
	return end.Sub(f.From)
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	q, err := parseStats(r.URL.Query(), h.opts.Now())
	if err == nil {
		// Bounded before anything is read: the buckets alone × the
		// fields (the groups are known only as the records are).
		q.MaxValues = h.opts.MaxAnswerValues
		err = store.CheckAnswerSize(&q, statsWindow(q.Filter, h.opts.Now()))
	}
	if err != nil {
		h.badRequest(w, err)
		return
	}
	ok, empty := scope(w, p, &q.Filter)
	if !ok {
		return
	}
	var st store.Stats
	if empty {
		st, err = store.EmptyStats(q)
	} else {
		ctx, done, ok := h.begin(w, r)
		if !ok {
			return
		}
		defer done()
		st, err = h.opts.Store.Stats(ctx, q)
	}
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	resp := StatsResponse{Stats: st, Filter: map[string]string{}}
	// The window the answer covers: the query's, widened to whole minutes
	// when it came from rollups.
	if !st.From.IsZero() {
		resp.Window.From = &st.From
	}
	if !st.To.IsZero() {
		resp.Window.To = &st.To
	}
	for k, v := range map[string]string{"model": q.Filter.Model, "channel": q.Filter.Channel, "group": q.Filter.Group,
		"status": q.Filter.Status, "label": q.Filter.Label, "key_name": q.Filter.KeyName} {
		if v != "" {
			resp.Filter[k] = v
		}
	}
	if q.Filter.Stream != nil {
		resp.Filter["stream"] = strconv.FormatBool(*q.Filter.Stream)
	}
	writeJSON(w, http.StatusOK, resp)
}

// HealthResponse is the answer of GET /api/health.
type HealthResponse struct {
	Status string      `json:"status"` // "ok", or "degraded" when the store fails
	Store  StoreHealth `json:"store"`
	Reads  ReadLimits  `json:"reads"`
}

// ReadLimits are the read API's budget: its deadline per read and how many
// run at once.
type ReadLimits struct {
	TimeoutMs   int64 `json:"timeout_ms"`  // deadline of one read, waiting for its turn included
	Concurrency int   `json:"concurrency"` // reads run at once; others wait
}

// StoreHealth is the state of the store and of its writer's queue.
type StoreHealth struct {
	Engine    string             `json:"engine"`
	Reachable bool               `json:"reachable"`
	Error     string             `json:"error,omitempty"` // why it is not reachable, without the database's address or credentials
	Writer    *store.WriterStats `json:"writer"`          // null when this process writes no records
}

// health answers admins only: the writer's counters and last error are the
// whole gateway's, not a group's (an error may name any group's request),
// so a viewer, scoped to its group everywhere else, may not read them.
func (h *Handler) health(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	if p.Role != auth.RoleAdmin {
		WriteError(w, http.StatusForbidden, TypePermission, "only admin keys can read /api/health: it reports the whole gateway's store and writer, not one group's")
		return
	}
	if err := checkParams(r.URL.Query(), nil); err != nil {
		h.badRequest(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	resp := HealthResponse{Status: "ok", Store: StoreHealth{Engine: h.opts.Store.Engine(), Reachable: true},
		Reads: ReadLimits{TimeoutMs: h.opts.Timeout.Milliseconds(), Concurrency: h.opts.Concurrency}}
	if err := h.opts.Store.Ping(ctx); err != nil {
		resp.Status, resp.Store.Reachable, resp.Store.Error = "degraded", false, store.ErrorMessage(err)
	}
	if h.opts.Writer != nil {
		st := h.opts.Writer.Stats()
		resp.Store.Writer = &st
		if st.Retrying {
			resp.Status = "degraded"
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) badRequest(w http.ResponseWriter, err error) {
	WriteError(w, http.StatusBadRequest, TypeInvalidRequest, err.Error())
}

// storeError answers a failed store call: the client's mistakes are 400s
// with the store's explanation, anything else a 500 whose detail goes to
// the log only.
func (h *Handler) storeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrBadQuery):
		WriteError(w, http.StatusBadRequest, TypeInvalidRequest, err.Error())
	case errors.Is(err, store.ErrBadCursor):
		WriteError(w, http.StatusBadRequest, TypeInvalidRequest, "cursor: not a cursor this API gave out")
	case r.Context().Err() != nil:
		// The client left; nobody reads the answer.
	case errors.Is(err, store.ErrUnavailable):
		w.Header().Set("Retry-After", "5")
		WriteError(w, http.StatusServiceUnavailable, TypeAPI, "the store's database has not been reached since the gateway started; "+
			"records are queued meanwhile (see /api/health)")
	case errors.As(err, new(*busyError)):
		w.Header().Set("Retry-After", "1")
		WriteError(w, http.StatusServiceUnavailable, TypeAPI, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		WriteError(w, http.StatusServiceUnavailable, TypeAPI, "the read did not finish within its deadline of "+h.opts.Timeout.String()+
			" (waiting for its turn included); narrow the query, or retry if the store is failing over")
	case storeUnreachable(err):
		// The database went away after start (stopped, restarted,
		// partitioned): the store is unavailable, not broken (SPEC §5).
		w.Header().Set("Retry-After", "5")
		h.log.Warn("api: the store's database cannot be reached", "path", Clip(r.URL.Path, MaxEcho), "err", err)
		WriteError(w, http.StatusServiceUnavailable, TypeAPI, "the store's database cannot be reached now; "+
			"records are queued meanwhile (see /api/health)")
	default:
		h.log.Error("api: store failed", "path", Clip(r.URL.Path, MaxEcho), "err", err)
		WriteError(w, http.StatusInternalServerError, TypeAPI, "the store failed; see the gateway's log")
	}
}

// storeUnreachable reports whether err says the store's database could not be
// reached, rather than that it refused or failed the query: a dial or I/O
// error on its connection (every driver wraps the net.Error), a
// connection the driver found broken, or one cut mid-answer. A driver's
// error that says the query never reached the server (SafeToRetry, as
// PostgreSQL's driver says of "conn closed": a pooled connection the cut
// had already closed) is one too.
func storeUnreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false // a net.Error too, but the read's own deadline (answered above)
	}
	var ne net.Error
	var unsent interface{ SafeToRetry() bool }
	return errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		errors.As(err, &unsent) && unsent.SafeToRetry()
}

// MaxEcho bounds client-supplied text (a path, an id) that an error message
// quotes back: a megabyte URL must not come back as a megabyte answer.
const MaxEcho = 128

// Clip returns s cut to at most n bytes on a rune boundary, marked with "…"
// when cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
