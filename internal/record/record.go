// Package record defines the metadata kept for every request the gateway
// serves (SPEC.md §7, §10): identity, routing, status, tokens, event counts,
// attempts, the timeline fields and the diagnosis. It holds no prompt, no
// response, no key and no plaintext user identity, and has no field that
// could: every string in it is chosen by the operator's configuration or the
// gateway, or is a model name, a status or an error summary the gateway
// wrote itself.
package record

import (
	"time"

	"github.com/ttfx/ttfx/internal/timeline"
)

// Terminal statuses of a request (SPEC.md §5).
const (
	StatusOK                   = "ok"
	StatusClientCancelled      = "client_cancelled"
	StatusUpstreamHTTPError    = "upstream_http_error"
	StatusUpstreamConnectError = "upstream_connect_error"
	StatusHeaderTimeout        = "header_timeout"
	StatusFirstOutputTimeout   = "first_output_timeout"
	StatusIdleTimeout          = "idle_timeout"
	StatusTotalTimeout         = "total_timeout"
	StatusUpstreamStreamError  = "upstream_stream_error"
	StatusTruncated            = "truncated"
	StatusAuthFailed           = "auth_failed"
	StatusBadRequest           = "bad_request"
	StatusNoChannel            = "no_channel"
	StatusRateLimited          = "rate_limited"
)

// Statuses lists every terminal status, ok first.
var Statuses = []string{
	StatusOK, StatusClientCancelled, StatusUpstreamHTTPError, StatusUpstreamConnectError,
	StatusHeaderTimeout, StatusFirstOutputTimeout, StatusIdleTimeout, StatusTotalTimeout,
	StatusUpstreamStreamError, StatusTruncated, StatusAuthFailed, StatusBadRequest,
	StatusNoChannel, StatusRateLimited,
}

// Token sources.
const (
	TokensUsage    = "usage"    // the provider's usage report
	TokensEstimate = "estimate" // counted with the tokenizer over the visible text
)

// Record is the metadata of one request. The timeline fields of SPEC.md §1
// are at the top level (embedded), under their contract names.
type Record struct {
	RequestID string    `json:"request_id"`
	Timestamp time.Time `json:"timestamp"` // wall-clock time of t0, UTC
	API       string    `json:"api"`       // a registered API unit's name (internal/wire), e.g. openai.chat
	Route     string    `json:"route"`     // the endpoint pattern the client called, e.g. "POST /v1/chat/completions"
	Model     string    `json:"model"`     // the model the client asked for; empty if it named none
	// UpstreamModel is the name the relayed (or last) attempt's channel
	// sent the provider for Model: the same name unless the channel maps
	// it (aliases, SPEC §5); empty when no channel was chosen.
	UpstreamModel string `json:"upstream_model"`
	Group         string `json:"group"`               // the client key's group; empty for none
	KeyName       string `json:"key_name"`            // the configured name of the client key, never the key
	UserHash      string `json:"user_hash,omitempty"` // keyed hash of a client-sent user id; empty if none was sent

	Channel  string `json:"channel"`  // the channel of the relayed (or last) attempt; empty if none was chosen
	Region   string `json:"region"`   // that channel's coarse region from the configuration
	Provider string `json:"provider"` // that channel's upstream host (or "sim" for the built-in simulator)

	Status       string `json:"status"`        // terminal status, one of Statuses
	HTTPStatus   int    `json:"http_status"`   // status code sent to the client; 0 if none was sent
	Error        string `json:"error"`         // short error summary written by the gateway; empty when ok
	Stream       bool   `json:"stream"`        // the client asked for a streaming response
	Terminal     string `json:"terminal"`      // how the upstream stream ended: done, truncated, error; empty when not streamed
	FinishReason string `json:"finish_reason"` // the provider's finish/stop reason, if it gave one

	timeline.Fields
	VisibleOutputTPS    timeline.Rate `json:"visible_output_tps"`     // visible tokens / visible window (§3)
	InterTokenLatencyMs timeline.Span `json:"inter_token_latency_ms"` // visible window / (visible tokens − 1)
	// ProviderLatencyMs is the provider's own figure for the request's
	// latency when its response carries one (Bedrock's metrics.latencyMs),
	// kept beside the gateway's marks, never mixed with them; absent when
	// the provider gave none.
	ProviderLatencyMs timeline.Span `json:"provider_latency_ms,omitzero"`

	Tokens    Tokens    `json:"tokens"`
	Events    Events    `json:"events"`
	Inflight  Inflight  `json:"inflight"`
	Attempts  []Attempt `json:"attempts"`
	Diagnosis []string  `json:"diagnosis"` // labels of §4 and terminal status verdicts, primary first; empty for none

	// SkippedEjected names the channels the route's order passed over
	// because they were ejected as outliers; empty when none were.
	SkippedEjected []string `json:"skipped_ejected"`
	// SkippedRateLimited are the channels the route's order passed over
	// because their provider's rate-limit budget, as their last answers
	// told it, was below what the request needs (SPEC.md §5); absent when
	// none were.
	SkippedRateLimited []RateLimitSkip `json:"skipped_rate_limited,omitempty"`
	// TraceID is the W3C trace id of the request's span (32 hex digits)
	// when tracing is on; empty otherwise. An id, never content.
	TraceID string `json:"trace_id,omitempty"`
	// Trace is the rest of the request's W3C span context, for the OTLP
	// export that builds its span after the fact; it is not stored.
	Trace Trace `json:"-"`
}

