package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// ColumnKind is the SQL type of a column, for binding a batch column-wise.
type ColumnKind uint8

const (
	TextCol  ColumnKind = iota // TEXT
	IntCol                     // INTEGER or BIGINT, maybe NULL
	FloatCol                   // DOUBLE PRECISION, maybe NULL
	BoolCol                    // BOOLEAN
	BytesCol                   // BYTEA (a BLOB on SQLite), maybe NULL
)

type Column struct {
	Name string
	Kind ColumnKind
}

func Cols(kind ColumnKind, names ...string) []Column {
	out := make([]Column, len(names))
	for i, n := range names {
		out[i] = Column{n, kind}
	}
	return out
}

// The columns of requests, in the order RequestArgs and scanRecord use.
var RequestTable = slices.Concat(
	Cols(TextCol, "request_id"), Cols(IntCol, "timestamp_ns"),
	Cols(TextCol, "api", "route", "model", "group_name", "key_name", "user_hash",
		"channel", "region", "provider", "status"),
	Cols(IntCol, "http_status"), Cols(TextCol, "error"), Cols(BoolCol, "stream"),
	Cols(TextCol, "terminal", "finish_reason"),
	Cols(FloatCol, "auth_ms", "distribution_ms", "body_read_ms", "upstream_headers_ms", "upstream_start_ms",
		"upstream_headers_at_ms", "first_sse_event_ms", "first_response_ms", "first_text_delta_ms",
		"first_text_sent_ms", "upstream_done_ms", "total_handler_ms", "visible_output_tps", "inter_token_latency_ms"),
	Cols(IntCol, "tokens_input", "tokens_output", "tokens_reasoning", "tokens_visible"),
	Cols(TextCol, "tokens_source"),
	Cols(IntCol, "events_heartbeat", "events_metadata", "events_reasoning", "events_tool", "events_text",
		"events_done", "events_error", "events_unknown", "inflight_gateway", "inflight_channel"),
	Cols(FloatCol, "max_output_gap_ms", "max_output_gap_at_ms", "request_wait_ms", "headers_sent_ms"),
	Cols(TextCol, "trace_id", "skipped_ejected"),
	Cols(TextCol, "upstream_model"),
	Cols(FloatCol, "admission_wait_ms"),
	Cols(TextCol, "skipped_rate_limited"),
	Cols(FloatCol, "upstream_auth_ms"),
	Cols(FloatCol, "provider_latency_ms"),
)

func ColumnNames(cs []Column) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

var (
	RequestColumns = ColumnNames(RequestTable)
)

func SpanArg(s timeline.Span) any {
	if ms, ok := s.Ms(); ok {
		return ms
	}
	return nil
}

func OffsetArg(o timeline.Offset) any {
	if ms, ok := o.Ms(); ok {
		return ms
	}
	return nil
}

// RateArg stores a rate, or NULL when it is absent or not finite: SQLite
// would store NaN as NULL and PostgreSQL as NaN, and the engines must agree.
func RateArg(r timeline.Rate) any {
	if v, ok := r.Get(); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
		return v
	}
	return nil
}

