package telemetry_test

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/telemetry"
	"github.com/ttfx/ttfx/internal/timeline"
)

// otlpReceiver is an in-process OTLP/HTTP collector: it decodes the
// protobuf export requests the SDK exporters send to /v1/metrics and
// /v1/traces, as a real collector would.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	metrics []*metricpb.ResourceMetrics
	spans   []*tracepb.Span
	service string
	discard bool // decode, but keep nothing (benchmarks)
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a protobuf body", 400)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		var resp proto.Message
		switch req.URL.Path {
		case "/v1/metrics":
			var m colmetrics.ExportMetricsServiceRequest
			if err := proto.Unmarshal(b, &m); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			if !r.discard {
				r.metrics = append(r.metrics, m.ResourceMetrics...)
			}
			for _, rm := range m.ResourceMetrics {
				r.service = attrString(rm.GetResource().GetAttributes(), "service.name")
			}
			resp = &colmetrics.ExportMetricsServiceResponse{}
		case "/v1/traces":
			var tr coltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(b, &tr); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			for _, rs := range tr.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					if !r.discard {
						r.spans = append(r.spans, ss.Spans...)
					}
				}
			}
			resp = &coltrace.ExportTraceServiceResponse{}
		default:
			http.NotFound(w, req)
			return
		}
		out, _ := proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func newReceiver(t testing.TB) *otlpReceiver { return newOTLPReceiver(t) }

func (r *otlpReceiver) url() string { return r.URL }

// snapshot returns the observation count of each histogram (over the last
// export's points) and the event names of each request's server span, by
// request id.
func (r *otlpReceiver) snapshot() (map[string]uint64, map[string][]string) {
	counts := map[string]uint64{}
	for name, pts := range r.histograms() {
		for _, p := range pts {
			counts[name] += p.Count
		}
	}
	spans := map[string][]string{}
	for _, s := range r.allSpans() {
		if s.Kind != tracepb.Span_SPAN_KIND_SERVER {
			continue
		}
		id, _ := attrMap(s.Attributes)["ttfx.request_id"].(string)
		for _, e := range s.Events {
			spans[id] = append(spans[id], e.Name)
		}
	}
	return counts, spans
}

// strings returns every string attribute value the receiver was sent:
// resource, span, span event and metric point attributes, and span names.
func (r *otlpReceiver) strings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	add := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.Value.GetStringValue())
			for _, v := range kv.Value.GetArrayValue().GetValues() {
				out = append(out, v.GetStringValue())
			}
		}
	}
	for _, s := range r.spans {
		out = append(out, s.Name, s.Status.GetMessage())
		add(s.Attributes)
		for _, e := range s.Events {
			out = append(out, e.Name)
			add(e.Attributes)
		}
	}
	for _, rm := range r.metrics {
		add(rm.GetResource().GetAttributes())
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, p := range m.GetHistogram().GetDataPoints() {
					add(p.Attributes)
				}
			}
		}
	}
	return out
}

// histograms returns the latest data points of each histogram by name.
func (r *otlpReceiver) histograms() map[string][]*metricpb.HistogramDataPoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]*metricpb.HistogramDataPoint{}
	for _, rm := range r.metrics {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if h := m.GetHistogram(); h != nil {
					out[m.Name] = h.DataPoints // cumulative: the last export has everything
				}
			}
		}
	}
	return out
}

func (r *otlpReceiver) allSpans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	out := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			out[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_ArrayValue:
			var s []string
			for _, e := range v.ArrayValue.Values {
				s = append(s, e.GetStringValue())
			}
			out[kv.Key] = s
		}
	}
	return out
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// traceB is SPEC.md §4's trace B as a record (built in metrics_test.go).
func traceB() record.Record { return telemetry.TraceB() }

// failover is trace B after a 503 on a first channel.
func failover() record.Record {
	rec := traceB()
	rec.RequestID = "req_fail"
	rec.Attempts = append([]record.Attempt{{Channel: "eu", UpstreamStartMs: timeline.At(ms(0.1)), UpstreamHeadersMs: timeline.SpanOf(ms(50)),
		UpstreamHeadersAtMs: timeline.At(ms(50.1)), Status: record.StatusUpstreamHTTPError, HTTPStatus: 503, Error: "upstream answered 503"}}, rec.Attempts...)
	rec.Attempts[1].UpstreamStartMs = timeline.At(ms(60))
	rec.Attempts[1].UpstreamHeadersAtMs = timeline.At(ms(300))
	rec.UpstreamStartMs, rec.UpstreamHeadersAtMs = timeline.At(ms(60)), timeline.At(ms(300))
	return rec
}

