package chstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"

	"github.com/ttfx/ttfx/internal/record"
)

// The attempt arrays of a requests row, parallel, in attemptArrays order.
var attemptArrays = []string{"attempt_channel", "attempt_upstream_start_ms", "attempt_upstream_headers_ms",
	"attempt_upstream_headers_at_ms", "attempt_status", "attempt_http_status", "attempt_error", "attempt_role",
	"attempt_outcome", "attempt_first_response_at_ms", "attempt_tokens_input", "attempt_tokens_output",
	"attempt_remaining_requests", "attempt_remaining_tokens"}

// chReadColumns are the columns of a requests row as chStore reads them:
// the SQL engines' request columns, then labels, the attempt arrays and the
// batch token.
var chReadColumns = slices.Concat(store.RequestColumns, []string{"labels"}, attemptArrays, []string{"batch"})

// chRequestColumns are the columns chStore writes, in chReadColumns
// order: durations in their nanoseconds columns (durations.go).
var chRequestColumns = func() []string {
	out := make([]string, len(chReadColumns))
	for i, c := range chReadColumns {
		out[i] = chStoredName(c)
	}
	return out
}()

// Positions in RequestColumns whose ClickHouse type differs from what
// RequestArgs gives: stream is a UInt8 and skipped_ejected an Array(String).
var (
	chStreamCol  = slices.Index(store.RequestColumns, "stream")
	chSkippedCol = slices.Index(store.RequestColumns, "skipped_ejected")
)

func floatPtr(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

func intPtr(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

// chRequestRow returns the values of r's requests row, in
// chRequestColumns order.
func chRequestRow(r *record.Record, batch string) []any {
	row := store.RequestArgs(make([]any, 0, len(chRequestColumns)), r)
	var stream uint8
	if r.Stream {
		stream = 1
	}
	row[chStreamCol] = stream
	skipped := make([]string, 0, min(len(r.SkippedEjected), store.MaxAttempts))
	for _, n := range r.SkippedEjected[:min(len(r.SkippedEjected), store.MaxAttempts)] {
		skipped = append(skipped, store.Clean(n, store.MaxNameLen))
	}
	row[chSkippedCol] = skipped
	for _, i := range chNsPositions {
		row[i] = nsArg(row[i])
	}
	labels := make([]string, 0, min(len(r.Diagnosis), store.MaxLabels))
	for _, l := range r.Diagnosis[:min(len(r.Diagnosis), store.MaxLabels)] {
		labels = append(labels, store.Clean(l, store.MaxNameLen))
	}
	atts := r.Attempts[:min(len(r.Attempts), store.MaxAttempts)]
	n := len(atts)
	var (
		channel, status, errs, role, outcome = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		start, headers, headersAt, first     = make([]*float64, n), make([]*float64, n), make([]*float64, n), make([]*float64, n)
		httpStatus                           = make([]int64, n)
		tin, tout                            = make([]*int64, n), make([]*int64, n)
		rreq, rtok                           = make([]*int64, n), make([]*int64, n)
	)
	for i := range atts {
		a := &atts[i]
		channel[i], status[i], errs[i] = store.Clean(a.Channel, store.MaxNameLen), store.Clean(a.Status, store.MaxNameLen), store.Clean(a.Error, store.MaxErrorLen)
		role[i], outcome[i] = store.Clean(a.Role, store.MaxNameLen), store.Clean(a.Outcome, store.MaxNameLen)
		start[i], headers[i] = floatPtr(store.OffsetArg(a.UpstreamStartMs)), floatPtr(store.SpanArg(a.UpstreamHeadersMs))
		headersAt[i], first[i] = floatPtr(store.OffsetArg(a.UpstreamHeadersAtMs)), floatPtr(store.OffsetArg(a.FirstResponseAtMs))
		httpStatus[i] = int64(a.HTTPStatus)
		tin[i], tout[i] = intPtr(a.TokensInput), intPtr(a.TokensOutput)
		rreq[i], rtok[i] = a.RemainingRequests, a.RemainingTokens
	}
	return append(row, labels, channel, nsArray(start), nsArray(headers), nsArray(headersAt), status, httpStatus, errs, role, outcome,
		nsArray(first), tin, tout, rreq, rtok, batch)
}

// chQuote is s as a ClickHouse string literal. The strings quoted are
// request ids, which Validate keeps free of control characters.
func chQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, `'`, `\'`) + "'"
}

