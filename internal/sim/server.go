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
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/tokens"
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
	// Identity configures the token endpoints of the vertex kind (Google's
	// JWT-bearer grant) and of Entra ID (client credentials), and makes
	// the routes that take their bearer tokens accept only tokens issued
	// and still valid; nil: those routes take any bearer token
	// (identity.go).
	Identity *Identity
	// AWSCredentials are the access key ids and secret keys whose SigV4
	// signatures the Bedrock side accepts; empty: DefaultAWSAccessKeyID
	// with DefaultAWSSecretAccessKey.
	AWSCredentials map[string]string
}

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

func (s *Server) routes() {
	m := http.NewServeMux()
	// Paths are registered without a method so that a wrong method gets a
	// 405 in the protocol's own error format, not ServeMux's plain text.
	m.HandleFunc("/healthz", s.healthz)
	m.HandleFunc("/v1/chat/completions", s.generation(APIChat))
	m.HandleFunc("/v1/completions", s.generation(APICompletions))
	m.HandleFunc("/v1/responses", s.generation(APIResponses))
	m.HandleFunc("/v1/embeddings", s.generation(APIEmbeddings))
	m.HandleFunc("/v1/messages", s.generation(APIAnthropic))
	m.HandleFunc("/v1/models", s.models)
	m.HandleFunc("/v1/models/{name}", s.modelPath)
	m.HandleFunc("/v1beta/models", s.models)
	m.HandleFunc("/v1beta/models/{name}", s.modelPath)
	s.azureRoutes(m)
	s.vertexRoutes(m)
	s.bedrockRoutes(m)
	m.HandleFunc("/", s.notFound)
	s.mux = m
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.methodNotAllowed(w, familyOpenAI, "GET")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	f := familyOpenAI
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1beta/"):
		f = familyGemini
	case strings.HasPrefix(r.URL.Path, "/v1/messages"):
		f = familyAnthropic
	}
	writeError(w, f, errorf(http.StatusNotFound, fmt.Sprintf("Unknown path %s %s.", r.Method, r.URL.Path)))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, f errorFamily, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, f, errorf(http.StatusMethodNotAllowed, "Method not allowed; use "+allow+"."))
}

// modelPath serves /v1/models/{name} and /v1beta/models/{name}: a model
// object on GET, Gemini generation on POST of "{model}:generateContent" or
// "{model}:streamGenerateContent".
func (s *Server) modelPath(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if model, action, ok := strings.Cut(name, ":"); ok {
		if r.Method != http.MethodPost {
			s.methodNotAllowed(w, familyGemini, "POST")
			return
		}
		switch action {
		case "generateContent", "streamGenerateContent":
			s.serve(w, r, APIGemini, model, action == "streamGenerateContent", false)
			return
		}
		writeError(w, familyGemini, errorf(http.StatusNotFound, "Unknown method "+action+"; the simulator serves generateContent and streamGenerateContent."))
		return
	}
	if r.Method != http.MethodGet {
		s.methodNotAllowed(w, familyOpenAI, "GET")
		return
	}
	s.model(w, r, name)
}

func (s *Server) generation(api API) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, api, "", false, false) }
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
	family  errorFamily
	info    Info
	timer   *time.Timer
	written bool // a status line went out
}

