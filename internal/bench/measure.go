package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/timeline"
)

// Request statuses of a row. They describe what the client saw of the
// endpoint it called (the gateway or a provider); the gateway's own
// terminal status, when the row is joined with its record, is in
// Row.Gateway.
const (
	StatusOK            = "ok"             // the response completed: a terminal marker or finish reason (stream), a parsed body (non-stream)
	StatusHTTPError     = "http_error"     // a non-2xx status (http_status says which)
	StatusConnectError  = "connect_error"  // no response: dial, TLS, writing the request or reading its headers failed
	StatusTimeout       = "timeout"        // the per-request timeout elapsed (phase says where)
	StatusResponseError = "response_error" // the response carried an error: an in-stream error event, or an error object in a 2xx body
	StatusTruncated     = "truncated"      // the stream ended cleanly without a terminal marker or finish reason ("closed" is not "succeeded")
	StatusReadError     = "read_error"     // the connection failed while the body was read (reset, unexpected EOF)
	StatusBadResponse   = "bad_response"   // a 2xx answer that is not what was asked for: not an event stream, or a body that does not parse
	StatusCancelled     = "cancelled"      // the run was interrupted while the request was in flight; neither a success nor a failure of the endpoint
)

// Statuses lists the row statuses, ok first.
var Statuses = []string{StatusOK, StatusHTTPError, StatusConnectError, StatusTimeout, StatusResponseError,
	StatusTruncated, StatusReadError, StatusBadResponse, StatusCancelled}

// Phases in which a request failed.
const (
	PhaseBeforeHeaders     = "before_headers"      // no response headers arrived
	PhaseAtHeaders         = "at_headers"          // the headers were the failure (an HTTP error status)
	PhaseBeforeFirstOutput = "before_first_output" // headers arrived, no effective output (t4) yet
	PhaseMidStream         = "mid_stream"          // after the first effective output
)

// maxBody bounds a non-streaming body the bench reads, and maxErrorBody
// the part of an error body it reads for the error's type.
const (
	maxBody      = 64 << 20
	maxErrorBody = 64 << 10
)

