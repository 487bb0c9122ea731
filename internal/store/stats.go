package store

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/timeline"
)

// SketchMethod names, for every answer of Stats, how its percentiles are
// computed. Both engines answer from the same sketches with the same code,
// so SQLite and PostgreSQL give the same numbers for the same records.
var SketchMethod = fmt.Sprintf("Log-bucketed quantile sketch (the DDSketch kind, internal/sketch) with relative accuracy %g: "+
	"each value counts in the bucket (γ^(i−1), γ^i], γ = (1+α)/(1−α), whose representative is within %g%% of every value in it. "+
	"A percentile is R-7 (numpy's default: h = (n−1)·p, x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋])) over the order statistics as "+
	"the buckets estimate them, so it is within %g%% of the exact R-7 percentile of the same values. "+
	"Sketches merge exactly (the merge of two is the sketch of the union), so minute, hour and day rollups and their "+
	"merges all carry that bound. min, max and mean are exact. Absent values are excluded and counted in absent.",
	sketch.RelativeAccuracy, sketch.RelativeAccuracy*100, sketch.RelativeAccuracy*100)

// Answer methods: where Stats read its answer from.
const (
	// MethodRollups: the rollups written at ingest (minute rows of each
	// gateway, and hour and day rows compacted from them). The window is
	// widened to whole minutes.
	MethodRollups = "rollups"
	// MethodRows: the records themselves, because a filter needs what the
	// rollups do not hold (a diagnosis label, a key name) or the buckets
	// are finer than a minute. Bounded by MaxStatsRows.
	MethodRows = "rows"
)

// MethodDefinition defines Stats.Method, in every answer's definitions.
const MethodDefinition = "Where the answer was read from: \"rollups\" — the per-minute summaries written with the records " +
	"(and hour and day summaries made from them), the window widened to whole minutes; or \"rows\" — the records themselves, " +
	"when a filter needs what the rollups do not hold (label, key_name) or the buckets are finer than a minute, " +
	"with at most MaxStatsRows records read."

// StatField is a per-request value that Stats summarises.
type StatField struct {
	Name       string // the contract name (SPEC.md §1)
	Definition string // one sentence: what it measures, from which origin
	Columns    []string
	// derive computes the value from cols' values, each valid; nil means
	// the value is cols[0] itself.
	Derive func(v []float64) float64
	// of is the field of a record, as its columns store it: absent where
	// the column would be NULL.
	Of func(r *record.Record) (float64, bool)
}

// RollupColumn is the field's sketch column in the rollups table.
func (f *StatField) RollupColumn() string { return "s_" + f.Name }

func span(get func(*timeline.Fields) timeline.Span) func(*record.Record) (float64, bool) {
	return func(r *record.Record) (float64, bool) { return get(&r.Fields).Ms() }
}

func offset(get func(*timeline.Fields) timeline.Offset) func(*record.Record) (float64, bool) {
	return func(r *record.Record) (float64, bool) { return get(&r.Fields).Ms() }
}

