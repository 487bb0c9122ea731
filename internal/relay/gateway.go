// Package relay is the gateway's HTTP handler: auth → route → upstream →
// stream → record. It relays every response byte for byte (SPEC.md §11),
// flushes each SSE event the moment it is complete, and times every stage
// of the request on one clock (SPEC.md §1, §5).
package relay

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ttfx/ttfx/internal/admission"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// Recorder receives every finished request's record. Record must not block:
// the relay calls it on the request's goroutine after the response ended.
// rec is lent for the call: a recorder that keeps it copies *rec. (A
// record passed by value was copied onto the stack at each call, 824
// bytes a time, and grew the handler goroutine's stack; issue 15.)
type Recorder interface {
	Record(rec *record.Record)
}

// Recorders fans a record out to several recorders in order.
type Recorders []Recorder

// Record hands rec to each recorder.
func (rs Recorders) Record(rec *record.Record) {
	for _, r := range rs {
		r.Record(rec)
	}
}

// Options configure a Gateway.
type Options struct {
	Router   *route.Router
	Keys     *auth.Keyring
	Recorder Recorder // may be nil
	// Diagnose, if set, fills rec.Diagnosis before the record is handed on.
	Diagnose func(rec *record.Record)
	// Now is the clock of every mark; nil means time.Now.
	Now timeline.Clock
	// Transport carries upstream requests; nil means a transport tuned
	// for streaming (NewTransport).
	Transport http.RoundTripper
	// UpstreamIdleTimeout is how long an idle upstream connection is kept
	// for the next request when Transport is nil; 0 means
	// DefaultUpstreamIdleTimeout.
	UpstreamIdleTimeout time.Duration
	// MaxBodyBytes bounds a client's request body.
	MaxBodyBytes int64
	// BodyBudget bounds the request-body bytes held in memory at once
	// over every request; 0 sizes it from the memory limit (see
	// bodyBudgetFromMemLimit). BodyBudgetPerKey is one key's share of it;
	// 0 is half. A body that finds no room within BodyWait (0:
	// DefaultBodyWait) is answered 503 with Retry-After.
	BodyBudget       int64
	BodyBudgetPerKey int64
	BodyWait         time.Duration
	// MaxEventBytes bounds one SSE line or event; 0 = sse default.
	MaxEventBytes int
	// UserHashKey keys the hash of client-sent user ids.
	UserHashKey []byte
	// BodyReadTimeout bounds reading a client's request body (slow
	// uploads); 0 means DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MaxAuthFailures is how many failed authentications one source may
	// make in a minute before it is answered 429; 0 means
	// DefaultMaxAuthFailures.
	MaxAuthFailures int
	// MaxAuthFailureRecords is how many failed authentications are
	// recorded in a minute over every source together; the rest are
	// counted only. 0 means DefaultAuthFailureRecords.
	MaxAuthFailureRecords int
	Logger                *slog.Logger
	// Starting, if set, counts the requests being set up (from t0 to
	// their first output or end), for the store's writer to hold its
	// transactions back while there are any.
	Starting *Starting
	// Admission, if set, holds requests to the configured limits per
	// key, group and model before they are routed (issue 49).
	Admission *admission.Limiter
	// Tracer, if set, joins each request to its caller's trace (W3C
	// trace-context) and passes the gateway's span on upstream.
	Tracer Tracer
}

// Tracer is the trace-context hook of the relay (issue 17). Both methods
// run on the request's goroutine and must be cheap: header parsing and
// random ids, no I/O.
type Tracer interface {
	// Start reads the client's traceparent and tracestate from h at t0
	// and sets rec.TraceID and rec.Trace.
	Start(h http.Header, rec *record.Record)
	// Inject sets the trace headers of an upstream request of rec,
	// naming a new span of the gateway as its parent, and returns that
	// span's id (kept as the attempt's SpanID).
	Inject(h http.Header, rec *record.Record) string
}

// DefaultUpstreamIdleTimeout is how long an idle upstream connection is
// kept. Go's default, 90 s, made a burst after a quiet minute and a half
// open every connection again (a TLS handshake each to a real provider):
// with 200 streams opening at once on a 2-core machine that cost 10–25 ms
// at the median first text, against the same burst on a warm pool
// (issue 15). An upstream that closes idle connections sooner does so
// with a FIN, which the transport sees and drops the connection for.
const DefaultUpstreamIdleTimeout = 5 * time.Minute

// DefaultBodyReadTimeout bounds reading a request body when Options leave
// it unset.
const DefaultBodyReadTimeout = 60 * time.Second

