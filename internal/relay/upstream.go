package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// maxErrorBody bounds how much of an upstream error response the gateway
// reads before relaying it (errors are small; this keeps a broken upstream
// from making the gateway hold megabytes).
const maxErrorBody = 64 << 10

// errorBodyWait bounds how long the gateway waits for an upstream error
// body it is going to relay.
const errorBodyWait = 10 * time.Second

// attempt is one upstream try in progress.
type attempt struct {
	ch     *route.Channel
	index  int // in the timeline's attempts
	ctx    context.Context
	cancel context.CancelCauseFunc
	timers []*time.Timer
	resp   *http.Response
	// injected is set when this attempt's body carries the
	// stream_options.include_usage the gateway added.
	injected bool
	// sent is set once the whole request was written upstream (traceSent).
	sent atomic.Bool

	spanID      string    // the span its upstream request named in traceparent; "" without tracing
	firstOutput *deadline // stopped at t4 (or the first bytes of a non-SSE stream)
	// A hedged attempt arrives at the relay with its stream already read
	// up to t4: its reader, classifier and the pieces it held back.
	rd   wire.PieceReader
	st   *protocol.Stream
	held []heldPiece
	// h is the channel's health for the request's model; early is set once
	// it was told of the attempt's first output (outputReached).
	h      *route.Health
	early  bool
	unlink func() bool // detaches the attempt from the gateway's shutdown
	// authWait is how long building its request waited for a credential
	// fetched on the request's path (upstream_auth_ms); 0 when cached.
	authWait time.Duration
	// remReq and remTok are the provider's remaining budget its answer
	// told (budgetSeen); nil when it told none.
	remReq, remTok *int64

	// The total, header and first-output deadlines share one timer
	// (issue 15: three runtime timers were armed per attempt, and two of
	// them stopped again within milliseconds). It fires at the earliest
	// deadline still pending and re-arms itself for the next one; a
	// deadline that is stopped is only marked, the timer is not touched.
	deadlineMu    sync.Mutex  // guards deadlines, nDeadlines, deadlineTimer
	deadlines     [3]deadline // the first nDeadlines are in use
	nDeadlines    int
	deadlineTimer *time.Timer
}

// deadline is one of an attempt's deadlines.
type deadline struct {
	at    time.Time // on the wall clock
	cause error
	done  atomic.Bool // stopped: it no longer applies
}

// Stop ends the deadline before it passes.
func (d *deadline) Stop() { d.done.Store(true) }

func (a *attempt) stop() {
	// Cancel first: a timer callback running now sees the attempt over
	// and does not re-arm itself after Stop.
	a.cancel(context.Canceled)
	for _, t := range a.timers {
		t.Stop()
	}
	a.deadlineMu.Lock()
	if a.deadlineTimer != nil {
		a.deadlineTimer.Stop()
	}
	a.deadlineMu.Unlock()
	if a.unlink != nil {
		a.unlink()
	}
}

// after cancels the attempt with cause when d passes, until stopped. The
// first three (total, headers, first output) share the attempt's timer; any
// further one gets its own.
func (a *attempt) after(d time.Duration, cause error) *deadline {
	a.deadlineMu.Lock()
	defer a.deadlineMu.Unlock()
	if a.nDeadlines == len(a.deadlines) {
		dl := &deadline{}
		a.timers = append(a.timers, time.AfterFunc(d, func() {
			if !dl.done.Load() {
				a.cancel(cause)
			}
		}))
		return dl
	}
	dl := &a.deadlines[a.nDeadlines]
	a.nDeadlines++
	dl.at, dl.cause = time.Now().Add(d), cause
	switch {
	case a.deadlineTimer == nil:
		a.deadlineTimer = time.AfterFunc(d, a.deadlinePassed)
	case a.nextDeadline().Equal(dl.at):
		a.deadlineTimer.Reset(d) // earlier than the one it was armed for
	}
	return dl
}

