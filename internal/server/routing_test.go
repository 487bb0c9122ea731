package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestRoutingEndToEnd: a configured route ejects a channel whose port
// refuses connections; the stored record names it in skipped_ejected, and
// GET /api/channels/health (admin only), /metrics and the Channels view
// show the ejection.
func TestRoutingEndToEnd(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // connections are refused from now on
	env := map[string]string{"ADMIN": "admin-k", "A": "client-a-k", "VA": "viewer-a-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: client-a, role: client, group: team-a, key_env: A}
  - {name: viewer-a, role: viewer, group: team-a, key_env: VA}
channels:
  - {name: dead, protocol: openai, base_url: %q, key_env: UP, priority: 0}
  - {name: live, protocol: openai, base_url: %q, key_env: UP, priority: 1}
routes:
  - models: ["fa*"]
    strategy: latency
    latency: {definition: first_text, percentile: 0.5, explore: 0}
    eject: {consecutive_failures: 2, base: 1m}
    hedge: {after: p95, floor: 300ms, max_share: 0.2}
`, "sqlite:"+filepath.Join(t.TempDir(), "t.db"), dead, up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	var ids []string
	for range 3 {
		resp, _ := chat(t, srv.URL(), "client-a-k", "fast", true, "")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
	}
	// With no samples yet the latency order keeps priority: dead first,
	// failing twice, then skipped.
	for i, id := range ids {
		rec := readBack(t, srv.URL(), "admin-k", id)
		var chans []string
		for _, a := range rec.Attempts {
			chans = append(chans, a.Channel+":"+a.Role+":"+a.Outcome)
		}
		want := []string{"dead:primary:failed", "live:retry:won"}
		var skipped []string
		if i == 2 {
			want, skipped = []string{"live:primary:won"}, []string{"dead"}
		}
		if !slices.Equal(chans, want) || !slices.Equal(rec.SkippedEjected, skipped) {
			t.Errorf("request %d: attempts %v skipped %v, want %v and %v", i, chans, rec.SkippedEjected, want, skipped)
		}
	}

	get := func(path, key string) (int, []byte) {
		req, _ := http.NewRequest("GET", srv.URL()+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for _, k := range []string{"", "viewer-a-k", "client-a-k"} {
		if code, _ := get("/api/channels/health", k); code != 401 && code != 403 {
			t.Errorf("channel health with key %q: %d, want 401 or 403", k, code)
		}
	}
	code, b := get("/api/channels/health", "admin-k")
	var rep route.HealthReport
	if err := json.Unmarshal(b, &rep); code != 200 || err != nil {
		t.Fatalf("channel health: %d %v %s", code, err, b)
	}
	states := map[string]route.HealthView{}
	for _, v := range rep.Channels {
		states[v.Channel+"/"+v.Model] = v
	}
	// Health is kept per configured model pattern (these channels list
	// none: "*") and group, not per client model name (issue 50).
	d, l := states["dead/*"], states["live/*"]
	if d.Group != "team-a" {
		t.Errorf("dead/* group %q, want team-a", d.Group)
	}
	if d.State != "ejected" || d.Ejections != 1 || d.EjectedForMs <= 0 || d.Route != "fa*" || d.Strategy != "latency" {
		t.Errorf("dead/fast = %+v", d)
	}
	if d.ErrorRate == nil || *d.ErrorRate != 1 || d.Counts.Attempts != 2 {
		t.Errorf("dead/fast error rate %v over %d attempts, want 1 over 2", d.ErrorRate, d.Counts.Attempts)
	}
	if l.State != "healthy" || l.FirstText.Count != 3 || l.FirstText.P50 <= 0 || l.UpstreamHeaders.Count != 3 {
		t.Errorf("live/fast = %+v", l)
	}
	if len(rep.Routes) != 1 || rep.Routes[0].Decisions != 3 || !rep.Routes[0].Hedging {
		t.Errorf("routes = %+v", rep.Routes)
	}

	_, m := get("/metrics", "")
	for _, want := range []string{
		`ttfx_channel_ejected{channel="dead",model="*"} 1`,
		`ttfx_channel_ejected{channel="live",model="*"} 0`,
		`ttfx_channel_ejections_total{channel="dead",model="*"} 1`,
		`ttfx_hedges_total{outcome="started"} 0`,
		`ttfx_hedges_total{outcome="won"} 0`,
		`ttfx_hedges_total{outcome="lost"} 0`,
		`ttfx_route_decisions_total{channel="dead",strategy="latency"} 2`,
		`ttfx_route_decisions_total{channel="live",strategy="latency"} 1`,
		`ttfx_route_skipped_total{channel="dead",reason="ejected"} 1`,
		`ttfx_route_skipped_total{channel="live",reason="ejected"} 0`,
		`ttfx_route_skipped_total{channel="dead",reason="rate_limited"} 0`,
	} {
		if !strings.Contains(string(m), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The live tables are for admins: health spans every group's models.
	for _, k := range []string{"admin-k", "viewer-a-k"} {
		code, page := get("/ui/view/channels?since=1h", k)
		admin := k == "admin-k"
		if code != 200 || strings.Contains(string(page), `data-health-channel="dead" data-health-model="*" data-state="ejected"`) != admin ||
			strings.Contains(string(page), `data-route="fa*"`) != admin {
			t.Errorf("channels view for %s: %d, live routing tables shown %v, want %v", k, code, !admin, admin)
		}
	}
}

// TestRouteSkippedRateLimited: a channel whose provider budget (told by
// the simulator's rate-limit headers, 2 requests a minute) is spent is
// passed over; /metrics counts each such plan under
// ttfx_route_skipped_total{reason="rate_limited"}, and the stored record
// names the skip.
func TestRouteSkippedRateLimited(t *testing.T) {
	prof := sim.Builtin()["fast"]
	prof.RateLimit = &sim.RateLimit{RequestsPerMinute: 2}
	limited := httptest.NewServer(sim.New(sim.Options{Profiles: map[string]sim.Profile{"fast": prof}}))
	defer limited.Close()
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	env := map[string]string{"ADMIN": "admin-k", "A": "client-a-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: client-a, role: client, group: team-a, key_env: A}
channels:
  - {name: limited, protocol: openai, base_url: %q, key_env: UP, priority: 0}
  - {name: live, protocol: openai, base_url: %q, key_env: UP, priority: 1}
`, "sqlite:"+filepath.Join(t.TempDir(), "t.db"), limited.URL, up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	var last string
	for i := range 5 {
		resp, _ := chat(t, srv.URL(), "client-a-k", "fast", false, "")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		last = resp.Header.Get("X-Request-Id")
	}
	rec := readBack(t, srv.URL(), "admin-k", last)
	if rec.Channel != "live" || len(rec.SkippedRateLimited) != 1 || rec.SkippedRateLimited[0].Channel != "limited" {
		t.Errorf("last request: channel %s, skipped %+v", rec.Channel, rec.SkippedRateLimited)
	}
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`ttfx_route_skipped_total{channel="limited",reason="rate_limited"} 3`,
		`ttfx_route_skipped_total{channel="limited",reason="ejected"} 0`,
		`ttfx_route_skipped_total{channel="live",reason="rate_limited"} 0`,
		`ttfx_route_decisions_total{channel="limited",strategy="priority"} 2`,
		`ttfx_route_decisions_total{channel="live",strategy="priority"} 3`,
	} {
		if !strings.Contains(string(m), want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestRoutesConfigErrors: mistakes are refused at start, naming the field.
func TestRoutesConfigErrors(t *testing.T) {
	base := `
channels:
  - {name: a, protocol: openai, base_url: "http://127.0.0.1:1", models: ["gpt-*"]}
  - {name: c, protocol: anthropic, base_url: "http://127.0.0.1:1"}
routes:
`
	for _, tc := range []struct{ route, want string }{
		{`  - {models: ["gpt-*"], strategy: fastest}`, `strategy "fastest" is not priority, weighted or latency`},
		{`  - {models: ["gpt-*"], strategy: latency, latency: {percentile: 1.5}}`, `latency.percentile 1.5 is outside (0,1)`},
		{`  - {models: ["gpt-*"], strategy: latency, latency: {definition: first_byte}}`, `latency.definition "first_byte"`},
		{`  - {models: ["gpt-*"], hedge: {after: 1s}}`, `hedge: needs a second channel`},
		{`  - {models: ["gpt-*"], hedge: {after: p100}}`, `hedge.after "p100"`},
		{`  - {models: ["gpt-*"], eject: {base: 1m, max: 10s}}`, `eject.max (10s) is shorter than eject.base (1m0s)`},
		{`  - {models: ["gpt-*"], strategy: weighted, latency: {percentile: 0.5}}`, `latency: only the latency strategy reads it`},
	} {
		_, err := config.Parse([]byte(base+tc.route+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.route, err, tc.want)
		}
	}
}