// Gateway serves the model APIs of SPEC.md §5.
type Gateway struct {
	opts     Options
	upstream http.RoundTripper // opts.Transport
	inflight atomic.Int64
	log      *slog.Logger
	fails    *authFailures
	bodies   *bodyBudget
	// realClock is set when the marks are taken on time.Now, so that one
	// reading serves both a mark and a write deadline.
	realClock bool

	// life ends when Abort is called: every upstream attempt still running
	// is cancelled with errShutdown.
	life  context.Context
	abort context.CancelFunc
}

// New returns a gateway.
func New(opts Options) *Gateway {
	realClock := opts.Now == nil
	if realClock {
		opts.Now = time.Now
	}
	if opts.Transport == nil {
		t := NewTransport()
		if opts.UpstreamIdleTimeout > 0 {
			t.IdleConnTimeout = opts.UpstreamIdleTimeout
		}
		opts.Transport = t
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 32 << 20
	}
	if opts.Recorder == nil {
		opts.Recorder = Recorders(nil)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BodyReadTimeout <= 0 {
		opts.BodyReadTimeout = DefaultBodyReadTimeout
	}
	life, abort := context.WithCancel(context.Background())
	return &Gateway{opts: opts, upstream: opts.Transport, log: opts.Logger, life: life, abort: abort, fails: newAuthFailures(opts.MaxAuthFailures, opts.MaxAuthFailureRecords), realClock: realClock,
		bodies: newBodyBudget(opts.BodyBudget, opts.BodyBudgetPerKey, opts.BodyWait)}
}

// roundTrip sends an upstream request and returns its response headers. It
// calls the transport itself, as httputil.ReverseProxy does, not an
// http.Client: redirects are the upstream's answer and go to the client as
// they are (the gateway does not follow them with the channel's key), and
// there is no cookie jar or client timeout (the attempt's own deadlines
// apply), so a client's redirect loop, deadline and error wrapping were work
// done for nothing between t1 and the upstream write (issue 15).
func (g *Gateway) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.upstream.RoundTrip(req)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close() // a RoundTripper must not return both; an http.Client would not either
		}
		return nil, err
	}
	if resp == nil {
		return nil, errNoResponse
	}
	if !decodeBody(resp) {
		resp.Body.Close()
		return nil, &unknownCodingError{coding: resp.Header.Get("Content-Encoding")}
	}
	return resp, nil
}

// Abort ends every request still relaying: its upstream is cancelled and
// its stream closed with the protocol's error event, and it is recorded. A
// server calls it when its drain timeout passes during a graceful shutdown.
func (g *Gateway) Abort() { g.abort() }

// NewTransport returns the upstream transport: no transparent compression
// (the relay forwards bytes as they are, and gzip on an event stream
// would hold events back), many idle connections per host, a dial
// timeout shorter than any header timeout, bounded response headers
// (MaxUpstreamHeaderBytes), and small buffers.
//
// An HTTP/1 connection keeps its write buffer for its whole life, while
// it only ever holds a request's line and headers: they are flushed on
// their own (the body is a promptReader, not a reader net/http knows to be
// in memory), and the body goes past the buffer. 1 KiB holds the headers
// of a typical request (an SDK's, with a key and a traceparent, is about
// 700 bytes); larger ones take a write per KiB.
// Against the default 4 KiB it saves 3 KB per open stream: 67.4 → 64.5 KB
// of anonymous memory per held stream in a ttfx process holding 2,000
// streams (issue 15).
//
// Its read buffer is held for as long too, and an event stream arrives a
// few hundred bytes at a time: 1 KiB rather than 4 KiB is another 3 KB
// per open stream (BenchmarkOverheadMemory: 63.4 → 60.3 KB of heap per
// held stream). A burst of events already waiting costs more reads: for
// 64 chat chunks sent at once (about 7 KB) 14.6 read calls a stream
// rather than 7, with the same writes to the client, which is a few µs
// of a stream's 2 ms of CPU. Response headers longer than the buffer
// are read in pieces, as before; the events themselves go to the relay's
// event reader, which keeps its own buffer.
//
// Idle connections are kept DefaultUpstreamIdleTimeout (see there), and
// TCP keep-alive probes every 30 s keep a NAT's or load balancer's state
// of them and find a peer that went away.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConns:           1000,
		MaxIdleConnsPerHost:    256,
		IdleConnTimeout:        DefaultUpstreamIdleTimeout,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: MaxUpstreamHeaderBytes,
		WriteBufferSize:        1 << 10,
		ReadBufferSize:         1 << 10,
	}
}

