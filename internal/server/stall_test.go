package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestStalledStream: a stream that stops for 3.5 s mid-answer and then
// finishes is recorded with its longest output gap and where it ended,
// diagnosed generation_stalled (issue 14), and summarised by /api/stats. A
// provider that pings while stalled is caught all the same: heartbeats do
// not end a gap (SPEC.md §1).
func TestStalledStream(t *testing.T) {
	t.Parallel()
	const stall = 3500.0 // ms
	ms := func(v int) *int { return &v }
	profiles := map[string]sim.Profile{
		// 100 tokens at 100 t/s from 80 ms; after the 20th token the
		// rest waits 3.5 s longer.
		"stall-3500": {HeadersMs: 20, TextMs: ms(80), VisibleTokens: 100, TPS: 100, Fault: fmt.Sprintf("stall_after:20:%d", int(stall))},
		// The same, pinging every 250 ms throughout (Anthropic's `event:
		// ping`; on chat the `: ping` comment of an OpenAI-compatible
		// router).
		"stall-pings": {HeadersMs: 20, TextMs: ms(80), VisibleTokens: 100, TPS: 100, HeartbeatEveryMs: 250, HeartbeatComments: true, Fault: fmt.Sprintf("stall_after:20:%d", int(stall))},
	}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles}))
	defer up.Close()
	env := map[string]string{"ADMIN": "admin-k", "CLIENT": "client-k", "UP": "u"}
	// The default threshold (5 s) would let a 3.5 s stall pass; this
	// deployment flags stalls over 3 s.
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: app, role: client, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UP}
  - {name: up-anthropic, protocol: anthropic, base_url: %q, key_env: UP}
diagnosis:
  generation_stalled_ms: 3000
