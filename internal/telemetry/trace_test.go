package telemetry_test

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// headerLog is a simulator front that keeps the trace headers of every
// request it gets.
type headerLog struct {
	mu    sync.Mutex
	seen  []http.Header
	inner http.Handler
}

func (h *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.seen = append(h.seen, http.Header{
		telemetry.HeaderTraceparent: r.Header.Values(telemetry.HeaderTraceparent),
		telemetry.HeaderTracestate:  r.Header.Values(telemetry.HeaderTracestate),
	})
	h.mu.Unlock()
	h.inner.ServeHTTP(w, r)
}

func (h *headerLog) all() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// TestTraceContextThroughGateway is issue 17's OTel acceptance: a request
// with a W3C traceparent yields a request span whose parent is the
// caller's span, an upstream request carrying a child context of that
// span (the attempt's CLIENT span), the trace id in the record, and
// exemplars with that trace id in the OpenMetrics exposition.
func TestTraceContextThroughGateway(t *testing.T) {
	front := &headerLog{inner: sim.New(sim.Options{Profiles: testProfiles()})}
	up := httptest.NewServer(front)
	t.Cleanup(up.Close)
	rcv := newReceiver(t)
	t.Setenv("TTFX_TEST_CLIENT", "client-key-trace-test")
	srv, _ := serveConfig(t, fmt.Sprintf(`
store: sqlite:%s/ttfx.db
keys:
  - {name: app, role: client, key_env: TTFX_TEST_CLIENT}
channels:
  - {name: sim, protocol: openai, base_url: %s, models: ["*"]}
telemetry: {otlp_endpoint: %s, interval: 100ms}
`, t.TempDir(), up.URL, rcv.url()), "127.0.0.1:0")
	url := srv.URL()

	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
		state       = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	)
	send := func(traceparent string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions",
			strings.NewReader(`{"model":"quick","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer client-key-trace-test")
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
			req.Header.Set("tracestate", state)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp.Header.Get("X-Request-Id")
	}
	id := send("00-" + callerTrace + "-" + callerSpan + "-01")
	firstExemplars := []string{"ttfx_time_to_first_text_seconds_bucket", "ttfx_request_duration_seconds_bucket", "ttfx_time_to_headers_seconds_bucket"}
	waitExemplars(t, url, firstExemplars, callerTrace)
	// A malformed traceparent is ignored (W3C §3.2): a trace of its own.
	own := send("00-" + strings.ToUpper(callerTrace) + "-" + callerSpan + "-01")

	recs := waitRecords(t, srv, []string{id, own})
	rec, rec2 := recs[0], recs[1]
	if rec.TraceID != callerTrace {
		t.Errorf("record trace_id %q, want the caller's %q", rec.TraceID, callerTrace)
	}
	if rec2.TraceID == "" || rec2.TraceID == callerTrace || rec2.TraceID == strings.ToLower(callerTrace) {
		t.Errorf("a malformed traceparent gave trace id %q, want a new one", rec2.TraceID)
	}

	// The upstream saw a child context: same trace, a parent span that is
	// neither the caller's nor empty, sampled, with the caller's state.
	hs := front.all()
	if len(hs) != 2 {
		t.Fatalf("upstream saw %d requests", len(hs))
	}
	tp := hs[0].Get(telemetry.HeaderTraceparent)
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || parts[1] != callerTrace || parts[2] == callerSpan || len(parts[2]) != 16 || parts[3] != "01" {
		t.Fatalf("upstream traceparent %q: want 00-%s-<gateway span>-01", tp, callerTrace)
	}
	upstreamParent := parts[2]
	if got := hs[0].Get(telemetry.HeaderTracestate); got != state {
		t.Errorf("upstream tracestate %q, want %q", got, state)
	}
	if p2 := strings.Split(hs[1].Get(telemetry.HeaderTraceparent), "-"); len(p2) != 4 || p2[1] != rec2.TraceID {
		t.Errorf("second upstream traceparent %q, want trace %s", hs[1].Get(telemetry.HeaderTraceparent), rec2.TraceID)
	}
	if got := hs[1].Get(telemetry.HeaderTracestate); got != "" {
		t.Errorf("tracestate %q passed on with an invalid traceparent", got)
	}

	// The exported spans: the request's SERVER span is the caller's
	// child; the attempt's CLIENT span is the server span's child, and is
	// the span the upstream was told about.
	var server, client *tracepb.Span
	deadline := time.Now().Add(15 * time.Second)
	for server == nil || client == nil {
		for _, s := range rcv.allSpans() {
			if hex.EncodeToString(s.TraceId) != callerTrace {
				continue
			}
			switch s.Kind {
			case tracepb.Span_SPAN_KIND_SERVER:
				server = s
			case tracepb.Span_SPAN_KIND_CLIENT:
				client = s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of trace %s not exported (server %v, client %v)", callerTrace, server != nil, client != nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := hex.EncodeToString(server.ParentSpanId); got != callerSpan {
		t.Errorf("request span's parent %s, want the caller's %s", got, callerSpan)
	}
	if got, want := hex.EncodeToString(client.ParentSpanId), hex.EncodeToString(server.SpanId); got != want {
		t.Errorf("attempt span's parent %s, want the request span %s", got, want)
	}
	if got := hex.EncodeToString(client.SpanId); got != upstreamParent {
		t.Errorf("attempt span id %s, but the upstream was told %s", got, upstreamParent)
	}
	if server.TraceState != state {
		t.Errorf("request span tracestate %q, want %q", server.TraceState, state)
	}
	if attrString(server.Attributes, "ttfx.request_id") != id {
		t.Errorf("request span is not request %s", id)
	}

	// Exemplars: the OpenMetrics exposition links the latency buckets to
	// the trace. A bucket keeps its latest exemplar, so the first request's
	// were checked before the second one's replaced them.
	waitExemplars(t, url, []string{"ttfx_time_to_first_text_seconds_bucket"}, rec2.TraceID)
}

// waitExemplars waits until every family has a bucket line with an
// exemplar of traceID in the OpenMetrics exposition at url.
func waitExemplars(t *testing.T, url string, fams []string, traceID string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
			t.Fatalf("/metrics answered %q to an OpenMetrics scraper", ct)
		}
		var missing []string
		for _, fam := range fams {
			found := false
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, fam+"{") && strings.Contains(line, `# {trace_id="`+traceID+`"}`) {
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, fam)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no exemplar of trace %s on %v\n%s", traceID, missing, grepLines(string(body), "first_text_seconds_bucket"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestParseTraceparent covers the W3C rules the gateway reads the header by.
func TestParseTraceparent(t *testing.T) {
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{"00-" + tid + "-" + sid + "-01", true, true},
		{"00-" + tid + "-" + sid + "-00", true, false},
		{" 00-" + tid + "-" + sid + "-01 ", true, true},
		{"01-" + tid + "-" + sid + "-01-extra", true, true}, // a later version may add fields
		{"00-" + tid + "-" + sid + "-01-extra", false, false},
		{"ff-" + tid + "-" + sid + "-01", false, false},
		{"00-00000000000000000000000000000000-" + sid + "-01", false, false},
		{"00-" + tid + "-0000000000000000-01", false, false},
		{"00-" + strings.ToUpper(tid) + "-" + sid + "-01", false, false},
		{"00-" + tid + "-" + sid, false, false},
		{"00_" + tid + "-" + sid + "-01", false, false},
		{"", false, false},
	} {
		rec := record.Record{}
		h := http.Header{}
		h.Set("traceparent", c.in)
		telemetry.Tracing{}.Start(h, &rec)
		if got := rec.TraceID == tid; got != c.ok {
			t.Errorf("%q: took the caller's trace %v, want %v", c.in, got, c.ok)
		}
		if c.ok && (rec.Trace.ParentSpanID != sid || rec.Trace.Sampled != c.sampled) {
			t.Errorf("%q: parent %q sampled %v", c.in, rec.Trace.ParentSpanID, rec.Trace.Sampled)
		}
		if !c.ok && (rec.Trace.ParentSpanID != "" || len(rec.TraceID) != 32 || !rec.Trace.Sampled) {
			t.Errorf("%q: want a new sampled root trace, got %+v %q", c.in, rec.Trace, rec.TraceID)
		}
		if len(rec.Trace.SpanID) != 16 {
			t.Errorf("%q: span id %q", c.in, rec.Trace.SpanID)
		}
	}
}

