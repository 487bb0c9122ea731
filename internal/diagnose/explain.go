package diagnose

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
)

// ContextWindow is how far before and after a request its peers are
// looked for: long enough to hold a channel's weather, short enough that
// yesterday's incident does not hide today's.
const ContextWindow = 15 * time.Minute

// contextFields are the fields the context shows, in timeline order.
var contextFields = []string{
	"upstream_headers_ms", "first_sse_event_ms", "first_response_ms", "first_text_delta_ms",
	"upstream_done_ms", "total_handler_ms", "visible_output_tps", "max_output_gap_ms", "relay_lag_ms",
}

// Report explains one request: its verdicts in order with advice, and the
// context that tells a slow request from a slow channel (SPEC.md §4).
type Report struct {
	RequestID string    `json:"request_id"`
	Status    string    `json:"status"`
	Verdicts  []Verdict `json:"verdicts"` // primary first; empty when nothing fired
	Context   Context   `json:"context"`
	Rules     []Rule    `json:"rules"` // the seven rules in order, with this request's thresholds
}

// Verdict is one label of the request with its advice and, for a rule,
// the measured value that fired it.
type Verdict struct {
	Label   string   `json:"label"`
	Primary bool     `json:"primary"`
	Kind    string   `json:"kind"` // "status" for a terminal status, "rule" for one of the seven rules
	Finding *Finding `json:"finding,omitempty"`
	Advice
}

// Rule is one of the seven rules with its resolved threshold.
type Rule struct {
	Order      int    `json:"order"`
	Label      string `json:"label"`
	Definition string `json:"definition"`
	Fired      bool   `json:"fired"`
	// NotApplicable, when set, says why the rule was not checked for this
	// request (rule 1 on a non-streaming request, SPEC.md §4): shown as
	// such, never as passed.
	NotApplicable string `json:"not_applicable,omitempty"`
}

// NotStreaming is the reason rule 1 does not apply to a non-streaming
// request: its headers come with the whole answer.
const NotStreaming = "non-streaming"

// notApplicable says why label's rule was not checked on rec, or "".
func notApplicable(label string, rec record.Record) string {
	if label == UpstreamHeadersSlow && !rec.Stream {
		return NotStreaming
	}
	return ""
}

// Context is the same channel and model around the request's time.
type Context struct {
	From     time.Time       `json:"from"`
	To       time.Time       `json:"to"`
	Channel  string          `json:"channel"`
	Model    string          `json:"model"`
	Route    string          `json:"route"`
	Region   string          `json:"region"`
	Provider string          `json:"provider"`
	Inflight record.Inflight `json:"inflight"`
	// Stream is the stream flag the peers share with the request: a
	// non-streaming answer's headers and first output come with its whole
	// generation, so mixing the two would skew every percentile (SPEC.md §4).
	Stream bool `json:"stream"`
	// Peers is how many other requests of the same channel, model and
	// stream flag fall
	// in the window; FlaggedAlike how many of them carry this request's
	// primary verdict.
	Peers        int `json:"peers"`
	FlaggedAlike int `json:"flagged_alike"`
	// Scope is "channel" when at least half of three or more peers share
	// the primary verdict (the channel was slow then), "request" when the
	// request stands alone, "unknown" with too few peers to tell, and
	// empty when there is no verdict.
	Scope string `json:"scope"`
	// Fields holds, per field, this request's value and the p50/p95 of
	// the channel and model in the window (this request included).
	Fields map[string]FieldContext `json:"fields"`
	// Definitions names what each field measures.
	Definitions      map[string]string `json:"definitions"`
	PercentileMethod string            `json:"percentile_method"`
}

// FieldContext is one field of the request next to its peers'.
type FieldContext struct {
	Value *float64 `json:"value"` // this request's value; null when absent
	P50   *float64 `json:"p50"`
	P95   *float64 `json:"p95"`
	Count int      `json:"count"` // requests in the window where the field is present
}

