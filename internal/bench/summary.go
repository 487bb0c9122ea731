package bench

import (
	"math"
	"time"

	"github.com/ttfx/ttfx/internal/timeline"
)

// Metric names: the summary keys of SPEC.md §9.
const (
	MetricHeaders       = "time_to_headers_ms"
	MetricFirstEvent    = "first_sse_event_ms"
	MetricFirstResponse = "first_response_ms"
	MetricFirstText     = "first_text_delta_ms"
	MetricEndToEnd      = "end_to_end_ms"
	MetricTPS           = "visible_output_tps"
	MetricITL           = "inter_token_latency_ms"
)

// MetricDef defines one metric.
type MetricDef struct {
	Name       string
	Definition string
	// Latency is set for the time-to metrics, which have a
	// failure-inclusive summary (a failed request never reached them
	// successfully: it counts as +Inf).
	Latency bool
	value   func(r *Row) (float64, bool)
}

func offsetValue(f func(r *Row) timeline.Offset) func(r *Row) (float64, bool) {
	return func(r *Row) (float64, bool) { return f(r).Ms() }
}

// Metrics are the summarised metrics, in the order of the timeline.
var Metrics = []MetricDef{
	{Name: MetricHeaders, Latency: true, value: offsetValue(func(r *Row) timeline.Offset { return r.TimeToHeadersMs }),
		Definition: "Request written (httptrace WroteRequest) to the response headers parsed (http.Client.Do returned): network and admission. " +
			"A ttfx gateway sends its headers with the first piece of the stream it relays, so through it this is close to first_sse_event_ms."},
	{Name: MetricFirstEvent, Latency: true, value: offsetValue(func(r *Row) timeline.Offset { return r.FirstSSEEventMs }),
		Definition: "Request written to the first dispatched SSE event carrying data (SSE comments never count; it may be metadata only). Absent without streaming."},
	{Name: MetricFirstResponse, Latency: true, value: offsetValue(func(r *Row) timeline.Offset { return r.FirstResponseMs }),
		Definition: "Request written to the first effective content or action: text, reasoning or tool-call arguments with a non-whitespace character " +
			"(a tool call's id and name are metadata). Without streaming: the last byte of a body that has such content."},
	{Name: MetricFirstText, Latency: true, value: offsetValue(func(r *Row) timeline.Offset { return r.FirstTextDeltaMs }),
		Definition: "Request written to the first visible text delta (time to first visible text). Absent, never 0, for a response without text (a tool call only)."},
	{Name: MetricEndToEnd, Latency: true, value: offsetValue(func(r *Row) timeline.Offset { return r.EndToEndMs }),
		Definition: "Request written to the last byte of the response body (or the failure), for any reason."},
	{Name: MetricTPS, value: func(r *Row) (float64, bool) { return r.VisibleOutputTPS.Get() },
		Definition: "Per request (per user): visible output tokens / (end − first visible text) in seconds. Absent without visible text or with fewer than 2 visible tokens. " +
			"Not aggregate throughput (see throughput)."},
	{Name: MetricITL, value: func(r *Row) (float64, bool) { return r.InterTokenLatencyMs.Ms() },
		Definition: "Per request: (end − first visible text) / (visible output tokens − 1)."},
}

// Summary is the summary of a result. The metric summaries at its top
// level (SPEC.md §9) are over the successful requests; Failures holds the
// same over failed ones, and WithFailures the latency metrics over all
// requests with every failure counted as +Inf.
type Summary struct {
	PercentileMethod string            `json:"percentile_method"`
	Definitions      map[string]string `json:"definitions"`

	Requests   RequestCounts `json:"requests"`
	Window     Window        `json:"window"`
	Throughput Throughput    `json:"throughput"`
	Load       LoadAchieved  `json:"load"`

	TimeToHeadersMs     Stat `json:"time_to_headers_ms"`
	FirstSSEEventMs     Stat `json:"first_sse_event_ms"`
	FirstResponseMs     Stat `json:"first_response_ms"`
	FirstTextDeltaMs    Stat `json:"first_text_delta_ms"`
	EndToEndMs          Stat `json:"end_to_end_ms"`
	VisibleOutputTPS    Stat `json:"visible_output_tps"`
	InterTokenLatencyMs Stat `json:"inter_token_latency_ms"`

	Failures     map[string]Stat `json:"failures"`      // every metric, over failed requests: how far they got
	WithFailures map[string]Stat `json:"with_failures"` // latency metrics over ok and failed requests, failures as +Inf

	Tokens TokenStats `json:"tokens"`
	// GatewaySplit summarises, per metric and part, the Split of the
	// successful requests that were joined with the gateway's records.
	GatewaySplit map[string]map[string]Stat `json:"gateway_split,omitempty"`
}

