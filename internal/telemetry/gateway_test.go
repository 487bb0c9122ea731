package telemetry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// promptCanary and the client key must never appear in a log line.
const promptCanary = "PROMPT-CANARY-7f3a"

func ptr(n int) *int { return &n }

// testProfiles are short simulator profiles, so a test of many requests
// stays quick: text at 40 ms, a tool call with no text, and a 503.
func testProfiles() map[string]sim.Profile {
	return map[string]sim.Profile{
		"quick": {HeadersMs: 10, FirstEventMs: 10, TextMs: ptr(40), VisibleTokens: 20, TPS: 400},
		"tools": {HeadersMs: 10, FirstEventMs: 10, ToolMs: ptr(40), TPS: 400},
		"down":  {HeadersMs: 5, TextMs: ptr(10), VisibleTokens: 5, TPS: 100, Fault: "status:503"},
		// The Prometheus test's profile: first text at 250 ms, inside
		// the (0.2, 0.3] bucket.
		"ttft-250": {HeadersMs: 20, FirstEventMs: 20, TextMs: ptr(250), VisibleTokens: 10, TPS: 200},
		// The native-histogram test's profile: first text spread over
		// 60–460 ms by jitter, so the quantiles differ.
		"spread": {HeadersMs: 5, FirstEventMs: 5, TextMs: ptr(60), JitterMs: 400, VisibleTokens: 4, TPS: 400},
	}
}

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gateway is a zero-config gateway on loopback with the test profiles.
type gateway struct {
	srv    *server.Server
	url    string
	client string // the client key
	logs   *syncBuffer
}

func startGateway(t testing.TB) *gateway {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Options{
		Dir: t.TempDir(), Listen: "127.0.0.1:0", SimProfiles: testProfiles(),
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("gateway did not shut down")
		}
	})
	g := &gateway{srv: srv, url: srv.URL(), logs: logs}
	for _, k := range srv.Generated() {
		if k.Role == auth.RoleClient {
			g.client = k.Secret
		}
	}
	return g
}

