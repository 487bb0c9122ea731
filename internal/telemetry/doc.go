// Package telemetry exports every finished request's record in the formats
// operators already watch (SPEC.md §8, issue 8): Prometheus metrics served
// at GET /metrics, the OpenTelemetry GenAI metrics and a span per request
// over OTLP/HTTP, and one structured log line per request.
//
// Each exporter is a recorder: the relay hands it the record.Record of a
// request after the response ended, on the request's goroutine. Nothing
// here runs per relayed event, and nothing blocks that goroutine:
//
//   - Metrics observes the record into Prometheus histograms and counters
//     (atomic adds behind a cached lookup of the request's label values).
//   - Queue hands the record to the slower exporters — RequestLog, whose
//     handler may write to a pipe a log shipper drains late, and OTel,
//     which builds spans — on one goroutine of its own, through a bounded
//     queue whose overflow is counted, never waited for.
//
// # Definitions
//
// The Prometheus histograms are the SPEC.md §1 fields, in seconds; a
// field that is absent for a request (a mark that did not happen) is not
// observed, never observed as 0:
//
//	ttfx_time_to_headers_seconds         upstream_headers_ms = t2 − t1 of the relayed attempt
//	ttfx_time_to_first_event_seconds     first_sse_event_ms  = t3 − t0
//	ttfx_time_to_first_response_seconds  first_response_ms   = t4 − t0 (text, reasoning or tool arguments)
//	ttfx_time_to_first_text_seconds      first_text_delta_ms = t5 − t0 (visible text only)
//	ttfx_request_duration_seconds        total_handler_ms    = t7 − t0
//	ttfx_upstream_duration_seconds       t6 − t1 of the relayed attempt: the provider's share,
//	                                     without local phases and failed attempts
//	ttfx_relay_lag_seconds               first_text_sent_ms − first_text_delta_ms
//	ttfx_local_phase_seconds{phase}      auth_ms, distribution_ms, body_read_ms,
//	                                     after_upstream = t7 − t6, and request_wait_ms
//	                                     (before t0: first byte read → handler)
//	ttfx_visible_output_tokens_per_second visible_output_tps (§3)
//	ttfx_inter_token_latency_seconds     inter_token_latency (§3)
//
// The OpenTelemetry GenAI metrics map onto them as follows (see OTel):
//
//	gen_ai.client.operation.duration     total_handler_ms (t7 − t0): the whole operation as
//	                                     the gateway's caller waited for it, fallbacks included
//	gen_ai.server.time_to_first_token    first_response_ms (t4 − t0), successful requests only
//	gen_ai.server.time_per_output_token  inter_token_latency over the visible tokens,
//	                                     successful requests only
//	gen_ai.client.token.usage            tokens.input and tokens.output, by gen_ai.token.type
//
// # Cardinality
//
// Labels are bounded by construction: api and status are closed sets,
// channel and group come from the configuration, and a model name keeps its
// own label only when the configuration names it exactly or an upstream
// accepted it (answered 2xx), up to a limit; any other name is "other".
package telemetry