// StatFields lists the fields Stats summarises, in the order of the
// request timeline.
var StatFields = []StatField{
	{Name: "auth_ms", Columns: []string{"auth_ms"}, Of: span(func(f *timeline.Fields) timeline.Span { return f.AuthMs }),
		Definition: "Duration of authenticating the client key (local phase, its own origin)."},
	{Name: "distribution_ms", Columns: []string{"distribution_ms"}, Of: span(func(f *timeline.Fields) timeline.Span { return f.DistributionMs }),
		Definition: "Duration of channel selection and routing (local phase, its own origin)."},
	{Name: "body_read_ms", Columns: []string{"body_read_ms"}, Of: span(func(f *timeline.Fields) timeline.Span { return f.BodyReadMs }),
		Definition: "Duration of reading the client's request body (local phase, its own origin; finds slow uploads)."},
	{Name: "request_wait_ms", Columns: []string{"request_wait_ms"}, Of: span(func(f *timeline.Fields) timeline.Span { return f.RequestWaitMs }),
		Definition: "How long the request waited in the gateway before t0: from its first byte read on the connection to the handler starting (local phase, its own origin)."},
	{Name: "upstream_headers_ms", Columns: []string{"upstream_headers_ms"}, Of: span(func(f *timeline.Fields) timeline.Span { return f.UpstreamHeadersMs }),
		Definition: "t2 − t1 of the relayed attempt: upstream request start to upstream response headers (origin t1, not t0; network, admission, queue)."},
	{Name: "first_sse_event_ms", Columns: []string{"first_sse_event_ms"}, Of: offset(func(f *timeline.Fields) timeline.Offset { return f.FirstSSEEventMs }),
		Definition: "t3 − t0: gateway receipt to the first SSE event carrying data (comments never count; it may be metadata only)."},
	{Name: "first_response_ms", Columns: []string{"first_response_ms"}, Of: offset(func(f *timeline.Fields) timeline.Offset { return f.FirstResponseMs }),
		Definition: "t4 − t0: gateway receipt to the first effective content or action — text, reasoning or tool-call arguments with a non-whitespace character."},
	{Name: "first_text_delta_ms", Columns: []string{"first_text_delta_ms"}, Of: offset(func(f *timeline.Fields) timeline.Offset { return f.FirstTextDeltaMs }),
		Definition: "t5 − t0: gateway receipt to the first visible text delta from upstream (time to first visible text)."},
	{Name: "first_text_sent_ms", Columns: []string{"first_text_sent_ms"}, Of: offset(func(f *timeline.Fields) timeline.Offset { return f.FirstTextSentMs }),
		Definition: "Gateway receipt to the first visible text flushed to the client."},
	{Name: "relay_lag_ms", Columns: []string{"first_text_sent_ms", "first_text_delta_ms"},
		Derive: func(v []float64) float64 { return v[0] - v[1] },
		Of: func(r *record.Record) (float64, bool) {
			sent, ok1 := r.FirstTextSentMs.Ms()
			delta, ok2 := r.FirstTextDeltaMs.Ms()
			return sent - delta, ok1 && ok2
		},
		Definition: "first_text_sent_ms − first_text_delta_ms of the same request (both from t0): how long the gateway held the first visible text."},
	{Name: "upstream_done_ms", Columns: []string{"upstream_done_ms"}, Of: offset(func(f *timeline.Fields) timeline.Offset { return f.UpstreamDoneMs }),
		Definition: "t6 − t0: gateway receipt to the upstream body finishing or closing, for any reason (closed is not succeeded)."},
	{Name: "total_handler_ms", Columns: []string{"total_handler_ms"}, Of: offset(func(f *timeline.Fields) timeline.Offset { return f.TotalHandlerMs }),
		Definition: "t7 − t0: gateway receipt to the last byte written and flushed to the client; the gateway's end-to-end latency."},
	{Name: "visible_output_tps", Columns: []string{"visible_output_tps"},
		Of: func(r *record.Record) (float64, bool) {
			v, ok := r.VisibleOutputTPS.Get()
			// As RateArg stores it: a rate that is not finite is NULL.
			return v, ok && !math.IsNaN(v) && !math.IsInf(v, 0)
		},
		Definition: "Visible output tokens / visible generation window (t6 − t5) in seconds, per request; absent without visible text or with fewer than 2 visible tokens. Not aggregate throughput."},
	{Name: "inter_token_latency_ms", Columns: []string{"inter_token_latency_ms"},
		Of:         func(r *record.Record) (float64, bool) { return r.InterTokenLatencyMs.Ms() },
		Definition: "Visible generation window (t6 − t5) / (visible output tokens − 1)."},
	{Name: "max_output_gap_ms", Columns: []string{"max_output_gap_ms"}, Of: span(func(f *timeline.Fields) timeline.Span { return f.MaxOutputGapMs }),
		Definition: "Longest wait between two consecutive events carrying content (text, reasoning or tool arguments), from t4 on; heartbeats and metadata do not end a gap (its own origin; absent with fewer than two such events)."},
}

