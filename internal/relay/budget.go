package relay

import (
	"net/http"
	"time"

	"github.com/ttfx/ttfx/internal/admission"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/wire"
)

// Channels kept below their provider's limits (issue 49, SPEC.md §5): the
// rate-limit headers of every answer tell the channel its budget for the
// upstream model (route/budget.go), the plan passes over a channel whose budget is below
// the request's need, and the record keeps both the figures each attempt
// saw and the channels skipped for them.

// budgetNeed returns what the request takes of a channel's provider
// budget: its prompt's tokens, counted (with the tokenizer admission uses)
// only when a channel's token budget is below the body's length.
func (x *exchange) budgetNeed() *route.Need {
	if x.req == nil || !x.ep.hasBody {
		return nil
	}
	n := &x.need
	x.req.mu.Lock()
	n.Bound = int64(len(x.req.body))
	x.req.mu.Unlock()
	n.Tokens = x // the exchange itself: a closure would cost an allocation per request
	return n
}

// PromptTokens counts the prompt's tokens for the plan (route.Counter).
func (x *exchange) PromptTokens() int64 {
	x.req.mu.Lock()
	defer x.req.mu.Unlock()
	return int64(admission.PromptTokens(x.req.body))
}

// planSkips notes in the record the channels the plan passed over for
// their provider budget.
func (x *exchange) planSkips(p *route.Plan) {
	if len(p.RateLimited) == 0 {
		return
	}
	out := make([]record.RateLimitSkip, len(p.RateLimited))
	for i, s := range p.RateLimited {
		out[i] = record.RateLimitSkip{Channel: s.Channel, Limit: s.Limit, Remaining: s.Remaining, Need: s.Need,
			ResetMs: float64(s.Reset) / float64(time.Millisecond)}
	}
	x.rec.SkippedRateLimited = out
}

// spendBudget takes the request's share of ch's budget as its attempt
// starts.
func (x *exchange) spendBudget(ch *route.Channel) {
	x.g.opts.Router.Budget(ch, x.req.model).Spend(x.need.Counted())
}

// budgetSeen reads the provider's rate-limit headers on a's answer, tells
// the channel's budget, and keeps the remaining figures for a's record.
func (x *exchange) budgetSeen(a *attempt, resp *http.Response) {
	l := wire.ReadRateLimits(wire.LookupKind(a.ch.Protocol), resp.StatusCode, resp.Header, x.g.opts.Now())
	if !l.Any() {
		return
	}
	x.g.opts.Router.Budget(a.ch, x.req.model).See(l)
	// Copies, not &l.Requests.Remaining: that would move every answer's
	// l to the heap, headers or none (an allocation on every request).
	if l.Requests.Known {
		n := l.Requests.Remaining
		a.remReq = &n
	}
	if l.Tokens.Known {
		n := l.Tokens.Remaining
		a.remTok = &n
	}
}

// stampBudget copies the figures a's answer told onto its record attempt.
func (a *attempt) stampBudget(at *record.Attempt) {
	at.RemainingRequests, at.RemainingTokens = a.remReq, a.remTok
}