// serve runs one model request from receipt to its last byte.
// pathModel is a model the URL names (a Gemini model, an Azure
// deployment); keyChecked says the caller checked the key in its
// provider's own way.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, api API, pathModel string, geminiStream, keyChecked bool) {
	x := &exchange{s: s, w: w, r: r, ctx: r.Context(), t0: s.now(), family: familyOf(api)}
	x.info = Info{API: api, Path: r.URL.Path, Received: x.t0}
	defer x.finish()

	if r.Method != http.MethodPost {
		x.fail(&apiError{status: http.StatusMethodNotAllowed, msg: "Method not allowed; use POST."}, "POST")
		return
	}
	if s.opts.APIKey != "" && !keyChecked {
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
	req, apiErr := parseRequest(api, body, pathModel)
	if apiErr != nil {
		x.fail(apiErr, "")
		return
	}
	if api == APIConverse || api == APIBedrockInvoke {
		req.stream = geminiStream // the path says
	}
	if api == APIGemini {
		req.stream = geminiStream
		if geminiStream && r.URL.Query().Get("alt") != "sse" {
			x.fail(errorf(http.StatusBadRequest, "The simulator streams Gemini only as server-sent events: add ?alt=sse to streamGenerateContent."), "")
			return
		}
	}
	x.info.Model, x.info.Stream = req.model, req.stream
	sv := s.lookup(req.model)
	if sv == nil {
		x.fail(errorf(http.StatusNotFound, fmt.Sprintf("The model '%s' does not exist: the simulator serves %s.", req.model, strings.Join(s.Profiles(), ", "))), "")
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
	if api == APIEmbeddings {
		x.embeddings(sv, req)
		return
	}

	pl := sv.base
	if sv.p.JitterMs > 0 {
		rng := rand.New(rand.NewPCG(uint64(sv.p.Seed), s.seq.Add(1)))
		pl = pl.jitter(msDur(sv.p.JitterMs), rng)
	}
	resp := newResponse(req.model, sv.name, sv.p, sv.c, pl, x.info.InputTokens, req.includeUsage)
	enc := newEncoder(api, resp)
	if req.stream {
		x.stream(pl, enc)
	} else {
		x.whole(pl, enc)
	}
}

func newEncoder(api API, r *response) encoder {
	switch api {
	case APICompletions:
		return &completionEncoder{r: r}
	case APIResponses:
		return newRespEncoder(r)
	case APIAnthropic:
		return newAnthEncoder(r)
	case APIGemini:
		return &geminiEncoder{r: r}
	case APIConverse:
		return newConverseEncoder(r)
	case APIBedrockInvoke:
		return newInvokeEncoder(r)
	}
	return &chatEncoder{r: r}
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
func (x *exchange) fail(e *apiError, allow string) {
	if allow != "" {
		x.w.Header().Set("Allow", allow)
	}
	x.info.Status, x.info.Error = e.status, e.msg
	x.written = true
	writeError(x.w, x.family, e)
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
func (x *exchange) stream(pl plan, enc encoder) {
	if !x.waitUntil(pl.headers) {
		return
	}
	rc := http.NewResponseController(x.w)
	setStreamHeaders(x.w.Header())
	framed, isFramed := enc.(framedEncoder)
	if isFramed {
		x.w.Header().Set("Content-Type", framed.contentType())
	}
	x.w.WriteHeader(http.StatusOK)
	x.info.Status, x.written = http.StatusOK, true
	if err := rc.Flush(); err != nil {
		x.cancelled()
		return
	}
	buf := make([]byte, 0, 1024)
	for _, st := range pl.steps {
		buf = enc.frame(buf[:0], st)
		switch st.kind {
		case stepCut, stepClose:
			if !x.waitUntil(st.at) {
				return
			}
			if st.kind == stepCut {
				x.abort()
			}
			x.info.Fault = faultTruncate.String()
			return
		case stepError:
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
			x.info.Events += framed.events(buf)
		} else {
			x.info.Events += countEvents(buf)
		}
		if st.kind == stepText {
			x.info.VisibleSent += st.tokens
		}
		if st.kind == stepError {
			return
		}
	}
	if pl.fault.kind == faultStall {
		x.info.Fault = faultStall.String()
	}
}

// framedEncoder is an encoder whose streams are not SSE (Bedrock's event
// stream): their media type and how many events a write holds.
type framedEncoder interface {
	contentType() string
	events(b []byte) int
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
func (x *exchange) whole(pl plan, enc encoder) {
	last := pl.steps[len(pl.steps)-1]
	for _, st := range pl.steps {
		if st.kind == stepCut || st.kind == stepError || st.kind == stepClose || st.kind == stepFinish {
			last = st
			break
		}
	}
	if !x.waitUntil(last.at) {
		return
	}
	switch last.kind {
	case stepCut:
		x.abort()
	case stepError:
		x.info.Fault = faultErrorEvent.String()
		x.fail(errorf(http.StatusInternalServerError, streamErrorMessage), "")
		return
	}
	body := enc.body()
	h := x.w.Header()
	h.Set("Content-Type", "application/json")
	if last.kind == stepClose {
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
		if st.kind == stepText {
			x.info.VisibleSent += st.tokens
		}
	}
}

// embeddings answers POST /v1/embeddings at the profile's header time with
// one deterministic unit vector per input (seeded by the input's text).
func (x *exchange) embeddings(sv *served, req request) {
	if !x.waitUntil(msDur(sv.p.HeadersMs)) {
		return
	}
	dims := req.dimensions
	if dims == 0 {
		dims = 1536
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, len(req.embedInputs))
	for i, in := range req.embedInputs {
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
		if req.base64 {
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
	}{Object: "list", Data: data, Model: req.model, Usage: struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	}{n, n}})
	x.w.Header().Set("Content-Type", "application/json")
	x.w.WriteHeader(http.StatusOK)
	x.info.Status, x.written = http.StatusOK, true
	x.w.Write(body)
}
