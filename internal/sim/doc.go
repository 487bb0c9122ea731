// Package sim is the simulated LLM provider of SPEC.md §6 (issue 3): an
// http.Handler that speaks every client-facing API a provider unit
// registers its simulator side for (Unit; internal/provider/<name>/<name>sim),
// streaming and not, in each provider's own wire format (compare
// testdata/fixtures), and the URL forms of the provider kinds that have
// their own (Kind), with the timing of a chosen profile. The gateway's
// tests, the zero-config `ttfx serve`, `ttfx demo` and the benchmark run against it, so its timing
// is the reference the gateway's accuracy is judged by.
//
// # Profiles and timing
//
// The request's model name selects a Profile (Options.Default serves the
// rest). Every time in a profile is measured from the moment the handler
// receives the request. Before the headers nothing is sent; the first
// metadata event follows at first_event_ms; reasoning, the tool call and
// the text start at reasoning_ms, tool_ms and text_ms, in the order of
// those times. Within a part, token j is due at start + j/tps (the part
// is sped up if it would run into the next one), tokens_per_event tokens
// to an event; the terminal events are due when the last part is done, at
// TextMs + VisibleTokens/TPS when the text comes last, so a client that
// measures visible_tokens / (last byte − first text) sees exactly tps.
// Each event's due time is computed from the receipt and waited for with
// one timer to that absolute time, so lateness never accumulates with the
// number of events; each event is flushed on its own, and a client that
// goes away stops the stream at once. Profile.Schedule gives the same
// times without waiting.
//
// The text is made of whole o200k_base tokens (internal/tokens), so the
// visible token count the usage reports equals tokens.Count of the visible
// text the client received. The usage reports what was sent: input tokens
// are counted over the prompt's text, output tokens are visible + reasoning
// (streamed or hidden) + tool-call argument tokens, with reasoning broken
// out where the protocol does. Bodies
// are the same bytes for the same profile, seed and request: ids derive
// from the profile's name and seed and timestamps are fixed. The prompt
// never changes the timing.
//
// # Faults
//
//	status:CODE          an error response in the protocol's format at headers_ms, before any body
//	reset_after:N        the connection is cut (unexpected EOF, not a clean end) when visible token
//	                     N+1 would be sent; exactly N visible tokens reach the client
//	stall_after:N:MS     everything from visible token N+1 on is sent MS later (heartbeats go on)
//	truncate             no finish or terminal marker, clean close
//	error_event_after:N  after N visible tokens an in-stream error event in the protocol's format
//	                     (each API's own: an error chunk, an error event),
//	                     then a clean close
//
// A non-streaming request answers at the time the stream would have ended:
// reset closes the connection without a response, truncate sends half the
// JSON body and closes cleanly, error_event answers 500 in the protocol's
// format, stall answers late.
//
// # Rate limits
//
// A profile's rate_limit (requests_per_minute, tokens_per_minute) is the
// simulated provider's own limit, a bucket refilled continuously: every
// answer carries the provider's rate-limit headers (Unit.RateHeaders, or a
// kind's Route.RateHeaders; DefaultRateHeaders when the unit gives none),
// and a request past the limit is answered 429 in the provider's format
// with Retry-After, before anything is served (ratelimit.go).
//
// # Units and kinds
//
// This package names no provider. A client-facing API's simulator side is
// a Unit (Register): how its bodies are read, its Encoder, its model list,
// its own error writer and rate-limit headers when they are not the
// default's; the simulator serves it on the API's wire endpoints. A
// provider kind with its own URLs, credentials or framing is a Kind
// (RegisterKind): its Routes, each with an Accept hook that authenticates
// and checks the request (Call: the body, the bearer tokens the token
// endpoints issued, the options) and may pick the API, the model and
// streaming from the path, a Wrap hook that rewrites what the API writes,
// and its own RateHeaders; its Endpoints serve paths of no API (an
// identity provider's token endpoint, answered with Server.IssueToken).
// Adding a provider touches its unit's package
// (internal/provider/<name>/<name>sim), its tests and one line in
// internal/provider/all.
//
// # Replay
//
// A profile with Replay (or ReplayProfile, `ttfx sim --replay`) serves a
// recorded .sse file byte for byte to any streaming request. See replay.go
// for the timing comments (": t=MS", ": headers=MS") that keep a
// recording's gaps; without them events go out replay_gap_ms apart.
package sim
