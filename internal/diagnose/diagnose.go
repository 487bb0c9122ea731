// Package diagnose checks a finished request stage by stage in the fixed
// order of SPEC.md §4. A terminal status other than ok is a verdict of its
// own and comes first; then every rule that fires adds its label, and the
// first label is the primary verdict. Every rule reads marks of one origin,
// and a rule whose inputs are absent does not fire.
package diagnose

import (
	"fmt"
	"sync/atomic"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// Labels of the seven rules, in their order.
const (
	UpstreamHeadersSlow = "upstream_headers_slow"
	FirstResponseSlow   = "first_response_slow"
	EventToResponseGap  = "event_to_response_gap"
	ResponseToTextGap   = "response_to_text_gap"
	GenerationSlow      = "generation_slow"
	GenerationStalled   = "generation_stalled"
	LocalOverhead       = "local_overhead"
)

// Admission is the verdict of a request whose wait for the gateway's own
// limits (admission_wait_ms) dominates its time to first output: it comes
// before the rules, as admission comes before the upstream. It is not one
// of the seven rules of §4 (a gateway without limits never gives it).
const Admission = "admission"

// UpstreamAuth is the verdict of a request that waited for its channel's
// upstream credentials (upstream_auth_ms: an OAuth2 token fetched on its
// path because none was cached) longer than the local-overhead threshold:
// a slow token endpoint, named as such rather than as a slow model. Like
// Admission it comes before the rules and is not one of §4's seven.
const UpstreamAuth = "upstream_auth"

// RuleLabels lists the rule labels in their fixed order.
var RuleLabels = []string{UpstreamHeadersSlow, FirstResponseSlow, EventToResponseGap, ResponseToTextGap, GenerationSlow, GenerationStalled, LocalOverhead}

// Thresholds are resolved thresholds (SPEC.md §4 defaults in Default).
type Thresholds struct {
	UpstreamHeadersSlowMs float64 // upstream_headers_ms above this
	FirstResponseSlowMs   float64 // t4 − t2 above this
	EventToResponseGapMs  float64 // t4 − t3 above this
	ResponseToTextGapMs   float64 // t5 − t4 above this
	GenerationSlowTPS     float64 // visible_output_tps below this…
	GenerationMinTokens   float64 // …with at least this many visible tokens
	GenerationStalledMs   float64 // max_output_gap_ms above this
	LocalOverheadMs       float64 // auth+distribution+body_read, or t7 − t6, above this
}

// Default is the SPEC.md §4 default thresholds.
var Default = Thresholds{
	UpstreamHeadersSlowMs: 2000,
	FirstResponseSlowMs:   3000,
	EventToResponseGapMs:  3000,
	ResponseToTextGapMs:   2000,
	GenerationSlowTPS:     15,
	GenerationMinTokens:   20,
	GenerationStalledMs:   5000,
	LocalOverheadMs:       100,
}

// apply overrides t with the fields o sets.
func (t Thresholds) apply(o config.Thresholds) Thresholds {
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&t.UpstreamHeadersSlowMs, o.UpstreamHeadersSlowMs)
	set(&t.FirstResponseSlowMs, o.FirstResponseSlowMs)
	set(&t.EventToResponseGapMs, o.EventToResponseGapMs)
	set(&t.ResponseToTextGapMs, o.ResponseToTextGapMs)
	set(&t.GenerationSlowTPS, o.GenerationSlowTPS)
	set(&t.GenerationMinTokens, o.GenerationMinTokens)
	set(&t.GenerationStalledMs, o.GenerationStalledMs)
	set(&t.LocalOverheadMs, o.LocalOverheadMs)
	return t
}

// Rules holds the configured thresholds. It is safe for concurrent use;
// Set replaces the thresholds (a configuration reload) with one atomic
// store, and each record is diagnosed on the thresholds of one load.
type Rules struct {
	cfg atomic.Pointer[config.Diagnosis]
}

// New returns rules with the defaults overridden by cfg.
func New(cfg config.Diagnosis) *Rules {
	r := &Rules{}
	r.Set(cfg)
	return r
}

