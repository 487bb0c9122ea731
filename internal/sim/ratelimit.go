package sim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RateLimit is a profile's own provider limit (issue 49): the simulated
// account may send that many requests and tokens a minute, refilled
// continuously as OpenAI and Anthropic describe their limits (a bucket
// whole again after a minute unused). Every answer carries the provider's
// rate-limit headers (OpenAI's x-ratelimit-*, Azure's remaining counts,
// Anthropic's anthropic-ratelimit-*; Gemini sends none), and a request the
// bucket cannot hold is answered 429 with Retry-After, as the provider
// would. A request takes one request and its prompt's tokens plus the
// profile's output tokens. Zero in either field: no limit of that kind.
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
	x.rateHeaders(h, now, req, tok)
	if wait == 0 {
		return true
	}
	x.info.Fault = "rate_limit"
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	if x.family != familyGemini {
		h.Set("Retry-After-Ms", strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	}
	what := "requests"
	if l.req.wait(1) == 0 {
		what = "tokens"
	}
	x.fail(&apiError{status: http.StatusTooManyRequests, code: "rate_limit_exceeded",
		msg: fmt.Sprintf("Rate limit reached for %s on %s (simulated): try again in %s.", what, sv.name, wait.Round(time.Millisecond))}, "")
	return false
}

// rateHeaders sets the rate-limit headers the request's provider sends.
func (x *exchange) rateHeaders(h http.Header, now time.Time, req, tok bucket) {
	type dim struct {
		name string
		b    bucket
	}
	dims := []dim{{"requests", req}, {"tokens", tok}}
	azure := strings.HasPrefix(x.r.URL.Path, "/openai/deployments/")
	for _, d := range dims {
		if d.b.limit == 0 {
			continue
		}
		rem := strconv.FormatInt(int64(math.Floor(d.b.level)), 10)
		lim := strconv.FormatInt(int64(d.b.limit), 10)
		switch {
		case x.family == familyAnthropic:
			// Anthropic: RFC 3339 times at which the budget is whole.
			h.Set("Anthropic-Ratelimit-"+d.name+"-Limit", lim)
			h.Set("Anthropic-Ratelimit-"+d.name+"-Remaining", rem)
			h.Set("Anthropic-Ratelimit-"+d.name+"-Reset", now.Add(d.b.reset()).UTC().Format(time.RFC3339))
		case x.family == familyGemini:
			// Gemini sends no rate-limit headers.
		case azure:
			// Azure OpenAI: the remaining counts only.
			h.Set("X-Ratelimit-Remaining-"+d.name, rem)
		default:
			// OpenAI: durations until the budget is whole ("1s", "6m0s").
			h.Set("X-Ratelimit-Limit-"+d.name, lim)
			h.Set("X-Ratelimit-Remaining-"+d.name, rem)
			h.Set("X-Ratelimit-Reset-"+d.name, d.b.reset().Round(time.Millisecond).String())
		}
	}
}
