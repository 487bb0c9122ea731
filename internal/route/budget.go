package route

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// Provider budgets (issue 49). A provider's answers may say how many
// requests and tokens the channel's account may still send before it
// answers 429, and when each is whole again; a 429 says how long to wait.
// The gateway keeps the newest figures and plans around a channel whose
// budget is below what a request needs until its reset, so that a
// fallback serves before the provider refuses.
//
// A provider limits an account (or a deployment) per model, whoever sends:
// the budget is kept per channel and upstream model (the name the channel
// sends, after its aliases), apart from health, which is kept per client
// group. Two groups sharing a channel spend one budget. Its keys are bounded
// by the configuration: an exact entry of the channel's models has its own
// (shared by the entries aliased to the same upstream name); every model a
// glob matches shares the glob's; a channel that lists no models has one.
// A name a client invents never makes a budget of its own.
//
// A plan spends the budget of the channel it tries locally (one request,
// the request's tokens) until the answer brings the provider's own figures:
// requests started together do not all count on the same remaining budget.

// defaultReset is how long a budget without a reset is trusted: the
// window of a per-minute limit, the unit every provider limits in.
const defaultReset = time.Minute

// Need is what a request takes of a channel's budget: one request and its
// prompt's tokens. Tokens is asked only when a channel's token budget is
// known and smaller than Bound, so that the prompt is counted only near a
// limit; nil Tokens (or Bound 0) needs no tokens.
type Need struct {
	// Bound is an upper bound of the tokens (the body's length in bytes:
	// a token is at least one byte); a budget at or above it admits
	// without counting.
	Bound int64
	// Tokens counts the request's tokens; it is asked at most once.
	Tokens Counter

	tokens int64
	done   bool
}

// Counter counts a request's prompt tokens. The relay's request is its
// own Counter, so that a plan's Need costs no allocation.
type Counter interface{ PromptTokens() int64 }

// CountFunc is a Counter of a function.
type CountFunc func() int64

// PromptTokens calls f.
func (f CountFunc) PromptTokens() int64 { return f() }

func (n *Need) count() int64 {
	if n == nil || n.Tokens == nil {
		return 0
	}
	if !n.done {
		n.tokens, n.done = max(n.Tokens.PromptTokens(), 0), true
	}
	return n.tokens
}

// Set gives the tokens already counted (by admission), so that Tokens is
// not called.
func (n *Need) Set(tokens int64) { n.tokens, n.done = max(tokens, 0), true }

// Counted returns the tokens if they were counted (by a plan near a
// limit), else the bound's worth of nothing: 0.
func (n *Need) Counted() int64 {
	if n == nil || !n.done {
		return 0
	}
	return n.tokens
}

// dim is one dimension of a budget: what may still be sent until when.
type dim struct {
	known     bool
	remaining int64
	limit     int64         // 0: not told
	until     time.Duration // since the router's base; past it the budget is whole
}

// Budget is a channel's provider budget for one upstream model (or one
// glob of its models). set is the lock-free fast path of plans: false until
// an answer told anything. Budgets live as long as the router and survive
// a reload with the channel's state.
type Budget struct {
	// Model is the upstream model (or the glob) the budget is kept for.
	Model string
	r     *Router

	set atomic.Bool

	mu       sync.Mutex // guards the rest
	req, tok dim
	seen     time.Duration // when an answer last told the figures
}

// Skip says why a plan passed over a channel for its provider budget.
type Skip struct {
	Channel string
	// Limit is "requests" or "tokens": the dimension that was short.
	Limit string
	// Remaining is what the provider (and the plans since) left of it;
	// Need what the request takes of it.
	Remaining, Need int64
	// Reset is how long until the budget is whole again.
	Reset time.Duration
}

// budgetKey returns what c's budget for model is kept under: the upstream
// name of model's exact entry in c's models, else the first glob that
// matches it (as mapped by its alias), else "*" (a channel that lists no
// models). Always a configured name, never the client's.
func (c *Channel) budgetKey(model string) string {
	if !strings.ContainsAny(model, "*?") {
		for _, p := range c.Models {
			if p == model {
				return c.patternKey(p)
			}
		}
	}
	for _, p := range c.Models {
		if strings.ContainsAny(p, "*?") && Match(p, model) {
			return c.patternKey(p)
		}
	}
	return "*"
}

// patternKey is the budget key of one of c's model patterns.
func (c *Channel) patternKey(p string) string {
	if up, ok := c.Upstream[p]; ok {
		return up
	}
	return p
}

// Budget returns c's provider budget for a request for model, created on
// first use.
func (r *Router) Budget(c *Channel, model string) *Budget {
	key := c.budgetKey(model)
	if v, ok := c.budgets.Load(key); ok {
		return v.(*Budget)
	}
	v, _ := c.budgets.LoadOrStore(key, &Budget{Model: key, r: r})
	return v.(*Budget)
}

