package wire

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimits is what a provider's response headers say of the budget left
// on the channel's account: the requests and the tokens it may still send
// before the provider answers 429, and when each is whole again. A
// provider kind reads its own headers (Kind.RateLimits); the gateway keeps
// the newest per channel and model and routes around a channel whose budget
// is below a request's need (internal/route, budget.go).
type RateLimits struct {
	Requests, Tokens Budget
	// RetryAfter is how long a 429 (or a 503) asked the client to wait
	// (Retry-After-Ms or Retry-After); 0 when it did not say.
	RetryAfter time.Duration
}

// Budget is one dimension of a provider's rate limit as one answer told it.
type Budget struct {
	// Known is set when the answer gave the remaining count.
	Known bool
	// Remaining is what may still be sent (requests, or tokens); never
	// negative.
	Remaining int64
	// Limit is the whole budget of the window; 0 when not given.
	Limit int64
	// Reset is how long after the answer the budget is whole again; 0
	// when not given (the kind's Window applies).
	Reset time.Duration
}

// Any reports whether the answer told anything of the budget.
func (l RateLimits) Any() bool { return l.Requests.Known || l.Tokens.Known || l.RetryAfter > 0 }

// RetryAfter reads Retry-After-Ms (milliseconds, which several providers
// send beside it) or Retry-After (whole seconds, or an HTTP date
// after now); 0 when neither says anything usable. Values are bounded to a
// day: a header cannot hold a channel out of rotation for longer.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > 0 {
			return bound(time.Duration(f * float64(time.Millisecond)))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return bound(time.Duration(min(n, maxReset/int64(time.Second))) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return bound(t.Sub(now))
	}
	return 0
}

// maxReset bounds every reset and retry a header gives.
const maxReset = int64(24 * time.Hour)

func bound(d time.Duration) time.Duration { return min(max(d, 0), time.Duration(maxReset)) }

// HeaderCount reads a non-negative count header ("59"); ok is false when
// it is absent or not a count. A negative count is no count: a provider may
// send -1 where a limit does not apply.
func HeaderCount(h http.Header, name string) (int64, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" || len(v) > 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// HeaderDuration reads a reset given as a duration in Go's notation, as
// OpenAI sends it ("1s", "6m0s", "17ms", "2.5s"); a bare number is seconds.
// 0 when absent or malformed.
func HeaderDuration(h http.Header, name string) time.Duration {
	v := strings.TrimSpace(h.Get(name))
	if v == "" || len(v) > 32 {
		return 0
	}
	// A unit ends the notation; only a bare number is tried as one (a
	// failed ParseFloat allocates its error, on every answer).
	if c := v[len(v)-1]; c >= '0' && c <= '9' || c == '.' {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return bound(time.Duration(f * float64(time.Second)))
		}
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0
	}
	return bound(d)
}

// HeaderTime reads a reset given as an RFC 3339 time, as some providers
// send it ("2025-04-01T12:00:05Z"), as the time from now; 0 when absent,
// malformed or past.
func HeaderTime(h http.Header, name string, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get(name))
	if v == "" || len(v) > 64 {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !t.After(now) {
		return 0
	}
	return bound(t.Sub(now))
}

// ReadBudget reads a remaining/limit/reset triple with reset read by reset.
func ReadBudget(h http.Header, remaining, limit string, reset func() time.Duration) Budget {
	var b Budget
	b.Remaining, b.Known = HeaderCount(h, remaining)
	if !b.Known {
		return Budget{}
	}
	if limit != "" {
		b.Limit, _ = HeaderCount(h, limit)
	}
	if reset != nil {
		b.Reset = reset()
	}
	return b
}

// ReadRateLimits reads what an answer of status code says of kind k's
// budget: the kind's own headers, and the Retry-After of a 429 from any
// provider. A 429 that says nothing else leaves both budgets spent for its
// Retry-After, or for a second when it gives none.
func ReadRateLimits(k *Kind, code int, h http.Header, now time.Time) RateLimits {
	var l RateLimits
	if k != nil && k.RateLimits != nil {
		l = k.RateLimits(h, now)
	}
	if code != http.StatusTooManyRequests {
		return l
	}
	l.RetryAfter = RetryAfter(h, now)
	if l.RetryAfter == 0 {
		l.RetryAfter = time.Second
	}
	return l
}
