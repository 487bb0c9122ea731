package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ttfx/ttfx/internal/seed"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/store"
)

// seededRecords is how many records TestBrowserSeeded seeds: 20,000 by
// default, TTFX_SEED_RECORDS in CI (a million).
func seededRecords(t *testing.T) int {
	n := 20_000
	if v := os.Getenv("TTFX_SEED_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("TTFX_SEED_RECORDS=%q", v)
		}
	}
	return n
}

// TestBrowserSeeded opens every view of the dashboard on a store that
// `ttfx seed` filled with a week of traffic (a million records in CI): each
// renders, with its data and without an error on the page or the console.
func TestBrowserSeeded(t *testing.T) {
	exe := chromium(t)
	dir := t.TempDir()
	n := seededRecords(t)
	s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "ttfx.db"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := seed.Run(context.Background(), s, seed.New(seed.Options{Records: n, Seed: 7}), 5000, nil)
	s.Close()
	if err != nil || res.Written != uint64(n) {
		t.Fatalf("seed: %+v, %v", res, err)
	}
	t.Logf("seeded %d records in %v", n, time.Since(start).Round(time.Millisecond))

	srv, err := server.New(context.Background(), server.Options{Listen: "127.0.0.1:0", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx) }()
	t.Cleanup(func() { stop(); <-served })
	admin := secret(srv.Generated(), "admin")
	recent, err := srv.Store().List(context.Background(), store.Filter{Limit: 1, Channel: "seed-anthropic-main"})
	if err != nil || len(recent.Records) == 0 {
		t.Fatalf("a seeded record: %v", err)
	}

	ctx, console := browser(t, exe)
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	eval := func(what, js string) any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL()+"/ui/#key="+admin)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ hash, ready string }{
		{"#/overview?since=24h", `document.querySelector('[data-count]') && document.querySelector('[data-count]').textContent !== '0'`},
		{"#/overview?since=7d", `document.querySelector('[data-count]') && document.querySelector('[data-count]').textContent !== '0'`},
		{"#/requests?since=24h", `document.querySelectorAll('tr[data-id]').length > 10`},
		{"#/requests?since=7d&label=upstream_headers_slow", `document.querySelectorAll('tr[data-id]').length > 0`},
		{"#/channels?since=24h", `document.querySelector('tr[data-channel="seed-anthropic-main"]')`},
		{"#/channels?since=7d", `document.querySelector('tr[data-channel="seed-gemini-main"]')`},
		{"#/request/" + recent.Records[0].RequestID, `document.querySelector('.wf-row')`},
	} {
		begin := time.Now()
		eval("go "+v.hash, `location.hash = `+jsString(v.hash))
		ready := v.ready + ` && !document.querySelector('#view').classList.contains('loading')`
		if _, err := chromedp.Run(ctx, chromedp.Poll[any](ready, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
			t.Fatalf("%s did not render: %v (page: %v)", v.hash, err, eval("page", `document.body.innerText.slice(0, 600)`))
		}
		t.Logf("%s rendered in %v", v.hash, time.Since(begin).Round(time.Millisecond))
		if text := fmt.Sprint(eval("errors", `[...document.querySelectorAll('.error-box, .error')].map(e => e.textContent).join(' | ')`)); text != "" {
			t.Errorf("%s shows an error: %s", v.hash, text)
		}
	}
	time.Sleep(200 * time.Millisecond)
	for _, m := range console() {
		if m.IsException() || m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning ||
			(m.Source == "network" && strings.Contains(m.Text, "status of")) {
			t.Errorf("console: %s (%s)", m, m.URL)
		}
	}
}
