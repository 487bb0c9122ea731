package telemetry

import (
	"crypto/sha256"
	"crypto/subtle"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// Bucket boundaries in seconds (or tokens per second).
var (
	// LatencyBuckets suit the milestones of an LLM request: 5 ms steps
	// where a fast chat model answers, and on to 10 minutes, the default
	// total timeout, because reasoning models can think for minutes before
	// their first text (the OpenTelemetry GenAI buckets stop at 10 s).
	LatencyBuckets = []float64{
		0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1, 1.5, 2, 3, 4, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600,
	}
	// LocalBuckets suit the gateway's own phases and its relay lag: tens
	// of microseconds when all is well, with SPEC.md §4's 100 ms
	// local_overhead threshold well inside, and up to a minute for a
	// client that uploads a large body slowly.
	LocalBuckets = []float64{
		0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
		0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
	}
	// TPSBuckets are visible output tokens per second; 15 is SPEC.md §4's
	// generation_slow threshold.
	TPSBuckets = []float64{1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 100, 125, 150, 200, 300, 500, 1000, 2000}
	// ITLBuckets are seconds between visible tokens.
	ITLBuckets = []float64{
		0.0005, 0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075,
		0.1, 0.15, 0.2, 0.3, 0.5, 1, 2, 5,
	}
)

// Label names of the latency families (SPEC.md §8). stream is "true" or
// "false": a non-streaming answer's headers come with its whole
// generation, so the two must never share a percentile (issue 14).
var seriesLabels = []string{"api", "model", "channel", "group", "stream"}

// Native (exponential) histograms beside the classic buckets (issue 17).
// A bucket factor of 1.1 gives schema 3: bucket boundaries grow by
// 2^(1/8) ≈ 1.0905, so a quantile read from them lies in the same bucket
// as the true one, within NativeRelativeError of it, however many
// replicas' histograms are summed. 160 buckets cover 1 ms to 10 minutes at
// that resolution (19 doublings × 8); a series that needs more halves its
// resolution rather than grow without bound.
const (
	NativeBucketFactor = 1.1
	nativeMaxBuckets   = 160
	nativeSchema       = 3
)

// NativeRelativeError bounds |estimate − true| / true of a quantile read
// from the native histograms at their schema: one bucket's growth − 1.
var NativeRelativeError = math.Exp2(math.Exp2(-nativeSchema)) - 1

// Local phase label values of ttfx_local_phase_seconds.
const (
	PhaseAuth          = "auth"           // auth_ms
	PhaseDistribution  = "distribution"   // distribution_ms
	PhaseBodyRead      = "body_read"      // body_read_ms
	PhaseAfterUpstream = "after_upstream" // t7 − t6
	PhaseRequestWait   = "request_wait"   // request_wait_ms: before t0, from the request's first byte read
	PhaseAdmissionWait = "admission_wait" // admission_wait_ms: queued for the gateway's limits
	PhaseUpstreamAuth  = "upstream_auth"  // upstream_auth_ms: waited for an upstream credential
)

var phases = [...]string{PhaseAuth, PhaseDistribution, PhaseBodyRead, PhaseAfterUpstream, PhaseRequestWait, PhaseAdmissionWait, PhaseUpstreamAuth}

// Token type label values of ttfx_tokens_total.
var tokenTypes = [...]string{"input", "output", "reasoning", "visible"}

// ChannelInflight is one channel's in-flight request count.
type ChannelInflight struct {
	Name     string
	Inflight int64
}

// StoreStats are the record writer's counters (store.WriterStats).
type StoreStats struct {
	Queued   int    // records held in memory, waiting or being written
	Capacity int    // the most records the queue holds before dropping; 0 = unknown (not exported)
	Dropped  uint64 // records lost: queue full, or the writer closed first
	Rejected uint64 // records the store refused
	Written  uint64 // records stored
}

// MetricsOptions configure Metrics. Every function is called at scrape
// time, so the values are current and nothing is pushed on the request
// path; a nil function leaves its metric out.
type MetricsOptions struct {
	// Models decides the model label; nil means NewModels(nil, 0).
	Models *Models
	// Inflight returns the requests the gateway is serving.
	Inflight func() int64
	// Channels returns each channel's in-flight requests.
	Channels func() []ChannelInflight
	// Store returns the record writer's counters.
	Store func() StoreStats
	// Dropped returns the records the telemetry queue could not take
	// (logs and OTLP export; see Queue).
	Dropped func() uint64
	// AuthFailures returns the requests that failed authentication,
	// including those not recorded (the relay records one per source and
	// minute).
	AuthFailures func() uint64
	// AuthFailuresUnrecorded returns the failed authentications counted
	// but not recorded nor logged (past a source's few a minute, or the
	// bound on such records a minute over every source).
	AuthFailuresUnrecorded func() uint64
	// BodyBudget returns the request-body budget's state.
	BodyBudget func() BodyBudget
	// Runtime adds the Go runtime and process metrics (go_*, process_*)
	// that Prometheus users expect from any Go server.
	Runtime bool
}

// Metrics is the Prometheus side of the telemetry: a Recorder whose
// observations GET /metrics serves (Handler). It has its own registry, so
// several gateways in one process (tests) do not collide.
type Metrics struct {
	reg    *prometheus.Registry
	models *Models

	headers, firstEvent, firstResponse, firstText *prometheus.HistogramVec
	duration, upstream, relayLag, phase, tps, itl *prometheus.HistogramVec
	maxGap                                        *prometheus.HistogramVec
	requests, diagnosis, tokens                   *prometheus.CounterVec

	// mu guards cache: the observers of each label combination seen, so
	// that a request costs one map lookup instead of a label hash per
	// family. BenchmarkMetricsRecord measured 1.2–1.4 µs and 0 allocs per
	// record with the cache, against 7.0 µs and 9 allocs (1152 B)
	// resolving every family through WithLabelValues (2-core AMD EPYC).
	mu    sync.RWMutex
	cache map[seriesKey]*series
}

// seriesKey is one combination of the latency families' label values.
type seriesKey struct {
	api, model, channel, group string
	stream                     bool
}

// series holds the resolved observers of one label combination. Counters
// by status and diagnosis label are resolved on first use (counter), since
// a combination sees few of them.
type series struct {
	headers, firstEvent, firstResponse, firstText prometheus.Observer
	duration, upstream, relayLag, tps, itl        prometheus.Observer
	maxGap                                        prometheus.Observer
	phase                                         [len(phases)]prometheus.Observer
	tokens                                        [len(tokenTypes)]prometheus.Counter
	key                                           []string // the label values, in seriesLabels order

	mu       sync.RWMutex // guards statuses and labels
	statuses map[string]prometheus.Counter
	labels   map[string]prometheus.Counter
}

// NewMetrics builds the metrics and their registry.
func NewMetrics(opts MetricsOptions) *Metrics {
	m := &Metrics{
		reg:    prometheus.NewRegistry(),
		models: opts.Models,
		cache:  map[seriesKey]*series{},
	}
	if m.models == nil {
		m.models = NewModels(nil, 0)
	}
	hist := func(name, help string, buckets []float64, extra ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets,
			NativeHistogramBucketFactor:    NativeBucketFactor,
			NativeHistogramMaxBucketNumber: nativeMaxBuckets,
			// A series that had to lower its resolution is reset to the
			// full one at most hourly.
			NativeHistogramMinResetDuration: time.Hour,
			// Exemplars stay on the classic buckets (one per bucket, cheap);
			// the native histograms' list of exemplars, kept sorted by value,
			// cost BenchmarkMetricsRecordExemplar ~60 µs per traced request.
			NativeHistogramMaxExemplars: -1,
		},
			append(append([]string(nil), seriesLabels...), extra...))
		m.reg.MustRegister(h)
		return h
	}
	ctr := func(name, help string, extra string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help},
			append(append([]string(nil), seriesLabels...), extra))
		m.reg.MustRegister(c)
		return c
	}
	const every = " Observed for every request that has both marks, whatever its status; a request without them is not observed (never as 0)."
	m.headers = hist("ttfx_time_to_headers_seconds",
		"Time to upstream response headers: upstream_headers_ms = t2 − t1 of the relayed attempt (from that attempt's start, not from receipt)."+every, LatencyBuckets)
	m.firstEvent = hist("ttfx_time_to_first_event_seconds",
		"Time to the first non-empty SSE event (comments never count): first_sse_event_ms = t3 − t0, from receipt of the request."+every, LatencyBuckets)
	m.firstResponse = hist("ttfx_time_to_first_response_seconds",
		"Time to the first effective content or action — text, reasoning or tool-call arguments with a non-whitespace character: first_response_ms = t4 − t0."+every, LatencyBuckets)
	m.firstText = hist("ttfx_time_to_first_text_seconds",
		"Time to the first visible text delta (reasoning and tool arguments do not count): first_text_delta_ms = t5 − t0."+every, LatencyBuckets)
	m.duration = hist("ttfx_request_duration_seconds",
		"Total handler time, receipt to the last byte written and flushed to the client: total_handler_ms = t7 − t0."+every, LatencyBuckets)
	m.upstream = hist("ttfx_upstream_duration_seconds",
		"Upstream time of the relayed attempt, from its request start to the end of its body: t6 − t1 (excludes local phases and failed attempts)."+every, LatencyBuckets)
	m.relayLag = hist("ttfx_relay_lag_seconds",
		"Gateway relay lag: first visible text flushed to the client minus first visible text received from upstream, first_text_sent_ms − first_text_delta_ms."+every, LocalBuckets)
	m.phase = hist("ttfx_local_phase_seconds",
		"Local phases of the gateway: phase=auth (auth_ms), distribution (distribution_ms: channel selection), body_read (body_read_ms: reading the client's body), after_upstream (t7 − t6: from the upstream body's end to the handler's end), request_wait (request_wait_ms: from the request's first byte read on its connection to t0 — accepting, reading headers, waiting for a core; it grows when the gateway is overloaded), admission_wait (admission_wait_ms: queued for the gateway's own limits, observed only for requests that queued), upstream_auth (upstream_auth_ms: waited for an upstream credential fetched on the request's path, observed only for such requests). A phase that did not run is not observed.", LocalBuckets, "phase")
	m.tps = hist("ttfx_visible_output_tokens_per_second",
		"Visible output speed of one stream: visible output tokens / (t6 − t5) in seconds (visible_output_tps). Not observed without visible text or with fewer than 2 visible tokens.", TPSBuckets)
	m.itl = hist("ttfx_inter_token_latency_seconds",
		"Inter-token latency of the visible text: (t6 − t5) / (visible output tokens − 1). Not observed without visible text or with fewer than 2 visible tokens.", ITLBuckets)
	m.maxGap = hist("ttfx_max_output_gap_seconds",
		"Longest wait between two consecutive content events (text, reasoning or tool arguments) from t4 on; heartbeats and metadata do not end a gap: max_output_gap_ms. Not observed with fewer than two content events.", LatencyBuckets)
	m.requests = ctr("ttfx_requests_total",
		"Finished requests by terminal status (ok, client_cancelled, upstream_http_error, …, SPEC.md §5).", "status")
	m.diagnosis = ctr("ttfx_diagnosis_total",
		"Diagnosis labels of finished requests (SPEC.md §4 rule labels and terminal-status verdicts); a request with several labels counts once under each.", "label")
	m.tokens = ctr("ttfx_tokens_total",
		"Tokens of finished requests by type: input, output and reasoning as the provider reported them (or estimated), visible = output − reasoning or the tokenizer's count of the visible text. A count that is unknown is not added.", "type")

	if opts.Inflight != nil {
		f := opts.Inflight
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ttfx_gateway_inflight_requests",
			Help: "Requests the gateway is serving now, on any channel or none yet.",
		}, func() float64 { return float64(f()) }))
	}
	if opts.Channels != nil {
		m.reg.MustRegister(&channelCollector{f: opts.Channels, desc: prometheus.NewDesc("ttfx_inflight_requests",
			"Requests in flight on each channel now (attempts under way, from upstream start to the end of the relay).", []string{"channel"}, nil)})
	}
	if opts.Store != nil {
		m.reg.MustRegister(&storeCollector{f: opts.Store,
			queue:    prometheus.NewDesc("ttfx_store_queue_depth", "Records waiting in memory to be written to the store, or in the batch being written.", nil, nil),
			capacity: prometheus.NewDesc("ttfx_store_queue_capacity", "The most records the store queue holds; past it, records are dropped (ttfx_store_dropped_total).", nil, nil),
			dropped:  prometheus.NewDesc("ttfx_store_dropped_total", "Records that were not stored because the queue was full or the writer closed before it could write them.", nil, nil),
			rejected: prometheus.NewDesc("ttfx_store_rejected_total", "Records the store refused (invalid, or refused by a store that otherwise answers).", nil, nil),
			written:  prometheus.NewDesc("ttfx_store_written_total", "Records written to the store.", nil, nil),
		})
	}
	if opts.Dropped != nil {
		f := opts.Dropped
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ttfx_telemetry_dropped_total",
			Help: "Records the request log and the OTLP export never saw because their queue was full.",
		}, func() float64 { return float64(f()) }))
	}
	if opts.AuthFailures != nil {
		f := opts.AuthFailures
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ttfx_auth_failures_total",
			Help: "Requests that failed authentication, recorded or not (one record per source and minute is kept).",
		}, func() float64 { return float64(f()) }))
	}
	if opts.AuthFailuresUnrecorded != nil {
		f := opts.AuthFailuresUnrecorded
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ttfx_auth_failures_unrecorded_total",
			Help: "Failed authentications counted but neither recorded nor logged: past the first few of their source and minute, or past the bound on such records a minute over every source (auth_failure_records_per_minute).",
		}, func() float64 { return float64(f()) }))
	}
	if opts.BodyBudget != nil {
		f := opts.BodyBudget
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ttfx_body_budget_bytes",
			Help: "The most request-body bytes the gateway holds in memory at once (body_budget_bytes).",
		}, func() float64 { return float64(f().Budget) }))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ttfx_body_budget_in_use_bytes",
			Help: "Request-body bytes held in memory now, counted against the budget.",
		}, func() float64 { return float64(f().InUse) }))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ttfx_body_budget_refused_total",
			Help: "Requests answered 503 because their body found no room in the budget (in total or in their key's share) within the wait.",
		}, func() float64 { return float64(f().Refused) }))
	}
	if opts.Runtime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// BodyBudget is the request-body budget's state (relay.BodyBudget).