// Inflight returns the requests the gateway is serving now.
func (g *Gateway) Inflight() int64 { return g.inflight.Load() }

// Register adds the model API routes to mux.
func (g *Gateway) Register(mux *http.ServeMux) {
	for _, ep := range endpoints() {
		mux.Handle(ep.pattern, g.handler(ep))
	}
	g.registerFallbacks(mux)
}

func (g *Gateway) handler(ep endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// t0: before anything else is done.
		tl := timeline.New(g.opts.Now)
		x := &exchange{g: g, ep: ep, w: w, r: r, tl: tl}
		x.serve()
	})
}

// exchange is the state of one request, owned by its handler goroutine.
type exchange struct {
	g  *Gateway
	ep endpoint
	w  http.ResponseWriter
	r  *http.Request
	tl *timeline.Timeline

	rec       record.Record
	principal auth.Principal
	req       *clientRequest
	route     route.Plan // the channels to try, in order (see relay)
	attempts  []record.Attempt
	proto     string     // the API family the request is routed by
	unit      *wire.API  // the API whose formats the client reads
	scratch   []byte     // reused for events the relay has to rewrite
	errorNote string     // added to the record's error
	conn      *timedConn // the client connection, when the server times it (TimeConns)
	body      *lease     // the request body's part of the budget, until the prompt is let go (&bodyLease, or nil)
	bodyLease lease
	ticket    *admission.Ticket // the request's hold on its limits; nil when none applied
	// The flags together: an exchange is one allocation per request, and
	// padding can take it to the next size class (1536 → 1792 bytes).
	committed bool // response headers or bytes reached the client: no more fallback
	abortConn bool // end the response abnormally after recording: the body or stream was cut
	// skipRecord drops the record of a failed authentication that is
	// only counted (see authFailures).
	skipRecord bool
	starting   bool       // counted in opts.Starting, until started
	need       route.Need // what the request takes of a channel's provider budget (budget.go)
}

func (x *exchange) serve() {
	g := x.g
	x.proto, x.unit = x.ep.proto, x.ep.unit
	h := x.w.Header()
	id := requestID(h)
	// The record is filled in place: a literal assigned to it would be
	// built in this frame first (824 bytes), and a stack that deep at the
	// first flush grows the handler goroutine's stack from 8 to 16 KiB,
	// kept for as long as it holds the stream (issue 15).
	x.rec.RequestID = id
	x.rec.Timestamp = x.tl.Start().UTC()
	x.rec.API = x.ep.api
	x.rec.Route = x.ep.pattern
	x.rec.SkippedEjected = []string{}
	if g.opts.Starting != nil {
		g.opts.Starting.begin()
		x.starting = true
		defer x.started() // whichever way the request ends
	}
	x.requestWait()
	if g.opts.Tracer != nil {
		g.opts.Tracer.Start(x.r.Header, &x.rec)
	}
	x.rec.Inflight.Gateway = int(g.inflight.Add(1))
	defer g.inflight.Add(-1)
	if x.ep.shared {
		// Several providers list models at the same path; the headers
		// their clients send say whose client this is.
		if u := wire.Guess(x.r); u != nil {
			x.proto, x.unit = u.Family, u
		}
	}

	if herr := x.prepare(); herr != nil {
		x.fail(herr)
	} else if herr := x.admit(); herr != nil {
		x.fail(herr)
	} else {
		x.relay()
	}
	x.finish()
	if x.abortConn {
		// A body or stream was cut after its headers went out: ending
		// the response abnormally (no last chunk, or a reset HTTP/2
		// stream) is the only way to tell every client it did not get
		// the whole answer.
		panic(http.ErrAbortHandler)
	}
}

// requestWait records how long the request waited before t0, from its first
// byte read on its connection (request_wait_ms; see TimeConns). A timeline
// on an injected clock cannot be compared with the connection's real one:
// the phase is then not recorded.
func (x *exchange) requestWait() {
	tc, start, ok := requestStart(x.r)
	x.conn = tc
	if tc != nil && !x.ep.hasBody {
		tc.arm() // nothing more of this request to read
	}
	if !ok || !x.g.realClock {
		return
	}
	x.tl.SetPhase(timeline.PhaseRequestWait, max(0, x.tl.Start().Sub(start)))
}

