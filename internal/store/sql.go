package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// sqlStore is the Store of both engines.
type sqlStore struct {
	d     dialect
	write *sql.DB // inserts, deletes and pings
	read  *sql.DB // queries: a pool of its own, so reads cannot starve writes

	// statsSlots holds a token per Stats call running (see
	// MaxConcurrentStats).
	statsSlots chan struct{}
	// maxStatsRows is MaxStatsRows; tests lower it rather than store
	// millions of records.
	maxStatsRows int

	// lanes holds the names of the minute rollup rows this store writes
	// (see writeRollups), one per insert that may run at once: an insert
	// takes a name and gives it back, so that no two inserts read and
	// rewrite the same rows. SQLite has one (its writes are serial
	// anyway), PostgreSQL insertLanes (see WriterLanes).
	lanes chan string
	// partitions holds the days (int64 Unix ns) whose partitions are known
	// to exist, on a partitioned engine.
	partitions sync.Map
}

func newSQLStore(d dialect, write, read *sql.DB) *sqlStore {
	if !d.arrays {
		d.stmts = newStmtCache(write)
	}
	s := &sqlStore{d: d, write: write, read: read,
		statsSlots: make(chan struct{}, MaxConcurrentStats), maxStatsRows: MaxStatsRows}
	n := 1
	if d.partitioned {
		n = insertLanes
	}
	s.lanes = make(chan string, n)
	for range n {
		s.lanes <- newWriterID()
	}
	return s
}

// insertLanes is how many inserts a PostgreSQL store runs at once. One
// insert keeps the server's backend busy about two thirds of the time
// and the gateway's encoding the rest; two overlap them.
const insertLanes = 2

// WriterLanes implements Laner: a Writer over PostgreSQL runs insertLanes
// inserts at once.
func (s *sqlStore) WriterLanes() int { return cap(s.lanes) }

func (s *sqlStore) Engine() string { return s.d.name }

func (s *sqlStore) Ping(ctx context.Context) error { return s.write.PingContext(ctx) }

func (s *sqlStore) Close() error {
	s.d.stmts.close()
	err := s.write.Close()
	if s.read != s.write {
		err = errors.Join(err, s.read.Close())
	}
	return err
}

// colKind is the SQL type of a column, for binding a batch column-wise.
type colKind uint8

const (
	textCol  colKind = iota // TEXT
	intCol                  // INTEGER or BIGINT, maybe NULL
	floatCol                // DOUBLE PRECISION, maybe NULL
	boolCol                 // BOOLEAN
	bytesCol                // BYTEA (a BLOB on SQLite), maybe NULL
)

type column struct {
	name string
	kind colKind
}

func cols(kind colKind, names ...string) []column {
	out := make([]column, len(names))
	for i, n := range names {
		out[i] = column{n, kind}
	}
	return out
}

// The columns of requests, in the order requestArgs and scanRecord use.
var requestTable = slices.Concat(
	cols(textCol, "request_id"), cols(intCol, "timestamp_ns"),
	cols(textCol, "api", "route", "model", "group_name", "key_name", "user_hash",
		"channel", "region", "provider", "status"),
	cols(intCol, "http_status"), cols(textCol, "error"), cols(boolCol, "stream"),
	cols(textCol, "terminal", "finish_reason"),
	cols(floatCol, "auth_ms", "distribution_ms", "body_read_ms", "upstream_headers_ms", "upstream_start_ms",
		"upstream_headers_at_ms", "first_sse_event_ms", "first_response_ms", "first_text_delta_ms",
		"first_text_sent_ms", "upstream_done_ms", "total_handler_ms", "visible_output_tps", "inter_token_latency_ms"),
	cols(intCol, "tokens_input", "tokens_output", "tokens_reasoning", "tokens_visible"),
	cols(textCol, "tokens_source"),
	cols(intCol, "events_heartbeat", "events_metadata", "events_reasoning", "events_tool", "events_text",
		"events_done", "events_error", "events_unknown", "inflight_gateway", "inflight_channel"),
	cols(floatCol, "max_output_gap_ms", "max_output_gap_at_ms", "request_wait_ms", "headers_sent_ms"),
	cols(textCol, "trace_id", "skipped_ejected"),
)

