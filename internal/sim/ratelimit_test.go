package sim

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRateLimitHeaders: a profile with a rate limit answers with each
// provider's own rate-limit headers, and past its limit with a 429 in the
// provider's format with Retry-After, without serving the request.
func TestRateLimitHeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := faultBase
	p.RateLimit = &RateLimit{RequestsPerMinute: 2, TokensPerMinute: 100_000}
	for _, tc := range []struct {
		name string
		req  func(base string) *http.Request
		want []string // headers every answer carries
	}{
		{"openai", func(base string) *http.Request { return requestFor(ctx, base, APIChat, "m", false, nil) },
			[]string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests",
				"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}},
		{"azure", func(base string) *http.Request {
			r, _ := http.NewRequestWithContext(ctx, "POST", base+"/openai/deployments/m/chat/completions?api-version=2024-10-21",
				strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
			r.Header.Set("Api-Key", "k")
			r.Header.Set("Content-Type", "application/json")
			return r
		}, []string{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Remaining-Tokens"}},
		{"anthropic", func(base string) *http.Request { return requestFor(ctx, base, APIAnthropic, "m", false, nil) },
			[]string{"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset",
				"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"}},
		{"gemini", func(base string) *http.Request { return requestFor(ctx, base, APIGemini, "m", false, nil) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			infos := make(chan Info, 10)
			srv := testServer(t, Options{Profiles: map[string]Profile{"m": p}, OnRequest: func(in Info) { infos <- in }})
			for i := range 3 {
				resp, err := http.DefaultClient.Do(tc.req(srv.URL))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				in := <-infos
				if i < 2 {
					if resp.StatusCode != 200 {
						t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
					}
				} else {
					if resp.StatusCode != http.StatusTooManyRequests || in.Fault != "rate_limit" {
						t.Fatalf("request %d: %d (fault %q), want 429", i, resp.StatusCode, in.Fault)
					}
					// 2 a minute: the next is whole in about 30 s.
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 25 || s > 31 {
						t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
					}
					if want := map[string]string{"gemini": "RESOURCE_EXHAUSTED", "anthropic": "rate_limit_error"}[tc.name]; want != "" && !strings.Contains(string(body), want) {
						t.Errorf("429 body %s, want %s", body, want)
					}
				}
				for _, h := range tc.want {
					if resp.Header.Get(h) == "" {
						t.Errorf("request %d: no %s", i, h)
					}
				}
				if tc.name == "gemini" {
					for k := range resp.Header {
						if strings.Contains(strings.ToLower(k), "ratelimit") {
							t.Errorf("gemini answered %s", k)
						}
					}
				}
				remaining := map[string]string{"openai": "X-Ratelimit-Remaining-Requests", "azure": "X-Ratelimit-Remaining-Requests",
					"anthropic": "Anthropic-Ratelimit-Requests-Remaining"}[tc.name]
				if rem := resp.Header.Get(remaining); remaining != "" && rem != strconv.Itoa(max(1-i, 0)) {
					t.Errorf("request %d: remaining requests %s, want %d", i, rem, max(1-i, 0))
				}
			}
		})
	}
}
