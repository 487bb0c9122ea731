package sim

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/tokens"
	"github.com/ttfx/ttfx/internal/wire"
)

// DefaultMaxBodyBytes bounds a request body; larger bodies get a 413 in
// the protocol's error format.
const DefaultMaxBodyBytes = 32 << 20

// Options configure a Server.
type Options struct {
	// Profiles are the models the simulator serves, by model name; nil
	// means Builtin(). Invalid profiles answer 500 with the reason.
	Profiles map[string]Profile
	// Default names the profile that serves models matching no profile;
	// empty: those get 404 (model not found) in the protocol's format.
	Default string
	// Now is the clock that request receipt and due times are read from.
	// Waits are real timers, so it must run at real speed; nil: time.Now.
	Now func() time.Time
	// Logger receives one line per finished request at Debug level and
	// profile problems at Warn; nil: discard.
	Logger *slog.Logger
	// OnRequest, when set, is called once for every request as it ends
	// (after its last byte, or when the client went away), from the
	// request's goroutine.
	OnRequest func(Info)
	// APIKey, when set, is required on every model request (Bearer,
	// x-api-key, x-goog-api-key or ?key=, as providers accept them); a
	// request without it gets 401.
	APIKey string
	// MaxBodyBytes bounds request bodies; 0: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Identity configures the token endpoints the kinds register (a
	// service account's JWT-bearer grant, an application's client
	// credentials), and makes the routes that take their bearer tokens
	// accept only tokens issued and still valid; nil: those routes take
	// any bearer token (identity.go).
	Identity *Identity
	// AWSCredentials are the access key ids and secret keys whose
	// Signature Version 4 signatures a kind's routes accept;
	// empty: DefaultAWSAccessKeyID with DefaultAWSSecretAccessKey.
	AWSCredentials map[string]string
}

// The AWS credentials the simulator accepts when Options.AWSCredentials
// is empty, so that an AWS SDK can be pointed at `ttfx sim` as it is.
const (
	DefaultAWSAccessKeyID     = "AKIASIMULATOR0000000"
	DefaultAWSSecretAccessKey = "ttfx-simulator-secret-access-key"
)

// Info describes one finished request, for tests that check what the
// upstream saw (for example that a cancelled client cancelled the
// simulator's request promptly).
type Info struct {
	API      API
	Path     string
	Model    string // as the request named it
	Profile  string // the profile that served it; empty if none did
	Stream   bool
	Status   int       // HTTP status sent; 0 when none was (client left, or reset before headers)
	Received time.Time // request receipt: the origin of every profile time
	Ended    time.Time // the handler finished
	// Cancelled is set when the client went away (closed the connection or
	// cancelled the request) before the response was complete; CancelledAt
	// is when the simulator saw it.
	Cancelled   bool
	CancelledAt time.Time
	// Fault is the fault that fired: "status", "reset", "stall",
	// "truncate" or "error_event"; empty when none did.
	Fault string
	// Events is the number of SSE events written (comments not counted).
	Events int
	// VisibleSent is the number of visible text tokens written.
	VisibleSent int
	// InputTokens is the prompt token count the usage reports.
	InputTokens int
	// Error is the message of an error response, if one was sent.
	Error string
}

// Server is the simulated provider, an http.Handler. It is safe for
// concurrent use; its profiles are fixed when it is made.
type Server struct {
	opts     Options
	now      func() time.Time
	log      *slog.Logger
	mux      *http.ServeMux
	profiles map[string]*served // read-only after New
	seq      atomic.Uint64      // requests served, mixed into the jitter seed
	issued   issued             // the access tokens issued (identity.go)

	// onSend, when set (by benchmarks), is called after each write with
	// the time it was due and the time its flush returned.
	onSend func(due, sent time.Time)
}

// served is one profile ready to serve.
type served struct {
	name    string
	p       Profile
	fault   fault
	err     error // why the profile cannot be served
	c       *content
	base    plan
	rec     *recording
	recOnce sync.Once
	limits  *limiter // the profile's RateLimit (ratelimit.go); nil: none
}