// nextDeadline returns the earliest pending deadline, or zero. The caller
// holds deadlineMu.
func (a *attempt) nextDeadline() time.Time {
	var next time.Time
	for i := range a.nDeadlines {
		if dl := &a.deadlines[i]; !dl.done.Load() && (next.IsZero() || dl.at.Before(next)) {
			next = dl.at
		}
	}
	return next
}

// deadlinePassed runs on the timer: it cancels the attempt with the cause
// of the earliest deadline that passed, or re-arms for the next one.
func (a *attempt) deadlinePassed() {
	if a.ctx.Err() != nil {
		return // the attempt is over
	}
	a.deadlineMu.Lock()
	now := time.Now()
	var passed *deadline
	for i := range a.nDeadlines {
		dl := &a.deadlines[i]
		if !dl.done.Load() && !now.Before(dl.at) && (passed == nil || dl.at.Before(passed.at)) {
			passed = dl
		}
	}
	if passed == nil {
		if next := a.nextDeadline(); !next.IsZero() {
			a.deadlineTimer.Reset(next.Sub(now))
		}
	}
	a.deadlineMu.Unlock()
	if passed != nil {
		a.cancel(passed.cause)
	}
}

// idleWatch cancels an attempt whose upstream has kept the relay waiting
// longer than its limit between two pieces. It counts only time spent
// waiting on the upstream, not time spent writing to a slow client, and it
// starts with the first piece: before that the first-output timeout applies
// (idle is the gap between events, SPEC.md §5). The relay only notes when it
// starts to wait and when a piece arrives (atomic stores); the timer re-arms
// itself for what is left of the limit, so no timer is reset per event.
// Times are offsets from base on the gateway's clock, keeping its monotonic
// reading.
type idleWatch struct {
	a     *attempt
	now   func() time.Time
	base  time.Time
	since atomic.Int64 // 1 + offset from base when the current wait began; 0: not waiting
	limit time.Duration
	timer *time.Timer
}

// waiting notes that the relay begins to wait for upstream bytes (a wait
// already under way keeps its start).
func (w *idleWatch) waiting() { w.since.CompareAndSwap(0, int64(w.now().Sub(w.base))+1) }

// arrived notes that a piece came: the wait is over.
func (w *idleWatch) arrived() { w.since.Store(0) }

// idleTimer starts watching the attempt's stream for silences over limit.
func (a *attempt) idleTimer(now func() time.Time, limit time.Duration) *idleWatch {
	w := &idleWatch{a: a, now: now, base: now(), limit: limit}
	// The timer is made stopped-in-effect and armed only once w.timer is
	// set, so the callback never sees it unset.
	w.timer = time.AfterFunc(time.Duration(1<<62), w.fire)
	w.timer.Reset(limit)
	a.timers = append(a.timers, w.timer)
	return w
}

func (w *idleWatch) fire() {
	if w.a.ctx.Err() != nil {
		return // the attempt is over
	}
	s := w.since.Load()
	if s == 0 {
		w.timer.Reset(w.limit) // not waiting on the upstream now
		return
	}
	quiet := w.now().Sub(w.base) - time.Duration(s-1)
	if quiet < w.limit {
		w.timer.Reset(w.limit - quiet)
		return
	}
	w.a.cancel(errIdleTimeout)
}

// noChannel answers a request whose model no channel serves. It is a
// function of its own so that its temporaries are not on relay's frame,
// which is on the stack for the whole stream (see serve).
func (x *exchange) noChannel() {
	if held := x.route.Held; len(held) > 0 {
		x.fail(&HTTPError{Code: http.StatusServiceUnavailable, Type: "api_error",
			Msg: "every channel serving model " + strconv.Quote(x.req.model) + " is drained or disabled by an operator (" + strings.Join(held, ", ") + ")", Status: record.StatusNoChannel})
		return
	}
	x.fail(&HTTPError{Code: http.StatusNotFound, Type: "invalid_request_error",
		Msg: "no channel serves model " + strconv.Quote(x.req.model) + " on the " + x.proto + " protocol", Status: record.StatusNoChannel})
}