// Explain builds the report of rec, reading its context from st: the
// records of the same channel, model and stream flag within ContextWindow of it that the
// reader may see. within narrows the peers to the reader's scope (its Group
// for a viewer, its KeyName for a client key; empty for an admin), so that
// the context never summarises records the reader could not read itself.
func (r *Rules) Explain(ctx context.Context, st store.Store, rec record.Record, within store.Filter) (Report, error) {
	rep := Report{RequestID: rec.RequestID, Status: rec.Status}
	findings := r.Findings(rec)
	for i, label := range rec.Diagnosis {
		v := Verdict{Label: label, Primary: i == 0, Kind: "rule", Advice: Advise(label)}
		if !slices.Contains(RuleLabels, label) && label != Admission && label != UpstreamAuth {
			v.Kind = "status"
		}
		for j := range findings {
			if findings[j].Label == label {
				v.Finding = &findings[j]
			}
		}
		rep.Verdicts = append(rep.Verdicts, v)
	}
	for i, label := range RuleLabels {
		rep.Rules = append(rep.Rules, Rule{Order: i + 1, Label: label, Definition: Definitions()[label],
			Fired: slices.Contains(rec.Diagnosis, label), NotApplicable: notApplicable(label, rec)})
	}

	c := Context{
		From: rec.Timestamp.Add(-ContextWindow), To: rec.Timestamp.Add(ContextWindow),
		Channel: rec.Channel, Model: rec.Model, Route: rec.Route, Region: rec.Region, Provider: rec.Provider,
		Inflight: rec.Inflight, Stream: rec.Stream, Fields: map[string]FieldContext{}, Definitions: map[string]string{},
	}
	stream := rec.Stream
	stats, err := st.Stats(ctx, store.StatsQuery{
		Filter: store.Filter{From: c.From, To: c.To, Channel: rec.Channel, Model: rec.Model, Stream: &stream,
			Group: within.Group, KeyName: within.KeyName},
		Fields: contextFields,
	})
	if err != nil {
		return rep, fmt.Errorf("diagnosis context: %w", err)
	}
	c.PercentileMethod = stats.PercentileMethod
	values := recordValues(rec)
	var g store.Group
	if len(stats.Groups) > 0 {
		g = stats.Groups[0]
	}
	for _, f := range contextFields {
		fs := g.Fields[f]
		c.Fields[f] = FieldContext{Value: values[f], P50: fs.P50, P95: fs.P95, Count: fs.Count}
		c.Definitions[f] = stats.Definitions[f]
	}
	c.Peers = max(g.Count-1, 0)
	if len(rec.Diagnosis) > 0 {
		primary := rec.Diagnosis[0]
		c.FlaggedAlike = max(g.Labels[primary].Count-1, 0)
		switch {
		case c.Peers < 3:
			c.Scope = "unknown"
		case 2*c.FlaggedAlike >= c.Peers:
			c.Scope = "channel"
		default:
			c.Scope = "request"
		}
	}
	rep.Context = c
	return rep, nil
}

// recordValues returns the context fields of one record.
func recordValues(rec record.Record) map[string]*float64 {
	out := map[string]*float64{}
	put := func(name string, v float64, ok bool) {
		if ok {
			out[name] = &v
		}
	}
	f := rec.Fields
	v, ok := f.UpstreamHeadersMs.Ms()
	put("upstream_headers_ms", v, ok)
	v, ok = f.FirstSSEEventMs.Ms()
	put("first_sse_event_ms", v, ok)
	v, ok = f.FirstResponseMs.Ms()
	put("first_response_ms", v, ok)
	v, ok = f.FirstTextDeltaMs.Ms()
	put("first_text_delta_ms", v, ok)
	v, ok = f.UpstreamDoneMs.Ms()
	put("upstream_done_ms", v, ok)
	v, ok = f.TotalHandlerMs.Ms()
	put("total_handler_ms", v, ok)
	tps, ok := rec.VisibleOutputTPS.Get()
	put("visible_output_tps", tps, ok)
	v, ok = f.MaxOutputGapMs.Ms()
	put("max_output_gap_ms", v, ok)
	v, ok = f.RelayLag().Ms()
	put("relay_lag_ms", v, ok)
	return out
}
