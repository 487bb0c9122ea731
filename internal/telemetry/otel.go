package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// The OpenTelemetry GenAI semantic conventions' recommended bucket
// boundaries (semantic-conventions v1.41.0, docs/gen-ai/gen-ai-metrics.md).
var (
	OperationDurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	TokenUsageBuckets        = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	TimeToFirstTokenBuckets  = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}
	TimePerOutputBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}
)

// DefaultOTelInterval is the metric export interval when none is
// configured: the OpenTelemetry SDK's own default.
const DefaultOTelInterval = 60 * time.Second

// Upstream is a channel's upstream address, for server.address and
// server.port: what the semantic conventions ask for "behind any
// intermediaries", here the provider behind the gateway.
type Upstream struct {
	Address string
	Port    int
	// Provider is the gen_ai.provider.name of the channel's kind when it
	// is not the client API's (wire.Kind.GenAIProvider); "": the API's.
	Provider string
}

// OTelOptions configure OTel.
type OTelOptions struct {
	// Endpoint is the OTLP/HTTP base URL, e.g. http://127.0.0.1:4318:
	// metrics go to Endpoint/v1/metrics and spans to Endpoint/v1/traces.
	// The SDK's standard environment variables apply as well: for example
	// OTEL_EXPORTER_OTLP_HEADERS for a collector's API key,
	// OTEL_TRACES_SAMPLER=traceidratio with OTEL_TRACES_SAMPLER_ARG=0.1 to
	// keep one request span in ten (all are kept by default), and
	// OTEL_SERVICE_NAME for another service name than "ttfx".
	Endpoint string
	// Interval is the metric export interval; 0 means DefaultOTelInterval.
	// A finished span waits at most min(Interval, 5 s) in its batch.
	Interval time.Duration
	// Upstreams maps channel names to their upstream address.
	Upstreams map[string]Upstream
	// Models decides gen_ai.request.model on the metrics (spans carry the
	// name as the client sent it); nil means a NewModels of its own.
	Models *Models
}

// OTel exports each finished request as the GenAI semantic-convention
// metrics and as a span whose events are the timeline's marks, with one
// child span per upstream attempt, over OTLP/HTTP. No attribute carries
// content: every value is a name from the configuration, a model name, a
// status, a count or a time.
//
// Which of our definitions each GenAI metric carries:
//
//   - gen_ai.client.operation.duration = total_handler_ms (t7 − t0): the
//     operation as the gateway's caller lived it, fallbacks included —
//     comparable with what the calling application's own instrumentation
//     measures. error.type is the terminal status when it is not ok.
//   - gen_ai.server.time_to_first_token = first_response_ms (t4 − t0),
//     successful requests only. The convention's "first token" is the
//     first token the model generated, which it ties to queueing and
//     prefill; a reasoning or tool-call token is generated like a text
//     token, so the first effective output (t4), not the first visible
//     text (t5), is that moment. ttfx_time_to_first_text_seconds keeps t5.
//   - gen_ai.server.time_per_output_token = inter_token_latency (visible
//     window / (visible tokens − 1)), successful requests only; it is
//     absent without at least 2 visible tokens.
//   - gen_ai.client.token.usage = tokens.input and tokens.output (the
//     provider's usage, or the tokenizer's estimate when it sent none),
//     by gen_ai.token.type.
//
// gen_ai.provider.name names the wire protocol's provider (the API unit's
// GenAIProvider), or the channel's kind's where the kind says so (a cloud
// serving another provider's API: Anthropic clients on a bedrock channel
// are aws.bedrock; Upstream.Provider): an OpenAI-compatible upstream
// cannot be told apart, as the convention itself notes; server.address
// says which it was.
// gen_ai.system, the name before semantic conventions v1.37, is not sent:
// this is a new instrumentation with no older output to stay compatible
// with.
type OTel struct {
	mp        *sdkmetric.MeterProvider
	tp        *sdktrace.TracerProvider
	tracer    trace.Tracer
	models    *Models
	upstreams map[string]Upstream

	duration, ttft, tpot metric.Float64Histogram
	usage                metric.Int64Histogram
}

