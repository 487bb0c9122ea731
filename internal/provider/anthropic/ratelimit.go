package anthropic

import (
	"net/http"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// rateLimits reads Anthropic's rate-limit headers
// (https://docs.anthropic.com/en/api/rate-limits):
// anthropic-ratelimit-requests-{limit,remaining,reset} and
// anthropic-ratelimit-tokens-{limit,remaining,reset}, the latter the most
// restrictive of its input and output token limits; resets are RFC 3339
// times at which the budget is whole again.
func rateLimits(h http.Header, now time.Time) wire.RateLimits {
	return wire.RateLimits{
		Requests: wire.ReadBudget(h, "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Limit",
			func() time.Duration { return wire.HeaderTime(h, "Anthropic-Ratelimit-Requests-Reset", now) }),
		Tokens: wire.ReadBudget(h, "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Limit",
			func() time.Duration { return wire.HeaderTime(h, "Anthropic-Ratelimit-Tokens-Reset", now) }),
	}
}
