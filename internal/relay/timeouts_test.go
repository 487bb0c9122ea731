package relay_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestNonStreamingTimeouts: a non-streaming answer's headers come with the
// whole answer, and each timeout bounds that wait at its own value, the
// failure named by the one that passed (SPEC.md §5). The simulated answer
// is ready at about 4.1 s.
func TestNonStreamingTimeouts(t *testing.T) {
	t.Parallel()
	profiles := map[string]sim.Profile{"slow-answer": {HeadersMs: 10, FirstEventMs: 10, TextMs: sim.Ms(100), VisibleTokens: 200, TPS: 50}}
	up, _ := upstream(t, profiles)
	const answer = 4100 * time.Millisecond
	cases := []struct {
		name           string
		headers, first time.Duration
		wantStatus     string
		wantAfter      time.Duration
	}{
		{"first_output below headers", 30 * time.Second, 800 * time.Millisecond, record.StatusFirstOutputTimeout, 800 * time.Millisecond},
		{"headers below first_output", 400 * time.Millisecond, 30 * time.Second, record.StatusHeaderTimeout, 400 * time.Millisecond},
		{"headers first, first_output later", 400 * time.Millisecond, 800 * time.Millisecond, record.StatusHeaderTimeout, 400 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			to := fastTimeouts
			to.Headers, to.FirstOutput = c.headers, c.first
			gw, recs := gateway(t, channel("c", "openai", up.URL, to))
			req := call{"chat", "slow-answer", false}.request(context.Background(), gw.URL, clientKey)
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if resp.StatusCode != http.StatusGatewayTimeout || rec.Status != c.wantStatus {
				t.Fatalf("HTTP %d, status %s (%s) after %v; want 504 and %s", resp.StatusCode, rec.Status, rec.Error, took, c.wantStatus)
			}
			// Cut at its own value: not before it, and nowhere near the
			// answer's own time.
			if took < c.wantAfter || took > c.wantAfter+(answer-c.wantAfter)/2 {
				t.Fatalf("cut after %v, want at about %v (the answer is ready at %v)", took, c.wantAfter, answer)
			}
		})
	}
}