// Set replaces the configured thresholds.
func (r *Rules) Set(cfg config.Diagnosis) { r.cfg.Store(&cfg) }

// For returns the thresholds for a model on a channel. The most specific
// setting wins: channel, then model, then global, then the default.
func (r *Rules) For(model, channel string) Thresholds {
	cfg := r.cfg.Load()
	t := Default.apply(cfg.Thresholds)
	if o, ok := cfg.Models[model]; ok {
		t = t.apply(o)
	}
	if o, ok := cfg.Channels[channel]; ok {
		t = t.apply(o)
	}
	return t
}

// Finding is one fired rule with the value that fired it.
type Finding struct {
	Label     string  `json:"label"`
	Value     float64 `json:"value"`     // the measured value (ms, or tokens/s)
	Threshold float64 `json:"threshold"` // what it was compared with
	Unit      string  `json:"unit"`      // "ms" or "tokens/s"
	Rule      string  `json:"rule"`      // the rule as text
}

// Diagnose sets rec.Diagnosis: the terminal status if not ok, then the
// labels of the rules that fire, in order.
func (r *Rules) Diagnose(rec *record.Record) {
	var labels []string
	if rec.Status != "" && rec.Status != record.StatusOK {
		labels = append(labels, rec.Status)
	}
	for _, f := range r.Findings(*rec) {
		labels = append(labels, f.Label)
	}
	rec.Diagnosis = labels
}

// Findings runs the seven rules in order on rec.
func (r *Rules) Findings(rec record.Record) []Finding {
	th := r.For(rec.Model, rec.Channel)
	f := rec.Fields
	var out []Finding
	if w, ok := f.AdmissionWaitMs.Ms(); ok && w > th.LocalOverheadMs {
		// It dominates when it is at least half of the time to the first
		// output (or to the end, for a request that had none).
		upTo, ok := f.FirstResponseMs.Ms()
		if !ok {
			upTo, ok = f.TotalHandlerMs.Ms()
		}
		if !ok || w >= upTo/2 {
			out = append(out, Finding{Label: Admission, Value: w, Threshold: th.LocalOverheadMs, Unit: "ms",
				Rule: fmt.Sprintf("admission_wait_ms > %g and at least half of the time to first output", th.LocalOverheadMs)})
		}
	}
	if w, ok := f.UpstreamAuthMs.Ms(); ok && w > th.LocalOverheadMs {
		out = append(out, Finding{Label: UpstreamAuth, Value: w, Threshold: th.LocalOverheadMs, Unit: "ms",
			Rule: fmt.Sprintf("upstream_auth_ms > %g", th.LocalOverheadMs)})
	}
	over := func(label string, v timeline.Span, limit float64, rule string) {
		if ms, ok := v.Ms(); ok && ms > limit {
			out = append(out, Finding{Label: label, Value: ms, Threshold: limit, Unit: "ms", Rule: fmt.Sprintf(rule, limit)})
		}
	}
	// A non-streaming answer's headers come with the whole answer, so
	// upstream_headers_ms is its generation time there, not a network or
	// admission delay: the rule reads streams only.
	if rec.Stream {
		over(UpstreamHeadersSlow, f.UpstreamHeadersMs, th.UpstreamHeadersSlowMs, "upstream_headers_ms > %g")
	}
	over(FirstResponseSlow, f.FirstResponseMs.Sub(f.UpstreamHeadersAtMs), th.FirstResponseSlowMs, "t4 − t2 > %g ms")
	over(EventToResponseGap, f.FirstResponseMs.Sub(f.FirstSSEEventMs), th.EventToResponseGapMs, "t4 − t3 > %g ms")
	over(ResponseToTextGap, f.FirstTextDeltaMs.Sub(f.FirstResponseMs), th.ResponseToTextGapMs, "t5 − t4 > %g ms")
	if tps, ok := rec.VisibleOutputTPS.Get(); ok && rec.Tokens.Visible != nil &&
		float64(*rec.Tokens.Visible) >= th.GenerationMinTokens && tps < th.GenerationSlowTPS {
		out = append(out, Finding{Label: GenerationSlow, Value: tps, Threshold: th.GenerationSlowTPS, Unit: "tokens/s",
			Rule: fmt.Sprintf("visible_output_tps < %g with ≥ %g visible tokens", th.GenerationSlowTPS, th.GenerationMinTokens)})
	}
	// The gap is a span of its own (between two content events), so it
	// fires whether or not the stream later finished well: a stream that
	// stopped typing for seconds and then ended is still a stall.
	over(GenerationStalled, f.MaxOutputGapMs, th.GenerationStalledMs, "max_output_gap_ms > %g")
	local, tail := f.LocalMs(), f.TotalHandlerMs.Sub(f.UpstreamDoneMs)
	lms, lok := local.Ms()
	tms, tok := tail.Ms()
	switch {
	case lok && lms > th.LocalOverheadMs:
		out = append(out, Finding{Label: LocalOverhead, Value: lms, Threshold: th.LocalOverheadMs, Unit: "ms",
			Rule: fmt.Sprintf("request_wait_ms + auth_ms + distribution_ms + body_read_ms > %g", th.LocalOverheadMs)})
	case tok && tms > th.LocalOverheadMs:
		out = append(out, Finding{Label: LocalOverhead, Value: tms, Threshold: th.LocalOverheadMs, Unit: "ms",
			Rule: fmt.Sprintf("t7 − t6 > %g ms", th.LocalOverheadMs)})
	}
	return out
}