// Trace is a request's span context beside its TraceID (W3C trace-context).
type Trace struct {
	SpanID       string // the gateway's span for the request, 16 hex digits
	ParentSpanID string // the caller's span (incoming traceparent); empty when the request started the trace
	Sampled      bool   // the sampled flag the gateway propagated
	State        string // the caller's tracestate, passed on as received (bounded); empty for none
}

// Attempt roles: why an attempt was started.
const (
	RolePrimary = "primary" // the first attempt of the request
	RoleRetry   = "retry"   // started after the one before it failed
	RoleHedge   = "hedge"   // started beside a primary whose first output was late
)

// AttemptHedgeLost is the status of an attempt the gateway cancelled
// because the other attempt of a hedge race reached first output first:
// neither the client's doing nor a failure (SPEC.md §12). It is an
// attempt's status only, never a request's.
const AttemptHedgeLost = "hedge_lost"

// Attempt outcomes.
const (
	OutcomeWon       = "won"       // its response was relayed to the client
	OutcomeCancelled = "cancelled" // stopped by the gateway: another attempt won the race
	OutcomeFailed    = "failed"    // it failed (its status says how)
)

// Tokens are the token counts of a request; a nil count is unknown.
type Tokens struct {
	Input     *int   `json:"input"`
	Output    *int   `json:"output"`
	Reasoning *int   `json:"reasoning"`
	Visible   *int   `json:"visible"` // output − reasoning, or the tokenizer's count of the visible text
	Source    string `json:"source"`  // TokensUsage or TokensEstimate; empty when nothing was counted
}

// Events counts dispatched stream events by kind (SPEC.md §2). Each event is
// counted once, under the most significant kind it carries; SSE comment
// lines count as heartbeats.
type Events struct {
	Heartbeat int `json:"heartbeat"`
	Metadata  int `json:"metadata"`
	Reasoning int `json:"reasoning"`
	Tool      int `json:"tool"`
	Text      int `json:"text"`
	Done      int `json:"done"`
	Error     int `json:"error"`
	Unknown   int `json:"unknown"`
}

// Inflight is how many requests were in flight when this one arrived,
// including itself.
type Inflight struct {
	Gateway int `json:"gateway"`
	Channel int `json:"channel"` // on the channel of the first attempt, this one included; 0 if none was chosen
}

// Attempt is one upstream attempt with its own timing and outcome.
type Attempt struct {
	Channel             string          `json:"channel"`
	UpstreamStartMs     timeline.Offset `json:"upstream_start_ms"`      // t1 − t0 of the request
	UpstreamHeadersMs   timeline.Span   `json:"upstream_headers_ms"`    // t2 − t1 of this attempt
	UpstreamHeadersAtMs timeline.Offset `json:"upstream_headers_at_ms"` // t2 − t0
	Status              string          `json:"status"`                 // ok for the relayed attempt that succeeded, else why it failed
	HTTPStatus          int             `json:"http_status"`            // upstream status code; 0 if no response
	Error               string          `json:"error"`                  // short summary; empty when ok
	Role                string          `json:"role"`                   // RolePrimary, RoleRetry or RoleHedge
	Outcome             string          `json:"outcome"`                // OutcomeWon, OutcomeCancelled or OutcomeFailed
	FirstResponseAtMs   timeline.Offset `json:"first_response_at_ms"`   // this attempt's t4 − t0 of the request; absent if it had none
	TokensInput         *int            `json:"tokens_input"`           // tokens this attempt consumed, when known (a cancelled hedge's)
	TokensOutput        *int            `json:"tokens_output"`
	// RemainingRequests and RemainingTokens are what the provider's
	// rate-limit headers on this attempt's answer said may still be sent
	// on the channel's account; nil when it did not say (or no answer came).
	RemainingRequests *int64 `json:"remaining_requests,omitempty"`
	RemainingTokens   *int64 `json:"remaining_tokens,omitempty"`
	// SpanID is the span id this attempt's upstream request carried in
	// its traceparent when tracing is on; empty otherwise.
	SpanID string `json:"span_id,omitempty"`
}

// RateLimitSkip is a channel passed over for its provider budget, with the
// figures the decision was made on.
type RateLimitSkip struct {
	Channel string `json:"channel"`
	// Limit is the budget that was short: "requests" or "tokens".
	Limit string `json:"limit"`
	// Remaining is what was left of it; Need what the request takes
	// (1 request, or its prompt's estimated tokens).
	Remaining int64 `json:"remaining"`
	Need      int64 `json:"need"`
	// ResetMs is how long after the decision the budget was to be whole.
	ResetMs float64 `json:"reset_ms"`
}

// Int returns a pointer to n, for Tokens.
func Int(n int) *int { return &n }
