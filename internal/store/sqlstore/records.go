package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
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
	d.names = newNameCache()
	d.series = &seriesCache{}
	s := &sqlStore{d: d, write: write, read: read,
		statsSlots: make(chan struct{}, store.MaxConcurrentStats), maxStatsRows: store.MaxStatsRows}
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

var attemptTable = slices.Concat(
	store.Cols(store.TextCol, "request_id"), store.Cols(store.IntCol, "attempt"), store.Cols(store.IntCol, "channel"),
	store.Cols(store.IntCol, "upstream_start_ns", "upstream_headers_ns", "upstream_headers_at_ns"),
	store.Cols(store.IntCol, "status"), store.Cols(store.IntCol, "http_status"), store.Cols(store.TextCol, "error"),
	store.Cols(store.IntCol, "role", "outcome"), store.Cols(store.IntCol, "first_response_at_ns"), store.Cols(store.IntCol, "tokens_input", "tokens_output"),
	store.Cols(store.IntCol, "timestamp_ns"),
	store.Cols(store.IntCol, "remaining_requests", "remaining_tokens"),
)

var labelTable = slices.Concat(store.Cols(store.TextCol, "request_id"), store.Cols(store.IntCol, "position"), store.Cols(store.TextCol, "label"), store.Cols(store.IntCol, "timestamp_ns"))

// selectRecord is the column list of a record read, over the alias r.
var selectRecord = "r." + strings.Join(store.ColumnNames(requestTable), ", r.")