// Client measures single requests.
type Client struct {
	HTTP    *http.Client
	Wire    *Wire
	Now     timeline.Clock // nil: time.Now
	Timeout time.Duration  // per request, retries included; 0: none
	Retry   Retry

	// wrapBody, when set (by the overhead benchmark), wraps every
	// response body before it is read.
	wrapBody func(io.ReadCloser) io.ReadCloser
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// measurement is one request's state while it runs.
type measurement struct {
	row    Row
	origin time.Time // the first attempt's request written (or just before Do, see Do)
	start  time.Time // just before the first attempt's Do
}

func (m *measurement) at(t time.Time) timeline.Offset { return timeline.At(t.Sub(m.origin)) }

// Do sends one request with body and measures it. Marks are offsets from
// the moment the first attempt's request was written (httptrace
// WroteRequest); when the transport did not report that before the
// headers arrived (a server answering before it read the request, or a
// request that failed before it was written), the origin is the moment
// just before http.Client.Do. Nothing of the prompt or the response text is
// kept.
func (c *Client) Do(ctx context.Context, body []byte) Row { return c.DoAt(ctx, body, time.Time{}) }

// DoAt is Do for a request due at a given time: it waits until due and
// then sends at once, so that an open-loop schedule loses nothing to
// starting goroutines (the rate mode starts each request's goroutine
// shortly before it is due). The timeout runs from due. A zero due sends
// at once.
func (c *Client) DoAt(ctx context.Context, body []byte, due time.Time) Row {
	if !due.IsZero() {
		if wait := due.Sub(c.now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
	parent := ctx
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	m := &measurement{}
	for attempt := 0; ; attempt++ {
		m.row.Attempts++
		retry := c.attempt(ctx, parent, body, m)
		if !retry || attempt >= c.Retry.Max || ctx.Err() != nil {
			break
		}
		if d, ok := c.Retry.Backoff.Get(); ok && d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			if ctx.Err() != nil {
				m.fail(c.now(), ctxStatus(ctx, parent), PhaseBeforeHeaders, "retry backoff interrupted")
				break
			}
		}
	}
	m.row.origin, m.row.start = m.origin, m.start
	m.row.WriteMs = timeline.SpanOf(m.origin.Sub(m.start))
	return m.row
}

// ctxStatus names why ctx ended: the request's own timeout, or the run
// being interrupted.
func ctxStatus(ctx, parent context.Context) string {
	if parent.Err() != nil {
		return StatusCancelled
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return StatusTimeout
	}
	return StatusCancelled
}

func (m *measurement) fail(at time.Time, status, phase, msg string) {
	m.row.Status, m.row.Phase, m.row.Error = status, phase, msg
	m.row.EndToEndMs = m.at(at)
}

// retryable reports whether the policy retries a failure.
func (r Retry) retryable(status string, code int) bool {
	on := func(s string) bool { return slices.Contains(r.On, s) }
	switch status {
	case StatusConnectError:
		return on("connect_error")
	case StatusTimeout:
		return on("timeout")
	case StatusHTTPError:
		return code == http.StatusTooManyRequests && on("http_429") || code >= 500 && on("http_5xx")
	}
	return false
}

// attempt makes one attempt. It reports whether the policy asks for a
// retry: only failures that happened before any of the body was used.
func (c *Client) attempt(ctx, parent context.Context, body []byte, m *measurement) (retry bool) {
	// Each attempt starts from a clean row: only the last attempt's
	// outcome is reported (with the count of attempts).
	m.row = Row{Attempts: m.row.Attempts}
	req, err := c.Wire.NewRequest(ctx, body)
	if err != nil {
		m.start = c.now()
		m.origin = m.start
		m.fail(m.start, StatusConnectError, PhaseBeforeHeaders, "build request: "+err.Error())
		return false
	}
	// WroteRequest runs on the transport's writer goroutine and may race
	// with Do returning (a server may answer before reading the body), so
	// the time is handed over under a lock.
	var mu sync.Mutex // guards wrote and reused
	var wrote time.Time
	var reused bool
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			reused = info.Reused
			mu.Unlock()
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				t := c.now()
				mu.Lock()
				wrote = t
				mu.Unlock()
			}
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	start := c.now()
	first := m.start.IsZero()
	if first {
		m.start = start
	}
	resp, err := c.HTTP.Do(req)
	headersAt := c.now()
	mu.Lock()
	w := wrote
	m.row.ConnReused = reused
	mu.Unlock()
	if first {
		m.origin = start
		if !w.IsZero() && !w.After(headersAt) {
			m.origin = w
		}
	}
	if err != nil {
		status := StatusConnectError
		if ctx.Err() != nil {
			status = ctxStatus(ctx, parent)
		}
		m.fail(headersAt, status, PhaseBeforeHeaders, shortError(err))
		return c.Retry.retryable(status, 0)
	}
	defer resp.Body.Close()
	var rc io.ReadCloser = resp.Body
	if c.wrapBody != nil {
		rc = c.wrapBody(rc)
	}
	cr := &countingReader{r: rc}
	m.row.HTTPStatus = resp.StatusCode
	m.row.TimeToHeadersMs = m.at(headersAt)
	m.row.RequestID = resp.Header.Get("X-Request-Id")
	if m.row.RequestID == "" {
		m.row.RequestID = resp.Header.Get("Request-Id")
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(cr, maxErrorBody))
		m.row.Bytes = cr.n
		if info, err := protocol.ParseResponse(c.Wire.API, b); err == nil && info.Error {
			m.row.ErrorCode = info.ErrorCode
		}
		if m.row.ErrorCode == "" {
			m.row.ErrorCode = c.Wire.HeaderErrorCode(resp.Header)
		}
		m.fail(c.now(), StatusHTTPError, PhaseAtHeaders, fmt.Sprintf("HTTP %d", resp.StatusCode))
		return c.Retry.retryable(StatusHTTPError, resp.StatusCode)
	}
	// A success is final: whatever happens to the body now is this
	// request's outcome.
	m.row.Status, m.row.Phase, m.row.Error, m.row.ErrorCode = "", "", "", ""
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if c.Wire.Stream {
		if mt != c.Wire.StreamType() {
			b, _ := io.ReadAll(io.LimitReader(cr, maxErrorBody))
			m.row.Bytes = cr.n
			if info, err := protocol.ParseResponse(c.Wire.API, b); err == nil && info.Error {
				m.row.ErrorCode = info.ErrorCode
				m.fail(c.now(), StatusResponseError, PhaseBeforeFirstOutput, "error body instead of an event stream")
				return false
			}
			m.fail(c.now(), StatusBadResponse, PhaseBeforeFirstOutput, fmt.Sprintf("asked for a stream, got Content-Type %q", mt))
			return false
		}
		c.readStream(ctx, parent, cr, m)
		return false
	}
	c.readWhole(ctx, parent, cr, m)
	return false
}