type BodyBudget struct {
	Budget, InUse int64
	Refused       uint64
}

// Record observes one finished request. It runs on the request's goroutine
// after the response ended: a cached lookup and atomic adds, no I/O.
//
// With tracing on (rec.TraceID set, and sampled) each observation of the latency
// families carries the trace id as an exemplar, shown in the OpenMetrics
// and protobuf expositions: a slow bucket links to a request that put a
// value there. BenchmarkMetricsRecordExemplar: a traced record cost 9 µs
// of CPU (pprof samples; 25–40 µs of wall time on a loaded 2-core machine)
// and 65 allocations (2640 B), against 1.1 µs and none untraced:
// client_golang builds each exemplar as a protobuf message. It is paid once
// per request after its response ended, never per relayed event.
func (m *Metrics) Record(rec *record.Record) {
	s := m.series(seriesKey{api: rec.API, model: m.models.Label(rec), channel: safeLabel(rec.Channel), group: safeLabel(rec.Group), stream: rec.Stream})
	o := observer{}
	if rec.TraceID != "" && rec.Trace.Sampled && validTraceID(rec.TraceID) {
		o.ex = prometheus.Labels{"trace_id": rec.TraceID}
	}
	f := &rec.Fields
	o.span(s.headers, f.UpstreamHeadersMs)
	o.offset(s.firstEvent, f.FirstSSEEventMs)
	o.offset(s.firstResponse, f.FirstResponseMs)
	o.offset(s.firstText, f.FirstTextDeltaMs)
	o.offset(s.duration, f.TotalHandlerMs)
	o.span(s.upstream, f.UpstreamDoneMs.Sub(f.UpstreamStartMs))
	o.span(s.relayLag, f.RelayLag())
	// The local phases (five tiny spans) carry no exemplar: each one
	// costs about 0.7 µs and 7 allocations, and the request's trace is
	// already on every other family.
	plain := observer{}
	plain.span(s.phase[0], f.AuthMs)
	plain.span(s.phase[1], f.DistributionMs)
	plain.span(s.phase[2], f.BodyReadMs)
	plain.span(s.phase[3], f.TotalHandlerMs.Sub(f.UpstreamDoneMs))
	plain.span(s.phase[4], f.RequestWaitMs)
	plain.span(s.phase[5], f.AdmissionWaitMs)
	plain.span(s.phase[6], f.UpstreamAuthMs)
	o.span(s.maxGap, f.MaxOutputGapMs)
	if v, ok := rec.VisibleOutputTPS.Get(); ok {
		o.observe(s.tps, v)
	}
	o.span(s.itl, rec.InterTokenLatencyMs)
	for i, n := range [...]*int{rec.Tokens.Input, rec.Tokens.Output, rec.Tokens.Reasoning, rec.Tokens.Visible} {
		if n != nil && *n >= 0 {
			s.tokens[i].Add(float64(*n))
		}
	}
	s.counter(&s.statuses, m.requests, rec.Status).Inc()
	for _, l := range rec.Diagnosis {
		s.counter(&s.labels, m.diagnosis, l).Inc()
	}
}