// New returns a simulator serving opts.Profiles.
func New(opts Options) *Server {
	s := &Server{opts: opts, now: opts.Now, log: opts.Logger, profiles: map[string]*served{}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	profiles := opts.Profiles
	if profiles == nil {
		profiles = Builtin()
	}
	for name, p := range profiles {
		sv := &served{name: name, p: p, limits: newLimiter(p.RateLimit, s.now())}
		if sv.err = p.Validate(); sv.err == nil {
			sv.fault, _ = parseFault(p.Fault)
			if p.Replay == "" && p.recording == nil {
				sv.c = generate(p)
				sv.base = buildPlan(p, sv.fault, sv.c)
			} else if p.recording != nil {
				sv.rec = p.recording
			} else if sv.rec, sv.err = loadRecording(p.Replay); sv.err != nil {
				sv.err = fmt.Errorf("replay: %w", sv.err)
			}
		}
		if sv.err != nil {
			s.log.Warn("sim: profile cannot be served", "profile", name, "err", sv.err)
		}
		s.profiles[name] = sv
	}
	s.routes()
	return s
}

// Profiles returns the names of the profiles s serves, sorted.
func (s *Server) Profiles() []string {
	m := make(map[string]Profile, len(s.profiles))
	for n, sv := range s.profiles {
		m[n] = sv.p
	}
	return Names(m)
}

// ServeHTTP serves the simulator's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// routes serves the kinds' own routes and endpoints, the endpoints of
// every API a unit is registered for (its wire.API's) and the units' model
// paths; a kind's route comes first where both serve a path. Paths are
// registered without a method so that a wrong method gets a 405 in the
// API's own error format, not ServeMux's plain text.
func (s *Server) routes() {
	m := http.NewServeMux()
	seen := map[string]bool{"/healthz": true}
	handle := func(path string, h http.HandlerFunc) {
		if p := wildcards(path); !seen[p] {
			seen[p] = true
			m.HandleFunc(path, h)
		}
	}
	m.HandleFunc("/healthz", s.healthz)
	for _, k := range kinds {
		for _, rt := range k.Routes {
			if units[rt.API] != nil || rt.Accept != nil {
				handle(rt.Path, s.kindRoute(rt))
			}
		}
		for _, ep := range k.Endpoints {
			handle(ep.Path, func(w http.ResponseWriter, r *http.Request) { ep.Serve(s, w, r) })
		}
	}
	// A path ending in a wildcard can be both a model object (GET) and a
	// target a unit generates on (POST .../{model}:method): targets maps
	// such a path to its unit and splitter.
	type targetRoute struct {
		u     *Unit
		a     *wire.API
		split func(string) (string, bool, error)
	}
	targets := map[string]targetRoute{}
	for _, name := range Units() {
		u := units[name]
		a := wire.LookupAPI(string(name))
		if a == nil {
			continue // a unit whose API is not linked serves only a kind's routes
		}
		for _, ep := range a.Endpoints {
			_, path, _ := strings.Cut(ep.Pattern, " ")
			switch {
			case ep.SharedPath:
				// Served as a model path (Unit.ModelPaths).
			case ep.Target != nil:
				targets[path] = targetRoute{u, a, ep.Target}
			default:
				handle(path, s.generation(u))
			}
		}
	}
	var modelPaths []string
	for _, name := range Units() {
		modelPaths = append(modelPaths, units[name].ModelPaths...)
	}
	for path := range targets {
		modelPaths = append(modelPaths, path)
	}
	slices.Sort(modelPaths)
	for _, path := range slices.Compact(modelPaths) {
		if !strings.HasSuffix(path, "}") {
			handle(path, s.models)
			continue
		}
		t, ok := targets[path]
		wildcard := path[strings.LastIndexByte(path, '{')+1 : len(path)-1]
		handle(path, func(w http.ResponseWriter, r *http.Request) {
			name := r.PathValue(wildcard)
			if ok && strings.Contains(name, ":") {
				s.target(w, r, t.u, t.a, name, t.split)
				return
			}
			if r.Method != http.MethodGet {
				s.methodNotAllowed(w, wire.Guess(r), "GET")
				return
			}
			s.model(w, r, name)
		})
	}
	m.HandleFunc("/", s.notFound)
	s.mux = m
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.methodNotAllowed(w, nil, "GET")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// notFound answers a path no API serves in the format of the API whose
// client it most likely is (wire.Guess, as the gateway guesses).
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, wire.Guess(r), errorf(http.StatusNotFound, fmt.Sprintf("Unknown path %s %s.", r.Method, r.URL.Path)))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, a *wire.API, allow string) {
	writeError(w, a, MethodNotAllowed(allow))
}