// writeDeadline bounds how long one write to the client may block: a client
// that accepts no bytes for the limit (the channel's idle timeout) is cut,
// so it cannot hold the handler, the channel's inflight count or a graceful
// shutdown forever. The deadline is moved only when less than half of it is
// left, not on every write.
type writeDeadline struct {
	rc    *http.ResponseController
	limit time.Duration
	until time.Time
	off   bool // the ResponseWriter cannot set deadlines
}

func (d *writeDeadline) extend() { d.extendAt(time.Now()) }

// extendAt is extend with a wall-clock reading the caller already has (the
// relay takes one per piece, not one per write and flush).
func (d *writeDeadline) extendAt(now time.Time) {
	if d.off || d.limit <= 0 {
		return
	}
	if now.Add(d.limit / 2).Before(d.until) {
		return
	}
	d.until = now.Add(d.limit)
	if err := d.rc.SetWriteDeadline(d.until); err != nil {
		d.off = true
	}
}

// clear removes the deadline, so that the connection's next request is not
// bound by it.
func (d *writeDeadline) clear() {
	if !d.off && !d.until.IsZero() {
		d.rc.SetWriteDeadline(time.Time{})
	}
}

// relay tries the channels in the order the router plans until one
// answers, then relays it. A route with hedging races two attempts for the
// first output instead (race, hedge.go).
func (x *exchange) relay() {
	plan := x.plan()
	if plan == nil {
		return
	}
	plan.Begin()
	defer plan.End()
	if x.hedges(plan) {
		x.race(plan)
		return
	}
	x.inOrder(plan)
}

// plan returns the request's channels in the order to try them, or nil
// when none serves it (the client has been answered). The plan is kept
// in the exchange, not on relay's frame.
func (x *exchange) plan() *route.Plan {
	start := x.tl.Now()
	x.route = x.g.opts.Router.PlanFor(x.proto, x.req.model, x.principal.Group, x.budgetNeed())
	x.tl.PhaseSince(timeline.PhaseDistribution, start)
	if len(x.route.Skipped) > 0 {
		x.rec.SkippedEjected = x.route.Skipped
	}
	x.planSkips(&x.route)
	if len(x.route.Channels) == 0 {
		x.noChannel()
		return nil
	}
	return &x.route
}

// inOrder tries the plan's channels one after another until one answers
// and is relayed, or a failure that no other channel can mend. Its frame is
// on the stack for the whole of a relayed stream, below every flush: it
// keeps to the loop (issue 15).
func (x *exchange) inOrder(plan *route.Plan) {
	var last *HTTPError
	var lastResp *http.Response
	var lastBody []byte
	lastIndex := -1
	cands := plan.Channels
	for n, ch := range cands {
		if x.r.Context().Err() != nil {
			x.rec.Status = record.StatusClientCancelled
			x.rec.Error = "client closed the request before an upstream answered"
			return
		}
		h := plan.Health[n]
		count := h.Acquire()
		if n == 0 {
			x.rec.Inflight.Channel = int(count)
		}
		x.useChannel(ch)
		a, herr := x.start(ch)
		a.h = h
		if herr == nil {
			// Headers arrived with a success status: relay it. No more
			// fallback once the first byte reaches the client; before
			// that, a first-output timeout may still move on.
			retry := x.serveResponse(a, n < len(cands)-1)
			a.stop()
			h.Release()
			x.observe(h, a, len(x.attempts)-1, !retry)
			if !retry {
				return
			}
			continue
		}
		h.Release()
		x.observe(h, a, len(x.attempts)-1, false)
		last = herr
		lastResp, lastBody = nil, nil
		if a.resp != nil {
			if retryable(herr) && n < len(cands)-1 {
				// Another channel answers instead: do not wait for
				// this one's error body.
				a.resp.Body.Close()
			} else {
				lastResp, lastBody, lastIndex = a.resp, x.readErrorBody(a), a.index
			}
		}
		a.stop()
		if !retryable(herr) {
			break
		}
	}
	// Every attempt failed before anything was relayed.
	x.failAll(last, lastResp, lastBody, lastIndex)
}

