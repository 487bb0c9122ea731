package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clock is a stepped clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func mustNew(t *testing.T, rules []Rule, now func() time.Time) *Limiter {
	t.Helper()
	l, err := New(rules, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRequestsPerMinute: a limit of N admits a burst of N, then one every
// 60s/N; the refusal names the limit and says when to retry.
func TestRequestsPerMinute(t *testing.T) {
	c := newClock()
	l := mustNew(t, []Rule{{Scope: ScopeKey, Match: "alice", RequestsPerMinute: 6}}, c.now)
	ctx := context.Background()
	q := Request{Key: "alice", Group: "g", Model: "m"}
	for i := range 6 {
		if _, d := l.Admit(ctx, q); d != nil {
			t.Fatalf("request %d refused: %+v", i+1, d)
		}
	}
	_, d := l.Admit(ctx, q)
	if d == nil {
		t.Fatal("the 7th request in the same instant was admitted")
	}
	if d.Limit != "key:alice" || d.Kind != KindRequests || d.Max != 6 || d.RetryAfter != 10*time.Second {
		t.Errorf("denial %+v, want key:alice requests_per_minute 6, retry after 10s", d)
	}
	if got := d.Message(); got != "rate limit reached: key:alice requests_per_minute allows 6 requests a minute; retry in 10 s" {
		t.Errorf("message %q", got)
	}
	// Another key is not limited by alice's rule.
	if _, d := l.Admit(ctx, Request{Key: "bob", Model: "m"}); d != nil {
		t.Errorf("bob refused by alice's limit: %+v", d)
	}
	c.add(9 * time.Second)
	if _, d := l.Admit(ctx, q); d == nil {
		t.Error("admitted 9 s later, before the period of 10 s passed")
	}
	c.add(time.Second)
	if _, d := l.Admit(ctx, q); d != nil {
		t.Errorf("refused 10 s later: %+v", d)
	}
	// Over a long run the rate is the limit: 60 more seconds, 6 more.
	c.add(60 * time.Second)
	n := 0
	for range 20 {
		if _, d := l.Admit(ctx, q); d == nil {
			n++
		}
	}
	if n != 6 {
		t.Errorf("after a minute idle %d admitted, want the burst of 6", n)
	}
	st := l.Stats()
	if len(st) != 1 || st[0].Limit != "key:alice" || st[0].Admitted != 13 || st[0].Rejected != 16 {
		t.Errorf("stats %+v, want key:alice 13 admitted, 16 rejected", st)
	}
}

// TestTokensCorrected: tokens are charged their estimate, then corrected to
// the usage reported; a request larger than the limit passes on a full
// budget and its debt holds the next ones back.
func TestTokensCorrected(t *testing.T) {
	c := newClock()
	l := mustNew(t, []Rule{{Scope: ScopeGroup, Match: "team", TokensPerMinute: 1000}}, c.now)
	ctx := context.Background()
	if !l.NeedsTokens("k", "team", "m") || l.NeedsTokens("k", "other", "m") {
		t.Fatal("NeedsTokens wrong")
	}
	q := Request{Key: "k", Group: "team", Model: "m", Tokens: 600}
	tk, d := l.Admit(ctx, q)
	if d != nil {
		t.Fatal(d)
	}
	if _, d := l.Admit(ctx, q); d == nil || d.Kind != KindTokens || d.Limit != "group:team" {
		t.Fatalf("second 600 of 1000 admitted or wrong denial: %+v", d)
	} else if d.RetryAfter != 12*time.Second { // 200 tokens short at 60 ms a token
		t.Errorf("retry after %v, want 12s", d.RetryAfter)
	}
	// The answer reported 100 tokens in all: 500 are given back.
	tk.Done(100)
	if _, d := l.Admit(ctx, q); d != nil {
		t.Fatalf("after the correction to 100, 600 more refused: %+v", d)
	}
	c.add(time.Hour)
	big := Request{Key: "k", Group: "team", Model: "m", Tokens: 5000}
	if _, d := l.Admit(ctx, big); d != nil {
		t.Fatalf("a request larger than the limit on a full budget: %+v", d)
	}
	c.add(time.Minute)
	if _, d := l.Admit(ctx, Request{Key: "k", Group: "team", Model: "m", Tokens: 10}); d == nil {
		t.Error("a minute after 5000 tokens on a limit of 1000, another request passed")
	}
	c.add(4 * time.Minute)
	if _, d := l.Admit(ctx, Request{Key: "k", Group: "team", Model: "m", Tokens: 10}); d != nil {
		t.Errorf("five minutes after 5000 tokens: %+v", d)
	}
}

// TestConcurrentQueue: a concurrency limit refuses at once without a
// queue, and with one, admits a waiting request when a stream ends.
func TestConcurrentQueue(t *testing.T) {
	l := mustNew(t, []Rule{
		{Scope: ScopeModel, Match: "gpt-*", Concurrent: 2},
		{Scope: ScopeKey, Match: "q", Concurrent: 1, Queue: 2 * time.Second},
	}, nil)
	ctx := context.Background()
	a, _ := l.Admit(ctx, Request{Key: "x", Model: "gpt-4o"})
	b, _ := l.Admit(ctx, Request{Key: "x", Model: "gpt-4o-mini"})
	if a == nil || b == nil {
		t.Fatal("two streams of two refused")
	}
	if _, d := l.Admit(ctx, Request{Key: "x", Model: "gpt-5"}); d == nil || d.Kind != KindConcurrent || d.Limit != "model:gpt-*" || d.RetryAfter != time.Second {
		t.Fatalf("a third stream: %+v", d)
	}
	if _, d := l.Admit(ctx, Request{Key: "x", Model: "claude"}); d != nil {
		t.Fatalf("another model: %+v", d)
	}
	a.Done(-1)
	a.Done(-1) // twice is once
	if _, d := l.Admit(ctx, Request{Key: "x", Model: "gpt-5"}); d != nil {
		t.Fatalf("after a release: %+v", d)
	}

	first, _ := l.Admit(ctx, Request{Key: "q", Model: "m"})
	released := make(chan time.Time, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		released <- time.Now()
		first.Done(-1)
	}()
	second, d := l.Admit(ctx, Request{Key: "q", Model: "m"})
	admitted := time.Now()
	if d != nil {
		t.Fatalf("the queued request was refused: %+v", d)
	}
	at := <-released
	if admitted.Before(at) || second.Waited < 50*time.Millisecond {
		t.Errorf("admitted %v after the release, waited %v", admitted.Sub(at), second.Waited)
	}
	// Queued past its bound: refused after waiting it.
	start := time.Now()
	l2 := mustNew(t, []Rule{{Scope: ScopeKey, Match: "q", Concurrent: 1, Queue: 150 * time.Millisecond}}, nil)
	hold, _ := l2.Admit(ctx, Request{Key: "q"})
	_, d = l2.Admit(ctx, Request{Key: "q"})
	if d == nil || d.Waited < 150*time.Millisecond || time.Since(start) < 150*time.Millisecond {
		t.Errorf("over its queue bound: %+v after %v", d, time.Since(start))
	}
	hold.Done(-1)
	// A client that leaves while queued is let go at once.
	hold, _ = l2.Admit(ctx, Request{Key: "q"})
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	_, d = l2.Admit(cctx, Request{Key: "q"})
	if d == nil || !d.Cancelled {
		t.Errorf("a cancelled wait: %+v", d)
	}
	hold.Done(-1)
}

// TestRateQueue: a rate limit with a queue reserves the next slot and
// waits for it, instead of refusing.
func TestRateQueue(t *testing.T) {
	l := mustNew(t, []Rule{{Scope: ScopeKey, Match: "*", RequestsPerMinute: 600, Queue: time.Second}}, nil)
	ctx := context.Background()
	start := time.Now()
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for range 610 {
		wg.Go(func() {
			if _, d := l.Admit(ctx, Request{Key: "k"}); d == nil {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	// 600 at once, then one each 100 ms: the 10 more are reserved 0.1–1 s
	// ahead, all within the queue bound.
	if admitted.Load() != 610 || took < 900*time.Millisecond {
		t.Errorf("%d of 610 admitted in %v; want all, the last after ~1 s", admitted.Load(), took)
	}
	// Each key has its own counter under "*".
	if _, d := l.Admit(ctx, Request{Key: "other"}); d != nil {
		t.Errorf("another key: %+v", d)
	}
}

func TestRuleValidate(t *testing.T) {
	for _, r := range []Rule{
		{Scope: ScopeKey, RequestsPerMinute: 1},
		{Scope: ScopeKey, Match: "a"},
		{Scope: ScopeModel, Match: "[", RequestsPerMinute: 1},
		{Scope: ScopeKey, Match: "a", RequestsPerMinute: -1},
	} {
		if _, err := New([]Rule{r}, Options{}); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
}

func TestPromptTokens(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"system","content":"You are terse."},` +
		`{"role":"user","content":[{"type":"text","text":"Say \"hello\" to the world"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}}]}],"max_tokens":5}`)
	n := PromptTokens(body)
	// "gpt-4o" 3, "system" 1, "You are terse." 4, "user" 1, "text" 1,
	// `Say "hello" to the world` 7, "image_url" 3: about 20, and the
	// image's base64 not counted.
	if n < 15 || n > 25 {
		t.Errorf("PromptTokens = %d, want about 20", n)
	}
	if PromptTokens([]byte("not json at all")) == 0 {
		t.Error("a body that is not JSON counts nothing")
	}
}

func FuzzPromptTokens(f *testing.F) {
	f.Add([]byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"contents":[{"parts":[{"text":"\u00e9\ud83d"}]}]}`))
	f.Add([]byte(`[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := PromptTokens(b); n < 0 || n > len(b)+1 {
			t.Fatalf("PromptTokens = %d for %d bytes", n, len(b))
		}
	})
}