// CountDefinitions define the counts every group of Stats carries.
var CountDefinitions = map[string]string{
	"count":      "Records in the group: requests received in the window that match the filter.",
	"errors":     "Records whose terminal status is not ok (SPEC.md §5).",
	"error_rate": "errors / count.",
	"statuses":   "Records per terminal status.",
	"labels":     "Per diagnosis label: records carrying it at any position (count) and as the primary verdict (primary).",
	"absent":     "Records in the group for which the field did not happen (its mark is absent); excluded from the field's percentiles.",
}

// Dimensions are the record attributes Stats can group by, with their
// columns. Every one is a column of the rollups too.
var Dimensions = map[string]string{
	"model":    "model",
	"channel":  "channel",
	"group":    "group_name",
	"route":    "route",
	"api":      "api",
	"region":   "region",
	"provider": "provider",
	"stream":   "stream",
}

// Bounds of a Stats answer. Read from rollups, an answer costs in
// proportion to its window and to the variety of the traffic in it, not to
// the records; read from rows (MethodRows), it costs a pass over every
// matching record, so what one such call may read is bounded, and so is how
// many run at once. Neither path holds memory per record: values go into
// sketches as they are read.
const (
	MaxStatsGroups = 10000 // groups (× buckets) in one answer
	MinBucket      = time.Second
	// MaxStatsRows is the most records one call answered from rows reads;
	// past it the call fails with ErrBadQuery naming the filter that
	// made it read rows.
	MaxStatsRows = 2_000_000
	// DefaultMaxAnswerValues bounds the size of one answer: its groups
	// (× buckets) × fields, each a summary (count, min, max, mean, four
	// percentiles) computed from a sketch held until the answer is
	// made. One value cost up to about 3.3 KB of heap between sketch,
	// summary and encoding (api's TestStatsCallMemory: 15,000 values,
	// 50 MiB; issue 50: 6 days of 1-minute buckets by model took a
	// gateway from 34 to 435 MB of RSS for a 26 MB answer); 16,000 keep
	// one call within about 64 MiB. A query whose answer would pass it is
	// refused (ErrBadQuery) naming the bound and what fits.
	DefaultMaxAnswerValues = 16_000
	// MaxConcurrentStats is how many Stats calls one store runs at once;
	// further calls wait for a turn (or for their context to end).
	MaxConcurrentStats = 2
)

// StatsQuery selects and groups the records Stats summarises.
type StatsQuery struct {
	Filter  Filter        // which records; Limit and Cursor are ignored
	GroupBy []string      // Dimensions to group by, in order; empty: one group
	Bucket  time.Duration // split each group into time buckets aligned to the Unix epoch (UTC); 0: no buckets
	Fields  []string      // StatFields names to summarise; empty: all
	// MaxValues bounds groups × buckets × fields; 0 means
	// DefaultMaxAnswerValues.
	MaxValues int
}

// MaxAnswerValues is q's bound on groups × buckets × fields.
func (q *StatsQuery) MaxAnswerValues() int {
	if q.MaxValues > 0 {
		return q.MaxValues
	}
	return DefaultMaxAnswerValues
}

// CheckAnswerSize refuses, before anything is read, a query whose buckets
// alone × its fields pass the bound: window is the span it covers. The
// error names the bound and the finest bucket that fits.
func CheckAnswerSize(q *StatsQuery, window time.Duration) error {
	if q.Bucket <= 0 || window <= 0 {
		return nil
	}
	fields := len(q.Fields)
	if fields == 0 {
		fields = len(StatFields)
	}
	buckets := int((window + q.Bucket - 1) / q.Bucket)
	if buckets*fields <= q.MaxAnswerValues() {
		return nil
	}
	return fmt.Errorf("%w: the answer would hold %d buckets × %d fields = %d values (before any grouping), past the bound of %d "+
		"(groups × buckets × fields; max_answer_values); a bucket of %s fits, or name fewer fields (fields=…), or narrow the window",
		ErrBadQuery, buckets, fields, buckets*fields, q.MaxAnswerValues(), FitBucket(window, fields, q.MaxAnswerValues(), 1))
}

