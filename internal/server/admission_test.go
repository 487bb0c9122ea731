package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// limitedServer is a gateway whose key team-a may make 6 requests a
// minute, its counters in the Redis at redisURL.
func limitedServer(t *testing.T, dir, upURL, redisURL string) *server.Server {
	t.Helper()
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: team-a, role: client, group: team-a, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UPSTREAM}
limits:
  shared: %q
  rules:
    - {key: team-a, requests_per_minute: 6}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), upURL, redisURL)
	cfg, err := config.Parse([]byte(y), func(k string) string {
		return map[string]string{"CLIENT": "client-key-1", "UPSTREAM": "u"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, server.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// TestGatewaysShareLimits: two gateways with one Redis admit together
// what the key's limit says, over HTTP; a third started mid-window admits
// nothing more; the refused requests are 429 and counted by limit.
func TestGatewaysShareLimits(t *testing.T) {
	r := testenv.StartRedis(t)
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	a := limitedServer(t, t.TempDir(), up.URL, r.URL())
	b := limitedServer(t, t.TempDir(), up.URL, r.URL())
	codes := map[int]int{}
	for i := range 12 {
		resp, _ := chat(t, []*server.Server{a, b}[i%2].URL(), "client-key-1", "fast", false, "")
		codes[resp.StatusCode]++
	}
	// 12 requests take well under the 10 s that would regenerate one.
	if codes[200] != 6 || codes[429] != 6 {
		t.Errorf("two gateways answered %v; want 6 × 200 and 6 × 429", codes)
	}
	c := limitedServer(t, t.TempDir(), up.URL, r.URL())
	for _, s := range []*server.Server{a, b, c} {
		if resp, _ := chat(t, s.URL(), "client-key-1", "fast", false, ""); resp.StatusCode != 429 {
			t.Errorf("after the limit, %s answered %d", s.URL(), resp.StatusCode)
		}
	}
	resp, err := http.Get(a.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ttfx_admission_total{kind="requests_per_minute",limit="key:team-a",outcome="rejected"} 4`,
		`ttfx_admission_shared_up 1`,
		`ttfx_admission_replicas 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