// NewOTel starts the OTLP/HTTP exporters.
func NewOTel(ctx context.Context, opts OTelOptions) (*OTel, error) {
	base, err := url.Parse(opts.Endpoint)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("telemetry.otlp_endpoint %q: want an http(s) URL such as http://127.0.0.1:4318", opts.Endpoint)
	}
	endpoint := func(signal string) string {
		u := *base
		u.Path = strings.TrimSuffix(u.Path, "/") + signal
		return u.String()
	}
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultOTelInterval
	}
	mexp, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(endpoint("/v1/metrics")))
	if err != nil {
		return nil, fmt.Errorf("otlp metric exporter: %w", err)
	}
	texp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint("/v1/traces")))
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the default
	// service name (Merge lets the second resource win).
	res, err := resource.Merge(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("ttfx")), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	o := &OTel{
		mp: sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
			sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(interval)))),
		tp: sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(idGenerator{}),
			sdktrace.WithBatcher(texp, sdktrace.WithBatchTimeout(min(interval, 5*time.Second)))),
		models:    opts.Models,
		upstreams: opts.Upstreams,
	}
	if o.models == nil {
		o.models = NewModels(nil, 0)
	}
	const scope = "github.com/ttfx/ttfx/internal/telemetry"
	o.tracer = o.tp.Tracer(scope)
	meter := o.mp.Meter(scope)
	var errs [4]error
	o.duration, errs[0] = meter.Float64Histogram("gen_ai.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration: ttfx total_handler_ms (t7 − t0), receipt of the request to the last byte flushed to the client."),
		metric.WithExplicitBucketBoundaries(OperationDurationBuckets...))
	o.ttft, errs[1] = meter.Float64Histogram("gen_ai.server.time_to_first_token", metric.WithUnit("s"),
		metric.WithDescription("Time to generate first token for successful responses: ttfx first_response_ms (t4 − t0), the first text, reasoning or tool-call output."),
		metric.WithExplicitBucketBoundaries(TimeToFirstTokenBuckets...))
	o.tpot, errs[2] = meter.Float64Histogram("gen_ai.server.time_per_output_token", metric.WithUnit("s"),
		metric.WithDescription("Time per output token generated after the first token for successful responses: ttfx inter-token latency of the visible text, (t6 − t5) / (visible tokens − 1)."),
		metric.WithExplicitBucketBoundaries(TimePerOutputBuckets...))
	o.usage, errs[3] = meter.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used (the provider's usage, or ttfx's tokenizer estimate when it reported none)."),
		metric.WithExplicitBucketBoundaries(TokenUsageBuckets...))
	if err := errors.Join(errs[:]...); err != nil {
		o.Shutdown(ctx)
		return nil, fmt.Errorf("otel instruments: %w", err)
	}
	return o, nil
}

// ForceFlush exports what is pending now.
func (o *OTel) ForceFlush(ctx context.Context) error {
	return errors.Join(o.tp.ForceFlush(ctx), o.mp.ForceFlush(ctx))
}

// Shutdown exports what is pending and stops the exporters.
func (o *OTel) Shutdown(ctx context.Context) error {
	return errors.Join(o.tp.Shutdown(ctx), o.mp.Shutdown(ctx))
}

// genAI returns the gen_ai.operation.name and gen_ai.provider.name of an
// API, or "" for calls that are no GenAI operation (listing models).
func genAI(api string) (op, provider string) {
	if a := wire.LookupAPI(api); a != nil {
		return a.GenAIOperation, a.GenAIProvider
	}
	return "", ""
}