var attemptTable = slices.Concat(
	cols(textCol, "request_id"), cols(intCol, "attempt"), cols(textCol, "channel"),
	cols(floatCol, "upstream_start_ms", "upstream_headers_ms", "upstream_headers_at_ms"),
	cols(textCol, "status"), cols(intCol, "http_status"), cols(textCol, "error"),
	cols(textCol, "role", "outcome"), cols(floatCol, "first_response_at_ms"), cols(intCol, "tokens_input", "tokens_output"),
	cols(intCol, "timestamp_ns"),
)

var labelTable = slices.Concat(cols(textCol, "request_id"), cols(intCol, "position"), cols(textCol, "label"), cols(intCol, "timestamp_ns"))

func names(cs []column) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.name
	}
	return out
}

var (
	requestColumns = names(requestTable)
	attemptColumns = names(attemptTable)
	labelColumns   = names(labelTable)
)

// selectRecord is the column list of a record read, over the alias r.
var selectRecord = "r." + strings.Join(requestColumns, ", r.")

// maxParams bounds the placeholders of one statement: SQLite allows 32766,
// PostgreSQL 65535.
const maxParams = 30000

func spanArg(s timeline.Span) any {
	if ms, ok := s.Ms(); ok {
		return ms
	}
	return nil
}

func offsetArg(o timeline.Offset) any {
	if ms, ok := o.Ms(); ok {
		return ms
	}
	return nil
}

// rateArg stores a rate, or NULL when it is absent or not finite: SQLite
// would store NaN as NULL and PostgreSQL as NaN, and the engines must agree.
func rateArg(r timeline.Rate) any {
	if v, ok := r.Get(); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
		return v
	}
	return nil
}

func intArg(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

func requestArgs(args []any, r *record.Record) []any {
	f := &r.Fields
	return append(args,
		r.RequestID, r.Timestamp.UnixNano(),
		clean(r.API, maxNameLen), clean(r.Route, maxNameLen), clean(r.Model, maxNameLen),
		clean(r.Group, maxNameLen), clean(r.KeyName, maxNameLen), clean(r.UserHash, maxNameLen),
		clean(r.Channel, maxNameLen), clean(r.Region, maxNameLen), clean(r.Provider, maxNameLen),
		clean(r.Status, maxNameLen), int64(r.HTTPStatus), clean(r.Error, maxErrorLen), r.Stream,
		clean(r.Terminal, maxNameLen), clean(r.FinishReason, maxNameLen),
		spanArg(f.AuthMs), spanArg(f.DistributionMs), spanArg(f.BodyReadMs), spanArg(f.UpstreamHeadersMs),
		offsetArg(f.UpstreamStartMs), offsetArg(f.UpstreamHeadersAtMs), offsetArg(f.FirstSSEEventMs),
		offsetArg(f.FirstResponseMs), offsetArg(f.FirstTextDeltaMs), offsetArg(f.FirstTextSentMs),
		offsetArg(f.UpstreamDoneMs), offsetArg(f.TotalHandlerMs),
		rateArg(r.VisibleOutputTPS), spanArg(r.InterTokenLatencyMs),
		intArg(r.Tokens.Input), intArg(r.Tokens.Output), intArg(r.Tokens.Reasoning), intArg(r.Tokens.Visible),
		clean(r.Tokens.Source, maxNameLen),
		int64(clampCount(r.Events.Heartbeat)), int64(clampCount(r.Events.Metadata)),
		int64(clampCount(r.Events.Reasoning)), int64(clampCount(r.Events.Tool)),
		int64(clampCount(r.Events.Text)), int64(clampCount(r.Events.Done)),
		int64(clampCount(r.Events.Error)), int64(clampCount(r.Events.Unknown)),
		int64(clampCount(r.Inflight.Gateway)), int64(clampCount(r.Inflight.Channel)),
		spanArg(f.MaxOutputGapMs), offsetArg(f.MaxOutputGapAtMs), spanArg(f.RequestWaitMs), offsetArg(f.HeadersSentMs),
		clean(r.TraceID, maxNameLen), encodeNames(r.SkippedEjected),
	)
}

// encodeNames stores a list of configured names (channels) as a JSON array,
// each name cleaned and at most maxAttempts of them.
func encodeNames(names []string) string {
	out := make([]string, 0, min(len(names), maxAttempts))
	for _, n := range names[:min(len(names), maxAttempts)] {
		out = append(out, clean(n, maxNameLen))
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// decodeNames reads what encodeNames stored; anything else is no names.
func decodeNames(s string) []string {
	var out []string
	if json.Unmarshal([]byte(s), &out) != nil || out == nil {
		return []string{}
	}
	return out
}

// insertSQL caches the text of insert statements by dialect, table and row
// count.
var insertSQL sync.Map // string → string

// doNothing is the conflict clause of record inserts: a retried batch, or a
// record written twice, is kept once.
const doNothing = "ON CONFLICT DO NOTHING"

// valuesStatement is a multi-row INSERT ... VALUES (?, ...), (?, ...)
// followed by the conflict clause, with RETURNING returning when that is
// not empty.
func valuesStatement(table string, cs []column, rows int, conflict, returning string) string {
	key := "values/" + table + "/" + strconv.Itoa(rows) + "x" + strconv.Itoa(len(cs)) + "/" + conflict + "/" + returning
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (" + strings.Join(names(cs), ", ") + ") VALUES ")
	row := "(" + strings.Repeat("?, ", len(cs)-1) + "?)"
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(" " + conflict)
	if returning != "" {
		b.WriteString(" RETURNING " + returning)
	}
	q := b.String()
	insertSQL.Store(key, q)
	return q
}

// inserter inserts rows of len(cs) arguments each (row-major) into table.
// When returning names a text column, it returns that column's values of
// the rows it inserted, which leaves out the rows ON CONFLICT skipped.
type inserter func(ctx context.Context, tx *sql.Tx, table string, cs []column, args []any, conflict, returning string) ([]string, error)

// insertRows inserts rows with the inserter of d's engine.
func insertRows(ctx context.Context, tx *sql.Tx, d dialect, table string, cs []column, args []any, conflict, returning string) ([]string, error) {
	if d.arrays {
		return insertUnnest(ctx, tx, table, cs, args, conflict, returning)
	}
	return insertValues(ctx, tx, d.stmts, table, cs, args, conflict, returning)
}

// insert inserts rows with the engine's inserter.
func (s *sqlStore) insert(ctx context.Context, tx *sql.Tx, table string, cs []column, args []any, conflict, returning string) ([]string, error) {
	return insertRows(ctx, tx, s.d, table, cs, args, conflict, returning)
}

// execInsert runs one insert statement, collecting the returned column.
// With st (q prepared) it runs st in tx instead of preparing q again.
func execInsert(ctx context.Context, tx *sql.Tx, q string, st *sql.Stmt, args []any, returning string, got []string) ([]string, error) {
	if st != nil {
		st = tx.StmtContext(ctx, st)
		defer st.Close()
	}
	if returning == "" {
		var err error
		if st != nil {
			_, err = st.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, q, args...)
		}
		return got, err
	}
	var rows *sql.Rows
	var err error
	if st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = tx.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return got, err
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return got, err
		}
		got = append(got, v)
	}
	return got, rows.Close()
}