// Metric returns the summary of a metric over the successful requests.
func (s *Summary) Metric(name string) *Stat {
	switch name {
	case MetricHeaders:
		return &s.TimeToHeadersMs
	case MetricFirstEvent:
		return &s.FirstSSEEventMs
	case MetricFirstResponse:
		return &s.FirstResponseMs
	case MetricFirstText:
		return &s.FirstTextDeltaMs
	case MetricEndToEnd:
		return &s.EndToEndMs
	case MetricTPS:
		return &s.VisibleOutputTPS
	case MetricITL:
		return &s.InterTokenLatencyMs
	}
	return nil
}

// RequestCounts counts the measured requests.
type RequestCounts struct {
	Measured  int            `json:"measured"`  // rows
	OK        int            `json:"ok"`        // status ok
	Failed    int            `json:"failed"`    // neither ok nor cancelled
	Cancelled int            `json:"cancelled"` // in flight when the run was interrupted; in no summary
	ErrorRate float64        `json:"error_rate"`
	Statuses  map[string]int `json:"statuses"`
	Phases    map[string]int `json:"phases"` // failures per phase
	Attempts  int            `json:"attempts"`
}

// Window is the measured window: from the first measured request written
// to the last byte (or failure) of the last one, on the bench's monotonic
// clock.
type Window struct {
	DurationMs timeline.Span `json:"duration_ms"`
}

// Throughput is aggregate (system) throughput over the measured window,
// apart from the per-request speed of visible_output_tps.
type Throughput struct {
	RequestsPerS   float64 `json:"requests_per_s"`    // rows ended / window
	OKRequestsPerS float64 `json:"ok_requests_per_s"` // successful rows / window
	// OutputTokensPerS is the provider's usage output tokens (reasoning
	// included) of every row that reported them, ok or not, / window.
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// VisibleTokensPerS is visible tokens of every row / window.
	VisibleTokensPerS float64 `json:"visible_tokens_per_s"`
	// RowsWithoutOutput counts rows without a usage output count (they
	// add nothing to OutputTokensPerS).
	RowsWithoutOutput int `json:"rows_without_output"`
}

// LoadAchieved compares the load asked for with the load achieved.
type LoadAchieved struct {
	Mode string `json:"mode"`
	// RequestedRate and AchievedRate are requests started per second
	// (rate mode: R, and (n − 1) / (last start − first start)).
	RequestedRate *float64 `json:"requested_rate_per_s"`
	AchievedRate  *float64 `json:"achieved_rate_per_s"`
	// RequestedConcurrency is the workers asked for; AchievedConcurrency
	// is the mean number in flight over the window (Σ request durations /
	// window, Little's law), in either mode.
	RequestedConcurrency *int     `json:"requested_concurrency"`
	AchievedConcurrency  *float64 `json:"achieved_mean_concurrency"`
	// SchedLagMs is the bench's own scheduling error over every row: how
	// late each request was started against its due time.
	SchedLagMs Stat `json:"sched_lag_ms"`
}

// TokenStats summarises token counts over the successful requests.
type TokenStats struct {
	Prompt  Stat `json:"prompt"`  // the synthetic prompts as measured with the tokenizer: the achieved input distribution
	Input   Stat `json:"input"`   // the provider's usage input tokens
	Visible Stat `json:"visible"` // visible output tokens
}