// failAll answers the client when every attempt failed before anything was
// relayed: with the last upstream's own error response when there is one.
func (x *exchange) failAll(last *HTTPError, lastResp *http.Response, lastBody []byte, lastIndex int) {
	if lastResp != nil {
		// The upstream's own error, as the client would have seen it;
		// the request's t1/t2 are those of the attempt that sent it.
		x.tl.Relay(lastIndex)
		x.rec.Status, x.rec.Error = last.Status, last.Msg
		x.rec.HTTPStatus = lastResp.StatusCode
		copyHeaders(x.w.Header(), lastResp.Header, false)
		x.w.Header().Set("Content-Length", strconv.Itoa(len(lastBody)))
		x.w.WriteHeader(lastResp.StatusCode)
		x.committed = true
		x.w.Write(lastBody)
		return
	}
	x.fail(last)
}

// useChannel makes ch the record's channel.
func (x *exchange) useChannel(ch *route.Channel) {
	x.rec.Channel, x.rec.Region, x.rec.Provider = ch.Name, ch.Region, ch.Provider
	x.rec.UpstreamModel = ch.UpstreamModel(x.rec.Model)
}

// retryable reports whether the next channel may be tried after e:
// connect errors, 429 and 5xx, and header or first-output timeouts.
func retryable(e *HTTPError) bool {
	switch e.Status {
	case record.StatusUpstreamConnectError, record.StatusHeaderTimeout, record.StatusFirstOutputTimeout, record.StatusRateLimited:
		return true
	case record.StatusUpstreamHTTPError:
		return e.Code >= 500
	}
	return errors.Is(e.Err, errNoAnswer)
}

// start sends the request to ch and waits for its headers. On success the
// attempt holds a 2xx response; otherwise the error says why, and the
// attempt (if not nil) may hold the upstream's error response.
func (x *exchange) start(ch *route.Channel) (*attempt, *HTTPError) {
	to := ch.Timeouts
	ctx, cancel := context.WithCancelCause(x.r.Context())
	a := &attempt{ch: ch, index: -1, ctx: ctx, cancel: cancel}
	a.unlink = context.AfterFunc(x.g.life, func() { cancel(errShutdown) })
	a.after(x.tl.Start().Add(to.Total).Sub(x.tl.Now()), errTotalTimeout)

	req, err := x.upstreamRequest(traceSent(ctx, &a.sent), a)
	if a.authWait > 0 {
		x.tl.AddPhase(timeline.PhaseUpstreamAuth, a.authWait)
	}
	if err != nil {
		return a, x.attemptFailed(a, buildFailed(err))
	}
	a.index = x.tl.BeginAttempt()
	// Each timeout at its own value, streaming or not (SPEC.md §5). A
	// non-streaming answer's headers come with the whole answer, so both
	// bound that wait, and whichever passes first names the failure.
	headerTimer := a.after(to.Headers, errHeaderTimeout)
	a.firstOutput = a.after(to.FirstOutput, errFirstOutputTimeout)
	resp, err := x.g.roundTrip(req)
	if err == nil {
		x.tl.GotHeaders(a.index)
	}
	headerTimer.Stop()
	if !x.req.stream {
		// The answer is here (its body follows at once): its output is.
		a.firstOutput.Stop()
	}
	if err != nil {
		return a, x.attemptFailed(a, x.classifyError(a, err, "connect"))
	}
	a.resp = resp
	x.budgetSeen(a, resp)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		x.attempts = append(x.attempts, record.Attempt{Channel: ch.Name, Status: record.StatusOK, HTTPStatus: resp.StatusCode,
			Role: x.nextRole(), Outcome: record.OutcomeWon, SpanID: a.spanID})
		a.stampBudget(&x.attempts[len(x.attempts)-1])
		x.setAttemptTiming(len(x.attempts)-1, a.index)
		x.tl.Relay(a.index)
		return a, nil
	}
	status := record.StatusUpstreamHTTPError
	if resp.StatusCode == http.StatusTooManyRequests {
		status = record.StatusRateLimited
	}
	return a, x.attemptFailed(a, &HTTPError{Code: resp.StatusCode, Type: "api_error", Msg: "upstream answered " + strconv.Itoa(resp.StatusCode), Status: status})
}