func IntArg(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

func RequestArgs(args []any, r *record.Record) []any {
	f := &r.Fields
	return append(args,
		r.RequestID, r.Timestamp.UnixNano(),
		Clean(r.API, MaxNameLen), Clean(r.Route, MaxNameLen), Clean(r.Model, MaxNameLen),
		Clean(r.Group, MaxNameLen), Clean(r.KeyName, MaxNameLen), Clean(r.UserHash, MaxNameLen),
		Clean(r.Channel, MaxNameLen), Clean(r.Region, MaxNameLen), Clean(r.Provider, MaxNameLen),
		Clean(r.Status, MaxNameLen), int64(r.HTTPStatus), Clean(r.Error, MaxErrorLen), r.Stream,
		Clean(r.Terminal, MaxNameLen), Clean(r.FinishReason, MaxNameLen),
		SpanArg(f.AuthMs), SpanArg(f.DistributionMs), SpanArg(f.BodyReadMs), SpanArg(f.UpstreamHeadersMs),
		OffsetArg(f.UpstreamStartMs), OffsetArg(f.UpstreamHeadersAtMs), OffsetArg(f.FirstSSEEventMs),
		OffsetArg(f.FirstResponseMs), OffsetArg(f.FirstTextDeltaMs), OffsetArg(f.FirstTextSentMs),
		OffsetArg(f.UpstreamDoneMs), OffsetArg(f.TotalHandlerMs),
		RateArg(r.VisibleOutputTPS), SpanArg(r.InterTokenLatencyMs),
		IntArg(r.Tokens.Input), IntArg(r.Tokens.Output), IntArg(r.Tokens.Reasoning), IntArg(r.Tokens.Visible),
		Clean(r.Tokens.Source, MaxNameLen),
		int64(ClampCount(r.Events.Heartbeat)), int64(ClampCount(r.Events.Metadata)),
		int64(ClampCount(r.Events.Reasoning)), int64(ClampCount(r.Events.Tool)),
		int64(ClampCount(r.Events.Text)), int64(ClampCount(r.Events.Done)),
		int64(ClampCount(r.Events.Error)), int64(ClampCount(r.Events.Unknown)),
		int64(ClampCount(r.Inflight.Gateway)), int64(ClampCount(r.Inflight.Channel)),
		SpanArg(f.MaxOutputGapMs), OffsetArg(f.MaxOutputGapAtMs), SpanArg(f.RequestWaitMs), OffsetArg(f.HeadersSentMs),
		Clean(r.TraceID, MaxNameLen), EncodeNames(r.SkippedEjected),
		UpstreamModelArg(r),
		SpanArg(f.AdmissionWaitMs),
		EncodeSkips(r.SkippedRateLimited),
		SpanArg(f.UpstreamAuthMs),
		SpanArg(r.ProviderLatencyMs),
	)
}

// EncodeSkips stores the channels skipped for their provider budget as a
// JSON list, names cleaned and at most MaxAttempts of them.
func EncodeSkips(skips []record.RateLimitSkip) string {
	out := make([]record.RateLimitSkip, 0, min(len(skips), MaxAttempts))
	for _, s := range skips[:min(len(skips), MaxAttempts)] {
		s.Channel, s.Limit = Clean(s.Channel, MaxNameLen), Clean(s.Limit, MaxNameLen)
		if math.IsNaN(s.ResetMs) || math.IsInf(s.ResetMs, 0) {
			s.ResetMs = 0
		}
		out = append(out, s)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// DecodeSkips reads what EncodeSkips stored; anything else, or an empty
// list, is nil (the record's field is then absent).
func DecodeSkips(s string) []record.RateLimitSkip {
	var out []record.RateLimitSkip
	if json.Unmarshal([]byte(s), &out) != nil || len(out) == 0 {
		return nil
	}
	return out
}

// Int64Arg stores a count that may be unknown.
func Int64Arg(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// EncodeNames stores a list of configured names (channels) as a JSON array,
// each name cleaned and at most MaxAttempts of them.
func EncodeNames(names []string) string {
	out := make([]string, 0, min(len(names), MaxAttempts))
	for _, n := range names[:min(len(names), MaxAttempts)] {
		out = append(out, Clean(n, MaxNameLen))
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// DecodeNames reads what EncodeNames stored; anything else is no names.
func DecodeNames(s string) []string {
	var out []string
	if json.Unmarshal([]byte(s), &out) != nil || out == nil {
		return []string{}
	}
	return out
}

// UnixNano is t in Unix nanoseconds, clamped to what a BIGINT can hold:
// time.UnixNano is undefined outside 1678..2262, and a filter bound from a
// client may lie anywhere. Stored timestamps lie within 1970..2261
// (Validate), so clamping never changes which records match.
func UnixNano(t time.Time) int64 {
	switch {
	case t.Year() < 1970:
		return 0
	case t.Year() > 2261:
		return math.MaxInt64
	}
	return t.UnixNano()
}

// A cursor is the (timestamp, id) of the last record of a page, which is
// where the next page, ordered by the same pair descending, starts after.
// It is opaque to clients.
func EncodeCursor(r *record.Record) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(r.Timestamp.UnixNano(), 10) + "." + r.RequestID))
}

func DecodeCursor(c string) (int64, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	ts, id, ok := strings.Cut(string(b), ".")
	if !ok || id == "" {
		return 0, "", ErrBadCursor
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, "", ErrBadCursor
	}
	return n, id, nil
}

// PageLimit is f's page size: DefaultLimit for 0, refused outside 1..MaxLimit.
func PageLimit(f *Filter) (int, error) {
	switch {
	case f.Limit == 0:
		return DefaultLimit, nil
	case f.Limit < 0 || f.Limit > MaxLimit:
		return 0, fmt.Errorf("%w: limit %d (want 1..%d)", ErrBadQuery, f.Limit, MaxLimit)
	}
	return f.Limit, nil
}

// DefaultDeleteLimit is the batch size of DeleteBefore when limit is 0.
const DefaultDeleteLimit = 1000
