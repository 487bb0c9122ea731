package relay

import (
	"net/http"
	"strconv"

	"github.com/ttfx/ttfx/internal/admission"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// admit holds the request to the gateway's limits (Options.Admission),
// after authentication and the body, before routing: a ticket when it may
// go (after a bounded wait, admission_wait_ms), or a 429 in the client's
// protocol naming the limit, with Retry-After. A refusal is the request's
// own terminal status (rate_limited) and no channel is tried, so it is
// never counted against a channel's health.
func (x *exchange) admit() *HTTPError {
	l := x.g.opts.Admission
	if l == nil || x.req == nil || !x.ep.hasBody {
		return nil
	}
	q := admission.Request{Key: x.principal.Name, Group: x.principal.Group, Model: x.req.model}
	if l.NeedsTokens(q.Key, q.Group, q.Model) {
		// The prompt is counted only where a token limit applies; it is
		// still held (released once a response is committed).
		x.req.mu.Lock()
		q.Tokens = admission.PromptTokens(x.req.body)
		x.req.mu.Unlock()
		// Counted once: the plan's budget check reads the same figure.
		x.need.Set(int64(q.Tokens))
	}
	t, d := l.Admit(x.r.Context(), q)
	if t != nil {
		x.ticket = t
		if t.Waited > 0 {
			x.tl.SetPhase(timeline.PhaseAdmissionWait, t.Waited)
		}
		return nil
	}
	if d.Waited > 0 {
		x.tl.SetPhase(timeline.PhaseAdmissionWait, d.Waited)
	}
	if d.Cancelled {
		return &HTTPError{Code: 499, Msg: d.Message(), Status: record.StatusClientCancelled}
	}
	h := x.w.Header()
	h.Set("Retry-After", strconv.Itoa(admission.RetrySeconds(d.RetryAfter)))
	// Official SDKs (OpenAI's, and others generated the same way) read the
	// millisecond form first.
	h.Set("Retry-After-Ms", strconv.FormatInt(max(d.RetryAfter.Milliseconds(), 1), 10))
	h.Set("X-Ttfx-Rate-Limit", d.Limit+" "+d.Kind)
	return &HTTPError{Code: http.StatusTooManyRequests, Msg: d.Message(), Status: record.StatusRateLimited}
}

// admitted ends the request's ticket: its streams are released and its
// tokens corrected to what the answer reported (input + output), or kept
// at the estimate when it reported none.
func (x *exchange) admitted() {
	if x.ticket == nil {
		return
	}
	tokens := -1
	if in := x.rec.Tokens.Input; in != nil {
		tokens = *in
		if out := x.rec.Tokens.Output; out != nil {
			tokens += *out
		}
	}
	x.ticket.Done(tokens)
	x.ticket = nil
}