func (s *sqlStore) Insert(ctx context.Context, recs []record.Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := store.Validate(&recs[i]); err != nil {
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
	fresh := map[string]int64{}
	stored, err := insertRecordsAs(ctx, tx, s.d, recs, 0, fresh)
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
	s.d.names.add(fresh)
	return nil
}

// insertRecordsAs writes the rows of recs (requests, attempts, labels) in
// tx and returns the records it stored. The names it adds to record_names
// go into fresh, for the store's cache once tx commits.
//
// A request id names one record: of several in a batch the first is kept,
// and one already stored is kept as it is. ON CONFLICT DO NOTHING alone
// would skip only the colliding rows of each table, and graft the attempts
// and labels of a second record that do not collide onto the first; so the
// attempts and labels written are those of the records whose request row
// this transaction inserted.
//
// Tests of upgrades write the tables of an earlier schema version with it
// (version 0 is this one): before 0043 names were text, before 0042
// durations were float milliseconds, and before 0004 attempts and labels
// had no timestamp_ns. Only 0, 2 and 41 are written so.
func insertRecordsAs(ctx context.Context, tx *sql.Tx, d dialect, recs []record.Record, version int, fresh map[string]int64) ([]*record.Record, error) {
	attempts, labels, requests := attemptTable, labelTable, requestTable
	ms, stamped := version > 0 && version < 42, version == 0 || version >= 4
	names := d.names
	if version > 0 && version < 43 {
		names = nil
	}
	if ms {
		attempts, requests = msColumns(attempts), store.RequestTable
	}
	if !stamped {
		// Schema version 2 has neither timestamp_ns nor the remaining
		// budget in its attempts.
		attempts, labels = attempts[:len(attempts)-3], labels[:len(labels)-1]
		// Schema version 2 ends its requests with skipped_ejected.
		requests = requests[:slices.IndexFunc(requests, func(c store.Column) bool { return c.Name == "skipped_ejected" })+1]
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
	reqArgs := make([]any, 0, len(recs)*len(store.RequestColumns))
	var ids []string
	for i := range recs {
		if r := &recs[i]; !seen[r.RequestID] {
			seen[r.RequestID] = true
			n := len(reqArgs)
			reqArgs = store.RequestArgs(reqArgs, r)[:n+len(requests)]
			if !ms {
				for _, j := range requestDurations {
					reqArgs[n+j] = nsArg(reqArgs[n+j])
				}
			}
			ids = append(ids, r.RequestID)
		}
	}
	// Names as ids, those of the attempts too: every new name of the
	// batch is added at once, in one order (see nameCache.resolve).
	var nameIDs map[string]int64
	if names != nil {
		seen := map[string]bool{}
		pos := namePositions("requests", requests)
		list := collectNames(reqArgs, len(requests), pos, nil, seen)
		for i := range recs {
			for _, a := range recs[i].Attempts[:min(len(recs[i].Attempts), store.MaxAttempts)] {
				for _, n := range [...]string{a.Channel, a.Status, a.Role, a.Outcome} {
					if n = store.Clean(n, store.MaxNameLen); !seen[n] {
						seen[n] = true
						list = append(list, n)
					}
				}
			}
		}
		var err error
		if nameIDs, err = names.resolve(ctx, tx, d, list, fresh); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
		replaceNames(reqArgs, len(requests), pos, nameIDs)
	}
	name := func(n string) any {
		n = store.Clean(n, store.MaxNameLen)
		if nameIDs == nil {
			return n
		}
		return nameIDs[n]
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
	inserted, err := insertRows(ctx, tx, d, "requests", requests, reqArgs, conflict, returning)
	if err != nil {
		return nil, err
	}
	if d.partitioned {
		inserted = ids
	}
	isNew := make(map[string]bool, len(inserted))
	for _, id := range inserted {
		isNew[id] = true
	}
	var attArgs, labArgs []any
	dur := nsArg
	if ms {
		dur = func(v any) any { return v }
	}
	stored := make([]*record.Record, 0, len(inserted))
	for i := range recs {
		r := &recs[i]
		if !isNew[r.RequestID] {
			continue
		}
		delete(isNew, r.RequestID) // the first record of an id only
		stored = append(stored, r)
		for j, a := range r.Attempts[:min(len(r.Attempts), store.MaxAttempts)] {
			attArgs = append(attArgs, r.RequestID, int64(j), name(a.Channel),
				dur(store.OffsetArg(a.UpstreamStartMs)), dur(store.SpanArg(a.UpstreamHeadersMs)), dur(store.OffsetArg(a.UpstreamHeadersAtMs)),
				name(a.Status), int64(a.HTTPStatus), store.Clean(a.Error, store.MaxErrorLen),
				name(a.Role), name(a.Outcome), dur(store.OffsetArg(a.FirstResponseAtMs)),
				store.IntArg(a.TokensInput), store.IntArg(a.TokensOutput))
			if stamped {
				attArgs = append(attArgs, r.Timestamp.UnixNano(), store.Int64Arg(a.RemainingRequests), store.Int64Arg(a.RemainingTokens))
			}
		}
		for j, l := range r.Diagnosis[:min(len(r.Diagnosis), store.MaxLabels)] {
			labArgs = append(labArgs, r.RequestID, int64(j), store.Clean(l, store.MaxNameLen))
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

// nameRefs are a request row's name columns as read (ids, or text in a
// table of before 0043), in the order of requestNames.
type nameRefs [11]any

// requestNames are the fields of the name columns of a request row.
func requestNames(r *record.Record) [11]*string {
	return [11]*string{&r.API, &r.Route, &r.Group, &r.KeyName, &r.Channel, &r.Region, &r.Provider, &r.Status,
		&r.Terminal, &r.FinishReason, &r.Tokens.Source}
}

// setNames fills r's name fields from refs, and then its upstream model
// (store.FillUpstreamModel, which reads the channel); false when c does
// not know one of the ids (c nil: text only).
func setNames(r *record.Record, refs *nameRefs, c *nameCache) bool {
	for i, p := range requestNames(r) {
		if c == nil {
			*p, _ = textName(refs[i])
			continue
		}
		n, ok := c.nameOf(refs[i])
		if !ok {
			return false
		}
		*p = n
	}
	store.FillUpstreamModel(r)
	return true
}

// scanRecord reads a row of requests with its names as text (in the
// migrations before 0043: backfillRollups).
func scanRecord(sc scanner) (record.Record, error) {
	var refs nameRefs
	r, err := scanRecordRefs(sc, &refs)
	if err == nil {
		setNames(&r, &refs, nil)
	}
	return r, err
}

// scanRecordRefs reads a row of requests, its names into refs.
func scanRecordRefs(sc scanner, refs *nameRefs) (record.Record, error) {
	var r record.Record
	var ts int64
	var tokens [4]sql.NullInt64
	var skipped, rateSkips string
	f := &r.Fields
	err := sc.Scan(
		&r.RequestID, &ts, &refs[0], &refs[1], &r.Model, &refs[2], &refs[3], &r.UserHash,
		&refs[4], &refs[5], &refs[6], &refs[7], &r.HTTPStatus, &r.Error, &r.Stream, &refs[8], &refs[9],
		spanNs{&f.AuthMs}, spanNs{&f.DistributionMs}, spanNs{&f.BodyReadMs}, spanNs{&f.UpstreamHeadersMs}, offsetNs{&f.UpstreamStartMs},
		offsetNs{&f.UpstreamHeadersAtMs}, offsetNs{&f.FirstSSEEventMs}, offsetNs{&f.FirstResponseMs}, offsetNs{&f.FirstTextDeltaMs},
		offsetNs{&f.FirstTextSentMs}, offsetNs{&f.UpstreamDoneMs}, offsetNs{&f.TotalHandlerMs}, &r.VisibleOutputTPS, spanNs{&r.InterTokenLatencyMs},
		&tokens[0], &tokens[1], &tokens[2], &tokens[3], &refs[10],
		&r.Events.Heartbeat, &r.Events.Metadata, &r.Events.Reasoning, &r.Events.Tool, &r.Events.Text,
		&r.Events.Done, &r.Events.Error, &r.Events.Unknown,
		&r.Inflight.Gateway, &r.Inflight.Channel,
		spanNs{&f.MaxOutputGapMs}, offsetNs{&f.MaxOutputGapAtMs}, spanNs{&f.RequestWaitMs}, offsetNs{&f.HeadersSentMs},
		&r.TraceID, &skipped, &r.UpstreamModel, spanNs{&f.AdmissionWaitMs}, &rateSkips, spanNs{&f.UpstreamAuthMs}, spanNs{&r.ProviderLatencyMs},
	)
	if err != nil {
		return r, err
	}
	r.SkippedEjected = store.DecodeNames(skipped)
	// store.FillUpstreamModel needs the channel: see setNames.
	r.SkippedRateLimited = store.DecodeSkips(rateSkips)
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
	if id == "" || len(id) > store.MaxIDLen {
		return record.Record{}, store.ErrNotFound
	}
	row := s.read.QueryRowContext(ctx, "SELECT "+selectRecord+" FROM requests r WHERE r.request_id = $1", id)
	refs := make([]nameRefs, 1)
	r, err := scanRecordRefs(row, &refs[0])
	if errors.Is(err, sql.ErrNoRows) {
		return record.Record{}, store.ErrNotFound
	}
	if err != nil {
		return record.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	recs := []record.Record{r}
	if err := s.fillNames(ctx, recs, refs); err != nil {
		return record.Record{}, fmt.Errorf("get %s: %w", id, err)
	}
	if err := s.attach(ctx, s.read, recs); err != nil {
		return record.Record{}, err
	}
	return recs[0], nil
}

// fillNames fills the name fields of recs from their refs, reloading the
// store's names once when it meets an id it does not know: every id a
// row read refers to was committed with or before it.
func (s *sqlStore) fillNames(ctx context.Context, recs []record.Record, refs []nameRefs) error {
	for i := range recs {
		if !setNames(&recs[i], &refs[i], s.d.names) {
			if err := s.d.names.load(ctx, s.read); err != nil {
				return err
			}
			if !setNames(&recs[i], &refs[i], s.d.names) {
				return fmt.Errorf("record %s: a name id not in record_names", recs[i].RequestID)
			}
		}
	}
	return nil
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

	rows, err := q.QueryContext(ctx, `SELECT request_id, channel, upstream_start_ns, upstream_headers_ns,
		upstream_headers_at_ns, status, http_status, error, role, outcome, first_response_at_ns, tokens_input, tokens_output,
		remaining_requests, remaining_tokens
		FROM request_attempts WHERE request_id IN `+in+` ORDER BY request_id, attempt`, args...)
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	type attemptNames struct {
		r    *record.Record
		i    int
		refs [4]any // channel, status, role, outcome
	}
	var named []attemptNames
	for rows.Next() {
		var id string
		var a record.Attempt
		var tin, tout, rreq, rtok sql.NullInt64
		var refs [4]any
		if err := rows.Scan(&id, &refs[0], offsetNs{&a.UpstreamStartMs}, spanNs{&a.UpstreamHeadersMs},
			offsetNs{&a.UpstreamHeadersAtMs}, &refs[1], &a.HTTPStatus, &a.Error,
			&refs[2], &refs[3], offsetNs{&a.FirstResponseAtMs}, &tin, &tout, &rreq, &rtok); err != nil {
			rows.Close()
			return fmt.Errorf("read attempts: %w", err)
		}
		if tin.Valid {
			a.TokensInput = record.Int(int(tin.Int64))
		}
		if tout.Valid {
			a.TokensOutput = record.Int(int(tout.Int64))
		}
		if rreq.Valid {
			a.RemainingRequests = &rreq.Int64
		}
		if rtok.Valid {
			a.RemainingTokens = &rtok.Int64
		}
		if r := byID[id]; r != nil {
			r.Attempts = append(r.Attempts, a)
			named = append(named, attemptNames{r, len(r.Attempts) - 1, refs})
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	for reloaded := false; len(named) > 0; {
		an := named[0]
		a := &an.r.Attempts[an.i]
		ok := true
		for j, p := range [...]*string{&a.Channel, &a.Status, &a.Role, &a.Outcome} {
			n, known := s.d.names.nameOf(an.refs[j])
			ok = ok && known
			*p = n
		}
		if ok {
			named = named[1:]
			continue
		}
		if reloaded {
			return fmt.Errorf("read attempts: %s: a name id not in record_names", an.r.RequestID)
		}
		if err := s.d.names.load(ctx, q); err != nil {
			return err
		}
		reloaded = true
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
	// nameID is the id of a name in record_names (see nameLookup); false
	// when there is none, which no record then matches.
	nameID func(string) (int64, bool)
	err    error
}

// nameLookup returns a builder's nameID over the store's names, which it
// reloads from q once on a name it does not know; an error of the reload
// goes to b.err.
func (s *sqlStore) nameLookup(ctx context.Context, q querier, b *builder) func(string) (int64, bool) {
	synced := false
	return func(n string) (int64, bool) {
		if id, ok := s.d.names.id(n); ok || synced {
			return id, ok
		}
		synced = true
		if err := s.d.names.load(ctx, q); err != nil {
			b.err = err
			return 0, false
		}
		return s.d.names.id(n)
	}
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
func (b *builder) match(f *store.Filter) {
	ts := "r.timestamp_ns"
	if b.scanTime {
		ts = "+r.timestamp_ns"
	}
	if !f.From.IsZero() {
		b.cond(ts + " >= " + b.arg(store.UnixNano(f.From)))
	}
	if !f.To.IsZero() {
		b.cond(ts + " < " + b.arg(store.UnixNano(f.To)))
	}
	eq := func(col, v string) {
		switch {
		case v == "":
		case nameColumns["requests"][col]:
			if id, ok := b.nameID(v); ok {
				b.cond("r." + col + " = " + b.arg(id))
			} else {
				b.cond("1 = 0") // a name never stored
			}
		default:
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

func (s *sqlStore) List(ctx context.Context, f store.Filter) (store.Page, error) {
	limit, err := store.PageLimit(&f)
	if err != nil {
		return store.Page{}, err
	}
	var b builder
	b.nameID = s.nameLookup(ctx, s.read, &b)
	b.match(&f)
	if b.err != nil {
		return store.Page{}, fmt.Errorf("list: %w", b.err)
	}
	if f.Cursor != "" {
		ts, id, err := store.DecodeCursor(f.Cursor)
		if err != nil {
			return store.Page{}, err
		}
		b.cond("(r.timestamp_ns, r.request_id) < (" + b.arg(ts) + ", " + b.arg(id) + ")")
	}
	q := "SELECT " + selectRecord + " FROM requests r" + b.where() +
		" ORDER BY r.timestamp_ns DESC, r.request_id DESC LIMIT " + b.arg(limit+1)
	rows, err := s.read.QueryContext(ctx, q, b.args...)
	if err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	recs := make([]record.Record, 0, min(limit+1, 64))
	refs := make([]nameRefs, 0, cap(recs))
	for rows.Next() {
		refs = append(refs, nameRefs{})
		r, err := scanRecordRefs(rows, &refs[len(refs)-1])
		if err != nil {
			rows.Close()
			return store.Page{}, fmt.Errorf("list: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Close(); err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	if err := s.fillNames(ctx, recs, refs); err != nil {
		return store.Page{}, fmt.Errorf("list: %w", err)
	}
	var p store.Page
	if len(recs) > limit {
		recs = recs[:limit]
		p.Next = store.EncodeCursor(&recs[limit-1])
	}
	if err := s.attach(ctx, s.read, recs); err != nil {
		return store.Page{}, err
	}
	p.Records = recs
	return p, nil
}

func (s *sqlStore) DeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	if s.d.partitioned {
		return s.dropDaysBefore(ctx, t)
	}
	if limit <= 0 {
		limit = store.DefaultDeleteLimit
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
		if err := deleteRollupsBefore(ctx, tx, store.UnixNano(t)); err != nil {
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
		if err := deleteRollupsBefore(ctx, tx, store.UnixNano(t)); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete: commit: %w", err)
	}
	return int(n), nil
}

// Pools returns the store's read and write pools, for tests and tools
// that look inside the database (see internal/store/storetest).
func (s *sqlStore) Pools() (read, write *sql.DB) { return s.read, s.write }

// SetMaxStatsRows lowers MaxStatsRows for this store, so that tests need
// not store millions of records to reach it.
func (s *sqlStore) SetMaxStatsRows(n int) { s.maxStatsRows = n }

// StatsSlots is the channel that bounds concurrent Stats calls, for tests
// that hold its slots.
func (s *sqlStore) StatsSlots() chan struct{} { return s.statsSlots }