// wildcards is a mux path with its wildcards unnamed, to tell paths the
// mux would take for the same apart.
func wildcards(path string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '{')
		j := strings.IndexByte(path, '}')
		if i < 0 || j < i {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i])
		b.WriteString("{}")
		path = path[j+1:]
	}
}

// target serves a generation request whose path names the model and the
// method ("{model}:streamGenerateContent"), split by the API's Target.
func (s *Server) target(w http.ResponseWriter, r *http.Request, u *Unit, a *wire.API, name string, split func(string) (string, bool, error)) {
	if r.Method != http.MethodPost {
		s.methodNotAllowed(w, a, "POST")
		return
	}
	model, stream, err := split(name)
	if err != nil {
		code := http.StatusBadRequest
		if te, ok := err.(*wire.TargetError); ok {
			code = te.Code
		}
		writeError(w, a, errorf(code, err.Error()))
		return
	}
	s.serve(w, r, u, route{model: model, fromTarget: true, stream: stream})
}

func (s *Server) generation(u *Unit) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, u, route{}) }
}

// kindRoute serves a route of a provider kind's own URL form: the kind
// checks the credentials, the URL and the body, then the API's unit
// serves it.
func (s *Server) kindRoute(rt Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &Call{R: r, API: rt.API, Target: rt.Target, Stream: rt.Stream, s: s, w: w}
		if rt.Model != "" {
			c.Model = r.PathValue(rt.Model)
		}
		if rt.Accept != nil {
			if e := rt.Accept(c); e != nil {
				writeUnitError(w, units[c.API], e)
				if rt.Record && s.opts.OnRequest != nil {
					now := s.now()
					s.opts.OnRequest(Info{API: c.API, Path: r.URL.Path, Status: e.status, Error: e.msg, Received: now, Ended: now})
				}
				return
			}
		}
		u := units[c.API]
		if u == nil {
			writeError(w, nil, errorf(http.StatusNotFound, fmt.Sprintf("Unknown path %s %s.", r.Method, r.URL.Path)))
			return
		}
		if c.read {
			r.Body = io.NopCloser(bytes.NewReader(c.body))
		}
		if rt.Wrap != nil {
			w = rt.Wrap(w, c.API)
		}
		s.serve(w, r, u, route{model: c.Model, fromTarget: c.Target, stream: c.Stream, keyChecked: rt.Accept != nil, rate: rt.RateHeaders})
	}
}

// route is what the path of a request said.
type route struct {
	model      string // the model the path names (a target's, a deployment's)
	fromTarget bool   // the path names the model and the method: the body names neither
	stream     bool   // the target's method streams
	keyChecked bool   // the kind's route checked the credentials in its own way
	// rate, when set, writes the route's rate-limit headers instead of the
	// unit's (Route.RateHeaders).
	rate func(h http.Header, rs RateState)
}

// lookup finds the profile for model.
func (s *Server) lookup(model string) *served {
	if sv, ok := s.profiles[model]; ok {
		return sv
	}
	if s.opts.Default != "" {
		return s.profiles[s.opts.Default]
	}
	return nil
}

// exchange is the state of one request while it is served.
type exchange struct {
	s       *Server
	w       http.ResponseWriter
	r       *http.Request
	ctx     context.Context
	t0      time.Time
	u       *Unit // the API's unit, whose format errors are written in
	rt      route
	info    Info
	timer   *time.Timer
	written bool // a status line went out
}