// attemptFailed records a failed attempt and returns its error.
func (x *exchange) attemptFailed(a *attempt, e *HTTPError) *HTTPError {
	at := record.Attempt{Channel: a.ch.Name, Status: e.Status, Error: e.Msg, Role: x.nextRole(), Outcome: record.OutcomeFailed, SpanID: a.spanID}
	if a.resp != nil {
		at.HTTPStatus = a.resp.StatusCode
	}
	a.stampBudget(&at)
	// The error's detail (TLS, DNS, proxy) goes only to the log.
	x.g.log.Warn("upstream attempt failed", "request_id", x.rec.RequestID, "channel", a.ch.Name,
		"status", e.Status, "http_status", at.HTTPStatus, "err", e.Err)
	x.attempts = append(x.attempts, at)
	x.setAttemptTiming(len(x.attempts)-1, a.index)
	return e
}

// nextRole is the role of the attempt about to be recorded: the first is
// the primary, each later one a retry of the one before.
func (x *exchange) nextRole() string {
	if len(x.attempts) == 0 {
		return record.RolePrimary
	}
	return record.RoleRetry
}

// setAttemptTiming copies the marks of timeline attempt ti into record
// attempt i (an attempt that never started has none).
func (x *exchange) setAttemptTiming(i, ti int) {
	if ti < 0 {
		return
	}
	t := x.tl.AttemptTiming(ti)
	x.attempts[i].UpstreamStartMs = t.UpstreamStartMs
	x.attempts[i].UpstreamHeadersMs = t.UpstreamHeadersMs
	x.attempts[i].UpstreamHeadersAtMs = t.UpstreamHeadersAtMs
}

// classifyError tells why an upstream exchange failed: a timer of ours, the
// client leaving, or the network.
func (x *exchange) classifyError(a *attempt, err error, phase string) *HTTPError {
	cause := context.Cause(a.ctx)
	switch {
	case x.r.Context().Err() != nil:
		return &HTTPError{Code: 499, Msg: "client closed the request", Status: record.StatusClientCancelled, Err: err}
	case errors.Is(cause, errHeaderTimeout):
		return &HTTPError{Code: http.StatusGatewayTimeout, Type: "timeout_error", Msg: "upstream did not send headers within the header timeout", Status: record.StatusHeaderTimeout, Err: err}
	case errors.Is(cause, errFirstOutputTimeout):
		return &HTTPError{Code: http.StatusGatewayTimeout, Type: "timeout_error", Msg: "upstream sent no output within the first-output timeout", Status: record.StatusFirstOutputTimeout, Err: err}
	case errors.Is(cause, errIdleTimeout):
		return &HTTPError{Code: http.StatusGatewayTimeout, Type: "timeout_error", Msg: "upstream stream was idle longer than the idle timeout", Status: record.StatusIdleTimeout, Err: err}
	case errors.Is(cause, errTotalTimeout):
		return &HTTPError{Code: http.StatusGatewayTimeout, Type: "timeout_error", Msg: "request passed the total timeout", Status: record.StatusTotalTimeout, Err: err}
	case errors.Is(cause, errShutdown):
		// Not one of SPEC §5's causes: the operator stopped the gateway
		// past its drain timeout. The stream ends with an error event; the
		// record says what happened in its error.
		return &HTTPError{Code: http.StatusServiceUnavailable, Type: "api_error", Msg: "the gateway shut down before the response ended (drain timeout)", Status: record.StatusClientCancelled, Err: err}
	}
	var ue *unknownCodingError
	if errors.As(err, &ue) {
		return &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Status: record.StatusUpstreamStreamError, Err: err,
			Msg: "upstream sent its response in a content coding the gateway did not ask for and cannot decode (" + echo(ue.coding) + ")"}
	}
	if phase == "connect" && isHeaderTooLarge(err) {
		return &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: headerTooLargeMsg, Status: record.StatusUpstreamStreamError, Err: err}
	}
	if phase == "connect" && a.sent.Load() {
		return noAnswer(err)
	}
	if phase == "connect" {
		return &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: "cannot reach the upstream: " + netErrorText(err), Status: record.StatusUpstreamConnectError, Err: err}
	}
	return &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: "upstream stream failed: " + netErrorText(err), Status: record.StatusUpstreamStreamError, Err: err}
}

