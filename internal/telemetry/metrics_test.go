package telemetry

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// traceB is a record shaped like SPEC.md §4's trace B: tool arguments at
// 2900 ms, text at 8700 ms.
func traceB() record.Record {
	rec := record.Record{
		RequestID: "req_b", Timestamp: time.Unix(1_700_000_000, 0).UTC(), API: "openai.chat",
		Route: "POST /v1/chat/completions", Model: "trace-b", Group: "default", KeyName: "client",
		Channel: "sim-openai", Region: "local", Provider: "sim", Status: record.StatusOK, HTTPStatus: 200,
		Stream: true, Terminal: "done", FinishReason: "stop",
		Tokens:    record.Tokens{Input: record.Int(12), Output: record.Int(83), Visible: record.Int(83), Source: record.TokensUsage},
		Diagnosis: []string{"response_to_text_gap"},
	}
	rec.Fields = timeline.Fields{
		AuthMs: timeline.SpanOf(ms(0.02)), DistributionMs: timeline.SpanOf(ms(0.01)), BodyReadMs: timeline.SpanOf(ms(0.05)),
		UpstreamHeadersMs: timeline.SpanOf(ms(240)), UpstreamStartMs: timeline.At(ms(0.1)), UpstreamHeadersAtMs: timeline.At(ms(240.1)),
		FirstSSEEventMs: timeline.At(ms(240.5)), FirstResponseMs: timeline.At(ms(2900)), FirstTextDeltaMs: timeline.At(ms(8700)),
		FirstTextSentMs: timeline.At(ms(8700.04)), UpstreamDoneMs: timeline.At(ms(10200)), TotalHandlerMs: timeline.At(ms(10200.3)),
	}
	rec.VisibleOutputTPS, rec.InterTokenLatencyMs = timeline.Speed(rec.FirstTextDeltaMs, rec.UpstreamDoneMs, 83)
	rec.Attempts = []record.Attempt{{Channel: "sim-openai", UpstreamStartMs: timeline.At(ms(0.1)), UpstreamHeadersMs: timeline.SpanOf(ms(240)),
		UpstreamHeadersAtMs: timeline.At(ms(240.1)), Status: record.StatusOK, HTTPStatus: 200}}
	return rec
}