// serve runs one model request from receipt to its last byte.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, u *Unit, rt route) {
	x := &exchange{s: s, w: w, r: r, ctx: r.Context(), t0: s.now(), u: u, rt: rt}
	x.info = Info{API: u.API, Path: r.URL.Path, Received: x.t0}
	defer x.finish()

	if r.Method != http.MethodPost {
		x.fail(&Error{status: http.StatusMethodNotAllowed, msg: "Method not allowed; use POST."}, "POST")
		return
	}
	if s.opts.APIKey != "" && !rt.keyChecked {
		got := auth.FromRequest(r)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.APIKey)) != 1 {
			x.fail(errorf(http.StatusUnauthorized, "Invalid or missing API key."), "")
			return
		}
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		// Refused on what it declares, before a byte of it is read: the
		// connection is not kept for the rest of a body never wanted.
		w.Header().Set("Connection", "close")
		x.fail(errorf(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", s.opts.MaxBodyBytes)), "")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			x.fail(errorf(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", mbe.Limit)), "")
		} else {
			x.cancelled() // the client went away while sending
		}
		return
	}
	req, apiErr := parseRequest(u, body, rt.model, rt.fromTarget)
	if apiErr != nil {
		x.fail(apiErr, "")
		return
	}
	if rt.fromTarget {
		req.Stream = rt.stream
	}
	if u.Check != nil {
		if e := u.Check(r, &req); e != nil {
			x.fail(e, "")
			return
		}
	}
	x.info.Model, x.info.Stream = req.Model, req.Stream
	sv := s.lookup(req.Model)
	if sv == nil {
		x.fail(errorf(http.StatusNotFound, fmt.Sprintf("The model '%s' does not exist: the simulator serves %s.", req.Model, strings.Join(s.Profiles(), ", "))), "")
		return
	}
	x.info.Profile = sv.name
	if sv.err != nil {
		x.fail(errorf(http.StatusInternalServerError, fmt.Sprintf("The simulator's profile %q is invalid: %v", sv.name, sv.err)), "")
		return
	}
	x.info.InputTokens = countPrompt(req.prompt)
	if !x.rateLimit(sv, x.info.InputTokens+sv.p.VisibleTokens+sv.p.ReasoningTokens) {
		return
	}

	if sv.fault.kind == faultStatus {
		if !x.waitUntil(msDur(sv.p.HeadersMs)) {
			return
		}
		x.info.Fault = faultStatus.String()
		x.fail(errorf(sv.fault.code, fmt.Sprintf("Simulated upstream error %d (fault status:%d).", sv.fault.code, sv.fault.code)), "")
		return
	}
	if sv.rec != nil {
		x.replay(sv, req)
		return
	}
	if u.NewEncoder == nil {
		x.embeddings(sv, req)
		return
	}

	pl := sv.base
	if sv.p.JitterMs > 0 {
		rng := rand.New(rand.NewPCG(uint64(sv.p.Seed), s.seq.Add(1)))
		pl = pl.jitter(msDur(sv.p.JitterMs), rng)
	}
	resp := newResponse(req.Model, sv.name, sv.p, sv.c, pl, x.info.InputTokens, req.IncludeUsage)
	enc := u.NewEncoder(resp)
	if req.Stream {
		x.stream(pl, enc)
	} else {
		x.whole(pl, enc)
	}
}

// maxPromptCounted bounds the prompt text the simulator counts tokens of:
// past 256 KiB it extrapolates by bytes from what it counted, as the
// gateway's own estimate does (protocol.maxCounted). Counting the whole
// of a 2 MiB prompt of one letter took 1.35 s and 126 MiB (issue 50);
// bounded, any prompt costs what 256 KiB costs (BenchmarkCountPrompt).
const maxPromptCounted = 256 << 10