// chIDList is ids as the body of an IN (...) list.
func chIDList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = chQuote(id)
	}
	return strings.Join(q, ", ")
}

// chIDChunk bounds the ids one IN list names: ClickHouse parses at most
// max_query_size (256 KiB by default) of a query's text.
const chIDChunk = 2000

// Insert implements Store.Insert without transactions:
//
//  1. The batch is named by a token made from its request ids
//     (batchToken): a batch retried whole has the same token.
//  2. request_ids tells which ids are stored and by which batch. A record
//     stored by another batch is skipped, as on the other engines; one
//     stored by this token is an earlier attempt of this very batch, whose
//     rows may have landed in part, and is written again.
//  3. The requests rows, then the batch's minute rollup rows (writer =
//     token), then the marks that make their coarser units dirty, and last
//     the request_ids rows: an id counts as stored only once everything
//     of its record is.
//
// Rows written twice share their sorting keys (the rollup rows through the
// token), so the ReplacingMergeTree tables keep them once, and every read
// takes FINAL or LIMIT 1 BY until the merge: a retried batch never counts
// twice. Two gateways storing one request id at the same moment may both
// store it; ids are random per request, so this is a collision, not a
// retry.
func (s *chStore) Insert(ctx context.Context, recs []record.Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := store.Validate(&recs[i]); err != nil {
			return err
		}
	}
	seen := make(map[string]bool, len(recs))
	uniq := make([]*record.Record, 0, len(recs))
	ids := make([]string, 0, len(recs))
	for i := range recs {
		if r := &recs[i]; !seen[r.RequestID] {
			seen[r.RequestID] = true
			uniq = append(uniq, r)
			ids = append(ids, r.RequestID)
		}
	}
	token := batchToken(ids)
	stored, err := s.storedBatches(ctx, ids)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	fresh := uniq[:0:0]
	for _, r := range uniq {
		if b, ok := stored[r.RequestID]; !ok || b == token {
			fresh = append(fresh, r)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	rows := make([][]any, len(fresh))
	idRows := make([][]any, len(fresh))
	for i, r := range fresh {
		rows[i] = chRequestRow(r, token)
		// The minute, not the time: Get needs no more, and in id order a
		// minute's start compresses to 16 bytes a row where the exact
		// time took 23 (LZ4; 9.5 and 15.9 with ZSTD).
		idRows[i] = []any{r.RequestID, rollup.FloorUnit(r.Timestamp.UnixNano(), time.Minute), token}
	}
	if err := chInsert(ctx, s.write, "requests", chRequestColumns, rows); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if err := s.writeRollups(ctx, token, fresh); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if err := chInsert(ctx, s.write, "request_ids", []string{"request_id", "timestamp_ns", "batch"}, idRows); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}

// storedBatches returns, of ids, those stored and the token of the batch
// that stored each.
func (s *chStore) storedBatches(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), chIDChunk)]
		ids = ids[len(chunk):]
		rows, err := s.write.QueryContext(ctx, "SELECT request_id, batch FROM request_ids WHERE request_id IN ("+chIDList(chunk)+")")
		if err != nil {
			return nil, fmt.Errorf("stored ids: %w", err)
		}
		for rows.Next() {
			var id, b string
			if err := rows.Scan(&id, &b); err != nil {
				rows.Close()
				return nil, fmt.Errorf("stored ids: %w", err)
			}
			out[id] = b
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("stored ids: %w", err)
		}
	}
	return out, nil
}