// Advice is what to look at for a verdict, and what would not help.
type Advice struct {
	Symptom string `json:"symptom"`
	Check   string `json:"check"`
	NotHelp string `json:"not_help,omitempty"`
}

// Advise returns the advice for a label: a rule label or a terminal status.
func Advise(label string) Advice {
	if a, ok := advice[label]; ok {
		return a
	}
	return Advice{Symptom: "terminal status " + label, Check: "the attempts and the error of the record"}
}

// advice follows the seed note's table and its three traces.
var advice = map[string]Advice{
	UpstreamAuth: {
		Symptom: "waited for the channel's upstream credentials: no valid token was cached and the token endpoint was slow",
		Check:   "the channel's token endpoint (Google's or Entra ID's) and why no token was cached: a channel unused for longer than a token lives, or refreshes failing (the gateway's log)",
	},
	Admission: {
		Symptom: "queued by the gateway's own limits: most of the wait was for admission, before any channel was tried",
		Check:   "the limits of the request's key, group and model (limits.rules) and the ttfx_admission_total metric by limit",
		NotHelp: "another channel or region: the upstream was not reached yet",
	},
	UpstreamHeadersSlow: {
		Symptom: "slow before headers: most of the wait is before the upstream answered at all",
		Check:   "network, admission, queue, route, region — before looking at the UI or the model",
		NotHelp: "streaming tweaks or a faster client: nothing was streamed yet",
	},
	FirstResponseSlow: {
		Symptom: "headers fast, output late",
		Check:   "model queue, prefill (prompt length), reasoning, inflight requests on the channel",
		NotHelp: "a longer header timeout: the headers were not the slow part",
	},
	EventToResponseGap: {
		Symptom: "event fast, output late: the stream was alive but carried only metadata or heartbeats",
		Check:   "metadata, heartbeats, reasoning start-up",
		NotHelp: "an idle timeout: heartbeats keep the stream alive while nothing useful arrives",
	},
	ResponseToTextGap: {
		Symptom: "action fast, text late: a tool call or reasoning came well before any visible text",
		Check:   "the tool or the reasoning step, and how the answer is composed",
		NotHelp: "raising the header timeout (headers were fast) — and an agent can act on the first effective response already",
	},
	GenerationSlow: {
		Symptom: "text fast, generation slow: the first text came quickly but the rest trickled",
		Check:   "output length, context length, the channel, inflight load and the provider (decode contention)",
		NotHelp: "a first-output timeout: the first output was fast, so it never fires on this pattern",
	},
	GenerationStalled: {
		Symptom: "output started, then stopped: the stream went silent mid-answer before it went on",
		Check:   "the provider (a stall, preemption or contention on its side); max_output_gap_at_ms says when it ended",
		NotHelp: "an idle timeout: pings keep it from firing, and when it does fire it only cuts the answer short",
	},
	LocalOverhead: {
		Symptom: "upstream normal, local slow: time went in the gateway itself",
		Check:   "auth, policy, routing, the client's upload speed (body_read_ms), writing to the client",
		NotHelp: "changing the channel or the model: the upstream was not the slow part",
	},
	record.StatusTruncated: {
		Symptom: "the response ended unfinished: a stream closed without a terminal marker or finish reason, or a non-streaming body's JSON was cut short",
		Check:   "upstream crashes or proxies cutting long responses; closed is not succeeded",
	},
	record.StatusIdleTimeout: {
		Symptom: "the upstream stopped sending events mid-stream",
		Check:   "the provider's health, stalls under load, the idle timeout setting",
	},
	record.StatusHeaderTimeout: {
		Symptom: "the upstream did not answer with headers in time",
		Check:   "network, admission, queue, region; fallback channels",
	},
	record.StatusFirstOutputTimeout: {
		Symptom: "headers came but no effective output in time",
		Check:   "model queue, prefill, reasoning length; the first-output timeout setting",
	},
	record.StatusTotalTimeout: {
		Symptom: "the request ran past the total timeout",
		Check:   "output length and generation speed; the total timeout setting",
	},
	record.StatusUpstreamStreamError: {
		Symptom: "the upstream failed after it was sent the request: an error event or a broken connection mid-stream, a connection closed before any answer, or a body that is not the API's response",
		Check:   "the provider's status and the attempt's error",
	},
	record.StatusUpstreamHTTPError: {
		Symptom: "the upstream answered with an HTTP error",
		Check:   "the status code of each attempt; the request itself for 4xx, the provider for 5xx",
	},
	record.StatusUpstreamConnectError: {
		Symptom: "the gateway could not reach the upstream",
		Check:   "DNS, network path, the channel's base_url, the provider's availability",
	},
	record.StatusRateLimited: {
		Symptom: "the upstream refused with 429",
		Check:   "quotas per key and channel; spread load over channels of equal priority",
	},
	record.StatusClientCancelled: {
		Symptom: "the client went away before the response ended",
		Check:   "client timeouts (often a sign that an earlier stage was slow), user cancels",
	},
	record.StatusAuthFailed: {Symptom: "the key was missing or wrong", Check: "the client's key and its role"},
	record.StatusBadRequest: {Symptom: "the request was malformed or too large", Check: "the client's request body"},
	record.StatusNoChannel:  {Symptom: "no channel serves this model for this key", Check: "the channels' models and groups in the configuration"},
}

// Definitions says, for each rule, the fields it reads.
func Definitions() map[string]string {
	return map[string]string{
		UpstreamHeadersSlow: "upstream_headers_ms (t2 − t1 of the relayed attempt) above the threshold",
		FirstResponseSlow:   "first effective response after the headers, t4 − t2 (both from t0), above the threshold",
		EventToResponseGap:  "first effective response after the first SSE event, t4 − t3, above the threshold",
		ResponseToTextGap:   "first visible text after the first effective response, t5 − t4, above the threshold",
		GenerationSlow:      "visible_output_tps below the threshold, with at least the minimum visible tokens",
		GenerationStalled:   "max_output_gap_ms (the longest wait between two content events from t4 on; heartbeats do not end it) above the threshold",
		LocalOverhead:       "auth_ms + distribution_ms + body_read_ms, or t7 − t6, above the threshold",
		Admission:           "admission_wait_ms (queued for the gateway's own limits) above the local-overhead threshold and at least half of the time to first output",
		UpstreamAuth:        "upstream_auth_ms (waiting for an upstream credential fetched on the request's path) above the local-overhead threshold",
	}
}
