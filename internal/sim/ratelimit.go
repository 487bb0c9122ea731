package sim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateLimit is a profile's own provider limit (issue 49): the simulated
// account may send that many requests and tokens a minute, refilled
// continuously as providers describe their limits (a bucket whole again
// after a minute unused). Every answer carries the provider's rate-limit
// headers (Unit.RateHeaders, Route.RateHeaders: each unit writes its
// provider's), and a request the bucket cannot hold is answered 429 with
// Retry-After, as the provider would. A request takes one request and its
// prompt's tokens plus the profile's output tokens. Zero in either field:
// no limit of that kind.
type RateLimit struct {
	RequestsPerMinute int `yaml:"requests_per_minute"`
	TokensPerMinute   int `yaml:"tokens_per_minute"`
}

func (l *RateLimit) validate() error {
	if l == nil {
		return nil
	}
	if l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 {
		return fmt.Errorf("rate_limit: requests_per_minute and tokens_per_minute must not be negative")
	}
	if l.RequestsPerMinute == 0 && l.TokensPerMinute == 0 {
		return fmt.Errorf("rate_limit: give requests_per_minute or tokens_per_minute")
	}
	return nil
}

// bucket is one limit's level, refilled at limit per minute.
type bucket struct {
	limit float64
	level float64
}

// refill brings b to now, elapsed after its last reading.
func (b *bucket) refill(elapsed time.Duration) {
	b.level = min(b.limit, b.level+b.limit*elapsed.Minutes())
}

// wait is how long until b holds n; 0 when it does.
func (b *bucket) wait(n float64) time.Duration {
	if b.limit == 0 || b.level >= n {
		return 0
	}
	return time.Duration((min(n, b.limit) - b.level) / b.limit * float64(time.Minute))
}

// reset is how long until b is whole again.
func (b *bucket) reset() time.Duration {
	return time.Duration((b.limit - b.level) / b.limit * float64(time.Minute))
}

// limiter is a profile's buckets.
type limiter struct {
	mu       sync.Mutex // guards the rest
	at       time.Time  // the buckets' last reading
	req, tok bucket
}

func newLimiter(l *RateLimit, now time.Time) *limiter {
	if l == nil {
		return nil
	}
	return &limiter{at: now,
		req: bucket{limit: float64(l.RequestsPerMinute), level: float64(l.RequestsPerMinute)},
		tok: bucket{limit: float64(l.TokensPerMinute), level: float64(l.TokensPerMinute)}}
}

// rateLimit takes the request's share of the profile's limit and sets the
// provider's rate-limit headers; false when it answered 429 instead.
func (x *exchange) rateLimit(sv *served, tokens int) bool {
	l := sv.limits
	if l == nil {
		return true
	}
	now := x.s.now()
	l.mu.Lock()
	el := now.Sub(l.at)
	l.at = now
	l.req.refill(el)
	l.tok.refill(el)
	wait := max(l.req.wait(1), l.tok.wait(float64(tokens)))
	if wait == 0 {
		if l.req.limit > 0 {
			l.req.level--
		}
		if l.tok.limit > 0 {
			l.tok.level = max(l.tok.level-float64(tokens), 0)
		}
	}
	req, tok := l.req, l.tok
	l.mu.Unlock()

	h := x.w.Header()
	rs := RateState{Now: now, Wait: wait}
	for _, d := range []struct {
		name string
		b    bucket
	}{{"requests", req}, {"tokens", tok}} {
		if d.b.limit > 0 {
			rs.Limits = append(rs.Limits, RateLimitState{Name: d.name, Limit: int64(d.b.limit),
				Remaining: int64(math.Floor(d.b.level)), Reset: d.b.reset()})
		}
	}
	if wait > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	}
	switch {
	case x.rt.rate != nil:
		x.rt.rate(h, rs)
	case x.u.RateHeaders != nil:
		x.u.RateHeaders(h, rs)
	default:
		DefaultRateHeaders(h, rs)
	}
	if wait == 0 {
		return true
	}
	x.info.Fault = "rate_limit"
	what := "requests"
	if l.req.wait(1) == 0 {
		what = "tokens"
	}
	x.fail(&Error{status: http.StatusTooManyRequests, code: "rate_limit_exceeded",
		msg: fmt.Sprintf("Rate limit reached for %s on %s (simulated): try again in %s.", what, sv.name, wait.Round(time.Millisecond))}, "")
	return false
}

// DefaultRateHeaders sets the rate-limit headers most OpenAI-compatible
// services send: x-ratelimit-limit-*, -remaining-* and -reset-* (the time
// until the budget is whole, "1s", "6m0s"), and Retry-After-Ms on a 429.
func DefaultRateHeaders(h http.Header, rs RateState) {
	for _, l := range rs.Limits {
		h.Set("X-Ratelimit-Limit-"+l.Name, strconv.FormatInt(l.Limit, 10))
		h.Set("X-Ratelimit-Remaining-"+l.Name, strconv.FormatInt(l.Remaining, 10))
		h.Set("X-Ratelimit-Reset-"+l.Name, l.Reset.Round(time.Millisecond).String())
	}
	RetryAfterMs(h, rs)
}

// RetryAfterMs sets Retry-After-Ms on a 429: the wait in milliseconds, at
// least 1.
func RetryAfterMs(h http.Header, rs RateState) {
	if rs.Wait > 0 {
		h.Set("Retry-After-Ms", strconv.FormatInt(max(rs.Wait.Milliseconds(), 1), 10))
	}
}