// Record exports rec. It builds spans and attribute sets, so it belongs
// behind a Queue, off the request's goroutine.
func (o *OTel) Record(rec *record.Record) {
	ctx := context.Background()
	op, provider := genAI(rec.API)
	if up, ok := o.upstreams[rec.Channel]; ok && rec.Channel != "" && up.Provider != "" {
		provider = up.Provider
	}
	if op != "" {
		o.recordMetrics(ctx, rec, op, provider)
	}
	o.recordSpans(ctx, rec, op, provider)
}

func (o *OTel) recordMetrics(ctx context.Context, rec *record.Record, op, provider string) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.GenAIOperationNameKey.String(op), semconv.GenAIProviderNameKey.String(provider))
	if m := o.models.Label(rec); m != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(m))
	}
	if up, ok := o.upstreams[rec.Channel]; ok && rec.Channel != "" {
		attrs = append(attrs, semconv.ServerAddress(up.Address), semconv.ServerPort(up.Port))
	}
	ok := rec.Status == record.StatusOK
	base := metric.WithAttributeSet(attribute.NewSet(attrs...))
	if d, present := rec.TotalHandlerMs.Get(); present {
		if ok {
			o.duration.Record(ctx, seconds(d), base)
		} else {
			withErr := append(attrs[:len(attrs):len(attrs)], semconv.ErrorTypeKey.String(rec.Status))
			o.duration.Record(ctx, seconds(d), metric.WithAttributeSet(attribute.NewSet(withErr...)))
		}
	}
	if ok {
		if d, present := rec.FirstResponseMs.Get(); present {
			o.ttft.Record(ctx, seconds(d), base)
		}
		if d, present := rec.InterTokenLatencyMs.Get(); present {
			o.tpot.Record(ctx, seconds(d), base)
		}
	}
	for _, t := range [...]struct {
		n   *int
		typ string
	}{{rec.Tokens.Input, "input"}, {rec.Tokens.Output, "output"}} {
		if t.n != nil && *t.n >= 0 {
			withType := append(attrs[:len(attrs):len(attrs)], semconv.GenAITokenTypeKey.String(t.typ))
			o.usage.Record(ctx, int64(*t.n), metric.WithAttributeSet(attribute.NewSet(withType...)))
		}
	}
}

// requestContext returns the context to start rec's request span in: the
// caller's span as its remote parent when the request came with a
// traceparent, and the ids the relay chose at t0 (record.Trace), so that
// the span is the one the upstream requests named as their parent.
func requestContext(ctx context.Context, rec *record.Record) (context.Context, trace.TraceID) {
	tid, err := trace.TraceIDFromHex(rec.TraceID)
	if err != nil {
		return ctx, trace.TraceID{}
	}
	if parent, err := trace.SpanIDFromHex(rec.Trace.ParentSpanID); err == nil {
		var flags trace.TraceFlags
		if rec.Trace.Sampled {
			flags = trace.FlagsSampled
		}
		ts, _ := trace.ParseTraceState(rec.Trace.State) // a malformed one is dropped
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: parent, TraceFlags: flags, TraceState: ts, Remote: true,
		}))
	}
	sid, _ := trace.SpanIDFromHex(rec.Trace.SpanID)
	return withIDs(ctx, tid, sid), tid
}

// Span event names of the marks (SPEC.md §1), in timeline order.
const (
	EventRequestReceived = "request_received" // t0
	EventUpstreamStart   = "upstream_start"   // t1 of the relayed attempt
	EventUpstreamHeaders = "upstream_headers" // t2 of the relayed attempt
	EventFirstSSEEvent   = "first_sse_event"  // t3
	EventFirstResponse   = "first_response"   // t4
	EventFirstTextDelta  = "first_text_delta" // t5
	EventFirstTextSent   = "first_text_sent"  // first visible text flushed to the client
	EventUpstreamDone    = "upstream_done"    // t6
	EventHandlerDone     = "handler_done"     // t7
)

