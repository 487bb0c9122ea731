package chstore

import (
	"math"
	"slices"
	"strings"

	"github.com/ttfx/ttfx/internal/store"
)

// Durations are stored as whole nanoseconds (Nullable(Int64), migration
// 0027), not float milliseconds: a record's durations are whole
// nanoseconds (timeline.Span and Offset), so nothing is lost, and on disk
// an integer compresses where the float's mantissa does not: 238 → 194
// bytes per requests row at 1 000 records a minute (the density of 10 M
// records over a week), LZ4 on 18.16, measured on ttfx seed's records.
// ClickHouse 18.16 has no column codecs (Delta, ZSTD per column) and no
// RENAME COLUMN, so the nanoseconds are new columns, C_ns beside each
// C_ms: rows written before 0027 keep their milliseconds there (no
// mutation rewrites a store's parts), rows written since leave them NULL,
// and a read takes the nanoseconds in milliseconds where present, else the
// old milliseconds. A gateway of an older release keeps writing C_ms
// during a rolling upgrade, and its rows read the same.

// chNsColumns are the duration columns of requests kept in nanoseconds,
// by their name in store.RequestColumns and attemptArrays.
var chNsColumns = map[string]bool{
	"auth_ms": true, "distribution_ms": true, "body_read_ms": true, "upstream_headers_ms": true,
	"upstream_start_ms": true, "upstream_headers_at_ms": true, "first_sse_event_ms": true,
	"first_response_ms": true, "first_text_delta_ms": true, "first_text_sent_ms": true,
	"upstream_done_ms": true, "total_handler_ms": true, "inter_token_latency_ms": true,
	"max_output_gap_ms": true, "max_output_gap_at_ms": true, "request_wait_ms": true,
	"headers_sent_ms": true, "admission_wait_ms": true, "upstream_auth_ms": true,
	"provider_latency_ms":       true,
	"attempt_upstream_start_ms": true, "attempt_upstream_headers_ms": true,
	"attempt_upstream_headers_at_ms": true, "attempt_first_response_at_ms": true,
}

// chStoredName is the column that holds c: its nanoseconds for a duration.
func chStoredName(c string) string {
	if chNsColumns[c] {
		return strings.TrimSuffix(c, "_ms") + "_ns"
	}
	return c
}

// chReadExpr reads column c as milliseconds, whichever of its columns the
// row has.
func chReadExpr(c string) string {
	if !chNsColumns[c] {
		return c
	}
	ns := chStoredName(c)
	if strings.HasPrefix(c, "attempt_") {
		return "if(empty(" + ns + "), " + c + ", arrayMap(x -> x / 1000000, " + ns + "))"
	}
	return "ifNull(" + ns + " / 1000000, " + c + ")"
}

// chTableColumns are the columns of the requests table: those written,
// with each duration's old milliseconds column before its nanoseconds.
func chTableColumns() []string {
	var out []string
	for _, c := range chRequestColumns {
		if strings.HasSuffix(c, "_ns") && chNsColumns[strings.TrimSuffix(c, "_ns")+"_ms"] {
			out = append(out, strings.TrimSuffix(c, "_ns")+"_ms")
		}
		out = append(out, c)
	}
	return out
}

// nsArg is a float milliseconds argument (RequestArgs') as whole
// nanoseconds, or nil. The milliseconds were a Duration divided by 1e6,
// so rounding recovers it exactly (up to 2^51 ns, 26 days).
func nsArg(v any) any {
	if f, ok := v.(float64); ok {
		return int64(math.Round(f * 1e6))
	}
	return nil
}

// nsArray is nsArg of each element.
func nsArray(ms []*float64) []*int64 {
	out := make([]*int64, len(ms))
	for i, p := range ms {
		if p != nil {
			v := int64(math.Round(*p * 1e6))
			out[i] = &v
		}
	}
	return out
}

// chNsPositions are the positions in chRequestColumns of the scalar
// duration columns.
var chNsPositions = func() []int {
	var out []int
	for i, c := range store.RequestColumns {
		if chNsColumns[c] {
			out = append(out, i)
		}
	}
	return slices.Clip(out)
}()