// queryCached runs the query q in tx, prepared when stmts has it (and
// noted for preparing when it does not), and calls each for every row.
func queryCached(ctx context.Context, tx *sql.Tx, stmts *stmtCache, q string, args []any, each func(*sql.Rows) error) error {
	st, err := stmts.get(ctx, q)
	if err != nil {
		return err
	}
	var rows *sql.Rows
	if st != nil {
		st = tx.StmtContext(ctx, st)
		defer st.Close()
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = tx.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Close()
}

// insertValues inserts rows as multi-row VALUES statements of at most
// maxParams placeholders. With a statement cache, the rows go in chunks of
// a few fixed sizes (chunkRows), whose statements stay prepared: SQLite
// otherwise parses every statement of every batch again, which was most of
// the writer's time.
func insertValues(ctx context.Context, tx *sql.Tx, stmts *stmtCache, table string, cs []column, args []any, conflict, returning string) ([]string, error) {
	perStmt := maxParams / len(cs)
	var got []string
	for len(args) > 0 {
		n := min(len(args)/len(cs), perStmt)
		if stmts != nil {
			n = chunkRows(n)
		}
		chunk := args[:n*len(cs)]
		q := valuesStatement(table, cs, n, conflict, returning)
		st, err := stmts.get(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("insert %s: prepare: %w", table, err)
		}
		if got, err = execInsert(ctx, tx, q, st, chunk, returning, got); err != nil {
			return nil, fmt.Errorf("insert %s: %w", table, err)
		}
		args = args[len(chunk):]
	}
	return got, nil
}

// chunkRows is the largest of a few fixed row counts that is at most n.
// numLevels is one of them: a write of one minute's records marks that
// many rollup units dirty (markDirty), in one statement rather than four.
func chunkRows(n int) int {
	for _, c := range [...]int{256, 64, 16, numLevels, 4} {
		if c <= n {
			return c
		}
	}
	return 1
}

// stmtCache keeps insert statements prepared on a store's write pool. Its
// statements are of the few chunk sizes, tables and clauses there are, so
// it stays small. A statement is prepared between transactions (SQLite's
// write pool is one connection, which a transaction holds): one not yet
// prepared runs unprepared and is noted, and prepareNoted, called before
// the next transaction, prepares it. A nil cache prepares nothing.
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	m     map[string]*sql.Stmt
	noted []string
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

// get returns q prepared, or nil (and notes q) when it is not yet.
func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	if !slices.Contains(c.noted, q) {
		c.noted = append(c.noted, q)
	}
	return nil, nil
}

