package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
)

// getJSON GETs path with key and decodes a JSON answer into out (if not
// nil); it returns the status and how long the answer took.
func getJSON(t testing.TB, base, path, key string, out any) (int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, took
}

// TestStartDuringDatabaseOutage: with PostgreSQL down, `ttfx serve` starts
// anyway (it once exited at once), relays, queues the records, reports
// degraded and answers reads 503; once the database is back it migrates,
// writes what it queued, and reads work. A frozen database holds a read no
// longer than the stated read deadline.
func TestStartDuringDatabaseOutage(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	proxy := testenv.NewProxy(t, net.JoinHostPort(u.Hostname(), port))
	proxy.Cut()
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()

	up := httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(up.Close)
	const readTimeout = 2 * time.Second
	y := fmt.Sprintf(`
store: %q
read_timeout: %s
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: team-a, role: client, group: team-a, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UPSTREAM}
`, u.String(), readTimeout, up.URL)
	env := map[string]string{"ADMIN": "admin-key-0123456789", "CLIENT": "client-key-0123456789", "UPSTREAM": "u"}
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	t.Logf("started in %v with the database down", time.Since(begin))
	admin := env["ADMIN"]

	// It relays.
	resp, _ := chat(t, srv.URL(), env["CLIENT"], "fast", true, "")
	if resp.StatusCode != 200 {
		t.Fatalf("relay during the outage answered %d", resp.StatusCode)
	}
	id := resp.Header.Get("X-Request-Id")

	// It says it is degraded, with the record queued.
	var h api.HealthResponse
	waitUntil(t, "the record to be queued", 10*time.Second, func() bool {
		if code, _ := getJSON(t, srv.URL(), "/api/health", admin, &h); code != 200 {
			t.Fatalf("health answered %d", code)
		}
		return h.Store.Writer != nil && h.Store.Writer.Queued == 1
	})
	if h.Status != "degraded" || h.Store.Reachable || h.Store.Error == "" || h.Reads.TimeoutMs != readTimeout.Milliseconds() {
		t.Fatalf("health during the outage: %+v", h)
	}
	// Reads answer 503 at once, saying why.
	var eb api.ErrorBody
	code, took := getJSON(t, srv.URL(), "/api/requests", admin, &eb)
	if code != 503 || took > readTimeout {
		t.Fatalf("read during the outage: %d after %v (%s)", code, took, eb.Error.Message)
	}
	t.Logf("read during the outage: %d in %v: %s", code, took, eb.Error.Message)

	// The database comes back: migrations run, the queue drains.
	proxy.Restore()
	waitUntil(t, "the store to be reachable and the queue written", 60*time.Second, func() bool {
		getJSON(t, srv.URL(), "/api/health", admin, &h)
		return h.Status == "ok" && h.Store.Writer.Queued == 0
	})
	if rec := readBack(t, srv.URL(), admin, id); rec.Status != "ok" {
		t.Fatalf("the queued record reads back as %s", rec.Status)
	}
	if h.Store.Writer.Written != 1 || h.Store.Writer.Dropped != 0 {
		t.Errorf("writer after the outage: %+v", *h.Store.Writer)
	}

	// The database lost after start (its connections reset, new ones
	// refused): reads are 503, as at start, not 500 (issue 50).
	proxy.Cut()
	for _, path := range []string{"/api/requests", "/api/stats?since=1h", "/api/stats?since=1h&label=generation_slow", "/api/requests/" + id} {
		code, took = getJSON(t, srv.URL(), path, admin, &eb)
		if code != 503 || took > readTimeout+time.Second {
			t.Fatalf("%s with the database lost: %d after %v (%s), want 503", path, code, took, eb.Error.Message)
		}
	}
	t.Logf("read with the database lost: %d: %s", code, eb.Error.Message)
	proxy.Restore()

	// A frozen database: the read gives up at its stated deadline.
	proxy.Freeze()
	code, took = getJSON(t, srv.URL(), "/api/stats?since=1h&label=generation_slow", admin, &eb)
	proxy.Restore()
	if code != 503 || took < readTimeout-100*time.Millisecond || took > 3*readTimeout {
		t.Fatalf("read of a frozen database: %d after %v, want 503 after about %v (%s)", code, took, readTimeout, eb.Error.Message)
	}
	t.Logf("read of a frozen database: %d after %v: %s", code, took, eb.Error.Message)
}

// waitUntil polls cond every 50 ms until it holds or d passes.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAuthFloodLogsAndCounts: a flood of bad keys through the whole
// gateway is counted on /metrics, leaves a handful of records and log
// lines rather than one each, and turns into 429s.
func TestAuthFloodLogsAndCounts(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	t.Cleanup(up.Close)
	logs := &syncBuffer{}
	env := map[string]string{"ADMIN": "admin-key-0123456789", "CLIENT": "client-key-0123456789", "UPSTREAM": "u", "USER_HASH": "0123456789abcdef0123"}
	srv := configServer(t, "sqlite:"+filepath.Join(t.TempDir(), "ttfx.db"), up.URL, env, logs)
	// The limit is per minute: keep the flood within one.
	if s := time.Now().Second(); s > 50 {
		time.Sleep(time.Duration(61-s) * time.Second)
	}
	codes := map[int]int{}
	for range 300 {
		resp, _ := chat(t, srv.URL(), "bogus-key", "fast", true, "")
		codes[resp.StatusCode]++
	}
	if codes[401] != 30 || codes[429] != 270 {
		t.Fatalf("answers %v, want 30 × 401 then 429", codes)
	}
	srv.Writer().Close(context.Background()) // everything recorded is written
	recorded := 0
	for line := range strings.SplitSeq(string(logs.Bytes()), "\n") {
		if strings.Contains(line, `"status":"auth_failed"`) {
			recorded++
		}
	}
	if recorded > 10 {
		t.Errorf("%d log lines for 300 failed attempts from one source", recorded)
	}
	page, err := srv.Store().List(context.Background(), store.Filter{Status: "auth_failed", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Records); n == 0 || n > 10 {
		t.Errorf("%d auth_failed records for 300 failed attempts from one source", n)
	}
	req, _ := http.NewRequest("GET", srv.URL()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "ttfx_auth_failures_total 300") {
		t.Errorf("/metrics does not count the 300 failures")
	}
	t.Logf("300 failed attempts: %d log lines, answers %v", recorded, codes)
}