// chSelectRecord is the column list scanCHRecord reads: durations in
// milliseconds, whichever column holds them (chReadExpr).
var chSelectRecord = func() string {
	cols := chReadColumns[:len(chReadColumns)-1]
	exprs := make([]string, len(cols))
	for i, c := range cols {
		exprs[i] = chReadExpr(c)
	}
	return strings.Join(exprs, ", ")
}()

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanCHRecord reads a requests row selected with chSelectRecord.
func scanCHRecord(sc scanner) (record.Record, error) {
	var r record.Record
	var ts int64
	var tokens [4]sql.NullInt64
	var stream uint8
	var httpStatus int64
	var events [10]int64
	var (
		channel, status, errs, role, outcome []string
		start, headers, headersAt, first     []*float64
		attHTTP                              []int64
		tin, tout, rreq, rtok                []*int64
		rateSkips                            string
	)
	f := &r.Fields
	err := sc.Scan(
		&r.RequestID, &ts, &r.API, &r.Route, &r.Model, &r.Group, &r.KeyName, &r.UserHash,
		&r.Channel, &r.Region, &r.Provider, &r.Status, &httpStatus, &r.Error, &stream, &r.Terminal, &r.FinishReason,
		&f.AuthMs, &f.DistributionMs, &f.BodyReadMs, &f.UpstreamHeadersMs, &f.UpstreamStartMs,
		&f.UpstreamHeadersAtMs, &f.FirstSSEEventMs, &f.FirstResponseMs, &f.FirstTextDeltaMs,
		&f.FirstTextSentMs, &f.UpstreamDoneMs, &f.TotalHandlerMs, &r.VisibleOutputTPS, &r.InterTokenLatencyMs,
		&tokens[0], &tokens[1], &tokens[2], &tokens[3], &r.Tokens.Source,
		&events[0], &events[1], &events[2], &events[3], &events[4], &events[5], &events[6], &events[7],
		&events[8], &events[9],
		&f.MaxOutputGapMs, &f.MaxOutputGapAtMs, &f.RequestWaitMs, &f.HeadersSentMs,
		&r.TraceID, &r.SkippedEjected, &r.UpstreamModel, &f.AdmissionWaitMs, &rateSkips, &f.UpstreamAuthMs, &r.ProviderLatencyMs, &r.Diagnosis,
		&channel, &start, &headers, &headersAt, &status, &attHTTP, &errs, &role, &outcome, &first, &tin, &tout,
		&rreq, &rtok,
	)
	if err != nil {
		return r, err
	}
	r.Timestamp = time.Unix(0, ts).UTC()
	store.FillUpstreamModel(&r)
	r.HTTPStatus = int(httpStatus)
	r.Stream = stream != 0
	for i, p := range []*int{&r.Events.Heartbeat, &r.Events.Metadata, &r.Events.Reasoning, &r.Events.Tool,
		&r.Events.Text, &r.Events.Done, &r.Events.Error, &r.Events.Unknown, &r.Inflight.Gateway, &r.Inflight.Channel} {
		*p = int(events[i])
	}
	for i, p := range []**int{&r.Tokens.Input, &r.Tokens.Output, &r.Tokens.Reasoning, &r.Tokens.Visible} {
		if tokens[i].Valid {
			*p = record.Int(int(tokens[i].Int64))
		}
	}
	if r.SkippedEjected == nil {
		r.SkippedEjected = []string{}
	}
	r.SkippedRateLimited = store.DecodeSkips(rateSkips)
	if r.Diagnosis == nil {
		r.Diagnosis = []string{}
	}
	r.Attempts = make([]record.Attempt, len(channel))
	for i := range r.Attempts {
		a := &r.Attempts[i]
		a.Channel, a.Status, a.Error, a.Role, a.Outcome = channel[i], at(status, i), at(errs, i), at(role, i), at(outcome, i)
		if i < len(attHTTP) {
			a.HTTPStatus = int(attHTTP[i])
		}
		for _, m := range []struct {
			dst interface{ Scan(any) error }
			src []*float64
		}{{&a.UpstreamStartMs, start}, {&a.UpstreamHeadersMs, headers}, {&a.UpstreamHeadersAtMs, headersAt}, {&a.FirstResponseAtMs, first}} {
			if i < len(m.src) && m.src[i] != nil {
				if err := m.dst.Scan(*m.src[i]); err != nil {
					return r, err
				}
			}
		}
		if i < len(tin) && tin[i] != nil {
			a.TokensInput = record.Int(int(*tin[i]))
		}
		if i < len(tout) && tout[i] != nil {
			a.TokensOutput = record.Int(int(*tout[i]))
		}
		// Rows written before migration 0013 have empty arrays here.
		if i < len(rreq) {
			a.RemainingRequests = rreq[i]
		}
		if i < len(rtok) {
			a.RemainingTokens = rtok[i]
		}
	}
	return r, nil
}

// at is a[i], or "" past its end (parallel arrays are written whole, so
// this is only a guard against a hand-edited row).
func at(a []string, i int) string {
	if i < len(a) {
		return a[i]
	}
	return ""
}

// minuteKey is the first column of the requests sorting key.
const minuteKey = "intDiv(timestamp_ns, 60000000000)"