// readStream reads an event stream, classifying every piece the moment
// the reader yields it (the sse.Reader yields a piece as soon as its last
// byte is read and never waits to fill its buffer).
func (c *Client) readStream(ctx, parent context.Context, body *countingReader, m *measurement) {
	st := protocol.NewStream(c.Wire.API)
	rd := c.Wire.StreamReader(body)
	var readErr error
	r := &m.row
	for {
		p, err := rd.Next()
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
		at := c.now()
		res := st.Piece(p)
		if res.Event && !r.FirstSSEEventMs.Valid() {
			r.FirstSSEEventMs = m.at(at)
		}
		if res.Effective && !r.FirstResponseMs.Valid() {
			r.FirstResponseMs = m.at(at)
		}
		if res.Visible && !r.FirstTextDeltaMs.Valid() {
			r.FirstTextDeltaMs = m.at(at)
		}
	}
	end := c.now()
	r.Bytes = body.n
	r.EndToEndMs = m.at(end)
	r.Terminal = st.Terminal().String()
	r.FinishReason = st.FinishReason()
	r.ErrorCode = st.ErrorCode()
	r.Events = st.Counts()
	r.setTokens(st.Tokens())
	phase := PhaseBeforeFirstOutput
	if r.FirstResponseMs.Valid() {
		phase = PhaseMidStream
	}
	ev := r.Events
	recognised := ev.Metadata + ev.Reasoning + ev.Tool + ev.Text + ev.Done + ev.Error
	switch {
	case readErr != nil && ctx.Err() != nil:
		m.fail(end, ctxStatus(ctx, parent), phase, shortError(readErr))
	case readErr != nil:
		m.fail(end, StatusReadError, phase, shortError(readErr))
	case ev.Unknown > 0 && recognised == 0:
		// Every event was malformed or of another protocol: the usual
		// cause is a wrong --api, and calling it truncated would mislead.
		m.fail(end, StatusBadResponse, phase, fmt.Sprintf("no event of the stream parsed as %s (is the api right?)", c.Wire.API))
	case st.Terminal() == protocol.TerminalError:
		m.fail(end, StatusResponseError, phase, "in-stream error event")
	case st.Terminal() == protocol.TerminalTruncated:
		m.fail(end, StatusTruncated, phase, "stream ended without a terminal marker or finish reason")
	default:
		r.Status = StatusOK
	}
}

// readWhole reads a non-streaming body. Its content arrives with its last
// byte, so first response and first text, when the body has them, are the
// end (as the gateway records them); there is no first event.
func (c *Client) readWhole(ctx, parent context.Context, body *countingReader, m *measurement) {
	b, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	end := c.now()
	r := &m.row
	r.Bytes = body.n
	r.EndToEndMs = m.at(end)
	switch {
	case err != nil && ctx.Err() != nil:
		m.fail(end, ctxStatus(ctx, parent), PhaseBeforeFirstOutput, shortError(err))
		return
	case err != nil:
		m.fail(end, StatusReadError, PhaseBeforeFirstOutput, shortError(err))
		return
	case len(b) > maxBody:
		m.fail(end, StatusBadResponse, PhaseBeforeFirstOutput, "body larger than 64 MiB")
		return
	}
	info, err := protocol.ParseResponse(c.Wire.API, b)
	if err != nil {
		m.fail(end, StatusBadResponse, PhaseBeforeFirstOutput, "body does not parse as a "+string(c.Wire.API)+" response")
		return
	}
	if info.Effective {
		r.FirstResponseMs = m.at(end)
	}
	if info.Text {
		r.FirstTextDeltaMs = m.at(end)
	}
	r.FinishReason = info.FinishReason
	r.ErrorCode = info.ErrorCode
	switch {
	case info.Error:
		r.Terminal = protocol.TerminalError.String()
	case info.Kinds&protocol.Done != 0:
		r.Terminal = protocol.TerminalDone.String()
	}
	r.setTokens(info.Tokens)
	if info.Error {
		phase := PhaseBeforeFirstOutput
		if info.Effective {
			phase = PhaseMidStream
		}
		m.fail(end, StatusResponseError, phase, "error object in the response body")
		return
	}
	r.Status = StatusOK
}

// setTokens fills the token counts and the §3 speed of the row.
func (r *Row) setTokens(t protocol.Tokens) {
	r.Tokens.Source = t.Source
	r.Tokens.Input = optInt(t.Input, t.HasInput)
	r.Tokens.Output = optInt(t.Output, t.HasOutput)
	r.Tokens.Reasoning = optInt(t.Reasoning, t.HasReasoning)
	r.Tokens.Visible = optInt(t.Visible, t.HasVisible)
	if t.HasVisible {
		r.VisibleOutputTPS, r.InterTokenLatencyMs = timeline.Speed(r.FirstTextDeltaMs, r.EndToEndMs, t.Visible)
	}
}

func optInt(n int, ok bool) *int {
	if !ok {
		return nil
	}
	return &n
}

// shortError keeps an error's message short; messages from net/http do
// not quote request or response content.
func shortError(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
