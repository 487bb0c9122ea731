package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

// Durations are stored as whole nanoseconds (BIGINT), not float
// milliseconds (migration 0042). A record's durations are whole
// nanoseconds (timeline.Span and Offset), so an integer holds them
// exactly, and SQLite stores an integer in 1 to 8 bytes by its size: a
// duration under 2.1 s takes 4 bytes and one under 39 hours 6, where a
// REAL always takes 8. Microseconds would take a byte less each (3 bytes
// up to 8.4 s) but would round away what the API returns today, the
// nanoseconds of every mark. On PostgreSQL a BIGINT is the 8 bytes its
// DOUBLE PRECISION was: the engines keep one schema and one set of
// queries. ClickHouse made the same move in its migration 0027.
//
// The API still speaks float milliseconds. The nanoseconds stored for a
// value are exactly those a read of its float milliseconds returned
// before (timeline rounds float ms to the nearest nanosecond, and so does
// nsArg), so every read returns what it did.

// nsColumns are the duration columns of requests and request_attempts, by
// their name in store.RequestTable and before 0042.
var nsColumns = map[string]bool{
	"auth_ms": true, "distribution_ms": true, "body_read_ms": true, "upstream_headers_ms": true,
	"upstream_start_ms": true, "upstream_headers_at_ms": true, "first_sse_event_ms": true,
	"first_response_ms": true, "first_text_delta_ms": true, "first_text_sent_ms": true,
	"upstream_done_ms": true, "total_handler_ms": true, "inter_token_latency_ms": true,
	"max_output_gap_ms": true, "max_output_gap_at_ms": true, "request_wait_ms": true,
	"headers_sent_ms": true, "admission_wait_ms": true, "upstream_auth_ms": true,
	"provider_latency_ms": true, "first_response_at_ms": true,
}

// storedName is the column that holds c: x_ns for a duration x_ms.
func storedName(c string) string {
	if nsColumns[c] {
		return strings.TrimSuffix(c, "_ms") + "_ns"
	}
	return c
}

// storedColumns is cs with each duration an IntCol of its stored name.
func storedColumns(cs []store.Column) []store.Column {
	out := make([]store.Column, len(cs))
	for i, c := range cs {
		out[i] = c
		if nsColumns[c.Name] {
			out[i] = store.Column{Name: storedName(c.Name), Kind: store.IntCol}
		}
		if nameColumns["requests"][c.Name] {
			out[i].Kind = store.IntCol
		}
	}
	return out
}

// requestTable is store.RequestTable as stored: durations in nanoseconds,
// names as ids (names.go).
var requestTable = storedColumns(store.RequestTable)

// requestDurations are the positions of the durations in requestTable.
var requestDurations = func() []int {
	var out []int
	for i, c := range store.RequestTable {
		if nsColumns[c.Name] {
			out = append(out, i)
		}
	}
	return out
}()

// nsArg is a float milliseconds argument (store.RequestArgs' and
// OffsetArg's) as whole nanoseconds, or nil: rounded to the nearest
// nanosecond as timeline reads float milliseconds, which recovers the
// Duration the milliseconds were made from.
func nsArg(v any) any {
	f, ok := v.(float64)
	if !ok {
		return nil
	}
	ns := math.Round(f * 1e6)
	switch {
	case ns >= math.MaxInt64:
		return int64(math.MaxInt64)
	case ns <= math.MinInt64:
		return int64(math.MinInt64)
	}
	return int64(ns)
}

// nsDuration reads a stored duration: whole nanoseconds (an int64), or
// float milliseconds in a row of a table not yet migrated (read by the
// migrations before 0042: backfillRollups).
func nsDuration(src any) (time.Duration, bool, error) {
	switch v := src.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return time.Duration(v), true, nil
	}
	var s timeline.Span
	if err := s.Scan(src); err != nil {
		return 0, false, err
	}
	d, ok := s.Get()
	return d, ok, nil
}

// spanNs scans a stored duration into a Span.
type spanNs struct{ p *timeline.Span }

func (s spanNs) Scan(src any) error {
	d, ok, err := nsDuration(src)
	*s.p = timeline.Span{}
	if ok {
		*s.p = timeline.SpanOf(d)
	}
	return err
}

// offsetNs scans a stored duration into an Offset.
type offsetNs struct{ p *timeline.Offset }

func (o offsetNs) Scan(src any) error {
	d, ok, err := nsDuration(src)
	*o.p = timeline.Offset{}
	if ok {
		*o.p = timeline.At(d)
	}
	return err
}

// msValue turns a stored duration read into an any (int64 nanoseconds)
// into the float milliseconds the rollups' fields take, the same float
// the column held before 0042.
func msValue(v any) any {
	if ns, ok := v.(int64); ok {
		return float64(ns) / float64(time.Millisecond)
	}
	return v
}

// msColumnDef matches a duration column's definition in a SQLite table's
// DDL (as made by 0001, 0002 and later ALTER TABLE … ADD COLUMN).
var msColumnDef = regexp.MustCompile(`(?i)\b([a-z_]+)_ms(\s+)DOUBLE PRECISION\b`)

// durationsToNs is migration 0042 on SQLite: requests and
// request_attempts are made again with each duration column x_ms (REAL)
// as x_ns (INTEGER), the rows copied with the milliseconds rounded to
// nanoseconds, the tables' indexes made again. SQLite cannot change a
// column's type in place, and a second column beside each would leave
// every new row a header byte per old column and every read a choice: one
// rewrite, in the migration's transaction, is the price (on PostgreSQL,
// 0042_durations_ns.postgres.sql: one ALTER TABLE of each table).
func durationsToNs(ctx context.Context, tx *sql.Tx, _ dialect) error {
	for _, table := range []string{"requests", "request_attempts"} {
		if err := rebuildDurations(ctx, tx, table); err != nil {
			return fmt.Errorf("%s durations in nanoseconds: %w", table, err)
		}
	}
	return nil
}

func rebuildDurations(ctx context.Context, tx *sql.Tx, table string) error {
	ddl, err := tableDDL(ctx, tx, table)
	if err != nil {
		return err
	}
	body, err := tableBody(ddl, table)
	if err != nil {
		return err
	}
	body = msColumnDef.ReplaceAllStringFunc(body, func(m string) string {
		g := msColumnDef.FindStringSubmatch(m)
		if !nsColumns[strings.ToLower(g[1])+"_ms"] {
			return m
		}
		return g[1] + "_ns" + g[2] + "BIGINT"
	})
	indexes, err := tableIndexes(ctx, tx, table)
	if err != nil {
		return err
	}
	cols, err := tableColumns(ctx, tx, table)
	if err != nil {
		return err
	}
	var from, to []string
	for _, c := range cols {
		if nsColumns[c] {
			from = append(from, "CAST(ROUND("+c+" * 1000000) AS INTEGER)")
		} else {
			from = append(from, c)
		}
		to = append(to, storedName(c))
	}
	return replaceTable(ctx, tx, table, body, to, from, indexes)
}

// msColumns is the attempts' columns cs as before 0042: each x_ns a
// FloatCol x_ms, names text (for tests that write a schema of an earlier
// version).
func msColumns(cs []store.Column) []store.Column {
	out := make([]store.Column, len(cs))
	for i, c := range cs {
		out[i] = c
		if nameColumns["request_attempts"][c.Name] {
			out[i].Kind = store.TextCol
		}
		if ms := strings.TrimSuffix(c.Name, "_ns") + "_ms"; strings.HasSuffix(c.Name, "_ns") && nsColumns[ms] {
			out[i] = store.Column{Name: ms, Kind: store.FloatCol}
		}
	}
	return out
}