// gather parses what the /metrics handler serves with the Prometheus text
// parser, as a scraper would.
func gather(t testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	if rr.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rr.Code, rr.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rr.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// find returns the metric of family name whose labels include want, or nil.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func TestMetricsObservesFieldsInSeconds(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	m.Record(new(traceB()))
	fams := gather(t, m.Handler(""))
	labels := map[string]string{"api": "openai.chat", "model": "trace-b", "channel": "sim-openai", "group": "default"}
	for _, c := range []struct {
		name string
		sum  float64
	}{
		{"ttfx_time_to_headers_seconds", 0.240},
		{"ttfx_time_to_first_event_seconds", 0.2405},
		{"ttfx_time_to_first_response_seconds", 2.9},
		{"ttfx_time_to_first_text_seconds", 8.7},
		{"ttfx_request_duration_seconds", 10.2003},
		{"ttfx_upstream_duration_seconds", 10.2 - 0.0001},
		{"ttfx_relay_lag_seconds", 0.00004},
		{"ttfx_visible_output_tokens_per_second", 83 / 1.5},
		{"ttfx_inter_token_latency_seconds", 1.5 / 82},
	} {
		mt := find(fams, c.name, labels)
		if mt == nil {
			t.Errorf("%s: no series with %v", c.name, labels)
			continue
		}
		h := mt.GetHistogram()
		if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-c.sum) > 1e-9 {
			t.Errorf("%s: count %d sum %v, want 1 and %v", c.name, h.GetSampleCount(), h.GetSampleSum(), c.sum)
		}
		if !strings.Contains(fams[c.name].GetHelp(), " ") {
			t.Errorf("%s: no HELP text", c.name)
		}
	}
	for phase, want := range map[string]float64{"auth": 0.00002, "distribution": 0.00001, "body_read": 0.00005, "after_upstream": 0.0003} {
		l := map[string]string{"phase": phase, "model": "trace-b"}
		mt := find(fams, "ttfx_local_phase_seconds", l)
		if mt == nil || mt.GetHistogram().GetSampleCount() != 1 || math.Abs(mt.GetHistogram().GetSampleSum()-want) > 1e-9 {
			t.Errorf("local phase %s: %v, want one observation of %v", phase, mt, want)
		}
	}
	for typ, want := range map[string]float64{"input": 12, "output": 83, "visible": 83} {
		mt := find(fams, "ttfx_tokens_total", map[string]string{"type": typ})
		if mt == nil || mt.GetCounter().GetValue() != want {
			t.Errorf("tokens %s: %v, want %v", typ, mt, want)
		}
	}
	// The series of a label combination are created together, so the
	// reasoning counter exists, but an unknown count adds nothing.
	if mt := find(fams, "ttfx_tokens_total", map[string]string{"type": "reasoning"}); mt.GetCounter().GetValue() != 0 {
		t.Errorf("reasoning tokens unknown but counted: %v", mt)
	}
	if mt := find(fams, "ttfx_requests_total", map[string]string{"status": "ok", "model": "trace-b"}); mt.GetCounter().GetValue() != 1 {
		t.Errorf("requests_total{status=ok} = %v", mt)
	}
	if mt := find(fams, "ttfx_diagnosis_total", map[string]string{"label": "response_to_text_gap"}); mt.GetCounter().GetValue() != 1 {
		t.Errorf("diagnosis_total = %v", mt)
	}
}

// TestMetricsAbsentMarksAreNotObserved: a request that failed before
// headers has t7 and the local phases, and nothing else; nothing else may
// be observed, least of all as 0.
func TestMetricsAbsentMarksAreNotObserved(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	rec := record.Record{API: "anthropic", Model: "claude-x", Channel: "a", Group: "g", Status: record.StatusHeaderTimeout,
		Diagnosis: []string{record.StatusHeaderTimeout}}
	rec.AuthMs, rec.DistributionMs, rec.BodyReadMs = timeline.SpanOf(ms(0.01)), timeline.SpanOf(ms(0.01)), timeline.SpanOf(ms(0.01))
	rec.UpstreamStartMs = timeline.At(ms(0.05))
	rec.TotalHandlerMs = timeline.At(ms(30000))
	rec.Attempts = []record.Attempt{{Channel: "a", UpstreamStartMs: timeline.At(ms(0.05)), Status: record.StatusHeaderTimeout}}
	m.Record(&rec)
	fams := gather(t, m.Handler(""))
	for _, name := range []string{"ttfx_time_to_headers_seconds", "ttfx_time_to_first_event_seconds", "ttfx_time_to_first_response_seconds",
		"ttfx_time_to_first_text_seconds", "ttfx_upstream_duration_seconds", "ttfx_relay_lag_seconds",
		"ttfx_visible_output_tokens_per_second", "ttfx_inter_token_latency_seconds"} {
		for _, mt := range fams[name].GetMetric() {
			if n := mt.GetHistogram().GetSampleCount(); n != 0 {
				t.Errorf("%s observed %d times for a request without the mark", name, n)
			}
		}
	}
	if mt := find(fams, "ttfx_local_phase_seconds", map[string]string{"phase": "after_upstream"}); mt.GetHistogram().GetSampleCount() != 0 {
		t.Errorf("after_upstream observed without t6")
	}
	// The model was never accepted by an upstream: its label folds.
	if mt := find(fams, "ttfx_request_duration_seconds", map[string]string{"model": OtherModel, "api": "anthropic"}); mt.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("request duration of the failed request: %v", mt)
	}
	if mt := find(fams, "ttfx_requests_total", map[string]string{"status": record.StatusHeaderTimeout}); mt.GetCounter().GetValue() != 1 {
		t.Errorf("requests_total{status=header_timeout} = %v", mt)
	}
}