// countPrompt is the prompt's token count: each string on its own, so the
// count does not depend on the order of JSON object keys. The first
// maxPromptCounted bytes are counted; the rest are estimated at the
// tokens per byte of what was counted.
func countPrompt(texts []string) int {
	n, counted, rest := 0, 0, 0
	for _, t := range texts {
		room := maxPromptCounted - counted
		if len(t) <= room {
			n += tokens.Count(t)
			counted += len(t)
			continue
		}
		if room > 0 {
			// Cut where later text cannot change the tokens before.
			cut := tokens.Cut([]byte(t[:room]), 0)
			if cut == 0 {
				cut = room
				for cut > 0 && !utf8.RuneStart(t[cut]) {
					cut--
				}
			}
			n += tokens.Count(t[:cut])
			counted += cut
			rest += len(t) - cut
			counted = max(counted, maxPromptCounted) // nothing more is counted
			continue
		}
		rest += len(t)
	}
	if rest > 0 && counted > 0 {
		n += int(float64(n) / float64(counted) * float64(rest))
	}
	return n
}

// waitUntil waits until due after receipt. It returns false when the
// client went away first. The wait is one timer to an absolute time, so
// lateness never accumulates over the events of a stream.
func (x *exchange) waitUntil(due time.Duration) bool {
	if err := x.ctx.Err(); err != nil {
		x.cancelled()
		return false
	}
	d := x.t0.Add(due).Sub(x.s.now())
	if d <= 0 {
		return true
	}
	if x.timer == nil {
		x.timer = time.NewTimer(d)
	} else {
		x.timer.Reset(d)
	}
	select {
	case <-x.timer.C:
		return true
	case <-x.ctx.Done():
		x.timer.Stop()
		x.cancelled()
		return false
	}
}

func (x *exchange) cancelled() {
	if !x.info.Cancelled {
		x.info.Cancelled, x.info.CancelledAt = true, x.s.now()
	}
}

// fail sends an error response in the protocol's format.
func (x *exchange) fail(e *Error, allow string) {
	if allow != "" {
		x.w.Header().Set("Allow", allow)
	}
	x.info.Status, x.info.Error = e.status, e.msg
	x.written = true
	writeUnitError(x.w, x.u, e)
}

func (x *exchange) finish() {
	if t := x.timer; t != nil {
		t.Stop()
	}
	x.info.Ended = x.s.now()
	in := x.info
	x.s.log.Debug("sim request", "api", in.API, "model", in.Model, "profile", in.Profile, "stream", in.Stream,
		"status", in.Status, "fault", in.Fault, "cancelled", in.Cancelled, "events", in.Events,
		"ms", ms(in.Ended.Sub(in.Received)))
	if x.s.opts.OnRequest != nil {
		x.s.opts.OnRequest(in)
	}
}

// abort cuts the connection: the client sees an unexpected EOF (HTTP/1.1)
// or a stream reset (HTTP/2), never a clean end. net/http closes the
// connection without the final chunk when a handler panics with
// ErrAbortHandler, and does not log it.
func (x *exchange) abort() {
	x.info.Fault = faultReset.String()
	panic(http.ErrAbortHandler)
}

func setStreamHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
}

// stream writes pl as an event stream: headers at their time, then each
// step at its time, each flushed on its own.
func (x *exchange) stream(pl plan, enc Encoder) {
	if !x.waitUntil(pl.headers) {
		return
	}
	rc := http.NewResponseController(x.w)
	setStreamHeaders(x.w.Header())
	framed, isFramed := enc.(FramedEncoder)
	if isFramed {
		x.w.Header().Set("Content-Type", framed.ContentType())
	}
	x.w.WriteHeader(http.StatusOK)
	x.info.Status, x.written = http.StatusOK, true
	if err := rc.Flush(); err != nil {
		x.cancelled()
		return
	}
	buf := make([]byte, 0, 1024)
	for _, st := range pl.steps {
		buf = enc.Frame(buf[:0], Step{At: st.at, Kind: st.kind, Text: st.text, Tokens: st.tokens, Last: st.last})
		switch st.kind {
		case StepCut, StepClose:
			if !x.waitUntil(st.at) {
				return
			}
			if st.kind == StepCut {
				x.abort()
			}
			x.info.Fault = faultTruncate.String()
			return
		case StepError:
			x.info.Fault = faultErrorEvent.String()
		}
		if len(buf) == 0 {
			continue
		}
		if !x.waitUntil(st.at) {
			return
		}
		if _, err := x.w.Write(buf); err != nil {
			x.cancelled()
			return
		}
		if err := rc.Flush(); err != nil {
			x.cancelled()
			return
		}
		if x.s.onSend != nil {
			x.s.onSend(x.t0.Add(st.at), x.s.now())
		}
		if isFramed {
			x.info.Events += framed.Events(buf)
		} else {
			x.info.Events += countEvents(buf)
		}
		if st.kind == StepText {
			x.info.VisibleSent += st.tokens
		}
		if st.kind == StepError {
			return
		}
	}
	if pl.fault.kind == faultStall {
		x.info.Fault = faultStall.String()
	}
}

