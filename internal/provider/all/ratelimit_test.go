package all

import (
	"net/http"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// TestRateLimitHeaders reads each provider's rate-limit headers as its
// documentation shows them.
func TestRateLimitHeaders(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	tests := []struct {
		name, kind string
		code       int
		h          http.Header
		want       wire.RateLimits
	}{
		{"openai", "openai", 200, hdr("x-ratelimit-limit-requests", "5000", "x-ratelimit-remaining-requests", "4999",
			"x-ratelimit-reset-requests", "12ms", "x-ratelimit-limit-tokens", "2000000",
			"x-ratelimit-remaining-tokens", "1998620", "x-ratelimit-reset-tokens", "6m0s"),
			wire.RateLimits{Requests: wire.Budget{Known: true, Remaining: 4999, Limit: 5000, Reset: 12 * time.Millisecond},
				Tokens: wire.Budget{Known: true, Remaining: 1998620, Limit: 2000000, Reset: 6 * time.Minute}}},
		{"openai 429 tokens", "openai", 429, hdr("x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "1.5s",
			"retry-after-ms", "1500", "retry-after", "2"),
			wire.RateLimits{Tokens: wire.Budget{Known: true, Remaining: 0, Reset: 1500 * time.Millisecond}, RetryAfter: 1500 * time.Millisecond}},
		{"azure without resets", "azure", 200, hdr("x-ratelimit-remaining-requests", "9", "x-ratelimit-remaining-tokens", "-1"),
			wire.RateLimits{Requests: wire.Budget{Known: true, Remaining: 9, Reset: 10 * time.Second}}},
		{"anthropic", "anthropic", 200, hdr("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", "2026-12-07T12:00:01Z", "anthropic-ratelimit-tokens-limit", "40000",
			"anthropic-ratelimit-tokens-remaining", "38000", "anthropic-ratelimit-tokens-reset", "2026-12-07T12:00:03.5Z"),
			wire.RateLimits{Requests: wire.Budget{Known: true, Remaining: 49, Limit: 50, Reset: time.Second},
				Tokens: wire.Budget{Known: true, Remaining: 38000, Limit: 40000, Reset: 3500 * time.Millisecond}}},
		{"anthropic 429 with a date", "anthropic", 429, hdr("retry-after", "Mon, 07 Dec 2026 12:00:30 GMT"),
			wire.RateLimits{RetryAfter: 30 * time.Second}},
		{"gemini 429 without retry-after", "gemini", 429, hdr(), wire.RateLimits{RetryAfter: time.Second}},
		{"gemini 200", "gemini", 200, hdr("x-ratelimit-remaining-requests", "1"), wire.RateLimits{}},
		{"malformed", "openai", 200, hdr("x-ratelimit-remaining-requests", "lots", "x-ratelimit-remaining-tokens", "12",
			"x-ratelimit-reset-tokens", "soon"),
			wire.RateLimits{Tokens: wire.Budget{Known: true, Remaining: 12}}},
		{"bounded", "openai", 429, hdr("retry-after", "99999999999"), wire.RateLimits{RetryAfter: 24 * time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := wire.LookupKind(tt.kind)
			if k == nil {
				t.Fatalf("no kind %q", tt.kind)
			}
			if got := wire.ReadRateLimits(k, tt.code, tt.h, now); got != tt.want {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// FuzzRateLimitHeaders: whatever an upstream sends, the figures are never
// negative and resets stay within a day.
func FuzzRateLimitHeaders(f *testing.F) {
	f.Add("openai", "4999", "6m0s", "2026-12-07T12:00:01Z", "1500", "2")
	f.Add("anthropic", "-1", "1e300", "9999-12-31T23:59:59Z", "NaN", "Mon, 07 Dec 2026 12:00:30 GMT")
	f.Add("azure", "18446744073709551616", "-5s", "", "-1", "-1")
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, kind, count, dur, stamp, ms, after string) {
		k := wire.LookupKind(kind)
		h := http.Header{}
		for _, n := range []string{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens",
			"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Tokens-Remaining"} {
			h.Set(n, count)
		}
		h.Set("X-Ratelimit-Reset-Requests", dur)
		h.Set("X-Ratelimit-Reset-Tokens", dur)
		h.Set("Anthropic-Ratelimit-Requests-Reset", stamp)
		h.Set("Anthropic-Ratelimit-Tokens-Reset", stamp)
		h.Set("Retry-After-Ms", ms)
		h.Set("Retry-After", after)
		l := wire.ReadRateLimits(k, 429, h, now)
		for _, b := range []wire.Budget{l.Requests, l.Tokens} {
			if b.Remaining < 0 || b.Limit < 0 || b.Reset < 0 || b.Reset > 24*time.Hour {
				t.Fatalf("budget %+v", b)
			}
		}
		if l.RetryAfter <= 0 || l.RetryAfter > 24*time.Hour {
			t.Fatalf("retry after %v", l.RetryAfter)
		}
	})
}