// call sends one request of api for model and reads the whole response;
// it returns the request id.
func (g *gateway) call(t testing.TB, api, model, key string) string {
	t.Helper()
	id, err := g.do(api, model, key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// do is call for goroutines other than the test's.
func (g *gateway) do(api, model, key string) (string, error) {
	var req *http.Request
	msg := `[{"role":"user","content":"` + promptCanary + `"}]`
	switch api {
	case "openai.chat":
		req, _ = http.NewRequest("POST", g.url+"/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","stream":true,"messages":`+msg+`}`))
		req.Header.Set("Authorization", "Bearer "+key)
	case "anthropic":
		req, _ = http.NewRequest("POST", g.url+"/v1/messages", strings.NewReader(`{"model":"`+model+`","max_tokens":100,"stream":true,"messages":`+msg+`}`))
		req.Header.Set("x-api-key", key)
		req.Header.Set("anthropic-version", "2023-06-01")
	case "gemini":
		req, _ = http.NewRequest("POST", g.url+"/v1beta/models/"+model+":streamGenerateContent?alt=sse",
			strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"`+promptCanary+`"}]}]}`))
		req.Header.Set("x-goog-api-key", key)
	case "bedrock.converse":
		req, _ = http.NewRequest("POST", g.url+"/model/"+model+"/converse-stream",
			strings.NewReader(`{"messages":[{"role":"user","content":[{"text":"`+promptCanary+`"}]}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
	default:
		return "", fmt.Errorf("api %q", api)
	}
	req.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", api, model, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", fmt.Errorf("%s %s: read: %w", api, model, err)
	}
	id := resp.Header.Get("X-Request-Id")
	if id == "" {
		return "", fmt.Errorf("%s %s: no X-Request-Id", api, model)
	}
	return id, nil
}

// scrape parses GET /metrics with the Prometheus text parser.
func scrape(t testing.TB, url, key string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// histo sums the count and sum of family name over the series whose
// labels include want.
func histo(fams map[string]*dto.MetricFamily, name string, want map[string]string) (uint64, float64) {
	var n uint64
	var sum float64
next:
	for _, m := range fams[name].GetMetric() {
		l := labelsOf(m)
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		n += m.GetHistogram().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum()
	}
	return n, sum
}

func counter(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var v float64
next:
	for _, m := range fams[name].GetMetric() {
		l := labelsOf(m)
		for k, w := range want {
			if l[k] != w {
				continue next
			}
		}
		v += m.GetCounter().GetValue()
	}
	return v
}

// waitRecords reads the records back from the store (written
// asynchronously), waiting up to 10 s.
func waitRecords(t testing.TB, srv *server.Server, ids []string) []record.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var out []record.Record
	for _, id := range ids {
		for {
			rec, err := srv.Store().Get(context.Background(), id)
			if err == nil {
				out = append(out, rec)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("record %s not stored: %v", id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return out
}

// waitRequests scrapes until ttfx_requests_total adds up to n: the
// response of an error reaches the client with its Content-Length, a
// moment before the handler records it.
func waitRequests(t testing.TB, url, key string, n int) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fams := scrape(t, url, key)
		got := counter(fams, "ttfx_requests_total", nil)
		if got == float64(n) {
			return fams
		}
		if got > float64(n) || time.Now().After(deadline) {
			t.Fatalf("ttfx_requests_total = %v, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGatewayMetricsMatchRequests is the acceptance test of issue 8: the
// counts and sums /metrics reports match the requests sent, read back as
// records, and a tool-only request adds nothing to the visible-text
// histogram.
func TestGatewayMetricsMatchRequests(t *testing.T) {
	g := startGateway(t)
	type call struct{ api, model string }
	var calls []call
	for range 4 {
		calls = append(calls, call{"openai.chat", "quick"})
	}
	for range 3 {
		calls = append(calls, call{"openai.chat", "tools"})
	}
	calls = append(calls, call{"openai.chat", "down"}, call{"openai.chat", "down"},
		call{"anthropic", "quick"}, call{"gemini", "quick"}, call{"anthropic", "tools"}, call{"bedrock.converse", "quick"})
	var ids []string
	for _, c := range calls {
		ids = append(ids, g.call(t, c.api, c.model, g.client))
	}
	badKey := g.call(t, "openai.chat", "quick", "not-a-key")
	ids = append(ids, badKey)
	fams := waitRequests(t, g.url, "", len(ids))
	recs := waitRecords(t, g.srv, ids)

	// Per label combination, the histogram of each field must have one
	// observation per record where the field is present, and their sum.
	type key struct{ api, model, channel string }
	field := map[string]func(r *record.Record) (time.Duration, bool){
		"ttfx_time_to_headers_seconds":        func(r *record.Record) (time.Duration, bool) { return r.UpstreamHeadersMs.Get() },
		"ttfx_time_to_first_event_seconds":    func(r *record.Record) (time.Duration, bool) { return r.FirstSSEEventMs.Get() },
		"ttfx_time_to_first_response_seconds": func(r *record.Record) (time.Duration, bool) { return r.FirstResponseMs.Get() },
		"ttfx_time_to_first_text_seconds":     func(r *record.Record) (time.Duration, bool) { return r.FirstTextDeltaMs.Get() },
		"ttfx_request_duration_seconds":       func(r *record.Record) (time.Duration, bool) { return r.TotalHandlerMs.Get() },
		"ttfx_upstream_duration_seconds": func(r *record.Record) (time.Duration, bool) {
			return r.UpstreamDoneMs.Sub(r.UpstreamStartMs).Get()
		},
		"ttfx_relay_lag_seconds":           func(r *record.Record) (time.Duration, bool) { return r.RelayLag().Get() },
		"ttfx_inter_token_latency_seconds": func(r *record.Record) (time.Duration, bool) { return r.InterTokenLatencyMs.Get() },
	}
	modelLabel := map[string]string{"quick": "quick", "tools": "tools", "down": telemetry.OtherModel}
	for name, get := range field {
		want := map[key]struct {
			n   uint64
			sum float64
		}{}
		for i := range recs {
			r := &recs[i]
			k := key{r.API, modelLabel[r.Model], r.Channel}
			w := want[k]
			if d, ok := get(r); ok {
				w.n++
				w.sum += d.Seconds()
			}
			want[k] = w
		}
		for k, w := range want {
			n, sum := histo(fams, name, map[string]string{"api": k.api, "model": k.model, "channel": k.channel})
			if n != w.n || math.Abs(sum-w.sum) > 1e-6 {
				t.Errorf("%s{%v}: count %d sum %.9f, records say %d and %.9f", name, k, n, sum, w.n, w.sum)
			}
		}
	}
	// The tool-only requests reached first_response but never visible
	// text: they are in one histogram and not the other.
	if n, _ := histo(fams, "ttfx_time_to_first_response_seconds", map[string]string{"model": "tools"}); n != 4 {
		t.Errorf("first_response observations of tool-only requests = %d, want 4", n)
	}
	if n, _ := histo(fams, "ttfx_time_to_first_text_seconds", map[string]string{"model": "tools"}); n != 0 {
		t.Errorf("a tool-only request was observed in ttfx_time_to_first_text_seconds (%d)", n)
	}
	if n, _ := histo(fams, "ttfx_visible_output_tokens_per_second", map[string]string{"model": "tools"}); n != 0 {
		t.Errorf("a tool-only request has a visible TPS observation (%d)", n)
	}
	if n, _ := histo(fams, "ttfx_time_to_first_text_seconds", nil); n != 7 {
		t.Errorf("first text observations = %d, want 7 (4 chat + anthropic + gemini + bedrock.converse)", n)
	}
	// Bedrock's Converse is an api label like the others (a closed set:
	// the registered APIs), through the zero-config bedrock channel.
	if n, _ := histo(fams, "ttfx_time_to_first_text_seconds", map[string]string{"api": "bedrock.converse", "model": "quick", "channel": "sim-bedrock"}); n != 1 {
		t.Errorf("first text observations of bedrock.converse on sim-bedrock = %d, want 1", n)
	}
	if got := counter(fams, "ttfx_requests_total", map[string]string{"api": "bedrock.converse", "status": record.StatusOK}); got != 1 {
		t.Errorf("requests_total{api=bedrock.converse,status=ok} = %v, want 1", got)
	}

	statuses := map[string]float64{}
	for _, r := range recs {
		statuses[r.Status]++
	}
	for st, n := range statuses {
		if got := counter(fams, "ttfx_requests_total", map[string]string{"status": st}); got != n {
			t.Errorf("requests_total{status=%s} = %v, records say %v", st, got, n)
		}
	}
	if statuses[record.StatusOK] != 11 || statuses[record.StatusUpstreamHTTPError] != 2 || statuses[record.StatusAuthFailed] != 1 {
		t.Errorf("statuses %v", statuses)
	}
	labels := map[string]float64{}
	for _, r := range recs {
		for _, l := range r.Diagnosis {
			labels[l]++
		}
	}
	for l, n := range labels {
		if got := counter(fams, "ttfx_diagnosis_total", map[string]string{"label": l}); got != n {
			t.Errorf("diagnosis_total{label=%s} = %v, records say %v", l, got, n)
		}
	}
	var visible, output float64
	for _, r := range recs {
		if r.Tokens.Visible != nil {
			visible += float64(*r.Tokens.Visible)
		}
		if r.Tokens.Output != nil {
			output += float64(*r.Tokens.Output)
		}
	}
	if got := counter(fams, "ttfx_tokens_total", map[string]string{"type": "visible"}); got != visible || visible < 6*20 {
		t.Errorf("visible tokens %v, records say %v", got, visible)
	}
	if got := counter(fams, "ttfx_tokens_total", map[string]string{"type": "output"}); got != output {
		t.Errorf("output tokens %v, records say %v", got, output)
	}
	// Local phases: every request authenticated.
	if n, _ := histo(fams, "ttfx_local_phase_seconds", map[string]string{"phase": "auth"}); n != uint64(len(ids)) {
		t.Errorf("auth phase observations %d, want %d", n, len(ids))
	}
	// Gauges: nothing in flight now, one series per channel.
	for _, ch := range []string{"sim-openai", "sim-anthropic", "sim-gemini"} {
		m := findMetric(fams, "ttfx_inflight_requests", map[string]string{"channel": ch})
		if m == nil || m.GetGauge().GetValue() != 0 {
			t.Errorf("ttfx_inflight_requests{channel=%s} = %v", ch, m)
		}
	}
	if fams["ttfx_store_queue_depth"] == nil || fams["ttfx_store_dropped_total"] == nil || fams["ttfx_gateway_inflight_requests"] == nil {
		t.Errorf("store or gateway gauges missing")
	}

	checkLogLines(t, g, ids)
}

// newSim serves the test profiles on loopback and returns its URL.
func newSim(t testing.TB) string {
	t.Helper()
	ts := httptest.NewServer(sim.New(sim.Options{Profiles: testProfiles()}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func mustConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), os.Getenv)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, yaml)
	}
	return cfg
}

func findMetric(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
next:
	for _, m := range fams[name].GetMetric() {
		l := labelsOf(m)
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// checkLogLines waits for one "request" log line per id, and checks that
// no line carries the prompt or a key.
func checkLogLines(t *testing.T, g *gateway, ids []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen := map[string]map[string]any{}
		sc := bufio.NewScanner(strings.NewReader(g.logs.String()))
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("log line not JSON: %q", sc.Text())
			}
			if line["msg"] == "request" {
				id, _ := line["request_id"].(string)
				if seen[id] != nil {
					t.Fatalf("two log lines for %s", id)
				}
				seen[id] = line
			}
		}
		missing := 0
		for _, id := range ids {
			if seen[id] == nil {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests have no log line; logs:\n%s", missing, g.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	all := g.logs.String()
	for _, secret := range []string{promptCanary, g.client, "not-a-key"} {
		if strings.Contains(all, secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
}

// TestGatewayTelemetryFromConfig runs a configured gateway — a metrics key
// and an OTLP endpoint — against a simulator it does not own, and checks
// /metrics refuses a scrape without the key and the OTLP receiver gets the
// GenAI metrics and the request spans.
func TestGatewayTelemetryFromConfig(t *testing.T) {
	simSrv := newSim(t)
	rcv := newReceiver(t)
	t.Setenv("TTFX_TEST_CLIENT_KEY", "client-key-for-config-test")
	t.Setenv("TTFX_TEST_METRICS_KEY", "metrics-key-for-config-test")
	t.Setenv("TTFX_TEST_BEDROCK_KEY", "bedrock-key-for-config-test")
	cfg := mustConfig(t, fmt.Sprintf(`
store: sqlite:%s/ttfx.db
keys:
  - {name: app, role: client, group: team-a, key_env: TTFX_TEST_CLIENT_KEY}
channels:
  - {name: primary, protocol: openai, base_url: %s, models: ["quick", "tools"], region: local}
  - {name: brk, protocol: bedrock, base_url: %s, key_env: TTFX_TEST_BEDROCK_KEY, models: ["quick"]}
metrics: {key_env: TTFX_TEST_METRICS_KEY}
telemetry: {otlp_endpoint: %s, interval: 100ms}
`, t.TempDir(), simSrv, simSrv, rcv.url()))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Options{Config: cfg, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	g := &gateway{srv: srv, url: srv.URL(), client: "client-key-for-config-test"}

	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the key: %d", resp.StatusCode)
	}
	id := g.call(t, "openai.chat", "quick", g.client)
	g.call(t, "openai.chat", "tools", g.client)
	// An Anthropic client on the bedrock channel: its operation's
	// provider is the channel kind's (aws.bedrock), not the API's.
	bid := g.call(t, "anthropic", "quick", g.client)
	fams := waitRequests(t, g.url, "metrics-key-for-config-test", 3)
	if n, _ := histo(fams, "ttfx_time_to_first_text_seconds", map[string]string{"model": "quick", "group": "team-a", "channel": "primary"}); n != 1 {
		t.Errorf("first text of quick in team-a on primary: %d", n)
	}

	// OTLP: wait for the periodic export to carry both requests.
	deadline := time.Now().Add(15 * time.Second)
	for {
		names, spans := rcv.snapshot()
		if names["gen_ai.client.operation.duration"] >= 2 && names["gen_ai.server.time_to_first_token"] >= 2 && spans[id] != nil && spans[bid] != nil &&
			slices.Contains(rcv.strings(), "aws.bedrock") {
			ev := map[string]bool{}
			for _, e := range spans[id] {
				ev[e] = true
			}
			for _, e := range []string{telemetry.EventRequestReceived, telemetry.EventUpstreamHeaders, telemetry.EventFirstSSEEvent,
				telemetry.EventFirstResponse, telemetry.EventFirstTextDelta, telemetry.EventUpstreamDone, telemetry.EventHandlerDone} {
				if !ev[e] {
					t.Errorf("span of %s lacks event %s: %v", id, e, spans[id])
				}
			}
			if names["gen_ai.server.time_per_output_token"] != 2 {
				t.Errorf("time_per_output_token points %d, want 2: quick on openai and on aws.bedrock (the tool call has no visible text)", names["gen_ai.server.time_per_output_token"])
			}
			// No content and no key in any name or attribute.
			values := rcv.strings()
			for _, v := range values {
				for _, secret := range []string{promptCanary, g.client, "metrics-key-for-config-test"} {
					if strings.Contains(v, secret) {
						t.Errorf("OTLP export carries %q in %q", secret, v)
					}
				}
			}
			if len(values) < 50 {
				t.Errorf("only %d strings exported: the check above saw too little", len(values))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("OTLP export incomplete: metrics %v, spans of %d requests", names, len(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkRecordAllExporters is the whole per-request telemetry cost on
// the request's goroutine, exporters as setupTelemetry wires them: the
// Prometheus observation, then the hand-off to the queue of the JSON
// request log. The log is written on the queue's goroutine; when the loop
// outruns it, records are dropped (reported as dropped/op), which costs
// the request's goroutine the same as a hand-off.
func BenchmarkRecordAllExporters(b *testing.B) {
	m := telemetry.NewMetrics(telemetry.MetricsOptions{})
	q := telemetry.NewQueue(0, telemetry.NewRequestLog(slog.New(slog.NewJSONHandler(io.Discard, nil))))
	defer q.Close(context.Background())
	rec := traceB()
	b.ReportAllocs()
	for b.Loop() {
		m.Record(&rec)
		q.Record(&rec)
	}
	b.ReportMetric(float64(q.Dropped())/float64(b.N), "dropped/op")
}