// series returns the observers of k, resolving them on first use.
func (m *Metrics) series(k seriesKey) *series {
	m.mu.RLock()
	s := m.cache[k]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.cache[k]; s != nil {
		return s
	}
	lv := []string{k.api, k.model, k.channel, k.group, strconv.FormatBool(k.stream)}
	s = &series{
		headers:       m.headers.WithLabelValues(lv...),
		firstEvent:    m.firstEvent.WithLabelValues(lv...),
		firstResponse: m.firstResponse.WithLabelValues(lv...),
		firstText:     m.firstText.WithLabelValues(lv...),
		duration:      m.duration.WithLabelValues(lv...),
		upstream:      m.upstream.WithLabelValues(lv...),
		relayLag:      m.relayLag.WithLabelValues(lv...),
		tps:           m.tps.WithLabelValues(lv...),
		itl:           m.itl.WithLabelValues(lv...),
		maxGap:        m.maxGap.WithLabelValues(lv...),
		statuses:      map[string]prometheus.Counter{},
		labels:        map[string]prometheus.Counter{},
	}
	for i, p := range phases {
		s.phase[i] = m.phase.WithLabelValues(append(lv, p)...)
	}
	for i, t := range tokenTypes {
		s.tokens[i] = m.tokens.WithLabelValues(append(lv, t)...)
	}
	s.key = lv
	m.cache[k] = s
	return s
}