`, "sqlite:"+filepath.Join(t.TempDir(), "t.db"), up.URL, up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})

	type result struct {
		name string
		id   string
		body string
	}
	cases := []struct{ name, path, body string }{
		{"chat", "/v1/chat/completions", `{"model":"stall-3500","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"chat pings", "/v1/chat/completions", `{"model":"stall-pings","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"anthropic pings", "/v1/messages", `{"model":"stall-pings","stream":true,"max_tokens":200,"messages":[{"role":"user","content":"hi"}]}`},
	}
	// The three streams run at once: each takes about 4.5 s.
	results := make([]result, len(cases))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", srv.URL()+c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer client-k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			results[i] = result{c.name, resp.Header.Get("X-Request-Id"), string(b)}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	gaps := map[string][]float64{} // by model, for /api/stats below
	for _, r := range results {
		rec := readBack(t, srv.URL(), "admin-k", r.id)
		gap, ok := rec.MaxOutputGapMs.Ms()
		gaps[rec.Model] = append(gaps[rec.Model], gap)
		at, atOK := rec.MaxOutputGapAtMs.Ms()
		t5, _ := rec.FirstTextDeltaMs.Ms()
		t6, _ := rec.UpstreamDoneMs.Ms()
		// The gap is the stall plus one token's interval (10 ms), give or
		// take scheduling: the simulator keeps its schedule, so a 20th token
		// written late shortens the gap by as much as this process's timers
		// were seen to fire late meanwhile (seen: 3499.8 ms under load).
		slip := float64(testenv.Slip(time.Duration(t6)*time.Millisecond+time.Second)) / float64(time.Millisecond)
		if !ok || gap < stall-slip || gap > stall+400+3*slip {
			t.Errorf("%s: max_output_gap_ms = %v (present %v), want about %v (timers up to %.0f ms late)", r.name, gap, ok, stall, slip)
		}
		// It ended after the 20th token: 80 + 20 × 10 ms + 3500 ms from the
		// simulator's start, so between t5 + 3.5 s and t6.
		if !atOK || at < t5+stall-slip || at > t6 {
			t.Errorf("%s: max_output_gap_at_ms = %v, want within [t5 + %v, t6] = [%v, %v]", r.name, at, stall, t5+stall, t6)
		}
		if rec.Status != record.StatusOK || !slices.Contains(rec.Diagnosis, diagnose.GenerationStalled) {
			t.Errorf("%s: status %s, diagnosis %v; want ok and %s", r.name, rec.Status, rec.Diagnosis, diagnose.GenerationStalled)
		}
		if strings.Contains(r.name, "pings") && rec.Events.Heartbeat < 10 {
			t.Errorf("%s: %d heartbeats recorded, want the pings sent during the stall", r.name, rec.Events.Heartbeat)
		}
	}

	// /api/stats summarises the field.
	q := url.Values{"fields": {"max_output_gap_ms"}, "group_by": {"model"}, "stream": {"true"}}
	req, _ := http.NewRequest("GET", srv.URL()+"/api/stats?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer admin-k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct {
		Definitions map[string]string `json:"definitions"`
		Groups      []struct {
			Key    map[string]string `json:"key"`
			Count  int               `json:"count"`
			Labels map[string]struct {
				Count int `json:"count"`
			} `json:"labels"`
			Fields map[string]struct {
				Count int      `json:"count"`
				P50   *float64 `json:"p50"`
			} `json:"fields"`
		} `json:"groups"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || resp.StatusCode != 200 {
		t.Fatalf("stats: %d %v", resp.StatusCode, err)
	}
	if stats.Definitions["max_output_gap_ms"] == "" {
		t.Errorf("stats do not define max_output_gap_ms: %v", stats.Definitions)
	}
	seen := 0
	for _, g := range stats.Groups {
		// The median of the group's own records (checked against the
		// stall above), within the sketch's relative accuracy.
		f := g.Fields["max_output_gap_ms"]
		own := slices.Sorted(slices.Values(gaps[g.Key["model"]]))
		if len(own) != g.Count || f.Count != g.Count || f.P50 == nil || g.Labels[diagnose.GenerationStalled].Count != g.Count {
			t.Errorf("stats group %v: count %d, max_output_gap_ms %+v, stalled %d; records %v", g.Key, g.Count, f, g.Labels[diagnose.GenerationStalled].Count, own)
		} else if want := store.Percentile(own, 0.5); math.Abs(*f.P50-want) > sketch.RelativeAccuracy*want {
			t.Errorf("stats group %v: max_output_gap_ms p50 %v, the records' median %v (±%v%%)", g.Key, *f.P50, want, 100*sketch.RelativeAccuracy)
		}
		seen += g.Count
	}
	if seen != len(cases) {
		t.Errorf("stats count %d streams, want %d", seen, len(cases))
	}
}

// TestDiagnoseNonStreaming: what `ttfx diagnose` prints for a non-streaming
// request — rule 1 not applicable rather than passed, and a context made
// of non-streaming peers only (SPEC.md §4).
func TestDiagnoseNonStreaming(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	env := map[string]string{"ADMIN": "admin-k", "CLIENT": "client-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: app, role: client, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UP}
`, "sqlite:"+filepath.Join(t.TempDir(), "t.db"), up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	for range 3 {
		chat(t, srv.URL(), "client-k", "fast", true, "")
	}
	chat(t, srv.URL(), "client-k", "fast", false, "")
	resp, _ := chat(t, srv.URL(), "client-k", "fast", false, "")
	id := resp.Header.Get("X-Request-Id")
	rec := readBack(t, srv.URL(), "admin-k", id)
	c := &api.Client{BaseURL: srv.URL(), Key: "admin-k"}
	var rep diagnose.Report
	// The other records are written asynchronously: wait for the peer.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if rep, err = c.Diagnosis(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if rep.Context.Peers >= 1 || time.Now().After(deadline) {
			break
		}
	}
	if rep.Rules[0].NotApplicable != diagnose.NotStreaming || rep.Context.Stream || rep.Context.Peers != 1 {
		t.Fatalf("rule 1 %+v, context stream %v with %d peers; want not applicable, 1 non-streaming peer", rep.Rules[0], rep.Context.Stream, rep.Context.Peers)
	}
	var b strings.Builder
	if err := diagnose.WriteText(&b, rec, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[-] 1 upstream_headers_slow: not applicable (non-streaming)", "non-streaming requests only"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("ttfx diagnose output lacks %q:\n%s", want, b.String())
		}
	}
}