// netErrorText summarises a network error without URLs or bodies.
func netErrorText(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "connection refused"):
		return "connection refused"
	case strings.Contains(s, "connection reset"):
		return "connection reset by peer"
	case strings.Contains(s, "no such host"):
		return "no such host"
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(s, "unexpected EOF"):
		return "unexpected EOF"
	case strings.Contains(s, "timeout"):
		return "network timeout"
	case errors.Is(err, io.EOF):
		return "EOF"
	}
	return "network error"
}

// readErrorBody reads an upstream error response (bounded in size and
// time) and closes it.
func (x *exchange) readErrorBody(a *attempt) []byte {
	defer a.resp.Body.Close()
	t := time.AfterFunc(errorBodyWait, func() { a.cancel(errors.New("upstream error body too slow")) })
	defer t.Stop()
	b, _ := io.ReadAll(io.LimitReader(a.resp.Body, maxErrorBody))
	if f := kindFraming(a.ch, x.ep.proto); f != nil && f.ErrorMessage != nil {
		// The provider answered in its own error format, which the
		// client's SDK does not read: the client gets its API's.
		b = x.ep.unit.ErrorBody(protocol.ErrorResponse{Status: a.resp.StatusCode, Message: f.ErrorMessage(a.resp.Header, b)})
		a.resp.Header.Set("Content-Type", "application/json")
	}
	return b
}