// prepare authenticates, reads the body and picks the channels' order.
func (x *exchange) prepare() *HTTPError {
	g := x.g
	start := x.tl.Start()
	if herr := checkKeyInURL(x.ep, x.r); herr != nil {
		return herr
	}
	key := auth.FromRequest(x.r)
	p, ok := g.opts.Keys.Lookup(key)
	start = x.tl.PhaseSince(timeline.PhaseAuth, start)
	if !ok {
		msg := "invalid API key"
		if key == "" {
			msg = missingKeyText(x.r)
		}
		return x.authFailed(msg)
	}
	x.principal = p
	x.rec.KeyName, x.rec.Group = p.Name, p.Group
	if p.Role == auth.RoleViewer {
		return &HTTPError{Code: http.StatusForbidden, Type: "permission_error", Msg: "a viewer key cannot call the model APIs", Status: record.StatusAuthFailed}
	}

	var body []byte
	if x.ep.hasBody {
		// A slow upload is bounded, so that it cannot hold the handler.
		rc := http.NewResponseController(x.w)
		deadline := rc.SetReadDeadline(time.Now().Add(g.opts.BodyReadTimeout)) == nil
		var err error
		if x.r.ContentLength > g.opts.MaxBodyBytes {
			// Refused on what it declares, before any of it is read.
			x.w.Header().Set("Connection", "close")
			return &HTTPError{Code: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Msg: "the request body is larger than " + strconv.FormatInt(g.opts.MaxBodyBytes, 10) + " bytes", Status: record.StatusBadRequest}
		}
		x.body = g.bodies.lease(&x.bodyLease, p.Name)
		body, err = readBody(x.r.Context(), http.MaxBytesReader(x.w, x.r.Body, g.opts.MaxBodyBytes), x.r.ContentLength, g.opts.MaxBodyBytes, x.body)
		x.tl.PhaseSince(timeline.PhaseBodyRead, start)
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.Is(err, errBodyBudget) {
				// Not read: the connection cannot be reused for the
				// next request while the rest of this body is unread.
				x.w.Header().Set("Connection", "close")
				x.w.Header().Set("Retry-After", "1")
				return &HTTPError{Code: http.StatusServiceUnavailable, Type: "api_error", Status: record.StatusRateLimited, Err: err,
					Msg: "the gateway holds as many request bodies in memory as its budget allows (" + strconv.FormatInt(g.bodies.total>>20, 10) +
						" MiB, " + strconv.FormatInt(g.bodies.perKey>>20, 10) + " MiB per key); retry shortly"}
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The connection is not reused: net/http would otherwise
				// wait for the rest of the body before answering.
				x.w.Header().Set("Connection", "close")
				return &HTTPError{Code: http.StatusRequestTimeout, Type: "invalid_request_error", Msg: "the request body did not arrive within " + g.opts.BodyReadTimeout.String(), Status: record.StatusBadRequest, Err: err}
			}
			if errors.As(err, &mbe) {
				return &HTTPError{Code: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Msg: "the request body is larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes", Status: record.StatusBadRequest}
			}
			if x.r.Context().Err() != nil {
				return &HTTPError{Code: 499, Msg: "client closed the request", Status: record.StatusClientCancelled, Err: err}
			}
			return &HTTPError{Code: http.StatusBadRequest, Type: "invalid_request_error", Msg: "could not read the request body", Status: record.StatusBadRequest, Err: err}
		}
		if deadline {
			rc.SetReadDeadline(time.Time{})
		}
		if x.conn != nil {
			// Bytes read from here on are the next request's.
			x.conn.arm()
		}
	}
	req, herr := parseRequest(x.ep, x.r, body)
	if herr != nil {
		return herr
	}
	x.req = req
	x.rec.Model, x.rec.Stream = req.model, req.stream
	if req.user != "" {
		x.rec.UserHash = g.hashUser(req.user)
	}
	return nil
}

// A declared Content-Length sizes a body's buffer (see readBody), once
// firstRead bytes of it have arrived: a client must send before the
// gateway sets memory aside for what it declared. A body of unknown length
// starts at unknownFirst bytes, as io.ReadAll does.
const (
	firstRead    = 64 << 10
	unknownFirst = 512
)

