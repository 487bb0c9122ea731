package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/demo"
	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestServeBedrock runs `ttfx serve --config` as a process with one
// bedrock channel (a Bedrock API key from an environment variable), the
// simulator as Bedrock's runtime endpoint over loopback. SPEC §4's traces
// A, B and C go through it at once, each as a Converse stream and as an
// Anthropic Messages stream (InvokeModelWithResponseStream upstream), and
// the stored records carry the verdicts SPEC §4 gives every API. Then
// what reads records handles bedrock.converse like the others: `ttfx
// diagnose` on trace B's Converse record, the dashboard's request list and
// detail, /api/stats grouped by api, and /metrics' api label.
func TestServeBedrock(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the traces take 20 s of real time")
	}
	const upstreamKey = "bedrock-api-key-serve"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: upstreamKey}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ttfx.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, key_env: T_CLIENT}
channels:
  - name: bedrock-1
    protocol: bedrock
    region: us-east-1
    base_url: %q
    key_env: T_BEDROCK_KEY
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), up.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	const admin, client = "admin-secret-br", "client-secret-br"
	p := serve(t, dir, []string{"T_ADMIN=" + admin, "T_CLIENT=" + client, "T_BEDROCK_KEY=" + upstreamKey}, "--config", cfg)
	base, _ := url.Parse(p.url)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// send makes one request as the benchmark client builds it for api
	// and returns its record.
	send := func(api protocol.API, model string, stream bool) (record.Record, error) {
		w := &request.Wire{API: api, Base: base, Model: model, Key: client, Stream: stream, MaxTokens: 1024}
		body, err := w.Body("Tell me.")
		if err != nil {
			return record.Record{}, err
		}
		req, err := w.NewRequest(ctx, body)
		if err != nil {
			return record.Record{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return record.Record{}, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return record.Record{}, fmt.Errorf("%s %s: %d %v %.200q", api, model, resp.StatusCode, err, b)
		}
		if api == "bedrock.converse" && stream && resp.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
			return record.Record{}, fmt.Errorf("%s %s: content type %q", api, model, resp.Header.Get("Content-Type"))
		}
		return readRecord(t, p.url, admin, resp.Header.Get("X-Request-Id")), nil
	}
	apis := []protocol.API{"bedrock.converse", "anthropic"}
	var mu sync.Mutex
	recs := map[string]record.Record{} // api/model → record
	var wg sync.WaitGroup
	for _, api := range apis {
		for _, tr := range demo.Traces {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec, err := send(api, tr.Model, true)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				recs[string(api)+"/"+tr.Model] = rec
				mu.Unlock()
			}()
		}
	}
	// Beside them, a fast Converse stream and a whole Converse answer.
	fast, err := send("bedrock.converse", "fast", true)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := send("bedrock.converse", "fast", false)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, api := range apis {
		for _, tr := range demo.Traces {
			rec := recs[string(api)+"/"+tr.Model]
			label := string(api) + " " + tr.Model
			if rec.API != string(api) || rec.Channel != "bedrock-1" || rec.Status != record.StatusOK || rec.Events.Unknown != 0 {
				t.Errorf("%s: api %s channel %s status %s (%s) events %+v", label, rec.API, rec.Channel, rec.Status, rec.Error, rec.Events)
			}
			if len(rec.Diagnosis) == 0 || rec.Diagnosis[0] != tr.Verdict {
				t.Errorf("%s: diagnosis %v, want %s first (SPEC §4); headers %v, first response %v, first text %v, tps %v",
					label, rec.Diagnosis, tr.Verdict, rec.UpstreamHeadersMs, rec.FirstResponseMs, rec.FirstTextDeltaMs, rec.VisibleOutputTPS)
			}
		}
	}
	if fast.Route != "POST /model/{target}/converse-stream" || !fast.ProviderLatencyMs.Valid() || len(fast.Diagnosis) != 0 {
		t.Errorf("fast Converse stream: route %q, provider_latency_ms %v, diagnosis %v", fast.Route, fast.ProviderLatencyMs, fast.Diagnosis)
	}
	if whole.Route != "POST /model/{target}/converse" || whole.Stream || whole.Status != record.StatusOK || !whole.ProviderLatencyMs.Valid() {
		t.Errorf("whole Converse answer: route %q stream %v status %s provider_latency_ms %v", whole.Route, whole.Stream, whole.Status, whole.ProviderLatencyMs)
	}

	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", p.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, b)
		}
		return string(b)
	}

	// ttfx diagnose: the waterfall, the verdicts in order, the provider's
	// own latency beside the marks.
	traceB := recs["bedrock.converse/trace-b"]
	var out bytes.Buffer
	if err := diagnoseMain(ctx, []string{"--url", p.url, "--key", admin, traceB.RequestID}, &out, func(string) string { return "" }); err != nil {
		t.Fatalf("ttfx diagnose: %v\n%s", err, out.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`request ` + traceB.RequestID + `  bedrock\.converse  model trace-b  status ok`),
		regexp.MustCompile(`channel bedrock-1 `),
		regexp.MustCompile(`\n  1\. response_to_text_gap  \(primary\)\n`),
		regexp.MustCompile(`\n  provider_latency_ms [0-9.]+ \(the provider's own figure`),
		regexp.MustCompile(`route POST /model/\{target\}/converse-stream`),
	} {
		if !want.MatchString(out.String()) {
			t.Errorf("ttfx diagnose lacks %s:\n%s", want, out.String())
		}
	}

	// The dashboard: the request list shows the Converse records like
	// the others, the detail names the API, the verdict and the
	// provider's latency.
	list := get("/ui/view/requests?since=1h")
	for _, rec := range []record.Record{traceB, recs["bedrock.converse/trace-a"], fast, whole} {
		if !strings.Contains(list, `data-id="`+rec.RequestID+`"`) {
			t.Errorf("the request list lacks %s (%s %s)", rec.RequestID, rec.API, rec.Model)
		}
	}
	detail := get("/ui/view/request/" + traceB.RequestID)
	for _, want := range []string{"via bedrock.converse", `data-label="response_to_text_gap"`, "data-provider-latency", "bedrock-1"} {
		if !strings.Contains(detail, want) {
			t.Errorf("the request's detail lacks %q", want)
		}
	}

	// /api/stats groups by api like any other.
	var stats struct {
		Groups []struct {
			Key    map[string]string
			Count  int
			Labels map[string]struct{ Count int }
		}
	}
	if err := json.Unmarshal([]byte(get("/api/stats?since=1h&group_by=api&stream=true")), &stats); err != nil {
		t.Fatal(err)
	}
	byAPI := map[string]int{}
	for _, g := range stats.Groups {
		byAPI[g.Key["api"]] = g.Count
		if g.Key["api"] == "bedrock.converse" {
			for _, tr := range demo.Traces {
				if g.Labels[tr.Verdict].Count < 1 {
					t.Errorf("stats of bedrock.converse: label %s counted %d", tr.Verdict, g.Labels[tr.Verdict].Count)
				}
			}
		}
	}
	if byAPI["bedrock.converse"] != 4 || byAPI["anthropic"] != 3 {
		t.Errorf("streams by api %v, want bedrock.converse 4 and anthropic 3", byAPI)
	}

	// /metrics: the api label is the API's registered name (a closed
	// set); summed over models, each API's streams on the channel.
	firstText := map[string]float64{} // api/channel/stream → observations
	line := regexp.MustCompile(`(?m)^ttfx_time_to_first_text_seconds_count\{([^}]*)\} ([0-9.e+]+)$`)
	label := func(labels, name string) string {
		m := regexp.MustCompile(name + `="([^"]*)"`).FindStringSubmatch(labels)
		if m == nil {
			return ""
		}
		return m[1]
	}
	metrics := get("/metrics")
	for _, m := range line.FindAllStringSubmatch(metrics, -1) {
		var v float64
		fmt.Sscan(m[2], &v)
		firstText[label(m[1], "api")+"/"+label(m[1], "channel")+"/"+label(m[1], "stream")] += v
	}
	// (A whole answer's first text comes with its last byte.)
	if firstText["bedrock.converse/bedrock-1/true"] != 4 || firstText["bedrock.converse/bedrock-1/false"] != 1 || firstText["anthropic/bedrock-1/true"] != 3 || len(firstText) != 3 {
		t.Errorf("ttfx_time_to_first_text_seconds observations by api/channel/stream: %v, want bedrock.converse 4 streamed and 1 whole, anthropic 3", firstText)
	}
	for _, m := range regexp.MustCompile(`api="([^"]*)"`).FindAllStringSubmatch(metrics, -1) {
		if m[1] != "bedrock.converse" && m[1] != "anthropic" {
			t.Errorf("/metrics has api label %q: only two APIs were used", m[1])
			break
		}
	}
}
