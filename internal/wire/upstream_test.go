package wire_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// clock is a clock the test steps.
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

// endpoint is a token endpoint: each fetch issues "t<n>" living life from
// the clock's now, after block is released (when set).
type endpoint struct {
	clk     *clock
	life    time.Duration
	fetches atomic.Int32
	block   chan struct{}
	fail    atomic.Bool
}

func (e *endpoint) fetch(ctx context.Context) (wire.Token, error) {
	n := e.fetches.Add(1)
	if e.block != nil {
		select {
		case <-e.block:
		case <-ctx.Done():
			return wire.Token{}, ctx.Err()
		}
	}
	if e.fail.Load() {
		return wire.Token{}, errors.New("503 from the token endpoint")
	}
	return wire.Token{Value: fmt.Sprintf("t%d", n), Expiry: e.clk.now().Add(e.life)}, nil
}

func authorize(t *testing.T, c *wire.TokenCache) (string, time.Duration, error) {
	t.Helper()
	req := &http.Request{Header: http.Header{}}
	w, err := c.Authorize(t.Context(), req, nil)
	return req.Header.Get("Authorization"), w, err
}

// waitFetches waits until the endpoint served n fetches and the cache saw
// the result.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestTokenCache(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	e := &endpoint{clk: clk, life: time.Hour}
	c := wire.NewTokenCache(e.fetch, wire.TokenCacheOptions{Channel: "c", Now: clk.now})

	// The warm-up fetch: a first request finds the token, or waits for
	// that same fetch (never a second one).
	h, _, err := authorize(t, c)
	if err != nil || h != "Bearer t1" {
		t.Fatalf("first: %q %v", h, err)
	}
	// Cached: no wait, no fetch, no matter how many requests.
	for range 100 {
		if h, w, err := authorize(t, c); h != "Bearer t1" || w != 0 || err != nil {
			t.Fatalf("cached: %q %v %v", h, w, err)
		}
	}
	if n := e.fetches.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}

	// Due for refresh (inside the margin): the request is served the
	// current token at once, and the refresh runs in the background.
	e.block = make(chan struct{})
	clk.add(time.Hour - wire.DefaultRefreshMargin + time.Second)
	if h, w, err := authorize(t, c); h != "Bearer t1" || w != 0 || err != nil {
		t.Fatalf("due: %q %v %v", h, w, err)
	}
	waitFor(t, "the background refresh", func() bool { return e.fetches.Load() == 2 })
	// Still running: more requests start no second refresh.
	for range 10 {
		authorize(t, c)
	}
	close(e.block)
	waitFor(t, "the refreshed token", func() bool { h, _, _ := authorize(t, c); return h == "Bearer t2" })
	if n := e.fetches.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
	e.block = nil

	// Expired (a channel unused for longer than a token lives): the
	// request waits for the fetch, and says how long.
	clk.add(2 * time.Hour)
	e.block = make(chan struct{})
	done := make(chan struct{})
	var w time.Duration
	go func() {
		defer close(done)
		h, w, err = authorize(t, c)
	}()
	waitFor(t, "the fetch on the path", func() bool { return e.fetches.Load() == 3 })
	clk.add(250 * time.Millisecond) // the endpoint's time
	close(e.block)
	<-done
	if err != nil || h != "Bearer t3" || w != 250*time.Millisecond {
		t.Errorf("expired: %q waited %v (want 250ms) %v", h, w, err)
	}
	e.block = nil

	// A failed refresh keeps serving the valid token and is not retried
	// by every request.
	e.fail.Store(true)
	clk.add(time.Hour - wire.DefaultRefreshMargin + time.Second)
	authorize(t, c)
	waitFor(t, "the failed refresh", func() bool { return c.LastError() != nil })
	for range 20 {
		if h, w, err := authorize(t, c); h != "Bearer t3" || w != 0 || err != nil {
			t.Fatalf("after a failed refresh: %q %v %v", h, w, err)
		}
	}
	if n := e.fetches.Load(); n != 4 {
		t.Errorf("%d fetches after a failed refresh and 20 requests, want 4", n)
	}
	// Expired with the endpoint down: the request fails naming the
	// credentials.
	clk.add(time.Hour)
	_, _, err = authorize(t, c)
	var ce *wire.CredentialError
	if !errors.As(err, &ce) || ce.Channel != "c" {
		t.Errorf("expired, endpoint down: %v", err)
	}
}

// TestTokenCacheTimerRefresh: a used token is refreshed by the timer before
// it expires, with no request waiting; an unused one is not.
func TestTokenCacheTimerRefresh(t *testing.T) {
	e := &endpoint{clk: &clock{}, life: 0}
	var life atomic.Int64
	life.Store(int64(400 * time.Millisecond))
	fetch := func(ctx context.Context) (wire.Token, error) {
		n := e.fetches.Add(1)
		return wire.Token{Value: fmt.Sprintf("t%d", n), Expiry: time.Now().Add(time.Duration(life.Load()))}, nil
	}
	c := wire.NewTokenCache(fetch, wire.TokenCacheOptions{Channel: "c", Margin: 300 * time.Millisecond})
	if _, w, err := authorize(t, c); err != nil || w > 5*time.Second {
		t.Fatal(w, err)
	}
	// Used: the timer refreshes at expiry − margin (about 100 ms on).
	waitFor(t, "the timer's refresh", func() bool { return e.fetches.Load() >= 2 })
	life.Store(int64(time.Hour))
	authorize(t, c)
	n := e.fetches.Load()
	if h, w, err := authorize(t, c); w != 0 || err != nil || h == "" {
		t.Errorf("after the timer's refresh: %q %v %v", h, w, err)
	}
	// Unused since: the next timer (an hour on) would not refresh; nothing
	// happens meanwhile.
	time.Sleep(50 * time.Millisecond)
	if e.fetches.Load() != n {
		t.Errorf("fetches went on without requests")
	}
}

// BenchmarkTokenCacheCached is the cost a request pays for a cached token.
func BenchmarkTokenCacheCached(b *testing.B) {
	e := &endpoint{clk: &clock{t: time.Now()}, life: time.Hour}
	c := wire.NewTokenCache(e.fetch, wire.TokenCacheOptions{Channel: "c", NoWarmUp: true})
	req := &http.Request{Header: http.Header{}}
	if _, err := c.Authorize(context.Background(), req, nil); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c.Authorize(ctx, req, nil)
	}
}
