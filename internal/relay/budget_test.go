package relay_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestProviderBudgetFallback: a channel near its provider's limit (the
// simulator's own, told in the provider's rate-limit headers) is skipped
// before the provider answers 429, and the fallback serves. For requests
// (OpenAI, Anthropic and Azure headers; Azure's tell no reset) and for
// tokens (a prompt larger than what the budget has left); each record
// names the skip with its figures and keeps the remaining budget its
// attempt saw.
func TestProviderBudgetFallback(t *testing.T) {
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40) // ~400 tokens
	for _, tc := range []struct {
		name, api, proto string
		limit            sim.RateLimit
		content          string
		served           int    // requests the limited channel serves before it is skipped
		short            string // the budget named in the skip
	}{
		{"openai requests", "chat", "openai", sim.RateLimit{RequestsPerMinute: 3}, "Say hello.", 3, "requests"},
		{"anthropic requests", "anthropic", "anthropic", sim.RateLimit{RequestsPerMinute: 2}, "Say hello.", 2, "requests"},
		{"openai tokens", "chat", "openai", sim.RateLimit{TokensPerMinute: 1000}, prompt, 2, "tokens"},
		{"anthropic tokens", "anthropic", "anthropic", sim.RateLimit{TokensPerMinute: 1000}, prompt, 2, "tokens"},
		{"azure requests", "chat", "azure", sim.RateLimit{RequestsPerMinute: 3}, "Say hello.", 3, "requests"},
		{"azure tokens", "chat", "azure", sim.RateLimit{TokensPerMinute: 1000}, prompt, 2, "tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limited := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000, RateLimit: &tc.limit}
			plain := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000}
			up, upInfos := upstream(t, map[string]sim.Profile{"m": limited})
			fb, fbInfos := upstream(t, map[string]sim.Profile{"m": plain})
			primary := channel("near-limit", tc.proto, up.URL, fastTimeouts)
			fallback := channel("fallback", tc.proto, fb.URL, fastTimeouts)
			fallback.Priority = 1
			gw, recs := gateway(t, primary, fallback)

			for i := range tc.served + 2 {
				resp, body := postBody(t, gw.URL, tc.api, tc.content)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
				}
				rec := recs.get(t, resp.Header.Get("X-Request-Id"))
				if len(rec.Attempts) != 1 {
					t.Fatalf("request %d: attempts %+v", i, rec.Attempts)
				}
				a := rec.Attempts[0]
				if i < tc.served {
					if rec.Channel != "near-limit" || len(rec.SkippedRateLimited) != 0 {
						t.Fatalf("request %d: served by %s, skipped %+v", i, rec.Channel, rec.SkippedRateLimited)
					}
					rem := a.RemainingRequests
					if tc.short == "tokens" {
						rem = a.RemainingTokens
					}
					if rem == nil {
						t.Fatalf("request %d: the attempt kept no remaining %s", i, tc.short)
					}
					if tc.short == "requests" && *rem != int64(tc.served-1-i) {
						t.Errorf("request %d: remaining requests %d, want %d", i, *rem, tc.served-1-i)
					}
					continue
				}
				if rec.Channel != "fallback" || len(rec.SkippedRateLimited) != 1 {
					t.Fatalf("request %d: served by %s, skipped %+v", i, rec.Channel, rec.SkippedRateLimited)
				}
				s := rec.SkippedRateLimited[0]
				if s.Channel != "near-limit" || s.Limit != tc.short || s.Remaining >= s.Need || s.ResetMs <= 0 || s.ResetMs > 60_000 {
					t.Errorf("request %d: skip %+v", i, s)
				}
				if a.RemainingRequests != nil || a.RemainingTokens != nil {
					t.Errorf("request %d: the fallback told no budget, its attempt kept %v %v", i, a.RemainingRequests, a.RemainingTokens)
				}
			}
			// The limited channel never had to refuse.
			for _, in := range upInfos.all() {
				if in.Status == http.StatusTooManyRequests {
					t.Errorf("the provider answered 429: %+v", in)
				}
			}
			if n := len(upInfos.all()); n != tc.served {
				t.Errorf("the limited channel saw %d requests, want %d", n, tc.served)
			}
			if n := len(fbInfos.all()); n != 2 {
				t.Errorf("the fallback saw %d requests, want 2", n)
			}
		})
	}
}