// FuzzTraceparent: the header is network bytes; whatever it holds, Start
// yields a valid trace id and span id, and Inject writes a traceparent
// that parses back to them.
func FuzzTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b")
	f.Add("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-xyz", "")
	f.Add("00-", "\xff")
	f.Fuzz(func(t *testing.T, tp, ts string) {
		h := http.Header{"Traceparent": {tp}, "Tracestate": {ts}}
		var rec record.Record
		telemetry.Tracing{}.Start(h, &rec)
		out := http.Header{}
		span := telemetry.Tracing{}.Inject(out, &rec)
		var back record.Record
		telemetry.Tracing{}.Start(out, &back)
		if back.TraceID != rec.TraceID || back.Trace.ParentSpanID != span || back.Trace.Sampled != rec.Trace.Sampled {
			t.Fatalf("injected %q does not parse back: %+v vs %+v", out.Get("traceparent"), back, rec)
		}
		if st := out.Get("tracestate"); len(st) > 512 || strings.ContainsAny(st, "\r\n") {
			t.Fatalf("tracestate passed on: %q", st)
		}
	})
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestExemplarsInPrometheus: a real Prometheus with exemplar storage on
// scrapes a tracing gateway and keeps the trace id of a request as the
// exemplar of its latency bucket — what links a Grafana panel to the trace.
func TestExemplarsInPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	up := httptest.NewServer(sim.New(sim.Options{Profiles: testProfiles()}))
	t.Cleanup(up.Close)
	rcv := newReceiver(t)
	t.Setenv("TTFX_TEST_CLIENT", "client-key-exemplar-test")
	srv, _ := serveConfig(t, fmt.Sprintf(`
store: sqlite:%s/ttfx.db
keys:
  - {name: app, role: client, key_env: TTFX_TEST_CLIENT}
channels:
  - {name: sim, protocol: openai, base_url: %s, models: ["*"]}
telemetry: {otlp_endpoint: %s, interval: 1s}
`, t.TempDir(), up.URL, rcv.url()), "127.0.0.1:0")
	prom := startPrometheusConfig(t, bin, fmt.Sprintf(`
scrape_configs:
  - job_name: ttfx
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: [%q]
`, strings.TrimPrefix(srv.URL(), "http://")), "--enable-feature=exemplar-storage")
	waitQuery(t, prom, `up{job="ttfx"}`, func(v float64) bool { return v == 1 })

	const trace = "0af7651916cd43dd8448eb211c80319c"
	g := &gateway{srv: srv, url: srv.URL(), client: "client-key-exemplar-test"}
	req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"quick","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+g.client)
	req.Header.Set("traceparent", "00-"+trace+"-b7ad6b7169203331-01")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	deadline := time.Now().Add(30 * time.Second)
	for {
		q := fmt.Sprintf("%s/api/v1/query_exemplars?query=%s&start=%d&end=%d", prom,
			"ttfx_time_to_first_text_seconds_bucket", start.Add(-time.Minute).Unix(), time.Now().Add(time.Minute).Unix())
		r, err := http.Get(q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if strings.Contains(string(b), `"trace_id":"`+trace+`"`) {
			t.Logf("Prometheus keeps the exemplar: %.300s", b)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no exemplar of trace %s in Prometheus after 30 s: %s", trace, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