func TestModelLabelsAreBounded(t *testing.T) {
	// served: the request ended ok, relayed from channel "ch".
	type outcome struct {
		status   string
		channel  string
		attempts []record.Attempt
	}
	served := outcome{record.StatusOK, "ch", []record.Attempt{{Channel: "ch", Status: record.StatusOK, HTTPStatus: 200}}}
	refused := outcome{record.StatusUpstreamHTTPError, "ch", []record.Attempt{{Channel: "ch", Status: record.StatusUpstreamHTTPError, HTTPStatus: 404}}}
	// A 200 whose stream then failed: accepted by the upstream, never
	// served. issue 18's probe filled the slots this way with made-up names.
	failedStream := outcome{record.StatusUpstreamStreamError, "ch", []record.Attempt{{Channel: "ch", Status: record.StatusUpstreamStreamError, HTTPStatus: 200}}}
	noChannel := outcome{record.StatusOK, "", nil}
	fallback := outcome{record.StatusOK, "ch2", []record.Attempt{
		{Channel: "ch", Status: record.StatusUpstreamHTTPError, HTTPStatus: 503},
		{Channel: "ch2", Status: record.StatusOK, HTTPStatus: 200}}}
	s := NewModels([]string{"configured"}, 2)
	for _, c := range []struct {
		model string
		o     outcome
		want  string
	}{
		{"", noChannel, ""},
		{"configured", refused, "configured"},          // named by the operator: always
		{"junk-1", refused, OtherModel},                // never served
		{"junk-2", failedStream, OtherModel},           // 200, then failed: not served
		{"junk-3", noChannel, OtherModel},              // no configured channel served it
		{"a", served, "a"},                             // admitted
		{"a", refused, "a"},                            // once admitted, kept
		{"b", fallback, "b"},                           // served by the fallback: the limit of 2 is now reached
		{"c", served, OtherModel},                      // over the limit
		{"configured", served, "configured"},           // configured names do not count against it
		{strings.Repeat("x", 200), served, OtherModel}, // too long
		{"bad\xff", served, OtherModel},                // not UTF-8: Prometheus would refuse it
		{"junk-1", served, OtherModel},                 // still over the limit
	} {
		rec := record.Record{Model: c.model, Status: c.o.status, Channel: c.o.channel, Attempts: c.o.attempts}
		if got := s.Label(&rec); got != c.want {
			t.Errorf("Label(%.20q, %s) = %q, want %q", c.model, c.o.status, got, c.want)
		}
	}
}

