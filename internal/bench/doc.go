// Package bench is the benchmark client of SPEC.md §9 (issue 7): it drives
// an endpoint of one of the four APIs — a ttfx gateway or a provider
// directly — under controlled, recorded conditions, and measures on the
// client the same milestones the gateway records, with the same event
// classifier (internal/sse and internal/protocol), so that client and
// gateway numbers are comparable.
//
// # Marks
//
// Every request's marks are offsets on the bench's monotonic clock from
// the moment its request was written (httptrace WroteRequest, after the
// body; when the transport does not report it before the headers arrive,
// the moment just before http.Client.Do):
//
//	time_to_headers_ms   the response headers parsed (Do returned)
//	first_sse_event_ms   the first dispatched SSE event with data (comments never count)
//	first_response_ms    the first effective content or action (non-whitespace text, reasoning or tool arguments)
//	first_text_delta_ms  the first visible text
//	end_to_end_ms        the last byte of the body — or the failure — for any reason
//
// A mark that did not happen is absent (JSON null) and counted as absent,
// never 0. A piece is marked the moment the sse.Reader yields it, which it
// does as soon as its last byte was read. Without streaming there is no
// first event, and first response and first text, when the body has such
// content, are the last byte (as the gateway records them). Visible
// output tokens come from the provider's usage or the tokenizer estimate
// (tokens.source, SPEC §3); visible_output_tps = visible tokens / (end −
// first text) and inter_token_latency_ms = (end − first text) / (tokens −
// 1), absent without text or with fewer than 2 visible tokens. The rows
// keep counts, marks and statuses; nothing of the prompt or of the
// response text.
//
// # Statuses and phases
//
// A row's status is what the client saw: ok, http_error, connect_error,
// timeout, response_error, truncated, read_error, bad_response (see the
// Status constants), or cancelled for a request in flight when the run was
// interrupted (it is in the rows and in no summary). A failure's phase is
// before_headers, at_headers (the HTTP error status itself),
// before_first_output or mid_stream (after the first effective output).
//
// # Summary
//
// The summary is keyed by metric (time_to_headers_ms, first_sse_event_ms,
// first_response_ms, first_text_delta_ms, end_to_end_ms,
// visible_output_tps, inter_token_latency_ms), each with count, absent,
// min, max, mean, p50, p90, p95, p99, over the successful requests;
// percentile_method is named once at the top (R-7, the store's method,
// see PercentileMethod). "failures" has the same metrics over the failed
// requests (how far they got). "with_failures" has the latency metrics
// over successful and failed requests with every failed request counted
// as unbounded: in JSON the statistic is then the string "+Inf" (JSON has
// no infinity; a string cannot be taken for a large finite number), and
// "unbounded" counts those requests. So a run that times out half its
// requests has a p50 of +Inf, not a fast one. Throughput (requests and
// aggregate output tokens per second over the measured window) and
// per-request TPS are reported apart; the load section sets requested
// against achieved rate and concurrency, and sched_lag_ms is the bench's
// own lateness starting requests.
//
// # Gateway join
//
// With a viewer or admin key of a ttfx gateway, every row is joined with
// the gateway's record (GET /api/requests/{X-Request-Id}) and each client
// mark is split into network_client_ms, gateway_ms, upstream_ms and, for a
// hedged request, held_for_hedging_ms (its events held until the race's
// winner reached first output), which add up to the client's value
// exactly; see Split for the definitions.
//
// # Comparing and merging
//
// Differences lists the conditions in which two results differ; every
// field except the tool's version, the sample size and warmup, and
// whether the gateway join ran blocks a comparison (Comparison), so runs
// with different models, routes, prompt distributions, output caps,
// streaming, reasoning effort, tools, load, sampling, timeouts, labels,
// retry policies or percentile methods are never ranked. Merge combines
// results of identical conditions from several machines exactly, from the
// rows.
package bench