// Definitions of everything else in a summary.
var summaryDefinitions = map[string]string{
	"failures":        "The same metrics over the failed requests (status neither ok nor cancelled): how far they got before failing.",
	"with_failures":   "Latency metrics over ok and failed requests with every failed request counted as +Inf (written \"+Inf\"), so a run that fails or times out half its requests cannot look fast.",
	"requests":        "Counts of the measured requests per status, and failures per phase (before_headers, at_headers, before_first_output, mid_stream).",
	"window":          "First measured request written to the last byte of the last one, on the bench's monotonic clock.",
	"throughput":      "Aggregate over the measured window, across concurrent requests; not per-user speed.",
	"load":            "Requested and achieved load; sched_lag_ms is the bench's own lateness starting requests.",
	"tokens":          "Token counts over the successful requests: prompt is the synthetic prompt measured with o200k_base.",
	"gateway_split":   "Per metric, the client's value split into network_client_ms, gateway_ms, upstream_ms and held_for_hedging_ms (a hedged request's events held until the race's winner reached first output) by the gateway's record (see the bench doc); successful joined requests only.",
	"absent":          "Requests for which the metric did not happen; excluded from its statistics, never counted as 0.",
	"unbounded":       "Requests counted as +Inf (failure-inclusive summaries only).",
	"cancelled":       "Requests in flight when the run was interrupted: in the rows, in no summary.",
	"sched_lag_ms":    "Just before Do − due time: rate mode, the arrival time; concurrency mode, when the worker became free.",
	"percentile_note": "Percentiles p50/p90/p95/p99 by the percentile_method; min, max and mean of the same values.",
}

// Summarize computes the summary of rows. window is the measured window;
// load the load asked for.
func Summarize(rows []Row, window time.Duration, load Load) Summary {
	s := Summary{
		PercentileMethod: PercentileMethod,
		Definitions:      map[string]string{},
		Requests:         RequestCounts{Measured: len(rows), Statuses: map[string]int{}, Phases: map[string]int{}},
		Window:           Window{DurationMs: timeline.SpanOf(window)},
		Failures:         map[string]Stat{},
		WithFailures:     map[string]Stat{},
	}
	for _, m := range Metrics {
		s.Definitions[m.Name] = m.Definition
	}
	for k, v := range summaryDefinitions {
		s.Definitions[k] = v
	}
	var outTokens, visTokens float64
	var busy time.Duration
	for i := range rows {
		r := &rows[i]
		s.Requests.Statuses[r.Status]++
		s.Requests.Attempts += r.Attempts
		switch {
		case r.ok():
			s.Requests.OK++
		case r.failed():
			s.Requests.Failed++
			s.Requests.Phases[r.Phase]++
		default:
			s.Requests.Cancelled++
		}
		if r.Tokens.Output != nil {
			outTokens += float64(*r.Tokens.Output)
		} else {
			s.Throughput.RowsWithoutOutput++
		}
		if r.Tokens.Visible != nil {
			visTokens += float64(*r.Tokens.Visible)
		}
		if d, ok := r.EndToEndMs.Get(); ok {
			busy += d
		}
	}
	if n := s.Requests.OK + s.Requests.Failed; n > 0 {
		s.Requests.ErrorRate = float64(s.Requests.Failed) / float64(n)
	}

	for _, m := range Metrics {
		var ok, failed, all []float64
		okAbsent, failedAbsent, allAbsent := 0, 0, 0
		for i := range rows {
			r := &rows[i]
			v, has := m.value(r)
			switch {
			case r.ok():
				if has {
					ok = append(ok, v)
					all = append(all, v)
				} else {
					okAbsent++
					allAbsent++
				}
			case r.failed():
				if has {
					failed = append(failed, v)
				} else {
					failedAbsent++
				}
				all = append(all, math.Inf(1))
			}
		}
		*s.Metric(m.Name) = Describe(ok, okAbsent)
		s.Failures[m.Name] = Describe(failed, failedAbsent)
		if m.Latency {
			s.WithFailures[m.Name] = Describe(all, allAbsent)
		}
	}

	if w := window.Seconds(); w > 0 {
		ended := s.Requests.OK + s.Requests.Failed
		s.Throughput.RequestsPerS = float64(ended) / w
		s.Throughput.OKRequestsPerS = float64(s.Requests.OK) / w
		s.Throughput.OutputTokensPerS = outTokens / w
		s.Throughput.VisibleTokensPerS = visTokens / w
		c := busy.Seconds() / w
		s.Load.AchievedConcurrency = &c
	}
	s.Load.Mode = load.Mode
	switch load.Mode {
	case ModeRate:
		r := load.Rate
		s.Load.RequestedRate = &r
		if a, ok := achievedRate(rows); ok {
			s.Load.AchievedRate = &a
		}
	case ModeConcurrency:
		c := load.Concurrency
		s.Load.RequestedConcurrency = &c
		if a, ok := achievedRate(rows); ok {
			s.Load.AchievedRate = &a
		}
	}
	var lags []float64
	lagAbsent := 0
	for i := range rows {
		if v, ok := rows[i].SchedLagMs.Ms(); ok {
			lags = append(lags, v)
		} else {
			lagAbsent++
		}
	}
	s.Load.SchedLagMs = Describe(lags, lagAbsent)

	tok := func(f func(r *Row) (float64, bool)) Stat {
		var v []float64
		absent := 0
		for i := range rows {
			if !rows[i].ok() {
				continue
			}
			if x, ok := f(&rows[i]); ok {
				v = append(v, x)
			} else {
				absent++
			}
		}
		return Describe(v, absent)
	}
	s.Tokens.Prompt = tok(func(r *Row) (float64, bool) { return float64(r.Tokens.Prompt), true })
	s.Tokens.Input = tok(func(r *Row) (float64, bool) { return intValue(r.Tokens.Input) })
	s.Tokens.Visible = tok(func(r *Row) (float64, bool) { return intValue(r.Tokens.Visible) })

	s.GatewaySplit = summarizeSplit(rows)
	return s
}