// FitBucket is the finest round bucket (1m, 5m, 15m, 1h, 6h, 1d, 7d)
// whose buckets over window, × fields × groups, stay within max.
func FitBucket(window time.Duration, fields, max, groups int) string {
	for _, b := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
		if int((window+b-1)/b)*fields*groups <= max {
			return formatBucket(b)
		}
	}
	return "7d (with fewer fields or a narrower filter)"
}

func formatBucket(b time.Duration) string {
	switch {
	case b%(24*time.Hour) == 0:
		return strconv.Itoa(int(b/(24*time.Hour))) + "d"
	case b%time.Hour == 0:
		return strconv.Itoa(int(b/time.Hour)) + "h"
	}
	return strconv.Itoa(int(b/time.Minute)) + "m"
}

// Stats is the answer of Store.Stats.
type Stats struct {
	PercentileMethod string            `json:"percentile_method"`
	RelativeError    float64           `json:"relative_error"` // the percentiles' bound, relative to the exact R-7 percentile
	Method           string            `json:"method"`         // MethodRollups or MethodRows
	Definitions      map[string]string `json:"definitions"`    // every field and count in the answer, one sentence each
	GroupBy          []string          `json:"group_by"`
	BucketMs         float64           `json:"bucket_ms,omitempty"` // bucket width; absent without buckets
	Groups           []Group           `json:"groups"`              // ordered by key, then bucket; the overflow group, if any, last
	// Truncated reports that the records made more than MaxStatsGroups
	// groups: the first MaxStatsGroups keys met have groups of their own,
	// and every further one is folded into a last group whose key values
	// are all OtherKey (see TruncatedDefinition). Only an answer without
	// buckets is truncated; a bucketed one past MaxStatsGroups groups ×
	// buckets is refused (rollup.Acc).
	Truncated bool `json:"truncated"`
	// From and To are the window the answer covers: the query's, widened
	// to whole minutes when read from rollups. Zero where the query left
	// the window open.
	From time.Time `json:"-"`
	To   time.Time `json:"-"`
}

// OtherKey is every key value of the overflow group of a truncated answer.
const OtherKey = "(other)"

// TruncatedDefinition defines Stats.Truncated, in every answer's
// definitions.
var TruncatedDefinition = fmt.Sprintf("True when the matching records form more than %d groups: the first %[1]d met keep groups of their own "+
	"and the records of every further group are counted together in one last group whose key values are all %q; "+
	"the counts of all groups still add up to every matching record. A bucketed answer past %[1]d groups × buckets is refused (400) instead.", MaxStatsGroups, OtherKey)

// Group is the summary of one group (and time bucket).
type Group struct {
	Key         map[string]string       `json:"key"`                   // dimension → value; empty without GroupBy
	BucketStart *time.Time              `json:"bucket_start,omitzero"` // start of the bucket; absent without buckets
	Count       int                     `json:"count"`
	Errors      int                     `json:"errors"`
	ErrorRate   float64                 `json:"error_rate"`
	Statuses    map[string]int          `json:"statuses"`
	Labels      map[string]LabelCount   `json:"labels"`
	Fields      map[string]FieldSummary `json:"fields"`
}

// LabelCount counts one diagnosis label in a group.
type LabelCount struct {
	Count   int `json:"count"`   // records carrying the label
	Primary int `json:"primary"` // records whose primary verdict it is
}