// TestProviderBudget429: a channel whose budget was never told answers
// 429 with Retry-After; the next request skips it until then.
func TestProviderBudget429(t *testing.T) {
	limited := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000, Fault: "status:429"}
	plain := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000}
	up, upInfos := upstream(t, map[string]sim.Profile{"m": limited})
	fb, _ := upstream(t, map[string]sim.Profile{"m": plain})
	primary := channel("refusing", "openai", up.URL, fastTimeouts)
	fallback := channel("fallback", "openai", fb.URL, fastTimeouts)
	fallback.Priority = 1
	gw, recs := gateway(t, primary, fallback)
	resp, _ := postBody(t, gw.URL, "chat", "hi")
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 200 || len(rec.Attempts) != 2 || rec.Attempts[0].Status != record.StatusRateLimited {
		t.Fatalf("first request: %d, attempts %+v", resp.StatusCode, rec.Attempts)
	}
	resp, _ = postBody(t, gw.URL, "chat", "hi")
	rec = recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 200 || len(rec.Attempts) != 1 || rec.Channel != "fallback" ||
		len(rec.SkippedRateLimited) != 1 || rec.SkippedRateLimited[0].Limit != "requests" {
		t.Fatalf("second request: %d, attempts %+v, skipped %+v", resp.StatusCode, rec.Attempts, rec.SkippedRateLimited)
	}
	if n := len(upInfos.all()); n != 1 {
		t.Errorf("the refusing channel saw %d requests, want 1", n)
	}
}

// TestProviderBudgetSharedByGroups: two client groups sharing a channel
// spend one provider budget (the provider limits the account per model,
// not per client): with 3 requests a minute, the fourth request, whichever
// group sends it, goes to the fallback and the provider never answers 429.
// Two names aliased to the same upstream model share it too.
func TestProviderBudgetSharedByGroups(t *testing.T) {
	limited := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000, RateLimit: &sim.RateLimit{RequestsPerMinute: 3}}
	plain := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000}
	up, upInfos := upstream(t, map[string]sim.Profile{"m": limited})
	fb, fbInfos := upstream(t, map[string]sim.Profile{"m": plain, "alias": plain})
	primary := channel("shared", "openai", up.URL, fastTimeouts)
	primary.Models, primary.Upstream = []string{"m", "alias"}, map[string]string{"alias": "m"}
	fallback := channel("fallback", "openai", fb.URL, fastTimeouts)
	fallback.Priority = 1
	const keyB = "test-client-key-b"
	keys := auth.NewKeyring([]auth.Entry{
		{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "team-a"}, Hash: auth.HashKey(clientKey)},
		{Principal: auth.Principal{Name: "client-b", Role: auth.RoleClient, Group: "team-b"}, Hash: auth.HashKey(keyB)}})
	recs := newRecords()
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{primary, fallback}, 1), Keys: keys, Recorder: recs,
		UserHashKey: []byte("0123456789abcdef")})
	mux := http.NewServeMux()
	g.Register(mux)
	gw := httptest.NewUnstartedServer(mux)
	gw.Config.ConnContext = relay.ConnContext
	gw.Start()
	t.Cleanup(gw.Close)

	for i, tc := range []struct{ key, model, channel string }{
		{clientKey, "m", "shared"}, {keyB, "m", "shared"}, {keyB, "alias", "shared"},
		{clientKey, "m", "fallback"}, {keyB, "m", "fallback"}, {keyB, "alias", "fallback"},
	} {
		resp, body := do(t, gw.URL, tc.key, call{api: "chat", model: tc.model})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if rec.Channel != tc.channel || len(rec.Attempts) != 1 {
			t.Fatalf("request %d (%s, %s): served by %s, attempts %+v, skipped %+v", i, rec.Group, tc.model, rec.Channel, rec.Attempts, rec.SkippedRateLimited)
		}
		if tc.channel == "fallback" {
			if len(rec.SkippedRateLimited) != 1 || rec.SkippedRateLimited[0].Channel != "shared" || rec.SkippedRateLimited[0].Limit != "requests" ||
				rec.SkippedRateLimited[0].Remaining != 0 {
				t.Errorf("request %d (%s): skipped %+v", i, rec.Group, rec.SkippedRateLimited)
			}
		} else if r := rec.Attempts[0].RemainingRequests; r == nil || *r != int64(2-i) {
			t.Errorf("request %d (%s): remaining requests %v, want %d", i, rec.Group, r, 2-i)
		}
	}
	for _, in := range upInfos.all() {
		if in.Status == http.StatusTooManyRequests {
			t.Errorf("the provider answered 429: %+v", in)
		}
	}
	if n, m := len(upInfos.all()), len(fbInfos.all()); n != 3 || m != 3 {
		t.Errorf("the shared channel saw %d requests, the fallback %d; want 3 and 3", n, m)
	}
}