// chTimeConds returns conditions for from <= timestamp_ns < to (either
// bound may be open: math.MinInt64 or math.MaxInt64), on the sorting key's
// minute too so that the primary index narrows the read.
func chTimeConds(from, to int64) []string {
	var c []string
	if from != math.MinInt64 {
		c = append(c, "timestamp_ns >= "+strconv.FormatInt(from, 10),
			minuteKey+" >= "+strconv.FormatInt(rollup.FloorDiv(from, int64(time.Minute)), 10))
	}
	if to != math.MaxInt64 {
		c = append(c, "timestamp_ns < "+strconv.FormatInt(to, 10),
			minuteKey+" <= "+strconv.FormatInt(rollup.FloorDiv(to, int64(time.Minute)), 10))
	}
	return c
}

// chWhere builds a WHERE clause with ? placeholders.
type chWhere struct {
	conds []string
	args  []any
}

func (w *chWhere) cond(c string, args ...any) {
	w.conds = append(w.conds, c)
	w.args = append(w.args, args...)
}

func (w *chWhere) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// match adds the conditions of f over requests.
func (w *chWhere) match(f *store.Filter) {
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !f.From.IsZero() {
		from = store.UnixNano(f.From)
	}
	if !f.To.IsZero() {
		to = store.UnixNano(f.To)
	}
	w.conds = append(w.conds, chTimeConds(from, to)...)
	for _, c := range []struct{ col, v string }{{"model", f.Model}, {"channel", f.Channel}, {"group_name", f.Group},
		{"status", f.Status}, {"key_name", f.KeyName}} {
		if c.v != "" {
			w.cond(c.col+" = ?", c.v)
		}
	}
	if f.Stream != nil {
		var v uint8
		if *f.Stream {
			v = 1
		}
		w.cond("stream = ?", v)
	}
	if f.Label != "" {
		w.cond("has(labels, ?)", f.Label)
	}
}