// upstreamRequest builds the request to ch: the client's body (with the
// usage option the gateway may add), the headers the provider needs, and
// the channel's own key. The client's key never goes upstream.
func (x *exchange) upstreamRequest(ctx context.Context, a *attempt) (*http.Request, error) {
	ch := a.ch
	kind := wire.LookupKind(ch.Protocol)
	if kind == nil {
		return nil, fmt.Errorf("channel %s: no provider unit of kind %q is linked", ch.Name, ch.Protocol)
	}
	up := ch.Hooks
	path, query, _ := strings.Cut(x.req.upstreamURI, "?")
	// The provider's name for the model (aliases): in the body, in the
	// path, or where the kind puts it (a deployment named in the URL).
	model := ch.UpstreamModel(x.req.model)
	if at := x.req.modelInPath; model != x.req.model && at >= 0 && at+len(x.req.model) <= len(path) {
		path = path[:at] + model + path[at+len(x.req.model):]
	}
	target := wire.Target{Base: ch.BaseURL, Path: path, Query: query, Model: model, Stream: x.req.stream, Family: x.ep.proto}
	var u *url.URL
	switch {
	case up != nil && up.URL != nil:
		u = up.URL(target)
	case kind.URL != nil:
		u = kind.URL(target)
	default:
		u = wire.JoinURL(ch.BaseURL, path, query)
	}
	// The URL is built, not printed and parsed again: NewRequest gets an
	// empty one and u replaces it (issue 15: the round trip through a
	// string was work done twice on every request).
	req, err := http.NewRequestWithContext(ctx, x.r.Method, "", nil)
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = u, u.Host
	// A kind that rewrites the body, or signs it, gets it whole (one
	// copy, made only for such kinds); the others send the prompt's pieces.
	var whole []byte
	if x.ep.hasBody {
		payload, injected, ok := x.req.payloadFor(ch.NoStreamUsage, model)
		if !ok {
			return nil, errPromptReleased
		}
		a.injected = injected
		if up != nil && (up.Body != nil || up.Credentials != nil && up.Credentials.SignsBody()) {
			if whole, err = kindBody(up, target, payload); err != nil {
				return nil, err
			}
			payload = prompt{whole}
		}
		req.ContentLength = int64(payload.size())
		req.Body = http.NoBody
		if payload.size() > 0 {
			// Not a bytes.Reader: NewRequest's GetBody would keep the
			// prompt for as long as the response refers to the request.
			req.Body = &promptReader{p: payload}
			noUsage := ch.NoStreamUsage
			req.GetBody = func() (io.ReadCloser, error) {
				b, _, ok := x.req.payloadFor(noUsage, model)
				if !ok {
					return nil, errPromptReleased
				}
				if up != nil && up.Body != nil {
					w, err := kindBody(up, target, b)
					if err != nil {
						return nil, err
					}
					b = prompt{w}
				}
				return &promptReader{p: b}, nil
			}
		}
	}
	for _, k := range forwardHeaders {
		if v := x.r.Header[k]; len(v) > 0 {
			req.Header[k] = v
		}
	}
	for _, k := range kind.ForwardHeaders {
		if v := x.r.Header[k]; len(v) > 0 {
			req.Header[k] = v
		}
	}
	if x.ep.hasBody && len(req.Header["Content-Type"]) == 0 {
		req.Header["Content-Type"] = applicationJSON
	}
	if kind.Authorize != nil {
		kind.Authorize(req.Header, ch.Key)
	}
	x.spendBudget(ch)
	req.Header.Set("X-Request-Id", x.rec.RequestID)
	if t := x.g.opts.Tracer; t != nil {
		a.spanID = t.Inject(req.Header, &x.rec)
	}
	if up != nil && up.Credentials != nil {
		// Last: a signer signs the headers set above. A cached token
		// takes no time; a fetch on this path is upstream_auth_ms.
		waited, err := up.Credentials.Authorize(ctx, req, whole)
		a.authWait += waited
		if err != nil {
			return nil, err
		}
	}
	return req, nil
}

// buildFailed is the error of an attempt whose request could not be built:
// its credentials could not be had (the token endpoint named as the cause,
// not the model), or the body or URL could not be made.
func buildFailed(err error) *HTTPError {
	if ce, ok := errors.AsType[*wire.CredentialError](err); ok {
		return &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: "cannot get the upstream credentials of channel " + ce.Channel, Status: record.StatusUpstreamConnectError, Err: err}
	}
	return &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: "cannot build the upstream request", Status: record.StatusUpstreamConnectError, Err: err}
}

// kindBody is the body a kind sends: the prompt made whole, rewritten by
// the kind's Body when it has one.
func kindBody(up *wire.Upstream, t wire.Target, p prompt) ([]byte, error) {
	b := p[0]
	if len(b) != p.size() {
		b = make([]byte, 0, p.size())
		for _, piece := range p {
			b = append(b, piece...)
		}
	}
	if up.Body == nil {
		return b, nil
	}
	return up.Body(t, b)
}

// joinPath appends the request path to a channel's base path (see
// wire.JoinPath).
func joinPath(base, path string) string { return wire.JoinPath(base, path) }

var applicationJSON = []string{"application/json"}

// textEventStream is the Content-Type of a stream relayed as SSE.
var textEventStream = []string{"text/event-stream"}

// forwardHeaders are the client headers every upstream may need, besides
// those its provider kind reads (wire.Kind.ForwardHeaders); everything else
// (above all the client's own credentials) stays at the gateway.
var forwardHeaders = []string{
	"Content-Type", "Accept", "User-Agent",
	"X-Stainless-Arch", "X-Stainless-Lang", "X-Stainless-Os", "X-Stainless-Package-Version",
	"X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Retry-Count", "X-Stainless-Timeout",
}