// readBody reads a request body of at most limit bytes, counting each
// buffer against the lease before it is made (see bodyBudget). A declared
// length sizes the buffer in at most two steps (firstRead, then the
// whole), where io.ReadAll grows it step by step: for a prompt of 64 KiB
// that was 160 KiB allocated and copied, against 64; for 31 MiB, 73 MiB
// held per body (issue 50). A body of unknown length doubles its buffer,
// the old one counted until it is copied.
func readBody(ctx context.Context, r io.Reader, declared, limit int64, l *lease) ([]byte, error) {
	if declared > limit {
		declared = -1 // MaxBytesReader stops it at the limit
	}
	size := int64(unknownFirst)
	if declared > 0 {
		// One byte more than declared: the read that finds the end needs room.
		size = min(declared+1, firstRead)
	}
	if err := l.grow(ctx, size); err != nil {
		return nil, err
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) < cap(b) {
			continue
		}
		next := 2 * int64(cap(b))
		if declared > 0 && int64(cap(b)) < declared+1 {
			next = declared + 1 // it is sending what it declared
		}
		next = max(min(next, limit+1), int64(cap(b))+unknownFirst)
		if err := l.grow(ctx, next); err != nil {
			return b, err
		}
		nb := make([]byte, len(b), next)
		copy(nb, b)
		l.shrink(int64(cap(b)))
		b = nb
	}
}

// hashUser returns the keyed hash of a client-sent user id (SPEC.md §7).
func (g *Gateway) hashUser(user string) string {
	m := hmac.New(sha256.New, g.opts.UserHashKey)
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// fail answers the client with a gateway error before anything was relayed.
func (x *exchange) fail(e *HTTPError) {
	x.rec.Status = e.Status
	x.rec.Error = e.Msg + x.errorNote
	if e.Code == 499 {
		// The client is gone; there is no one to answer.
		return
	}
	x.rec.HTTPStatus = e.Code
	x.committed = true
	writeError(x.w, x.unit, e)
}

// started ends the request's count in opts.Starting, once: at its first
// output, or when it ends without one.
func (x *exchange) started() {
	if x.starting {
		x.starting = false
		x.g.opts.Starting.end()
	}
}

// finish takes t7 and hands the record on.
func (x *exchange) finish() {
	x.started()
	x.body.release()
	if x.committed {
		// Headers that went out with a whole answer (an error, a body)
		// reach the client when the handler returns.
		x.tl.MarkHeadersSent()
	}
	x.tl.Mark(timeline.T7)
	x.rec.Fields = x.tl.Fields()
	x.rec.Attempts = x.attempts
	x.admitted()
	if x.skipRecord {
		return
	}
	if x.g.opts.Diagnose != nil {
		x.g.opts.Diagnose(&x.rec)
	}
	x.g.opts.Recorder.Record(&x.rec)
}

// requestID returns the id the server's middleware already put on the
// response (server.withRequestID gives every response one), or a new one
// set on h: one id per request, drawn once.
func requestID(h http.Header) string {
	if v := h["X-Request-Id"]; len(v) == 1 && len(v[0]) == len("req_")+20 && strings.HasPrefix(v[0], "req_") {
		return v[0]
	}
	id := NewRequestID()
	h["X-Request-Id"] = []string{id}
	return id
}

// NewRequestID returns a new request id: "req_", the time and 55 random
// bits (see record.NewID).
func NewRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return record.NewID(time.Now(), binary.LittleEndian.Uint64(b[:]))
}

// copyHeaders copies upstream response headers the client should see.
// Hop-by-hop headers, cookies, lengths of streams and the upstream's own
// request id (kept as X-Upstream-Request-Id) are not copied as they are.
//
// The value slices are shared, not copied: src is the upstream response's
// header, which nothing reads or changes after this (issue 15: a copy per
// header per request was work done twice).
func copyHeaders(dst, src http.Header, stream bool) {
	for k, vs := range src {
		// The transport's keys are canonical already (then this does not
		// allocate); a key that is not is compared canonical all the same.
		switch textproto.CanonicalMIMEHeaderKey(k) {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer",
			"Set-Cookie", "Alt-Svc", "X-Request-Id":
			continue
		case "Content-Length":
			if stream {
				continue
			}
		}
		dst[k] = vs
	}
	if id := src["X-Request-Id"]; len(id) > 0 && id[0] != "" {
		dst["X-Upstream-Request-Id"] = id[:1:1]
	}
}

// Header values the relay sets on every stream. net/http only reads them;
// a later Add appends to a copy (their capacity is their length).
var (
	noCache = []string{"no-cache"}
	no      = []string{"no"}
)

// sseHeaders sets what keeps intermediaries from buffering an event stream.
func sseHeaders(h http.Header) {
	h["Cache-Control"] = noCache
	h["X-Accel-Buffering"] = no
}