func TestMetricsGaugesReadAtScrape(t *testing.T) {
	inflight := int64(3)
	st := StoreStats{Queued: 7, Dropped: 2, Rejected: 1, Written: 40}
	var dropped uint64 = 5
	m := NewMetrics(MetricsOptions{
		Inflight: func() int64 { return inflight },
		Channels: func() []ChannelInflight { return []ChannelInflight{{"a", 1}, {"b", 2}} },
		Store:    func() StoreStats { return st },
		Dropped:  func() uint64 { return dropped },
	})
	check := func(name string, labels map[string]string, want float64) {
		t.Helper()
		mt := find(gather(t, m.Handler("")), name, labels)
		var got float64
		switch {
		case mt == nil:
			t.Fatalf("%s%v missing", name, labels)
		case mt.Gauge != nil:
			got = mt.GetGauge().GetValue()
		default:
			got = mt.GetCounter().GetValue()
		}
		if got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	check("ttfx_gateway_inflight_requests", nil, 3)
	check("ttfx_inflight_requests", map[string]string{"channel": "a"}, 1)
	check("ttfx_inflight_requests", map[string]string{"channel": "b"}, 2)
	check("ttfx_store_queue_depth", nil, 7)
	check("ttfx_store_dropped_total", nil, 2)
	check("ttfx_store_rejected_total", nil, 1)
	check("ttfx_store_written_total", nil, 40)
	check("ttfx_telemetry_dropped_total", nil, 5)
	inflight, st.Queued = 0, 0
	check("ttfx_gateway_inflight_requests", nil, 0)
	check("ttfx_store_queue_depth", nil, 0)
}

func TestMetricsHandlerKey(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	h := m.Handler("s3cret-metrics-key")
	for _, c := range []struct {
		auth string
		code int
	}{
		{"", 401},
		{"Bearer wrong", 401},
		{"Basic czNjcmV0LW1ldHJpY3Mta2V5", 401},
		{"Bearer s3cret-metrics-key-and-more", 401},
		{"Bearer s3cret-metrics-key", 200},
		{"bearer s3cret-metrics-key", 200}, // the scheme is case-insensitive
	} {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		if rr.Code != c.code {
			t.Errorf("Authorization %q: %d, want %d", c.auth, rr.Code, c.code)
		}
		if c.code == 401 {
			if rr.Header().Get("WWW-Authenticate") == "" || !strings.Contains(rr.Body.String(), "metrics key") {
				t.Errorf("401 without a challenge or a reason: %v %q", rr.Header(), rr.Body)
			}
			if strings.Contains(rr.Body.String(), "ttfx_") {
				t.Errorf("401 leaked metrics")
			}
		}
	}
}

// TestMetricsConcurrentRecord runs Record from many goroutines (go test
// -race checks the cache) and checks no observation is lost.
func TestMetricsConcurrentRecord(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	const workers, each = 8, 200
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				rec := traceB()
				rec.Channel = fmt.Sprintf("ch-%d", (w+i)%3)
				m.Record(&rec)
			}
		}()
	}
	for range workers {
		<-done
	}
	var n uint64
	for _, mt := range gather(t, m.Handler(""))["ttfx_time_to_first_text_seconds"].GetMetric() {
		n += mt.GetHistogram().GetSampleCount()
	}
	if n != workers*each {
		t.Fatalf("observed %d, want %d", n, workers*each)
	}
}

// FuzzMetricsLabels feeds client-chosen strings (the model name comes from
// the request body or, for Gemini, the URL path) through Record: it must
// never panic, and /metrics must stay parseable.
func FuzzMetricsLabels(f *testing.F) {
	f.Add("gpt-4o", "team-a", "openai-eu", "ok", "generation_slow")
	f.Add("bad\xff\xfe", "", "", "", "")
	f.Add("quote\"back\\slash\nnewline", "g{}", "c=,", "s", "l")
	f.Fuzz(func(t *testing.T, modelName, group, channel, status, label string) {
		m := NewMetrics(MetricsOptions{})
		rec := traceB()
		rec.Model, rec.Group, rec.Channel, rec.Status = modelName, group, channel, status
		rec.Diagnosis = []string{label}
		m.Record(&rec)
		m.Record(&rec)
		var buf bytes.Buffer
		rr := httptest.NewRecorder()
		m.Handler("").ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
		buf.Write(rr.Body.Bytes())
		p := expfmt.NewTextParser(model.UTF8Validation)
		if _, err := p.TextToMetricFamilies(&buf); err != nil {
			t.Fatalf("unparseable /metrics after labels %q %q %q %q %q: %v", modelName, group, channel, status, label, err)
		}
	})
}

// BenchmarkMetricsRecord is the cost the Prometheus side adds to one
// request, once, after its response ended; it does not depend on how
// many events the request relayed.
func BenchmarkMetricsRecord(b *testing.B) {
	m := NewMetrics(MetricsOptions{})
	rec := traceB()
	b.ReportAllocs()
	for b.Loop() {
		m.Record(&rec)
	}
}