func (s *chStore) Get(ctx context.Context, id string) (record.Record, error) {
	if id == "" || len(id) > store.MaxIDLen {
		return record.Record{}, store.ErrNotFound
	}
	var ts int64
	err := s.read.QueryRowContext(ctx, "SELECT timestamp_ns FROM request_ids WHERE request_id = ? LIMIT 1", id).Scan(&ts)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Record{}, store.ErrNotFound
	}
	if err != nil {
		return record.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	// request_ids holds the start of the record's minute (rows written by
	// an older gateway hold its exact time, which lies in that minute
	// too): the requests row is found by its minute, the first column of
	// the sorting key, and its id.
	minute := rollup.FloorUnit(ts, time.Minute)
	w := chWhere{conds: chTimeConds(minute, minute+int64(time.Minute))}
	w.cond("request_id = ?", id)
	r, err := scanCHRecord(s.read.QueryRowContext(ctx, "SELECT "+chSelectRecord+" FROM requests"+w.String()+" LIMIT 1", w.args...))
	if errors.Is(err, sql.ErrNoRows) {
		return record.Record{}, store.ErrNotFound
	}
	if err != nil {
		return record.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	return r, nil
}

// List reads a page in two steps: the (timestamp, id) pairs of the page
// from the two narrow columns (and those the filter names), then the
// page's rows whole. Sorting every matching row's seventy columns to keep
// fifty would read the whole window.
func (s *chStore) List(ctx context.Context, f store.Filter) (store.Page, error) {
	limit, err := store.PageLimit(&f)
	if err != nil {
		return store.Page{}, err
	}
	var w chWhere
	w.match(&f)
	if f.Cursor != "" {
		ts, id, err := store.DecodeCursor(f.Cursor)
		if err != nil {
			return store.Page{}, err
		}
		w.conds = append(w.conds, chTimeConds(math.MinInt64, ts+1)...)
		w.cond("(timestamp_ns, request_id) < (?, ?)", ts, id)
	}
	// DISTINCT, not LIMIT 1 BY request_id: a row written twice (a retried
	// batch) is the same pair twice, and over a cluster's Distributed
	// table 18.16 cuts each shard's rows to the LIMIT before LIMIT BY
	// drops its copies, which left pages short of rows that were there.
	rows, err := s.read.QueryContext(ctx, "SELECT DISTINCT timestamp_ns, request_id FROM requests"+w.String()+
		" ORDER BY timestamp_ns DESC, request_id DESC LIMIT "+strconv.Itoa(limit+1), w.args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	var ids []string
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for rows.Next() {
		var ts int64
		var id string
		if err := rows.Scan(&ts, &id); err != nil {
			rows.Close()
			return store.Page{}, fmt.Errorf("list: %w", err)
		}
		if slices.Contains(ids, id) {
			continue // one id stored at two times: two gateways made it at once (see Insert)
		}
		ids = append(ids, id)
		lo, hi = min(lo, ts), max(hi, ts)
	}
	if err := rows.Close(); err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	p := store.Page{Records: []record.Record{}}
	if len(ids) == 0 {
		return p, nil
	}
	more := len(ids) > limit
	ids = ids[:min(len(ids), limit)]
	pos := make(map[string]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	w = chWhere{conds: chTimeConds(lo, hi+1)}
	w.cond("request_id IN (" + chIDList(ids) + ")")
	rows, err = s.read.QueryContext(ctx, "SELECT "+chSelectRecord+" FROM requests"+w.String()+" LIMIT 1 BY request_id", w.args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	recs := make([]record.Record, len(ids))
	found := 0
	for rows.Next() {
		r, err := scanCHRecord(rows)
		if err != nil {
			rows.Close()
			return store.Page{}, fmt.Errorf("list: %w", err)
		}
		if i, ok := pos[r.RequestID]; ok {
			recs[i] = r
			found++
		}
	}
	if err := rows.Close(); err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	if found != len(ids) {
		// Only a partition dropped between the two reads does this.
		return store.Page{}, fmt.Errorf("list: %d of the page's %d records vanished while it was read", len(ids)-found, len(ids))
	}
	p.Records = recs
	if more {
		p.Next = store.EncodeCursor(&recs[len(recs)-1])
	}
	return p, nil
}

// chDayTables are the tables partitioned by day, in the order retention
// drops a day: the records' index first, so an id is never found whose
// record is gone.
var chDayTables = []string{"request_ids", "requests", "rollups", "rollup_marks"}

// DeleteBefore drops every day partition that ends by t, in every table —
// records, their rollups and marks — whatever limit says, and returns how
// many records it dropped. The day t falls within is kept whole until it
// has passed too: ClickHouse deletes by partition, and a DELETE of rows is
// a mutation that rewrites whole parts in the background. On a cluster
// each node's partitions are dropped there (partPools), a table at a time
// on every node in chDayTables order.
func (s *chStore) DeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	end := rollup.FloorDiv(store.UnixNano(t), chDayNs) // days before this one end by t
	pools := s.partPools()
	days := make([]map[string][]int64, len(pools)) // per pool, per table
	some := false
	for i, db := range pools {
		var err error
		if days[i], err = daysBefore(ctx, db, end); err != nil {
			return 0, fmt.Errorf("delete: %w", err)
		}
		some = some || len(days[i]["requests"]) > 0
	}
	n := 0
	if some {
		var dropped uint64
		err := s.write.QueryRowContext(ctx, "SELECT uniqExact(request_id) FROM requests WHERE timestamp_ns < ?", end*chDayNs).Scan(&dropped)
		if err != nil {
			return 0, fmt.Errorf("delete: %w", err)
		}
		n = int(dropped)
	}
	for _, table := range chDayTables {
		for i, db := range pools {
			for _, d := range days[i][table] {
				if _, err := db.ExecContext(ctx, "ALTER TABLE "+table+" DROP PARTITION "+strconv.FormatInt(d, 10)); err != nil {
					return 0, fmt.Errorf("delete: drop %s day %d: %w", table, d, err)
				}
			}
		}
	}
	return n, nil
}

// daysBefore returns, per table of chDayTables, the day partitions of db's
// database before day end, in order.
func daysBefore(ctx context.Context, db *sql.DB, end int64) (map[string][]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT table, partition FROM system.parts
		WHERE database = currentDatabase() AND active AND table IN ('request_ids', 'requests', 'rollups', 'rollup_marks')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	days := map[string][]int64{}
	for rows.Next() {
		var table, part string
		if err := rows.Scan(&table, &part); err != nil {
			return nil, err
		}
		if d, err := strconv.ParseInt(part, 10, 64); err == nil && d < end {
			days[table] = append(days[table], d)
		}
	}
	for _, ds := range days {
		slices.Sort(ds)
	}
	return days, rows.Err()
}

// chDayNs is a day in nanoseconds: the partition unit.
const chDayNs = int64(24 * time.Hour)