// counter returns the counter of vec for this series and the extra label
// value v (a status or a diagnosis label: closed sets), cached in *c.
func (s *series) counter(c *map[string]prometheus.Counter, vec *prometheus.CounterVec, v string) prometheus.Counter {
	s.mu.RLock()
	ctr, ok := (*c)[v]
	s.mu.RUnlock()
	if ok {
		return ctr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctr, ok := (*c)[v]; ok {
		return ctr
	}
	ctr = vec.WithLabelValues(append(append([]string(nil), s.key...), safeLabel(v))...)
	(*c)[v] = ctr
	return ctr
}

// observer observes one record's values, with its exemplar when it has
// one (ex nil: none).
type observer struct{ ex prometheus.Labels }

func (o observer) observe(h prometheus.Observer, v float64) {
	if o.ex != nil {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, o.ex)
			return
		}
	}
	h.Observe(v)
}

func (o observer) span(h prometheus.Observer, s timeline.Span) {
	if d, ok := s.Get(); ok {
		o.observe(h, seconds(d))
	}
}

func (o observer) offset(h prometheus.Observer, off timeline.Offset) {
	if d, ok := off.Get(); ok {
		o.observe(h, seconds(d))
	}
}

// validTraceID reports whether id is 32 lowercase hex digits, not all
// zero (W3C trace-context): only such an id becomes an exemplar label.
func validTraceID(id string) bool {
	if len(id) != 32 || id == "00000000000000000000000000000000" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// seconds converts without rounding: a float64 holds any request's
// duration to the nanosecond.
func seconds(d time.Duration) float64 { return float64(d) / float64(time.Second) }

// Handler returns the GET /metrics handler. A non-empty key must come as
// "Authorization: Bearer KEY" (what Prometheus' authorization scrape
// setting sends); it is compared in constant time. An empty key leaves
// /metrics open.
func (m *Metrics) Handler(key string) http.Handler {
	if key == "" {
		return m.AuthHandler(nil)
	}
	return m.AuthHandler(KeyAuth(key))
}

// KeyAuth returns an AuthHandler check that accepts key alone, compared
// in constant time.
func KeyAuth(key string) func(token string) bool {
	want := sha256.Sum256([]byte(key))
	return func(token string) bool {
		sum := sha256.Sum256([]byte(token))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
}

// AuthHandler returns the GET /metrics handler whose bearer token allow
// decides; nil allow leaves it open. It serves the OpenMetrics text format
// to scrapers that ask for it (Prometheus does), which is what carries the
// exemplars, and the protobuf format that carries native histograms.
func (m *Metrics) AuthHandler(allow func(token string) bool) http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
	if allow == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok || !allow(got) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ttfx metrics"`)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			msg := "wrong metrics key\n"
			if !ok {
				msg = "missing metrics key: send Authorization: Bearer <key> (the key of metrics.key_env, or an admin key when none is set)\n"
			}
			w.Write([]byte(msg))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer TOKEN" value; the
// scheme is case-insensitive (RFC 9110 §11.1).
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// channelCollector reads the channels' in-flight counts at scrape time.
type channelCollector struct {
	f    func() []ChannelInflight
	desc *prometheus.Desc
}

func (c *channelCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *channelCollector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c.f() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(x.Inflight), safeLabel(x.Name))
	}
}

// storeCollector reads the record writer's counters at scrape time.
type storeCollector struct {
	f                                           func() StoreStats
	queue, capacity, dropped, rejected, written *prometheus.Desc
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.queue
	ch <- c.capacity
	ch <- c.dropped
	ch <- c.rejected
	ch <- c.written
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.f()
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(st.Queued))
	if st.Capacity > 0 {
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(st.Capacity))
	}
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(st.Rejected))
	ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(st.Written))
}