// BenchmarkMetricsRecordExemplar is a traced request: each latency
// observation also stores its trace id as the bucket's exemplar.
func BenchmarkMetricsRecordExemplar(b *testing.B) {
	m := NewMetrics(MetricsOptions{})
	rec := traceB()
	rec.TraceID, rec.Trace.Sampled = "4bf92f3577b34da6a3ce929d0e0e4736", true
	b.ReportAllocs()
	for b.Loop() {
		m.Record(&rec)
	}
}

// BenchmarkMetricsRecordParallel is the same under contention: requests
// of one series finishing on every core at once.
func BenchmarkMetricsRecordParallel(b *testing.B) {
	m := NewMetrics(MetricsOptions{})
	rec := traceB()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Record(&rec)
		}
	})
}

// FuzzMetricsKey sends arbitrary Authorization headers to a key-protected
// /metrics: only the bearer key itself may pass.
func FuzzMetricsKey(f *testing.F) {
	const key = "k3y-for-fuzz"
	for _, s := range []string{"", "Bearer " + key, "bearer " + key, "Bearer  " + key + " ", "Bearer", "Bearer " + key + "x", "Basic " + key, "\x00Bearer " + key} {
		f.Add(s)
	}
	h := NewMetrics(MetricsOptions{}).Handler(key)
	f.Fuzz(func(t *testing.T, auth string) {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header["Authorization"] = []string{auth}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		scheme, tok, _ := strings.Cut(auth, " ")
		want := http.StatusUnauthorized
		if strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) == key {
			want = http.StatusOK
		}
		if rr.Code != want {
			t.Fatalf("Authorization %q: %d, want %d", auth, rr.Code, want)
		}
	})
}

// TestMetricsStreamGapAndRequestWait: issue 14's metric items — the stream
// label keeps streaming and non-streaming apart, the longest output gap
// has its histogram, and request_wait is a local phase.
func TestMetricsStreamGapAndRequestWait(t *testing.T) {
	m := NewMetrics(MetricsOptions{})
	streamed := traceB()
	streamed.MaxOutputGapMs = timeline.SpanOf(ms(3500))
	streamed.RequestWaitMs = timeline.SpanOf(ms(0.3))
	whole := traceB()
	whole.Stream = false
	whole.MaxOutputGapMs = timeline.Span{} // absent: never observed as 0
	m.Record(&streamed)
	m.Record(&whole)
	fams := gather(t, m.Handler(""))
	for _, c := range []struct {
		name   string
		labels map[string]string
		count  uint64
		sum    float64
	}{
		{"ttfx_max_output_gap_seconds", map[string]string{"stream": "true"}, 1, 3.5},
		{"ttfx_max_output_gap_seconds", map[string]string{"stream": "false"}, 0, 0},
		{"ttfx_local_phase_seconds", map[string]string{"stream": "true", "phase": PhaseRequestWait}, 1, 0.0003},
		{"ttfx_local_phase_seconds", map[string]string{"stream": "false", "phase": PhaseRequestWait}, 0, 0},
		{"ttfx_time_to_headers_seconds", map[string]string{"stream": "true"}, 1, 0.24},
		{"ttfx_time_to_headers_seconds", map[string]string{"stream": "false"}, 1, 0.24},
	} {
		mt := find(fams, c.name, c.labels)
		if mt == nil {
			t.Errorf("%s%v missing", c.name, c.labels)
			continue
		}
		if h := mt.GetHistogram(); h.GetSampleCount() != c.count || math.Abs(h.GetSampleSum()-c.sum) > 1e-9 {
			t.Errorf("%s%v: count %d sum %v, want %d and %v", c.name, c.labels, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
	}
	if n := len(fams["ttfx_requests_total"].GetMetric()); n != 2 {
		t.Errorf("requests_total has %d series, want one per stream flag", n)
	}
}