// recordSpans builds the request's span after the fact, with the times of
// its marks: a SERVER span named by its route, the marks as events, and
// the upstream attempts as CLIENT child spans named as the GenAI
// conventions name inference calls ("chat gpt-4o").
func (o *OTel) recordSpans(ctx context.Context, rec *record.Record, op, provider string) {
	t0 := rec.Timestamp
	at := func(off timeline.Offset) time.Time { d, _ := off.Get(); return t0.Add(d) }
	f := &rec.Fields
	end := t0
	if f.TotalHandlerMs.Valid() {
		end = at(f.TotalHandlerMs)
	}

	method, route, _ := strings.Cut(rec.Route, " ")
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.HTTPRoute(route),
		attribute.String("ttfx.request_id", rec.RequestID),
		attribute.String("ttfx.api", rec.API),
		attribute.String("ttfx.status", rec.Status),
		attribute.Bool("ttfx.stream", rec.Stream),
	}
	if rec.HTTPStatus > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(rec.HTTPStatus))
	}
	if op != "" {
		attrs = append(attrs, semconv.GenAIOperationNameKey.String(op), semconv.GenAIProviderNameKey.String(provider))
	}
	if rec.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(clip(rec.Model, maxLogModel)))
	}
	if rec.Status != record.StatusOK {
		attrs = append(attrs, semconv.ErrorTypeKey.String(rec.Status))
	}
	for _, s := range [...]struct{ k, v string }{
		{"ttfx.channel", rec.Channel}, {"ttfx.region", rec.Region}, {"ttfx.group", rec.Group},
		{"ttfx.key_name", rec.KeyName}, {"ttfx.terminal", rec.Terminal}, {"ttfx.tokens.source", rec.Tokens.Source},
	} {
		if s.v != "" {
			attrs = append(attrs, attribute.String(s.k, s.v))
		}
	}
	if rec.FinishReason != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(clip(rec.FinishReason, 64)))
	}
	if rec.Tokens.Input != nil {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(*rec.Tokens.Input))
	}
	if rec.Tokens.Output != nil {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(*rec.Tokens.Output))
	}
	if rec.Tokens.Reasoning != nil {
		attrs = append(attrs, attribute.Int("ttfx.tokens.reasoning", *rec.Tokens.Reasoning))
	}
	if rec.Tokens.Visible != nil {
		attrs = append(attrs, attribute.Int("ttfx.tokens.visible", *rec.Tokens.Visible))
	}
	for _, s := range [...]struct {
		k string
		v timeline.Span
	}{{"ttfx.auth_ms", f.AuthMs}, {"ttfx.distribution_ms", f.DistributionMs}, {"ttfx.body_read_ms", f.BodyReadMs}, {"ttfx.request_wait_ms", f.RequestWaitMs},
		{"ttfx.upstream_headers_ms", f.UpstreamHeadersMs}, {"ttfx.inter_token_latency_ms", rec.InterTokenLatencyMs}} {
		if v, ok := s.v.Ms(); ok {
			attrs = append(attrs, attribute.Float64(s.k, v))
		}
	}
	if v, ok := rec.VisibleOutputTPS.Get(); ok {
		attrs = append(attrs, attribute.Float64("ttfx.visible_output_tps", v))
	}
	if len(rec.Diagnosis) > 0 {
		attrs = append(attrs, attribute.StringSlice("ttfx.diagnosis", rec.Diagnosis))
	}

	ctx, tid := requestContext(ctx, rec)
	ctx, span := o.tracer.Start(ctx, rec.Route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(t0), trace.WithAttributes(attrs...))
	for _, m := range [...]struct {
		name, mark string
		off        timeline.Offset
	}{
		{EventRequestReceived, "t0", timeline.At(0)},
		{EventUpstreamStart, "t1", f.UpstreamStartMs},
		{EventUpstreamHeaders, "t2", f.UpstreamHeadersAtMs},
		{EventFirstSSEEvent, "t3", f.FirstSSEEventMs},
		{EventFirstResponse, "t4", f.FirstResponseMs},
		{EventFirstTextDelta, "t5", f.FirstTextDeltaMs},
		{EventFirstTextSent, "", f.FirstTextSentMs},
		{EventUpstreamDone, "t6", f.UpstreamDoneMs},
		{EventHandlerDone, "t7", f.TotalHandlerMs},
	} {
		ms, ok := m.off.Ms()
		if !ok {
			continue // an absent mark has no event, never one at t0
		}
		ea := []attribute.KeyValue{attribute.Float64("ttfx.offset_ms", ms)}
		if m.mark != "" {
			ea = append(ea, attribute.String("ttfx.mark", m.mark))
		}
		span.AddEvent(m.name, trace.WithTimestamp(at(m.off)), trace.WithAttributes(ea...))
	}

	for i, a := range rec.Attempts {
		if !a.UpstreamStartMs.Valid() {
			continue // never sent: nothing happened upstream
		}
		// The record keeps each attempt's t1 and t2, not when the gateway
		// let it go: a failed attempt ends when the next one starts (or
		// the request ends), the relayed one when the upstream body does.
		aend := end
		switch {
		case a.Status == record.StatusOK && f.UpstreamDoneMs.Valid():
			aend = at(f.UpstreamDoneMs)
		case a.Status != record.StatusOK && i+1 < len(rec.Attempts) && rec.Attempts[i+1].UpstreamStartMs.Valid():
			aend = at(rec.Attempts[i+1].UpstreamStartMs)
		}
		name := "upstream " + a.Channel
		if op != "" {
			name = strings.TrimSpace(op + " " + clip(rec.Model, maxLogModel))
		}
		aa := []attribute.KeyValue{attribute.String("ttfx.channel", a.Channel), attribute.Int("ttfx.attempt", i)}
		if op != "" {
			p := provider
			if up, ok := o.upstreams[a.Channel]; ok {
				_, p = genAI(rec.API)
				if up.Provider != "" {
					p = up.Provider
				}
			}
			aa = append(aa, semconv.GenAIOperationNameKey.String(op), semconv.GenAIProviderNameKey.String(p))
		}
		if rec.Model != "" {
			aa = append(aa, semconv.GenAIRequestModel(clip(rec.Model, maxLogModel)))
		}
		if up, ok := o.upstreams[a.Channel]; ok {
			aa = append(aa, semconv.ServerAddress(up.Address), semconv.ServerPort(up.Port))
		}
		if a.HTTPStatus > 0 {
			aa = append(aa, semconv.HTTPResponseStatusCode(a.HTTPStatus))
		}
		if a.Status != record.StatusOK {
			aa = append(aa, semconv.ErrorTypeKey.String(a.Status))
		}
		if v, ok := a.UpstreamHeadersMs.Ms(); ok {
			aa = append(aa, attribute.Float64("ttfx.upstream_headers_ms", v))
		}
		// The span id its upstream request carried; none: a random one.
		sid, _ := trace.SpanIDFromHex(a.SpanID)
		_, as := o.tracer.Start(withIDs(ctx, tid, sid), name, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithTimestamp(at(a.UpstreamStartMs)), trace.WithAttributes(aa...))
		as.AddEvent(EventUpstreamStart, trace.WithTimestamp(at(a.UpstreamStartMs)))
		if ms, ok := a.UpstreamHeadersAtMs.Ms(); ok {
			as.AddEvent(EventUpstreamHeaders, trace.WithTimestamp(at(a.UpstreamHeadersAtMs)),
				trace.WithAttributes(attribute.Float64("ttfx.offset_ms", ms)))
		}
		if a.Status != record.StatusOK {
			as.SetStatus(codes.Error, a.Status)
		}
		as.End(trace.WithTimestamp(aend))
	}
	if rec.Status != record.StatusOK {
		span.SetStatus(codes.Error, rec.Status)
	}
	span.End(trace.WithTimestamp(end))
}