// countEvents counts the events in a frame: blank lines that end a block
// with a field (comments are not events).
func countEvents(b []byte) int {
	n := 0
	inBlock := false
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		line := bytes.TrimSuffix(b[:i], []byte{'\r'})
		switch {
		case len(line) == 0:
			if inBlock {
				n++
			}
			inBlock = false
		case line[0] != ':':
			inBlock = true
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return n
}

// whole sends the non-streaming response at the time the stream would
// have ended; faults act on it as they can without a stream.
func (x *exchange) whole(pl plan, enc Encoder) {
	last := pl.steps[len(pl.steps)-1]
	for _, st := range pl.steps {
		if st.kind == StepCut || st.kind == StepError || st.kind == StepClose || st.kind == StepFinish {
			last = st
			break
		}
	}
	if !x.waitUntil(last.at) {
		return
	}
	switch last.kind {
	case StepCut:
		x.abort()
	case StepError:
		x.info.Fault = faultErrorEvent.String()
		x.fail(errorf(http.StatusInternalServerError, streamErrorMessage), "")
		return
	}
	body := enc.Body()
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	if last.kind == StepClose {
		// Half the body and a clean end: the connection closed well, the
		// response did not finish (no Content-Length, so the client only
		// finds out when it parses).
		x.info.Fault = faultTruncate.String()
		body = body[:len(body)/2]
	} else {
		h.Set("Content-Length", fmt.Sprint(len(body)))
	}
	x.w.WriteHeader(http.StatusOK)
	x.info.Status, x.written = http.StatusOK, true
	if _, err := x.w.Write(body); err != nil {
		x.cancelled()
		return
	}
	if pl.fault.kind == faultStall {
		x.info.Fault = faultStall.String()
	}
	x.info.VisibleSent = 0
	for _, st := range pl.steps {
		if st.kind == StepText {
			x.info.VisibleSent += st.tokens
		}
	}
}

// embeddings answers POST /v1/embeddings at the profile's header time with
// one deterministic unit vector per input (seeded by the input's text).
func (x *exchange) embeddings(sv *served, req Request) {
	if !x.waitUntil(msDur(sv.p.HeadersMs)) {
		return
	}
	dims := req.Dimensions
	if dims == 0 {
		dims = 1536
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(req.EmbedInputs))
	for i, in := range req.EmbedInputs {
		h := fnv.New64a()
		io.WriteString(h, in)
		rng := rand.New(rand.NewPCG(h.Sum64(), uint64(sv.p.Seed)))
		v := make([]float32, dims)
		var norm float64
		for j := range v {
			f := rng.NormFloat64()
			v[j] = float32(f)
			norm += f * f
		}
		norm = math.Sqrt(norm)
		for j := range v {
			v[j] = float32(float64(v[j]) / norm)
		}
		var emb any = v
		if req.Base64 {
			b := make([]byte, 4*dims)
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(b)
		}
		data[i] = item{"embedding", i, emb}
	}
	n := x.info.InputTokens
	body := marshal(struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: data, Model: req.Model, Usage: struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}{n, n}})
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(http.StatusOK)
	x.info.Status, x.written = http.StatusOK, true
	x.w.Write(body)
}