func TestOTelExport(t *testing.T) {
	rcv := newOTLPReceiver(t)
	ctx := context.Background()
	o, err := telemetry.NewOTel(ctx, telemetry.OTelOptions{
		Endpoint:  rcv.URL,
		Interval:  time.Hour, // only the explicit flush exports
		Upstreams: map[string]telemetry.Upstream{"sim-openai": {Address: "api.example.test", Port: 443}, "eu": {Address: "eu.example.test", Port: 8443}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := failover()
	tool := traceB()
	tool.RequestID, tool.Model = "req_tool", "tool-call"
	tool.FirstTextDeltaMs, tool.FirstTextSentMs, tool.VisibleOutputTPS, tool.InterTokenLatencyMs = timeline.Offset{}, timeline.Offset{}, timeline.Rate{}, timeline.Span{}
	bad := record.Record{RequestID: "req_bad", Timestamp: ok.Timestamp, API: "anthropic", Route: "POST /v1/messages", Model: "claude-x",
		Channel: "eu", Status: record.StatusHeaderTimeout, HTTPStatus: 504, Diagnosis: []string{record.StatusHeaderTimeout}}
	bad.TotalHandlerMs = timeline.At(ms(30000))
	bad.Attempts = []record.Attempt{{Channel: "eu", UpstreamStartMs: timeline.At(ms(0.1)), Status: record.StatusHeaderTimeout}}
	models := record.Record{RequestID: "req_models", Timestamp: ok.Timestamp, API: "openai.models", Route: "GET /v1/models", Status: record.StatusOK}
	models.TotalHandlerMs = timeline.At(ms(1))
	for _, r := range []record.Record{ok, tool, bad, models} {
		o.Record(&r)
	}
	if err := o.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	if rcv.service != "ttfx" {
		t.Errorf("service.name = %q", rcv.service)
	}
	h := rcv.histograms()
	for name, bounds := range map[string][]float64{
		"gen_ai.client.operation.duration":    telemetry.OperationDurationBuckets,
		"gen_ai.server.time_to_first_token":   telemetry.TimeToFirstTokenBuckets,
		"gen_ai.server.time_per_output_token": telemetry.TimePerOutputBuckets,
		"gen_ai.client.token.usage":           telemetry.TokenUsageBuckets,
	} {
		pts := h[name]
		if len(pts) == 0 {
			t.Errorf("%s not exported; have %v", name, keys(h))
			continue
		}
		if len(pts[0].ExplicitBounds) != len(bounds) || pts[0].ExplicitBounds[0] != bounds[0] {
			t.Errorf("%s bounds %v, want the recommended %v", name, pts[0].ExplicitBounds, bounds)
		}
	}
	// Duration: two successful chats (one per model) and the failed
	// Anthropic call with error.type; no point for the models listing.
	var total uint64
	for _, p := range h["gen_ai.client.operation.duration"] {
		a := attrMap(p.Attributes)
		total += p.Count
		switch a["gen_ai.request.model"] {
		case "trace-b":
			if a["gen_ai.operation.name"] != "chat" || a["gen_ai.provider.name"] != "openai" || a["server.address"] != "api.example.test" || a["server.port"] != int64(443) {
				t.Errorf("duration attributes %v", a)
			}
			if _, has := a["error.type"]; has || p.Count != 1 || !near(p.GetSum(), 10.2003) {
				t.Errorf("trace-b duration point %v count %d sum %v", a, p.Count, p.GetSum())
			}
		case telemetry.OtherModel: // claude-x was never accepted upstream
			if a["error.type"] != record.StatusHeaderTimeout || a["gen_ai.provider.name"] != "anthropic" || !near(p.GetSum(), 30) {
				t.Errorf("failed call point %v sum %v", a, p.GetSum())
			}
		}
	}
	if total != 3 {
		t.Errorf("operation.duration count %d, want 3 (the models listing is no GenAI operation)", total)
	}
	// TTFT is first_response (t4), successful requests only: both chats.
	var ttft uint64
	for _, p := range h["gen_ai.server.time_to_first_token"] {
		ttft += p.Count
		if !near(p.GetSum(), 2.9) {
			t.Errorf("time_to_first_token sum %v, want t4 = 2.9 s", p.GetSum())
		}
	}
	if ttft != 2 {
		t.Errorf("time_to_first_token count %d, want 2", ttft)
	}
	// Time per output token: only the request with visible text.
	if pts := h["gen_ai.server.time_per_output_token"]; len(pts) != 1 || pts[0].Count != 1 || !near(pts[0].GetSum(), 1.5/82) {
		t.Errorf("time_per_output_token %v", pts)
	}
	usage := map[string]float64{}
	for _, p := range h["gen_ai.client.token.usage"] {
		usage[attrMap(p.Attributes)["gen_ai.token.type"].(string)] += p.GetSum()
	}
	if usage["input"] != 24 || usage["output"] != 166 {
		t.Errorf("token usage %v, want input 24, output 166", usage)
	}

	spans := rcv.allSpans()
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	var root *tracepb.Span
	for _, s := range byName["POST /v1/chat/completions"] {
		if attrMap(s.Attributes)["ttfx.request_id"] == "req_fail" {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no server span for req_fail; spans %v", names(spans))
	}
	if root.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span kind %v", root.Kind)
	}
	t0 := uint64(ok.Timestamp.UnixNano())
	if root.StartTimeUnixNano != t0 || root.EndTimeUnixNano != t0+uint64(ms(10200.3)) {
		t.Errorf("span from %d to %d, want t0 %d to t7 %d", root.StartTimeUnixNano, root.EndTimeUnixNano, t0, t0+uint64(ms(10200.3)))
	}
	want := map[string]time.Duration{
		telemetry.EventRequestReceived: 0, telemetry.EventUpstreamStart: ms(60), telemetry.EventUpstreamHeaders: ms(300), telemetry.EventFirstSSEEvent: ms(240.5),
		telemetry.EventFirstResponse: ms(2900), telemetry.EventFirstTextDelta: ms(8700), telemetry.EventFirstTextSent: ms(8700.04),
		telemetry.EventUpstreamDone: ms(10200), telemetry.EventHandlerDone: ms(10200.3),
	}
	if len(root.Events) != len(want) {
		t.Errorf("%d events, want %d: %v", len(root.Events), len(want), root.Events)
	}
	for _, e := range root.Events {
		d, ok := want[e.Name]
		if !ok {
			t.Errorf("unexpected event %q", e.Name)
			continue
		}
		if e.TimeUnixNano != t0+uint64(d) {
			t.Errorf("event %s at +%v, want +%v", e.Name, time.Duration(e.TimeUnixNano-t0), d)
		}
	}
	ra := attrMap(root.Attributes)
	for k, v := range map[string]any{"http.route": "/v1/chat/completions", "http.request.method": "POST", "http.response.status_code": int64(200),
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "trace-b", "gen_ai.usage.output_tokens": int64(83), "ttfx.channel": "sim-openai"} {
		if ra[k] != v {
			t.Errorf("span attribute %s = %#v, want %#v", k, ra[k], v)
		}
	}
	// Attempts are CLIENT children: the failed one ends when the next
	// starts, the relayed one when the upstream body ended.
	var children []*tracepb.Span
	for _, s := range spans {
		if string(s.ParentSpanId) == string(root.SpanId) {
			children = append(children, s)
		}
	}
	if len(children) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(children))
	}
	for _, c := range children {
		a := attrMap(c.Attributes)
		if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || c.Name != "chat trace-b" {
			t.Errorf("attempt span %q kind %v", c.Name, c.Kind)
		}
		switch a["ttfx.attempt"] {
		case int64(0):
			if a["error.type"] != record.StatusUpstreamHTTPError || a["http.response.status_code"] != int64(503) || a["server.address"] != "eu.example.test" ||
				c.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || c.EndTimeUnixNano != t0+uint64(ms(60)) {
				t.Errorf("failed attempt %v status %v end +%v", a, c.Status, time.Duration(c.EndTimeUnixNano-t0))
			}
		case int64(1):
			if c.StartTimeUnixNano != t0+uint64(ms(60)) || c.EndTimeUnixNano != t0+uint64(ms(10200)) || a["server.port"] != int64(443) {
				t.Errorf("relayed attempt %v from +%v to +%v", a, time.Duration(c.StartTimeUnixNano-t0), time.Duration(c.EndTimeUnixNano-t0))
			}
		}
	}
	// The tool-only request has no text: no first_text events at all,
	// rather than events at t0.
	for _, s := range byName["POST /v1/chat/completions"] {
		if attrMap(s.Attributes)["ttfx.request_id"] != "req_tool" {
			continue
		}
		for _, e := range s.Events {
			if e.Name == telemetry.EventFirstTextDelta || e.Name == telemetry.EventFirstTextSent {
				t.Errorf("tool-only request has event %s", e.Name)
			}
		}
	}
	// The failed request's span carries the status as its error.
	for _, s := range byName["POST /v1/messages"] {
		if s.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || attrMap(s.Attributes)["error.type"] != record.StatusHeaderTimeout {
			t.Errorf("failed request span status %v attrs %v", s.Status, attrMap(s.Attributes))
		}
	}
}

func TestNewOTelRejectsBadEndpoint(t *testing.T) {
	for _, ep := range []string{"", "collector:4318", "ftp://x", "http://"} {
		if _, err := telemetry.NewOTel(context.Background(), telemetry.OTelOptions{Endpoint: ep}); err == nil {
			t.Errorf("endpoint %q accepted", ep)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// BenchmarkOTelRecord is the OTLP exporter's work per request on the
// Queue's goroutine (the span, its events and attempt spans, the metric
// points), exporting to an in-process receiver every second; the
// batches' encoding and the receiver's decoding share the process.
func BenchmarkOTelRecord(b *testing.B) {
	rcv := newOTLPReceiver(b)
	rcv.discard = true
	o, err := telemetry.NewOTel(context.Background(), telemetry.OTelOptions{Endpoint: rcv.URL, Interval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer o.Shutdown(context.Background())
	rec := failover()
	b.ReportAllocs()
	for b.Loop() {
		o.Record(&rec)
	}
}

// TestOTelProviderOfKind: an Anthropic client served by a bedrock channel
// is an aws.bedrock operation (the channel's kind names the provider, not
// the client's API), on the channel's host; an attempt that failed on an
// anthropic channel first is the API's provider.
func TestOTelProviderOfKind(t *testing.T) {
	rcv := newOTLPReceiver(t)
	ctx := context.Background()
	o, err := telemetry.NewOTel(ctx, telemetry.OTelOptions{
		Endpoint: rcv.URL, Interval: time.Hour,
		Upstreams: map[string]telemetry.Upstream{
			"brk":  {Address: "bedrock-runtime.us-east-1.amazonaws.com", Port: 443, Provider: "aws.bedrock"},
			"anth": {Address: "api.anthropic.com", Port: 443},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := traceB()
	rec.RequestID, rec.API, rec.Route, rec.Channel = "req_brk", "anthropic", "POST /v1/messages", "brk"
	rec.Attempts = append([]record.Attempt{{Channel: "anth", UpstreamStartMs: timeline.At(ms(0.1)), UpstreamHeadersMs: timeline.SpanOf(ms(50)),
		UpstreamHeadersAtMs: timeline.At(ms(50.1)), Status: record.StatusUpstreamHTTPError, HTTPStatus: 529}}, rec.Attempts...)
	rec.Attempts[1].Channel = "brk"
	o.Record(&rec)
	if err := o.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	pts := rcv.histograms()["gen_ai.client.operation.duration"]
	if len(pts) != 1 {
		t.Fatalf("%d duration points, want 1", len(pts))
	}
	if a := attrMap(pts[0].Attributes); a["gen_ai.provider.name"] != "aws.bedrock" || a["server.address"] != "bedrock-runtime.us-east-1.amazonaws.com" {
		t.Errorf("duration attributes %v, want aws.bedrock on its host", a)
	}
	providers := map[string]string{} // attempt channel → provider
	for _, sp := range rcv.allSpans() {
		if ch := attrString(sp.Attributes, "ttfx.channel"); ch != "" {
			providers[ch] = attrString(sp.Attributes, "gen_ai.provider.name")
		}
	}
	if providers["brk"] != "aws.bedrock" || providers["anth"] != "anthropic" {
		t.Errorf("attempt spans' providers %v, want brk aws.bedrock and anth anthropic", providers)
	}
}