// FieldSummary summarises one field over a group. The statistics are
// absent (null) when no record of the group had the field.
type FieldSummary struct {
	Count  int      `json:"count"`  // records where the field is present
	Absent int      `json:"absent"` // records where it is absent
	Min    *float64 `json:"min"`
	Max    *float64 `json:"max"`
	Mean   *float64 `json:"mean"`
	P50    *float64 `json:"p50"`
	P90    *float64 `json:"p90"`
	P95    *float64 `json:"p95"`
	P99    *float64 `json:"p99"`
}

// ResolveStats checks q and returns the indexes in StatFields of the
// selected fields and the group columns.
func ResolveStats(q *StatsQuery) ([]int, []string, error) {
	var fields []int
	if len(q.Fields) == 0 {
		for i := range StatFields {
			fields = append(fields, i)
		}
	} else {
		for _, name := range q.Fields {
			i := slices.IndexFunc(StatFields, func(f StatField) bool { return f.Name == name })
			if i < 0 {
				return nil, nil, fmt.Errorf("%w: unknown field %q", ErrBadQuery, name)
			}
			if !slices.Contains(fields, i) {
				fields = append(fields, i)
			}
		}
	}
	var cols []string
	for i, d := range q.GroupBy {
		c, ok := Dimensions[d]
		if !ok {
			return nil, nil, fmt.Errorf("%w: cannot group by %q", ErrBadQuery, d)
		}
		if slices.Contains(q.GroupBy[:i], d) {
			return nil, nil, fmt.Errorf("%w: %q named twice in group_by", ErrBadQuery, d)
		}
		cols = append(cols, c)
	}
	if q.Bucket != 0 && q.Bucket < MinBucket {
		return nil, nil, fmt.Errorf("%w: bucket %v is shorter than %v", ErrBadQuery, q.Bucket, MinBucket)
	}
	f := q.Filter
	if q.Bucket > 0 && !f.From.IsZero() && !f.To.IsZero() && f.To.Sub(f.From)/q.Bucket > MaxStatsGroups {
		return nil, nil, fmt.Errorf("%w: %v buckets of %v exceed %d", ErrBadQuery, f.To.Sub(f.From)/q.Bucket, q.Bucket, MaxStatsGroups)
	}
	return fields, cols, nil
}

// RowsReason says why q must be answered from the records rather than the
// rollups, or "" when the rollups hold everything it asks.
func RowsReason(q *StatsQuery) string {
	switch {
	case q.Filter.Label != "":
		return "the label filter"
	case q.Filter.KeyName != "":
		return "the key_name filter"
	case q.Bucket > 0 && q.Bucket%time.Minute != 0:
		return "a bucket that is not a whole number of minutes"
	}
	return ""
}

// EmptyStats returns the answer of Stats for q when no record matches: its
// definitions and method, no groups. It is for callers that know the
// answer is empty without asking the store (a viewer asking for another
// group).
func EmptyStats(q StatsQuery) (Stats, error) {
	fields, _, err := ResolveStats(&q)
	if err != nil {
		return Stats{}, err
	}
	st := NewStats(&q, fields)
	st.Method, st.From, st.To = MethodRollups, q.Filter.From, q.Filter.To
	if RowsReason(&q) != "" {
		st.Method = MethodRows
	}
	return st, nil
}

func NewStats(q *StatsQuery, fields []int) Stats {
	st := Stats{
		PercentileMethod: SketchMethod,
		RelativeError:    sketch.RelativeAccuracy,
		Definitions:      map[string]string{},
		GroupBy:          append([]string{}, q.GroupBy...),
		Groups:           []Group{},
	}
	for k, v := range CountDefinitions {
		st.Definitions[k] = v
	}
	st.Definitions["truncated"] = TruncatedDefinition
	st.Definitions["method"] = MethodDefinition
	for _, i := range fields {
		st.Definitions[StatFields[i].Name] = StatFields[i].Definition
	}
	if q.Bucket > 0 {
		st.BucketMs = float64(q.Bucket.Nanoseconds()) / 1e6
	}
	return st
}
