package relay

import (
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// maxCapture bounds how much of a non-streaming body the gateway keeps to
// read its usage after relaying it. Bodies past it are relayed in full, but
// their usage is not read.
const maxCapture = 8 << 20

// serveResponse relays a successful upstream response. It reports whether
// the next channel should be tried instead: only when canRetry (there is a
// next channel), nothing reached the client yet, and the attempt failed in a
// retryable way.
func (x *exchange) serveResponse(a *attempt, canRetry bool) (retry bool) {
	defer a.resp.Body.Close()
	if a.rd == nil {
		a.rd = x.pieceReader(a.resp, a.ch)
	}
	if a.rd != nil {
		return x.relayStream(a, canRetry)
	}
	x.relayBody(a, x.req.stream)
	return false
}

// pieceReader returns the reader of resp's stream, or nil when resp is no
// stream the gateway classifies: an event stream (text/event-stream, or
// the media type of the API's own framing) of an API with a classifier,
// or a stream the channel's kind sends the API's family in another
// framing (wire.Kind.Framings), read as the family's own events.
func (x *exchange) pieceReader(resp *http.Response, ch *route.Channel) wire.PieceReader {
	if x.ep.classify == "" {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	if isEventStream(ct) {
		return sse.NewReader(resp.Body, x.g.opts.MaxEventBytes)
	}
	if f := x.ep.unit.Framing; f != nil && isMediaType(ct, f.ContentType) {
		return f.NewReader(resp.Body, x.g.opts.MaxEventBytes)
	}
	if f := kindFraming(ch, x.ep.proto); f != nil && isMediaType(ct, f.ContentType) {
		return f.NewReader(resp.Body, x.g.opts.MaxEventBytes)
	}
	return nil
}

// kindFraming is the framing ch's kind sends family's streams in when it
// is not the family's own (nil: the family's own).
func kindFraming(ch *route.Channel, family string) *wire.Framing {
	if k := wire.LookupKind(ch.Protocol); k != nil {
		return k.Framings[family]
	}
	return nil
}

// isMediaType reports whether a Content-Type names the media type mt.
func isMediaType(ct, mt string) bool {
	t, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(t), mt)
}

// isEventStream reports whether a Content-Type names text/event-stream,
// whatever its parameters: the media type is all the relay needs, and
// mime.ParseMediaType built a map of the parameters on every response.
func isEventStream(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// commit sends the response headers of the relayed attempt.
func (x *exchange) commit(a *attempt, stream bool) {
	h := x.w.Header()
	copyHeaders(h, a.resp.Header, stream)
	if stream {
		if x.ep.unit.Framing == nil && !isEventStream(h.Get("Content-Type")) {
			// A stream of another framing read as SSE events
			// (kindFraming): the client of an SSE API gets SSE.
			h["Content-Type"] = textEventStream
		}
		sseHeaders(h)
	}
	x.rec.HTTPStatus = a.resp.StatusCode
	x.w.WriteHeader(a.resp.StatusCode)
	x.committed = true
	x.req.release()
	x.body.release()
}

// relayStream forwards an event stream piece by piece: each complete event
// (or run of comment lines) is written the moment the parser yields it and
// flushed before the parser next waits for upstream bytes, so the gateway
// adds no buffering delay, while the classifier takes the marks t3, t4, t5
// at the time the bytes arrived.
func (x *exchange) relayStream(a *attempt, canRetry bool) (retry bool) {
	to := a.ch.Timeouts
	if a.st == nil {
		// Kept with the attempt, on the heap: on this frame they would
		// make the stack at the first flush deeper than the 8 KiB a
		// handler goroutine then grows past (issue 15).
		a.st = protocol.NewStream(x.ep.classify)
	}
	st, rd := a.st, a.rd
	rc := http.NewResponseController(x.w)
	idle := a.idleTimer(x.g.opts.Now, to.Idle)
	wd := &writeDeadline{rc: rc, limit: to.Idle}
	defer wd.clear()
	var readErr, writeErr error
	restore := x.resetOnCut()
	defer func() {
		if writeErr == nil {
			restore()
		}
	}()
	// Each event is written the moment it is parsed and flushed before the
	// reader waits for upstream bytes: events that arrived in one read go
	// out in one flush (one syscall, one chunk), and none waits for the next.
	started, dirty, textPending := false, false, false
	// terminalSent is set once a piece carrying the stream's terminal
	// event (a marker, a finish reason or an error) was flushed to a
	// client still there: from then on that event decides the status,
	// whatever ends the connection after it (SPEC.md §5).
	terminalPending, terminalSent := false, false
	// On the real clock the timeline's reading is time.Now itself: called
	// directly, a piece does not load the gateway and the timeline's clock
	// (cold after the wait for upstream bytes) before it is classified.
	realClock := x.g.realClock
	// wall is the latest wall-clock reading, for the write deadline: the
	// piece's arrival time when the timeline runs on the real clock (one
	// reading per piece serves the mark, the write and the flush).
	var wall time.Time
	// outputAt is when the attempt's first output arrived. The channel's
	// health hears of it once the piece that carried it was flushed: that
	// bookkeeping comes after the client's bytes, not before (issue 15).
	var outputAt time.Time
	flush := func() {
		if dirty && writeErr == nil {
			dirty = false
			wd.extendAt(wall)
			// A client that hung up before this flush does not have the
			// terminal event, even if the kernel takes the bytes. Asked
			// before the flush: after it, a client that read the event and
			// closed at once may already have cancelled the context.
			present := terminalPending && x.r.Context().Err() == nil
			if err := rc.Flush(); err != nil {
				writeErr = err
			} else {
				x.tl.MarkHeadersSent()
				if textPending {
					textPending = false
					x.tl.MarkTextSent()
				}
				if terminalPending {
					terminalPending = false
					terminalSent = present
				}
			}
		}
		if !outputAt.IsZero() {
			x.outputReached(a, outputAt)
			outputAt = time.Time{}
		}
		if started {
			idle.waiting()
			// The client has every byte so far and the reader is about
			// to wait: the visible text counted now lets a long answer
			// keep a few KiB of it, not up to 64 KiB.
			st.Compact()
		}
	}
	rd.OnWait(flush)
	if !canRetry {
		// No fallback can follow: the client gets the headers now, at t2,
		// as it would directly, not with the first event (issue 15). Where
		// another channel may still take over, they are held until the
		// first piece, so that nothing has reached the client if it does.
		x.commit(a, true)
		wall = time.Now()
		dirty = true
		flush()
	}
	for writeErr == nil {
		var p *sse.Piece
		var now time.Time
		var res protocol.Result
		if len(a.held) > 0 {
			// Pieces a hedged attempt read before it won, at the times
			// they arrived.
			hp := &a.held[0]
			a.held = a.held[1:]
			p, now, res = &hp.p, hp.at, hp.res
			wall = time.Now() // a write deadline counts from now, not from its arrival
		} else {
			var err error
			if p, err = rd.Next(); err != nil {
				if err != io.EOF {
					readErr = err
				}
				break
			}
			if realClock {
				now = time.Now()
				wall = now
			} else {
				now, wall = x.tl.Now(), time.Now()
			}
			res = st.Piece(p)
		}
		started = true
		idle.arrived()
		if p.Kind == sse.PieceIncomplete {
			// A block cut by a failed read: a client cannot use half an
			// event, and our error event must start on a fresh line.
			continue
		}
		if res.Event {
			x.tl.MarkAt(timeline.T3, now)
		}
		if res.Effective {
			if x.tl.MarkAt(timeline.T4, now) {
				x.started()
				if a.firstOutput != nil {
					a.firstOutput.Stop()
				}
				outputAt = now
			}
			x.tl.Content(now)
		}
		firstText := res.Visible && x.tl.MarkAt(timeline.T5, now)
		if res.UsageOnly && a.injected {
			// The usage chunk the gateway asked for and the client did not.
			continue
		}
		raw := p.Raw
		if a.injected && p.Kind == sse.PieceEvent {
			raw = x.stripUsageNull(raw)
		}
		held := !x.committed
		if held {
			x.commit(a, true)
		}
		wd.extendAt(wall)
		if _, err := x.w.Write(raw); err != nil {
			writeErr = err
			break
		}
		dirty = true
		textPending = textPending || firstText
		terminalPending = terminalPending || res.Terminal
		if held {
			// The held headers go out with this first piece at once, from
			// this frame: flushed from inside the reader's wait, net/http's
			// header write (a 2.8 KB frame) ran 224 bytes deeper, past the
			// 8 KiB a held stream's goroutine has (issue 15).
			flush()
		}
	}
	x.tl.Mark(timeline.T6) // the upstream body ended; forgotten again if another attempt follows
	flush()
	if terminalSent {
		// The client has the whole answer (or the upstream's own error):
		// a hang-up or a failure after it is not what happened to it.
		readErr, writeErr = nil, nil
	}
	return x.streamEnded(a, st, rc, wd, readErr, writeErr, started, canRetry)
}

// streamEnded records how relayStream's attempt ended and ends the client's
// stream. It reports whether the next channel should be tried instead. It
// is relayStream's tail, apart so that its locals are not on relayStream's
// frame, which is on the stack at every flush: the deepest point of a held
// stream's handler goroutine, which grows from 8 to 16 KiB if net/http's
// header write there runs out of room (issue 15).
func (x *exchange) streamEnded(a *attempt, st *protocol.Stream, rc *http.ResponseController, wd *writeDeadline, readErr, writeErr error, started, canRetry bool) (retry bool) {
	// How the attempt ended, if not well.
	var fail *HTTPError
	tryNext := false
	switch {
	case writeErr != nil:
	case readErr != nil:
		fail = x.classifyError(a, readErr, "stream")
		tryNext = retryable(fail)
	case !started:
		// 200 and an empty stream: a broken upstream, worth another channel.
		fail = &HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: "upstream ended the stream before sending anything", Status: record.StatusUpstreamStreamError}
		tryNext = true
	}
	if fail != nil && tryNext && canRetry && !x.committed {
		// Nothing reached the client: try the next channel, whose stream
		// the request-level marks and counts will come from.
		at := &x.attempts[len(x.attempts)-1]
		at.Status, at.Error, at.Outcome = fail.Status, fail.Msg, record.OutcomeFailed
		at.FirstResponseAtMs = x.tl.Since(timeline.T4)
		x.rec.Status, x.rec.Error = fail.Status, fail.Msg
		x.tl.ForgetStream()
		return true
	}
	x.streamOutcome(st)

	switch {
	case writeErr != nil:
		x.rec.Status, x.rec.Error = record.StatusClientCancelled, "client went away during the stream"
		if errors.Is(writeErr, os.ErrDeadlineExceeded) {
			x.rec.Error = "client stopped reading for longer than the idle timeout"
		}
	case fail != nil:
		x.rec.Status, x.rec.Error = fail.Status, fail.Msg
		if x.r.Context().Err() != nil {
			break // the client is gone: there is no one to tell
		}
		if !x.committed {
			x.rec.HTTPStatus = fail.Code
			x.committed = true
			writeError(x.w, x.unit, fail)
			break
		}
		// Bytes were sent: end the stream the way the protocol allows,
		// with an in-band error event, never by leaving it hanging; then
		// end the response abnormally (no last chunk over HTTP/1.1, a
		// reset stream over HTTP/2), so that a client which takes the
		// event for an ordinary one (openai-node iterating a Responses
		// stream, openai-go, LangChain) still sees the stream fail, as it
		// would have on the upstream's own cut (SPEC.md §5).
		wd.extend()
		x.w.Write(streamErrorEvent(x.rec.API, fail, st.DataEvents()))
		rc.Flush()
		x.abortConn = true
	default:
		switch st.Terminal() {
		case protocol.TerminalDone:
			x.rec.Status = record.StatusOK
		case protocol.TerminalError:
			x.rec.Status, x.rec.Error = record.StatusUpstreamStreamError, "upstream sent an error event"
		default:
			x.rec.Status, x.rec.Error = record.StatusTruncated, "upstream closed the stream without a terminal marker"
		}
	}
	x.endAttempt()
	x.attempts[len(x.attempts)-1].FirstResponseAtMs = x.tl.Since(timeline.T4)
	return false
}

// usageNull is what OpenAI-compatible upstreams append to every chunk of a
// stream whose request asked for stream_options.include_usage.
var usageNull = []byte(`,"usage":null}`)

// stripUsageNull removes the `"usage":null` member that the usage option
// the gateway added makes upstreams put at the end of every chunk, so that
// the client sees the bytes it would have seen directly (SPEC.md §3, §11).
// Only an event whose data line ends with it is changed; anything else is
// relayed as it is.
func (x *exchange) stripUsageNull(raw []byte) []byte {
	end := len(raw)
	for end > 0 && (raw[end-1] == '\n' || raw[end-1] == '\r') {
		end--
	}
	if end < len(usageNull) || string(raw[end-len(usageNull):end]) != string(usageNull) {
		return raw
	}
	cut := end - len(usageNull)
	x.scratch = append(x.scratch[:0], raw[:cut]...)
	x.scratch = append(x.scratch, raw[end-1:]...) // the closing brace and the line ends
	return x.scratch
}

// streamOutcome copies what the classifier learned into the record.
func (x *exchange) streamOutcome(st *protocol.Stream) {
	x.rec.Terminal = st.Terminal().String()
	x.rec.FinishReason = st.FinishReason()
	c := st.Counts()
	x.rec.Events = record.Events{Heartbeat: c.Heartbeat, Metadata: c.Metadata, Reasoning: c.Reasoning, Tool: c.Tool, Text: c.Text, Done: c.Done, Error: c.Error, Unknown: c.Unknown}
	x.setTokens(st.Tokens())
	if ms, ok := st.ProviderLatencyMs(); ok {
		x.rec.ProviderLatencyMs = timeline.SpanOf(time.Duration(ms) * time.Millisecond)
	}
}

// setTokens fills the record's tokens and the speed fields of SPEC.md §3.
func (x *exchange) setTokens(t protocol.Tokens) {
	tk := record.Tokens{Source: t.Source}
	if t.HasInput {
		tk.Input = record.Int(t.Input)
	}
	if t.HasOutput {
		tk.Output = record.Int(t.Output)
	}
	if t.HasReasoning {
		tk.Reasoning = record.Int(t.Reasoning)
	}
	if t.HasVisible {
		tk.Visible = record.Int(t.Visible)
		// Speed needs a window: text that came in one event (or in one
		// non-streaming body) has none worth the name, however many
		// tokens it held.
		if x.rec.Events.Text >= 2 {
			x.rec.VisibleOutputTPS, x.rec.InterTokenLatencyMs = timeline.Speed(x.tl.Since(timeline.T5), x.tl.Since(timeline.T6), t.Visible)
		}
	}
	x.rec.Tokens = tk
}

// relayBody copies a non-event-stream body to the client, keeping a bounded
// copy to read the usage from. streamed marks a stream that is not SSE
// (a streaming method asked without alt=sse may send a JSON array piece
// by piece): it is flushed after every read, its first bytes end the
// first-output wait, and the idle timeout applies between reads.
func (x *exchange) relayBody(a *attempt, streamed bool) {
	x.w.Header().Set("Server-Timing", x.serverTiming())
	x.commit(a, false)
	rc := http.NewResponseController(x.w)
	wd := &writeDeadline{rc: rc, limit: a.ch.Timeouts.Idle}
	defer wd.clear()
	restore := x.resetOnCut()
	var idle *idleWatch
	if streamed {
		idle = a.idleTimer(x.g.opts.Now, a.ch.Timeouts.Idle)
	}
	// The body is read straight into captured, which grows as it fills,
	// and written from there: no second buffer held for the response's
	// life, no copy of each read. Past maxCapture the capture is dropped
	// and a fixed buffer carries the rest. A declared length sizes it up
	// to 64 KiB, as for a prompt (readBody): a length the upstream
	// declares but does not send costs no more than that.
	var captured, spill []byte
	if cl := a.resp.ContentLength; cl > 0 {
		captured = make([]byte, 0, min(cl+1, firstRead))
	}
	overflow, first := false, true
	var readErr, writeErr error
	defer func() {
		if writeErr == nil {
			restore()
		}
	}()
	for {
		if idle != nil && !first {
			idle.waiting()
		}
		var buf []byte
		switch limit := min(cap(captured), maxCapture); {
		case spill != nil:
			buf = spill
		case len(captured) < limit:
			buf = captured[len(captured):limit]
		case len(captured) < maxCapture:
			captured = slices.Grow(captured, min(max(len(captured), 4<<10), maxCapture-len(captured)))
			buf = captured[len(captured):min(cap(captured), maxCapture)]
		default:
			overflow, captured, spill = true, nil, make([]byte, 32<<10)
			buf = spill
		}
		n, err := a.resp.Body.Read(buf)
		if n > 0 {
			if first {
				first = false
				if a.firstOutput != nil {
					a.firstOutput.Stop()
				}
			}
			if idle != nil {
				idle.arrived()
			}
			if spill == nil {
				captured = captured[:len(captured)+n]
			}
			wd.extend()
			if _, werr := x.w.Write(buf[:n]); werr != nil {
				writeErr = werr
				break
			}
			if streamed && rc.Flush() == nil {
				x.tl.MarkHeadersSent()
			}
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	end := x.tl.Now()
	x.tl.MarkAt(timeline.T6, end)
	switch {
	case writeErr != nil:
		x.rec.Status, x.rec.Error = record.StatusClientCancelled, "client went away during the response"
		if errors.Is(writeErr, os.ErrDeadlineExceeded) {
			x.rec.Error = "client stopped reading for longer than the idle timeout"
		}
	case readErr != nil:
		e := x.classifyError(a, readErr, "stream")
		x.rec.Status, x.rec.Error = e.Status, e.Msg
		// The headers are out, so the status cannot change; the client
		// learns that the body is incomplete from the connection closing.
		x.abortConn = x.r.Context().Err() == nil
	default:
		x.rec.Status = record.StatusOK
		wd.extend()
		rc.Flush() // t7 comes after the last byte reached the client
	}
	defer func() { x.attempts[len(x.attempts)-1].FirstResponseAtMs = x.tl.Since(timeline.T4) }()
	x.endAttempt()
	if overflow || x.ep.response == "" || readErr != nil || writeErr != nil {
		return
	}
	api := x.ep.response
	info, err := protocol.ParseResponse(api, captured)
	if err != nil {
		if status, msg := bodyOutcome(api, captured, streamed); status != "" {
			// The headers said 200 and the connection closed well, but
			// the body is not a complete answer: the record says so.
			x.rec.Status, x.rec.Error = status, msg
			x.endAttempt()
		}
		return
	}
	x.rec.FinishReason = info.FinishReason
	// A non-streaming answer is seen all at once: its first effective
	// output and first visible text arrive with its last byte.
	if info.Effective {
		x.tl.MarkAt(timeline.T4, end)
	}
	if info.Text {
		x.tl.MarkAt(timeline.T5, end)
	}
	x.setTokens(info.Tokens)
	if info.HasProviderLatency {
		x.rec.ProviderLatencyMs = timeline.SpanOf(time.Duration(info.ProviderLatencyMs) * time.Millisecond)
	}
}

// serverTiming renders the local phases and upstream timing known when the
// response headers go out, for the Server-Timing header.
func (x *exchange) serverTiming() string {
	f := x.tl.Fields()
	var b strings.Builder
	add := func(name string, v interface{ Ms() (float64, bool) }) {
		ms, ok := v.Ms()
		if !ok {
			return
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(name)
		b.WriteString(";dur=")
		b.WriteString(strconv.FormatFloat(ms, 'f', 3, 64))
	}
	add("auth", f.AuthMs)
	add("distribution", f.DistributionMs)
	add("body_read", f.BodyReadMs)
	add("upstream_start", f.UpstreamStartMs)
	add("upstream_headers", f.UpstreamHeadersMs)
	return b.String()
}
