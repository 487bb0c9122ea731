package azure

import (
	"net/http"
	"time"

	"github.com/ttfx/ttfx/internal/provider/openai"
	"github.com/ttfx/ttfx/internal/wire"
)

// Azure OpenAI sends x-ratelimit-remaining-requests and
// x-ratelimit-remaining-tokens, most often without a limit or a reset, and
// -1 where a limit does not apply. Its request limit is enforced over
// 10-second windows (a deployment's requests a minute ÷ 6) and its token
// limit over a minute, so a count without a reset is trusted for that long.
const (
	requestsWindow = 10 * time.Second
	tokensWindow   = time.Minute
)

func rateLimits(h http.Header, now time.Time) wire.RateLimits {
	l := openai.RateLimits(h, now)
	if l.Requests.Known && l.Requests.Reset == 0 {
		l.Requests.Reset = requestsWindow
	}
	if l.Tokens.Known && l.Tokens.Reset == 0 {
		l.Tokens.Reset = tokensWindow
	}
	return l
}
