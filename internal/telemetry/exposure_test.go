package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
)

// serveConfig starts a configured gateway listening on listen and returns
// its server and the log it wrote.
func serveConfig(t *testing.T, yaml, listen string) (*server.Server, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Options{Config: mustConfig(t, yaml), Listen: listen, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, logs
}

// metricsStatus GETs /metrics at base with token (none when empty).
func metricsStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestMetricsKeyByListener is issue 18's exposure item: /metrics carries
// every group's and model's names, so a listener other hosts can reach
// requires a key by default; loopback stays open and says so.
func TestMetricsKeyByListener(t *testing.T) {
	t.Setenv("TTFX_TEST_ADMIN", "admin-key-exposure-test")
	t.Setenv("TTFX_TEST_CLIENT", "client-key-exposure-test")
	t.Setenv("TTFX_TEST_METRICS", "metrics-key-exposure-test")
	base := func(extra string) string {
		return fmt.Sprintf(`
store: sqlite:%s/ttfx.db
keys:
  - {name: ops, role: admin, key_env: TTFX_TEST_ADMIN}
  - {name: app, role: client, key_env: TTFX_TEST_CLIENT}
channels:
  - {name: sim, protocol: openai, base_url: http://127.0.0.1:1, models: ["*"]}
%s`, t.TempDir(), extra)
	}
	// The port of a listener bound to every interface, reached over
	// loopback: what matters is what it binds, not how the test reaches it.
	wildcard := func(srv *server.Server) string {
		_, port, _ := net.SplitHostPort(srv.Addr())
		return "http://127.0.0.1:" + port
	}
	for _, c := range []struct {
		name, extra, listen string
		// want status for: no key, the client key, the admin key, the metrics key
		want    [4]int
		logWord string
	}{
		{"loopback, no key configured: open", "", "127.0.0.1:0", [4]int{200, 200, 200, 200}, "is open on this loopback listener"},
		{"all interfaces, no key configured: admin key", "", "0.0.0.0:0", [4]int{401, 401, 200, 401}, "requires an admin key"},
		{"all interfaces, public on purpose", "metrics: {public: true}", "0.0.0.0:0", [4]int{200, 200, 200, 200}, "is open to every host"},
		{"metrics key, on any listener", "metrics: {key_env: TTFX_TEST_METRICS}", "127.0.0.1:0", [4]int{401, 401, 401, 200}, "requires the key of metrics.key_env"},
		{"metrics key, all interfaces", "metrics: {key_env: TTFX_TEST_METRICS}", "0.0.0.0:0", [4]int{401, 401, 401, 200}, "requires the key of metrics.key_env"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, logs := serveConfig(t, base(c.extra), c.listen)
			url := srv.URL()
			if strings.HasPrefix(c.listen, "0.0.0.0") {
				url = wildcard(srv)
			}
			for i, tok := range []string{"", "client-key-exposure-test", "admin-key-exposure-test", "metrics-key-exposure-test"} {
				if got := metricsStatus(t, url, tok); got != c.want[i] {
					t.Errorf("GET /metrics with token #%d: %d, want %d", i, got, c.want[i])
				}
			}
			if !strings.Contains(logs.String(), c.logWord) {
				t.Errorf("start log does not say %q:\n%s", c.logWord, logs.String())
			}
		})
	}
}

// TestMadeUpModelsTakeNoLabel is issue 18's label item: a client sending
// many made-up model names — to a channel that refuses them (404), and to
// one that answers 200 and then fails in the stream — fills none of the
// model label slots; a model the channel served ok gets its label.
func TestMadeUpModelsTakeNoLabel(t *testing.T) {
	profiles := testProfiles()
	profiles["fails-midway"] = sim.Profile{HeadersMs: 1, TextMs: ptr(2), VisibleTokens: 10, TPS: 1000, Fault: "error_event_after:3"}
	strict := httptest.NewServer(sim.New(sim.Options{Profiles: profiles}))
	t.Cleanup(strict.Close)
	// Answers any name with the failing profile: a 200 that never ends ok.
	lenient := httptest.NewServer(sim.New(sim.Options{Profiles: profiles, Default: "fails-midway"}))
	t.Cleanup(lenient.Close)
	t.Setenv("TTFX_TEST_CLIENT", "client-key-labels-test")
	srv, _ := serveConfig(t, fmt.Sprintf(`
store: sqlite:%s/ttfx.db
keys:
  - {name: app, role: client, key_env: TTFX_TEST_CLIENT}
channels:
  - {name: strict, protocol: openai, base_url: %s, models: ["*"]}
  - {name: lenient, protocol: anthropic, base_url: %s, models: ["*"]}
metrics: {max_models: 10}
`, t.TempDir(), strict.URL, lenient.URL), "127.0.0.1:0")
	g := &gateway{srv: srv, url: srv.URL(), client: "client-key-labels-test"}

	const junk = 200
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range junk {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			api := "openai.chat"
			if i%2 == 1 {
				api = "anthropic"
			}
			g.do(api, fmt.Sprintf("made-up-%d", i), g.client) // errors are the point
		}()
	}
	wg.Wait()
	g.call(t, "openai.chat", "quick", g.client)
	fams := waitRequests(t, g.url, "", junk+1)
	models := map[string]bool{}
	for _, m := range fams["ttfx_requests_total"].GetMetric() {
		models[labelsOf(m)["model"]] = true
	}
	for m := range models {
		if strings.HasPrefix(m, "made-up-") {
			t.Errorf("made-up model %q has a label of its own", m)
		}
	}
	if !models["quick"] || !models["other"] {
		t.Errorf("model labels %v: want quick (served ok) and other (the made-up names)", models)
	}
	if got := counter(fams, "ttfx_requests_total", map[string]string{"model": "other"}); got != junk {
		t.Errorf("requests under model=other: %v, want %d", got, junk)
	}
	// The label slots are still free: a real model served now gets its own.
	deadline := time.Now().Add(5 * time.Second)
	g.call(t, "openai.chat", "tools", g.client)
	for {
		if counter(scrape(t, g.url, ""), "ttfx_requests_total", map[string]string{"model": "tools"}) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a served model after the flood got no label of its own")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
