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
	"github.com/ttfx/ttfx/internal/store"
)

// TestModelAliasesEndToEnd: a channel configured with a map of models
// serves the name clients send under the provider's name; the record read
// back keeps both, /api/stats and /metrics group by the name asked, and
// GET /api/channels shows the mapping.
func TestModelAliasesEndToEnd(t *testing.T) {
	var upstreamBodies []string
	simH := sim.New(sim.Options{Profiles: sim.Builtin()})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		upstreamBodies = append(upstreamBodies, string(b))
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		simH.ServeHTTP(w, r)
	}))
	defer up.Close()
	env := map[string]string{"ADMIN": "admin-k", "A": "client-a-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: client-a, role: client, group: team-a, key_env: A}
channels:
  - name: aliased
    protocol: openai
    base_url: %q
    key_env: UP
    models:
      house-model: fast
      "team-*": "*"
`, "sqlite:"+filepath.Join(t.TempDir(), "t.db"), up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	for _, tt := range []struct{ asked, served string }{{"house-model", "fast"}, {"team-fast", "fast"}} {
		resp, b := chat(t, srv.URL(), "client-a-k", tt.asked, true, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tt.asked, resp.StatusCode, b)
		}
		rec := readBack(t, srv.URL(), "admin-k", resp.Header.Get("X-Request-Id"))
		if rec.Model != tt.asked || rec.UpstreamModel != tt.served || rec.Status != "ok" {
			t.Errorf("record: model %q upstream_model %q status %s, want %q %q ok", rec.Model, rec.UpstreamModel, rec.Status, tt.asked, tt.served)
		}
	}
	for _, b := range upstreamBodies {
		if !strings.Contains(b, `"model":"fast"`) {
			t.Errorf("the provider got %s", b)
		}
	}
	var st store.Stats
	if code, _ := getJSON(t, srv.URL(), "/api/stats?since=1h&group_by=model&fields=first_text_delta_ms", "admin-k", &st); code != 200 {
		t.Fatalf("stats: %d", code)
	}
	got := map[string]int{}
	for _, g := range st.Groups {
		got[g.Key["model"]] = g.Count
	}
	if len(got) != 2 || got["house-model"] != 1 || got["team-fast"] != 1 {
		t.Errorf("stats by model: %v, want house-model and team-fast once each", got)
	}
	req, _ := http.NewRequest("GET", srv.URL()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `model="house-model"`) || strings.Contains(string(m), `model="fast"`) {
		t.Errorf("metrics should carry the name asked, never the provider's")
	}
	var chans struct {
		Channels []server.ChannelView `json:"channels"`
	}
	getJSON(t, srv.URL(), "/api/channels", "admin-k", &chans)
	if len(chans.Channels) != 1 || chans.Channels[0].UpstreamModels["house-model"] != "fast" || chans.Channels[0].UpstreamModels["team-*"] != "*" {
		t.Errorf("channels view: %+v", chans.Channels)
	}
}