// See keeps what an answer of the channel said of its budget. A 429
// leaves the requests spent until its Retry-After.
func (b *Budget) See(l wire.RateLimits) {
	if !l.Any() {
		return
	}
	now := b.r.since()
	b.mu.Lock()
	defer b.mu.Unlock()
	set := func(d *dim, w wire.Budget) {
		if !w.Known {
			return
		}
		reset := w.Reset
		if reset <= 0 {
			reset = defaultReset
		}
		*d = dim{known: true, remaining: w.Remaining, limit: w.Limit, until: now + reset}
	}
	set(&b.req, l.Requests)
	set(&b.tok, l.Tokens)
	if l.RetryAfter > 0 {
		until := now + l.RetryAfter
		if !b.req.known || b.req.remaining > 0 || b.req.until < until {
			b.req = dim{known: true, remaining: 0, limit: b.req.limit, until: until}
		}
	}
	b.seen = now
	b.set.Store(true)
}

// admits reports whether the budget holds the request at now; when not,
// it says which dimension of channel's budget is short.
func (b *Budget) admits(channel string, now time.Duration, need *Need) (Skip, bool) {
	if !b.set.Load() {
		return Skip{}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	expire := func(d *dim) {
		if d.known && now >= d.until {
			d.known = false
		}
	}
	expire(&b.req)
	expire(&b.tok)
	if !b.req.known && !b.tok.known {
		b.set.Store(false)
		return Skip{}, true
	}
	if b.req.known && b.req.remaining < 1 {
		return Skip{Channel: channel, Limit: "requests", Remaining: b.req.remaining, Need: 1, Reset: b.req.until - now}, false
	}
	if b.tok.known && need != nil && b.tok.remaining < need.Bound {
		if n := need.count(); b.tok.remaining < max(n, 1) {
			return Skip{Channel: channel, Limit: "tokens", Remaining: b.tok.remaining, Need: max(n, 1), Reset: b.tok.until - now}, false
		}
	}
	return Skip{}, true
}

// Spend takes what a request started on the channel takes of its budget
// (one request, tokens), until the channel's answer tells the provider's
// own figures.
func (b *Budget) Spend(tokens int64) {
	if !b.set.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.req.known {
		b.req.remaining = max(b.req.remaining-1, 0)
	}
	if b.tok.known {
		b.tok.remaining = max(b.tok.remaining-tokens, 0)
	}
}

// BudgetView is a channel's provider budget for one upstream model as its
// answers told it, for GET /api/channels and /api/channels/health. A
// dimension the provider did not tell (or whose reset has passed) is null.
type BudgetView struct {
	// UpstreamModel is what the budget is kept for: the upstream model
	// of an exact entry, or a glob shared by every model it matches.
	UpstreamModel     string `json:"upstream_model"`
	RemainingRequests *int64 `json:"remaining_requests"`
	LimitRequests     *int64 `json:"limit_requests,omitempty"`
	// RequestsResetMs is how long until the requests are whole again.
	RequestsResetMs *float64 `json:"requests_reset_ms"`
	RemainingTokens *int64   `json:"remaining_tokens"`
	LimitTokens     *int64   `json:"limit_tokens,omitempty"`
	TokensResetMs   *float64 `json:"tokens_reset_ms"`
	// SeenAgoMs is how long ago an answer last told the figures.
	SeenAgoMs float64 `json:"seen_ago_ms"`
}

// budgetView returns the budget of h's channel for h's model pattern at
// now, or nil when no answer told one that still holds. It makes none.
func (h *Health) budgetView(now time.Duration) *BudgetView {
	v, ok := h.Channel.budgets.Load(h.Channel.patternKey(h.Model))
	if !ok {
		return nil
	}
	return v.(*Budget).view(now)
}

// view returns the budget at now, or nil when no answer told one that
// still holds.
func (b *Budget) view(now time.Duration) *BudgetView {
	if !b.set.Load() {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	v := &BudgetView{UpstreamModel: b.Model, SeenAgoMs: ms(now - b.seen)}
	fill := func(d dim, rem, lim **int64, reset **float64) bool {
		if !d.known || now >= d.until {
			return false
		}
		r, l, t := d.remaining, d.limit, ms(d.until-now)
		*rem, *reset = &r, &t
		if l > 0 {
			*lim = &l
		}
		return true
	}
	a := fill(b.req, &v.RemainingRequests, &v.LimitRequests, &v.RequestsResetMs)
	c := fill(b.tok, &v.RemainingTokens, &v.LimitTokens, &v.TokensResetMs)
	if !a && !c {
		return nil
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