func intValue(p *int) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return float64(*p), true
}

// achievedRate is requests started per second: (n − 1) / (last start −
// first start).
func achievedRate(rows []Row) (float64, bool) {
	first, last := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	n := 0
	for i := range rows {
		if d, ok := rows[i].StartMs.Get(); ok {
			first, last = min(first, d), max(last, d)
			n++
		}
	}
	if n < 2 || last <= first {
		return 0, false
	}
	return float64(n-1) / (last - first).Seconds(), true
}

// splitParts names the parts of a Split in the summary.
var splitParts = []string{"network_client_ms", "gateway_ms", "upstream_ms", "held_for_hedging_ms"}

func summarizeSplit(rows []Row) map[string]map[string]Stat {
	joined := 0
	for i := range rows {
		if rows[i].Gateway != nil {
			joined++
		}
	}
	if joined == 0 {
		return nil
	}
	out := map[string]map[string]Stat{}
	for _, metric := range []string{MetricFirstEvent, MetricFirstResponse, MetricFirstText, MetricEndToEnd} {
		parts := map[string]Stat{}
		for _, part := range splitParts {
			var v []float64
			absent := 0
			for i := range rows {
				r := &rows[i]
				if !r.ok() || r.Gateway == nil {
					continue
				}
				sp, ok := r.Gateway.Split[metric]
				if !ok {
					absent++
					continue
				}
				var x timeline.Span
				switch part {
				case "network_client_ms":
					x = sp.NetworkClientMs
				case "gateway_ms":
					x = sp.GatewayMs
				case "held_for_hedging_ms":
					x = sp.HeldForHedgingMs
				default:
					x = sp.UpstreamMs
				}
				if ms, ok := x.Ms(); ok {
					v = append(v, ms)
				} else {
					absent++
				}
			}
			parts[part] = Describe(v, absent)
		}
		out[metric] = parts
	}
	return out
}
