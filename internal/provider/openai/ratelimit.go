package openai

import (
	"net/http"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// RateLimits reads OpenAI's rate-limit headers, which every answer carries
// (https://platform.openai.com/docs/guides/rate-limits):
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the resets as
// durations ("1s", "6m0s", "17ms") until the budget is whole again. Servers
// compatible with OpenAI that send the same headers are read the same way.
func RateLimits(h http.Header, _ time.Time) wire.RateLimits {
	return wire.RateLimits{
		Requests: wire.ReadBudget(h, "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Requests",
			func() time.Duration { return wire.HeaderDuration(h, "X-Ratelimit-Reset-Requests") }),
		Tokens: wire.ReadBudget(h, "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Limit-Tokens",
			func() time.Duration { return wire.HeaderDuration(h, "X-Ratelimit-Reset-Tokens") }),
	}
}