// TestProviderBudgetGemini: Gemini tells no budget in its headers, only a
// 429 with Retry-After once the limit is reached. That request falls back
// at once; the next ones skip the channel until the Retry-After has passed,
// and then it serves again.
func TestProviderBudgetGemini(t *testing.T) {
	// 60 a minute: the sim's Retry-After is a second.
	limited := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000, RateLimit: &sim.RateLimit{RequestsPerMinute: 60}}
	plain := sim.Profile{HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 5, TPS: 1000}
	up, upInfos := upstream(t, map[string]sim.Profile{"m": limited})
	fb, _ := upstream(t, map[string]sim.Profile{"m": plain})
	primary := channel("gemini-limited", "gemini", up.URL, fastTimeouts)
	fallback := channel("fallback", "gemini", fb.URL, fastTimeouts)
	fallback.Priority = 1
	gw, recs := gateway(t, primary, fallback)
	send := func() record.Record {
		t.Helper()
		resp, body := do(t, gw.URL, clientKey, call{api: "gemini", model: "m"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if resp.Header.Get("X-Ratelimit-Remaining-Requests") != "" {
			t.Fatalf("a Gemini answer carried rate-limit headers: %v", resp.Header)
		}
		return recs.get(t, resp.Header.Get("X-Request-Id"))
	}

	// Until the limit, the channel serves and no budget is known.
	var rec record.Record
	served := 0
	for served = 0; served < 200; served++ {
		if rec = send(); rec.Channel != "gemini-limited" {
			break
		}
		if a := rec.Attempts[0]; a.RemainingRequests != nil || len(rec.SkippedRateLimited) != 0 {
			t.Fatalf("request %d: Gemini told no budget, the record has %v, %+v", served, a.RemainingRequests, rec.SkippedRateLimited)
		}
	}
	if served < 60 || len(rec.Attempts) != 2 || rec.Attempts[0].Status != record.StatusRateLimited || rec.Channel != "fallback" {
		t.Fatalf("after %d served: channel %s, attempts %+v", served, rec.Channel, rec.Attempts)
	}
	// The sim's Retry-After at 60 a minute: one request's refill (at most
	// a second), in whole seconds.
	const retryAfter = time.Second
	if !slices.ContainsFunc(upInfos.all(), func(in sim.Info) bool { return in.Status == http.StatusTooManyRequests }) {
		t.Fatal("the simulator answered no 429")
	}
	refused := time.Now()

	// Within the Retry-After: skipped before the provider is asked.
	rec = send()
	if rec.Channel != "fallback" || len(rec.Attempts) != 1 || len(rec.SkippedRateLimited) != 1 {
		t.Fatalf("within Retry-After: channel %s, attempts %+v, skipped %+v", rec.Channel, rec.Attempts, rec.SkippedRateLimited)
	}
	if s := rec.SkippedRateLimited[0]; s.Channel != "gemini-limited" || s.Limit != "requests" || s.Remaining != 0 ||
		s.ResetMs <= 0 || s.ResetMs > float64(retryAfter/time.Millisecond) {
		t.Errorf("skip %+v, want the requests held for at most %v", s, retryAfter)
	}
	n := len(upInfos.all())

	// Past it, the channel is asked again (and the sim has refilled).
	time.Sleep(time.Until(refused.Add(retryAfter + 100*time.Millisecond)))
	rec = send()
	if rec.Channel != "gemini-limited" || len(rec.SkippedRateLimited) != 0 {
		t.Errorf("past Retry-After: channel %s, attempts %+v, skipped %+v", rec.Channel, rec.Attempts, rec.SkippedRateLimited)
	}
	if m := len(upInfos.all()); m != n+1 {
		t.Errorf("the limited channel saw %d requests past Retry-After, want 1", m-n)
	}
}

// postBody sends one non-streaming request of api with content as the
// user's message.
func postBody(t *testing.T, base, api, content string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := "/v1/chat/completions"
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}]}`, content)
	if api == "anthropic" {
		path = "/v1/messages"
		body = fmt.Sprintf(`{"model":"m","max_tokens":64,"messages":[{"role":"user","content":%q}]}`, content)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if api == "anthropic" {
		req.Header.Set("X-Api-Key", clientKey)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+clientKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