// prepareNoted prepares the statements get noted; outside a transaction.
// The lock is not held while preparing: that waits for the write
// connection, which a transaction of the same store (a compaction) may
// hold while it calls get.
func (c *stmtCache) prepareNoted(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	noted := c.noted
	c.noted = nil
	c.mu.Unlock()
	for i, q := range noted {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			c.mu.Lock()
			c.noted = append(c.noted, noted[i:]...)
			c.mu.Unlock()
			return err
		}
		c.mu.Lock()
		if _, ok := c.m[q]; ok {
			st.Close()
		} else {
			c.m[q] = st
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// unnestStatement is INSERT ... SELECT * FROM unnest($1::text[], ...): one
// array parameter per column, whatever the row count, so PostgreSQL
// prepares and plans it once. It writes 4 times the rows per second of a
// 500-row VALUES statement with 23000 parameters (measured: 57k against
// 15k rows/s), which PostgreSQL re-plans on every execution.
func unnestStatement(table string, cs []column, conflict, returning string) string {
	key := "unnest/" + table + "/" + strconv.Itoa(len(cs)) + "/" + conflict + "/" + returning
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	arrays := make([]string, len(cs))
	for i, c := range cs {
		arrays[i] = "$" + strconv.Itoa(i+1) + "::" + [...]string{textCol: "text[]", intCol: "int8[]", floatCol: "float8[]", boolCol: "bool[]", bytesCol: "bytea[]"}[c.kind]
	}
	q := "INSERT INTO " + table + " (" + strings.Join(names(cs), ", ") + ") SELECT * FROM unnest(" +
		strings.Join(arrays, ", ") + ") " + conflict
	if returning != "" {
		q += " RETURNING " + returning
	}
	insertSQL.Store(key, q)
	return q
}

// insertUnnest inserts row-major args column-wise, as typed arrays.
func insertUnnest(ctx context.Context, tx *sql.Tx, table string, cs []column, args []any, conflict, returning string) ([]string, error) {
	rows := len(args) / len(cs)
	if rows == 0 {
		return nil, nil
	}
	params := make([]any, len(cs))
	for j, c := range cs {
		switch c.kind {
		case textCol:
			a := make([]string, rows)
			for i := range a {
				a[i], _ = args[i*len(cs)+j].(string)
			}
			params[j] = a
		// Nullable numbers as pgtype's own arrays: pgx encodes them
		// without reflection, which []*int64 and []*float64 cost (a fifth
		// of the writer's CPU on PostgreSQL, measured).
		case intCol:
			a := make(pgtype.FlatArray[pgtype.Int8], rows)
			for i := range a {
				a[i].Int64, a[i].Valid = args[i*len(cs)+j].(int64)
			}
			params[j] = a
		case floatCol:
			a := make(pgtype.FlatArray[pgtype.Float8], rows)
			for i := range a {
				a[i].Float64, a[i].Valid = args[i*len(cs)+j].(float64)
			}
			params[j] = a
		case boolCol:
			a := make([]bool, rows)
			for i := range a {
				a[i], _ = args[i*len(cs)+j].(bool)
			}
			params[j] = a
		case bytesCol:
			a := make([][]byte, rows) // nil elements are NULL
			for i := range a {
				a[i], _ = args[i*len(cs)+j].([]byte)
			}
			params[j] = a
		}
	}
	got, err := execInsert(ctx, tx, unnestStatement(table, cs, conflict, returning), nil, params, returning, nil)
	if err != nil {
		return nil, fmt.Errorf("insert %s: %w", table, err)
	}
	return got, nil
}

func (s *sqlStore) Insert(ctx context.Context, recs []record.Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := Validate(&recs[i]); err != nil {
			return err
		}
	}
	var writer string
	select {
	case writer = <-s.lanes:
	case <-ctx.Done():
		return fmt.Errorf("insert: %w", ctx.Err())
	}
	defer func() { s.lanes <- writer }()
	if s.d.partitioned {
		ts := make([]int64, len(recs))
		for i := range recs {
			ts[i] = recs[i].Timestamp.UnixNano()
		}
		if err := s.ensurePartitions(ctx, daysOf(ts)); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	if err := s.d.stmts.prepareNoted(ctx); err != nil {
		return fmt.Errorf("insert: prepare: %w", err)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	defer tx.Rollback()
	stored, err := insertRecords(ctx, tx, s.d, recs)
	if err != nil {
		return err
	}
	// The rollups of exactly the records stored, in their transaction: a
	// retried batch adds nothing twice.
	if err := writeRollups(ctx, tx, s.d, writer, stored); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("insert: commit: %w", err)
	}
	return nil
}

// insertRecords writes the rows of recs (requests, attempts, labels) in tx
// and returns the records it stored.
//
// A request id names one record: of several in a batch the first is kept,
// and one already stored is kept as it is. ON CONFLICT DO NOTHING alone
// would skip only the colliding rows of each table, and graft the attempts
// and labels of a second record that do not collide onto the first; so the
// attempts and labels written are those of the records whose request row
// this transaction inserted.
func insertRecords(ctx context.Context, tx *sql.Tx, d dialect, recs []record.Record) ([]*record.Record, error) {
	return insertRecordsAs(ctx, tx, d, recs, true)
}

// insertRecordsAs is insertRecords, writing attempts and labels without
// their request's timestamp_ns when stamped is false, as schema versions
// before 4 had them (for tests of upgrades).
func insertRecordsAs(ctx context.Context, tx *sql.Tx, d dialect, recs []record.Record, stamped bool) ([]*record.Record, error) {
	attempts, labels := attemptTable, labelTable
	if !stamped {
		attempts, labels = attempts[:len(attempts)-1], labels[:len(labels)-1]
	}
	seen := make(map[string]bool, len(recs))
	if d.partitioned {
		// A partitioned table's key includes the timestamp, so ON CONFLICT
		// catches only a record stored again with its own timestamp (a
		// retried batch). Another record with a stored id is looked for
		// here, within a day of the batch's records (ids are 100 random
		// bits: a collision further apart is not a case to plan for).
		if err := storedIDs(ctx, tx, recs, seen); err != nil {
			return nil, err
		}
	}
	reqArgs := make([]any, 0, len(recs)*len(requestColumns))
	var ids []string
	for i := range recs {
		if r := &recs[i]; !seen[r.RequestID] {
			seen[r.RequestID] = true
			reqArgs = requestArgs(reqArgs, r)
			ids = append(ids, r.RequestID)
		}
	}
	// Where storedIDs has looked, every row left is new: plain inserts,
	// which PostgreSQL runs in half the time of ON CONFLICT DO NOTHING
	// RETURNING into a partitioned table (500 requests: 5 ms against 11,
	// measured). A record racing in from another gateway with the same
	// id and timestamp then fails the batch with a unique violation, and
	// the writer's record-by-record pass keeps the first.
	conflict, returning := doNothing, "request_id"
	if d.partitioned {
		conflict, returning = "", ""
	}
	inserted, err := insertRows(ctx, tx, d, "requests", requestTable, reqArgs, conflict, returning)
	if err != nil {
		return nil, err
	}
	if d.partitioned {
		inserted = ids
	}
	fresh := make(map[string]bool, len(inserted))
	for _, id := range inserted {
		fresh[id] = true
	}
	var attArgs, labArgs []any
	stored := make([]*record.Record, 0, len(inserted))
	for i := range recs {
		r := &recs[i]
		if !fresh[r.RequestID] {
			continue
		}
		delete(fresh, r.RequestID) // the first record of an id only
		stored = append(stored, r)
		for j, a := range r.Attempts[:min(len(r.Attempts), maxAttempts)] {
			attArgs = append(attArgs, r.RequestID, int64(j), clean(a.Channel, maxNameLen),
				offsetArg(a.UpstreamStartMs), spanArg(a.UpstreamHeadersMs), offsetArg(a.UpstreamHeadersAtMs),
				clean(a.Status, maxNameLen), int64(a.HTTPStatus), clean(a.Error, maxErrorLen),
				clean(a.Role, maxNameLen), clean(a.Outcome, maxNameLen), offsetArg(a.FirstResponseAtMs),
				intArg(a.TokensInput), intArg(a.TokensOutput))
			if stamped {
				attArgs = append(attArgs, r.Timestamp.UnixNano())
			}
		}
		for j, l := range r.Diagnosis[:min(len(r.Diagnosis), maxLabels)] {
			labArgs = append(labArgs, r.RequestID, int64(j), clean(l, maxNameLen))
			if stamped {
				labArgs = append(labArgs, r.Timestamp.UnixNano())
			}
		}
	}
	if _, err := insertRows(ctx, tx, d, "request_attempts", attempts, attArgs, conflict, ""); err != nil {
		return nil, err
	}
	if _, err := insertRows(ctx, tx, d, "request_labels", labels, labArgs, conflict, ""); err != nil {
		return nil, err
	}
	return stored, nil
}

// storedIDs marks in seen the ids of recs already stored within a day of
// the batch's time range.
func storedIDs(ctx context.Context, tx *sql.Tx, recs []record.Record, seen map[string]bool) error {
	ids := make([]string, len(recs))
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range recs {
		ids[i] = recs[i].RequestID
		ts := recs[i].Timestamp.UnixNano()
		lo, hi = min(lo, ts), max(hi, ts)
	}
	// One primary-key probe per id in each day's partition (a scan of
	// the time index over two days would read every record of them).
	rows, err := tx.QueryContext(ctx, `SELECT r.request_id FROM unnest($1::text[]) AS x(id)
		JOIN requests r ON r.request_id = x.id AND r.timestamp_ns >= $2 AND r.timestamp_ns <= $3`, ids, lo-dayNs, hi+dayNs)
	if err != nil {
		return fmt.Errorf("insert: stored ids: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return fmt.Errorf("insert: stored ids: %w", err)
		}
		seen[id] = true
	}
	return rows.Err()
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRecord(sc scanner) (record.Record, error) {
	var r record.Record
	var ts int64
	var tokens [4]sql.NullInt64
	var skipped string
	f := &r.Fields
	err := sc.Scan(
		&r.RequestID, &ts, &r.API, &r.Route, &r.Model, &r.Group, &r.KeyName, &r.UserHash,
		&r.Channel, &r.Region, &r.Provider, &r.Status, &r.HTTPStatus, &r.Error, &r.Stream, &r.Terminal, &r.FinishReason,
		&f.AuthMs, &f.DistributionMs, &f.BodyReadMs, &f.UpstreamHeadersMs, &f.UpstreamStartMs,
		&f.UpstreamHeadersAtMs, &f.FirstSSEEventMs, &f.FirstResponseMs, &f.FirstTextDeltaMs,
		&f.FirstTextSentMs, &f.UpstreamDoneMs, &f.TotalHandlerMs, &r.VisibleOutputTPS, &r.InterTokenLatencyMs,
		&tokens[0], &tokens[1], &tokens[2], &tokens[3], &r.Tokens.Source,
		&r.Events.Heartbeat, &r.Events.Metadata, &r.Events.Reasoning, &r.Events.Tool, &r.Events.Text,
		&r.Events.Done, &r.Events.Error, &r.Events.Unknown,
		&r.Inflight.Gateway, &r.Inflight.Channel,
		&f.MaxOutputGapMs, &f.MaxOutputGapAtMs, &f.RequestWaitMs, &f.HeadersSentMs,
		&r.TraceID, &skipped,
	)
	if err != nil {
		return r, err
	}
	r.SkippedEjected = decodeNames(skipped)
	r.Timestamp = time.Unix(0, ts).UTC()
	for i, p := range []**int{&r.Tokens.Input, &r.Tokens.Output, &r.Tokens.Reasoning, &r.Tokens.Visible} {
		if tokens[i].Valid {
			*p = record.Int(int(tokens[i].Int64))
		}
	}
	// The API always shows lists, never null (SPEC.md §10: "attempts",
	// "diagnosis" are lists, empty when there are none).
	r.Attempts = []record.Attempt{}
	r.Diagnosis = []string{}
	return r, nil
}

func (s *sqlStore) Get(ctx context.Context, id string) (record.Record, error) {
	if id == "" || len(id) > MaxIDLen {
		return record.Record{}, ErrNotFound
	}
	row := s.read.QueryRowContext(ctx, "SELECT "+selectRecord+" FROM requests r WHERE r.request_id = $1", id)
	r, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return record.Record{}, ErrNotFound
	}
	if err != nil {
		return record.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	recs := []record.Record{r}
	if err := s.attach(ctx, s.read, recs); err != nil {
		return record.Record{}, err
	}
	return recs[0], nil
}

// querier is a *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// attach reads the attempts and labels of recs.
func (s *sqlStore) attach(ctx context.Context, q querier, recs []record.Record) error {
	if len(recs) == 0 {
		return nil
	}
	byID := make(map[string]*record.Record, len(recs))
	args := make([]any, len(recs), len(recs)+2)
	marks := make([]string, len(recs))
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
		args[i] = recs[i].RequestID
		marks[i] = "$" + strconv.Itoa(i+1)
		ts := recs[i].Timestamp.UnixNano()
		lo, hi = min(lo, ts), max(hi, ts)
	}
	// The records' time range lets PostgreSQL read only their days'
	// partitions.
	args = append(args, lo, hi)
	in := "(" + strings.Join(marks, ", ") + ") AND timestamp_ns >= $" + strconv.Itoa(len(recs)+1) +
		" AND timestamp_ns <= $" + strconv.Itoa(len(recs)+2)

	rows, err := q.QueryContext(ctx, `SELECT request_id, channel, upstream_start_ms, upstream_headers_ms,
		upstream_headers_at_ms, status, http_status, error, role, outcome, first_response_at_ms, tokens_input, tokens_output
		FROM request_attempts WHERE request_id IN `+in+` ORDER BY request_id, attempt`, args...)
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	for rows.Next() {
		var id string
		var a record.Attempt
		var tin, tout sql.NullInt64
		if err := rows.Scan(&id, &a.Channel, &a.UpstreamStartMs, &a.UpstreamHeadersMs,
			&a.UpstreamHeadersAtMs, &a.Status, &a.HTTPStatus, &a.Error,
			&a.Role, &a.Outcome, &a.FirstResponseAtMs, &tin, &tout); err != nil {
			rows.Close()
			return fmt.Errorf("read attempts: %w", err)
		}
		if tin.Valid {
			a.TokensInput = record.Int(int(tin.Int64))
		}
		if tout.Valid {
			a.TokensOutput = record.Int(int(tout.Int64))
		}
		if r := byID[id]; r != nil {
			r.Attempts = append(r.Attempts, a)
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}

	rows, err = q.QueryContext(ctx, `SELECT request_id, label FROM request_labels
		WHERE request_id IN `+in+` ORDER BY request_id, position`, args...)
	if err != nil {
		return fmt.Errorf("read labels: %w", err)
	}
	for rows.Next() {
		var id, label string
		if err := rows.Scan(&id, &label); err != nil {
			rows.Close()
			return fmt.Errorf("read labels: %w", err)
		}
		if r := byID[id]; r != nil {
			r.Diagnosis = append(r.Diagnosis, label)
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read labels: %w", err)
	}
	return nil
}

// builder collects the conditions and arguments of a WHERE clause.
type builder struct {
	conds []string
	args  []any
	// scanTime writes the time range as +r.timestamp_ns, which keeps
	// SQLite from reading it through the time index (see wideWindow).
	scanTime bool
}

// arg adds an argument and returns its placeholder.
func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

func (b *builder) cond(c string) { b.conds = append(b.conds, c) }

func (b *builder) where() string {
	if len(b.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(b.conds, " AND ")
}

// match adds the conditions of f over the alias r.
func (b *builder) match(f *Filter) {
	ts := "r.timestamp_ns"
	if b.scanTime {
		ts = "+r.timestamp_ns"
	}
	if !f.From.IsZero() {
		b.cond(ts + " >= " + b.arg(unixNano(f.From)))
	}
	if !f.To.IsZero() {
		b.cond(ts + " < " + b.arg(unixNano(f.To)))
	}
	eq := func(col, v string) {
		if v != "" {
			b.cond("r." + col + " = " + b.arg(v))
		}
	}
	eq("model", f.Model)
	eq("channel", f.Channel)
	eq("group_name", f.Group)
	eq("status", f.Status)
	eq("key_name", f.KeyName)
	if f.Stream != nil {
		b.cond("r.stream = " + b.arg(*f.Stream))
	}
	if f.Label != "" {
		b.cond("EXISTS (SELECT 1 FROM request_labels l WHERE l.request_id = r.request_id AND l.timestamp_ns = r.timestamp_ns AND l.label = " + b.arg(f.Label) + ")")
	}
}

// unixNano is t in Unix nanoseconds, clamped to what a BIGINT can hold:
// time.UnixNano is undefined outside 1678..2262, and a filter bound from a
// client may lie anywhere. Stored timestamps lie within 1970..2261
// (Validate), so clamping never changes which records match.
func unixNano(t time.Time) int64 {
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
func encodeCursor(r *record.Record) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(r.Timestamp.UnixNano(), 10) + "." + r.RequestID))
}

func decodeCursor(c string) (int64, string, error) {
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

// pageLimit is f's page size: DefaultLimit for 0, refused outside 1..MaxLimit.
func pageLimit(f *Filter) (int, error) {
	switch {
	case f.Limit == 0:
		return DefaultLimit, nil
	case f.Limit < 0 || f.Limit > MaxLimit:
		return 0, fmt.Errorf("%w: limit %d (want 1..%d)", ErrBadQuery, f.Limit, MaxLimit)
	}
	return f.Limit, nil
}

func (s *sqlStore) List(ctx context.Context, f Filter) (Page, error) {
	limit, err := pageLimit(&f)
	if err != nil {
		return Page{}, err
	}
	var b builder
	b.match(&f)
	if f.Cursor != "" {
		ts, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return Page{}, err
		}
		b.cond("(r.timestamp_ns, r.request_id) < (" + b.arg(ts) + ", " + b.arg(id) + ")")
	}
	q := "SELECT " + selectRecord + " FROM requests r" + b.where() +
		" ORDER BY r.timestamp_ns DESC, r.request_id DESC LIMIT " + b.arg(limit+1)
	rows, err := s.read.QueryContext(ctx, q, b.args...)
	if err != nil {
		return Page{}, fmt.Errorf("list: %w", err)
	}
	recs := make([]record.Record, 0, min(limit+1, 64))
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			rows.Close()
			return Page{}, fmt.Errorf("list: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Close(); err != nil {
		return Page{}, fmt.Errorf("list: %w", err)
	}
	var p Page
	if len(recs) > limit {
		recs = recs[:limit]
		p.Next = encodeCursor(&recs[limit-1])
	}
	if err := s.attach(ctx, s.read, recs); err != nil {
		return Page{}, err
	}
	p.Records = recs
	return p, nil
}

// DefaultDeleteLimit is the batch size of DeleteBefore when limit is 0.
const DefaultDeleteLimit = 1000

func (s *sqlStore) DeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if s.d.partitioned {
		return s.dropDaysBefore(ctx, t)
	}
	if limit <= 0 {
		limit = DefaultDeleteLimit
	}
	limit = min(limit, maxParams)
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	defer tx.Rollback()
	// Select the ids first and delete by id from every table, so that the
	// three deletes agree on the set even while records are being written.
	rows, err := tx.QueryContext(ctx, `SELECT request_id FROM requests WHERE timestamp_ns < $1
		ORDER BY timestamp_ns, request_id LIMIT $2`, t.UnixNano(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	var ids []any
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("delete: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	if len(ids) == 0 {
		// Every record before t is gone: so go their rollups.
		if err := deleteRollupsBefore(ctx, tx, unixNano(t)); err != nil {
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("delete: commit: %w", err)
		}
		return 0, nil
	}
	marks := make([]string, len(ids))
	for i := range ids {
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	in := " WHERE request_id IN (" + strings.Join(marks, ", ") + ")"
	if _, err := tx.ExecContext(ctx, "DELETE FROM request_labels"+in, ids...); err != nil {
		return 0, fmt.Errorf("delete labels: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM request_attempts"+in, ids...); err != nil {
		return 0, fmt.Errorf("delete attempts: %w", err)
	}
	res, err := tx.ExecContext(ctx, "DELETE FROM requests"+in, ids...)
	if err != nil {
		return 0, fmt.Errorf("delete requests: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete requests: %w", err)
	}
	if len(ids) < limit {
		// The last records before t: their rollups go with them.
		if err := deleteRollupsBefore(ctx, tx, unixNano(t)); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete: commit: %w", err)
	}
	return int(n), nil
}
