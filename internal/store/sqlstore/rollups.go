package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store/rollup"
)

// newWriterID returns a random id for the minute rows of one open store:
// each gateway process writes rows of its own, so gateways sharing a
// database never update the same row.
func newWriterID() string {
	var b [6]byte
	rand.Read(b[:])
	return "w" + hex.EncodeToString(b[:])
}

// rollupTable is the rollups table's columns in the order rollupArgs
// writes them.
var rollupTable = func() []store.Column {
	cs := slices.Concat(store.Cols(store.IntCol, "level", "start_ns", "series"),
		store.Cols(store.TextCol, "writer"), store.Cols(store.IntCol, "count"), store.Cols(store.TextCol, "labels"))
	for _, f := range store.StatFields {
		cs = append(cs, store.Column{Name: f.RollupColumn(), Kind: store.BytesCol})
	}
	return append(cs, store.Column{Name: "statuses", Kind: store.TextCol}) // added by 0006_projections.sql
}()

// rollupUpsert is the conflict clause that replaces a row with the merged
// one the statement carries. On PostgreSQL only the raw minute rows have a
// unique index (0037_rollup_indexes.postgres.sql): its conflict target
// names that index's predicate, and a compacted row (written after its
// unit's rows were deleted) is a plain insert.
func rollupUpsert(d dialect) string {
	if d.name == "postgres" {
		return rollupUpsertPostgres
	}
	return rollupUpsertSQLite
}

var rollupUpsertSQLite, rollupUpsertPostgres = func() (string, string) {
	set := []string{"count = excluded.count", "labels = excluded.labels", "statuses = excluded.statuses"}
	for _, f := range store.StatFields {
		c := f.RollupColumn()
		set = append(set, c+" = excluded."+c)
	}
	target := "ON CONFLICT (level, start_ns, series, writer)"
	update := " DO UPDATE SET " + strings.Join(set, ", ")
	return target + update, target + " WHERE level = 0" + update
}()

// rollupArgs appends the arguments of one rollup row of series (its key's
// id: see ensureSeries), at its stored level: a row of a projection
// without the status (p > 0) counts its records per status.
func rollupArgs(args []any, level int, p int, start int64, series int64, writer string, c *rollup.Cell) ([]any, error) {
	statuses := ""
	if p > 0 {
		statuses = rollup.EncodeStatuses(c.Statuses)
	}
	args = append(args, rollup.StoredLevel(level, p), start, series, writer, c.Count, rollup.EncodeLabels(c.Labels))
	for _, s := range c.Sketches {
		if s == nil || s.Count() == 0 {
			args = append(args, nil)
			continue
		}
		b, err := s.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		args = append(args, b)
	}
	return append(args, statuses), nil
}

// scannedRollup is one rollup row as read by scanRollup. The sketches are
// only valid until the next scan.
type scannedRollup struct {
	level    int
	start    int64
	key      rollup.Key
	count    int64
	labels   string
	statuses string
	sketches []sql.RawBytes
	dest     []any
}

func newScannedRollup() *scannedRollup {
	r := &scannedRollup{sketches: make([]sql.RawBytes, len(store.StatFields))}
	var stream any
	r.dest = []any{&r.level, &r.start, &r.key.API, &r.key.Route, &r.key.Model, &r.key.Group, &r.key.Channel,
		&r.key.Region, &r.key.Provider, &stream, &r.key.Status, &r.count, &r.labels, &r.statuses}
	for i := range r.sketches {
		r.dest = append(r.dest, &r.sketches[i])
	}
	return r
}

func (r *scannedRollup) scan(rows *sql.Rows) error {
	var stream any
	r.dest[9] = &stream
	if err := rows.Scan(r.dest...); err != nil {
		return err
	}
	switch v := stream.(type) {
	case bool:
		r.key.Stream = v
	case int64:
		r.key.Stream = v != 0
	default:
		return fmt.Errorf("rollup stream flag of type %T", stream)
	}
	return nil
}

// bytesOf returns the scanned sketches as [][]byte without copying.
func (r *scannedRollup) bytesOf() [][]byte {
	out := make([][]byte, len(r.sketches))
	for i, b := range r.sketches {
		out[i] = b
	}
	return out
}

// writeRollups adds recs — the records this transaction inserted — to the
// minute rows of writer, and marks their coarser units dirty, in tx. The
// minute rows it changes are read, merged with the records and written
// back whole (a sketch cannot be added to in SQL); as only one insert at a
// time writes a writer's rows (sqlStore.lanes), no update is lost.
func writeRollups(ctx context.Context, tx *sql.Tx, d dialect, writer string, recs []*record.Record) error {
	if len(recs) == 0 {
		return nil
	}
	cells := map[rollup.UnitKey]*rollup.Cell{}
	var minutes []int64
	for _, r := range recs {
		k := rollup.UnitKey{Start: rollup.FloorUnit(r.Timestamp.UnixNano(), time.Minute), Key: rollup.KeyOf(r)}
		c := cells[k]
		if c == nil {
			c = rollup.NewCell()
			cells[k] = c
			if !slices.Contains(minutes, k.Start) {
				minutes = append(minutes, k.Start)
			}
		}
		c.Add(r)
	}
	slices.Sort(minutes)

	// The stored rows of these minutes, merged into the batch's.
	sr := newScannedRollup()
	err := readMinuteRollups(ctx, tx, d, writer, minutes, func(rows *sql.Rows) error {
		if err := sr.scan(rows); err != nil {
			return err
		}
		if c := cells[rollup.UnitKey{Start: sr.start, Key: sr.key}]; c != nil {
			return c.MergeRow(sr.key.Status, sr.count, sr.statuses, sr.labels, sr.bytesOf())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read rollups: %w", err)
	}

	// Write them back, in key order so that the statement text and the
	// locks it takes do not depend on map order.
	keys := make([]rollup.UnitKey, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, rollup.CompareUnitKeys)
	series := make([]rollup.Key, len(keys))
	for i, k := range keys {
		series[i] = k.Key
	}
	ids, err := ensureSeries(ctx, tx, d, series)
	if err != nil {
		return fmt.Errorf("write rollups: %w", err)
	}
	var rargs []any
	for _, k := range keys {
		if rargs, err = rollupArgs(rargs, rollup.Minute, 0, k.Start, ids[k.Key], writer, cells[k]); err != nil {
			return fmt.Errorf("write rollups: %w", err)
		}
	}
	if _, err := insertRows(ctx, tx, d, "rollups", rollupTable, rargs, rollupUpsert(d), ""); err != nil {
		return fmt.Errorf("write rollups: %w", err)
	}
	return markDirty(ctx, tx, d, minutes, writer)
}

// readMinuteRollups calls each for every stored minute row of writer whose
// start is in minutes. The minutes go in IN lists of a few fixed lengths,
// padded with their last minute, so that the statements stay prepared in
// stmts: SQLite otherwise parses the query at every write, which was about
// a tenth of the CPU of writing one record (issue 15).
func readMinuteRollups(ctx context.Context, tx *sql.Tx, d dialect, writer string, minutes []int64, each func(*sql.Rows) error) error {
	for len(minutes) > 0 {
		n := min(len(minutes), 64)
		size := 64
		for _, c := range [...]int{1, 4, 16} {
			if n <= c {
				size = c
				break
			}
		}
		args := make([]any, 0, 1+size)
		args = append(args, writer)
		for i := range size {
			args = append(args, minutes[min(i, n-1)])
		}
		if err := queryCached(ctx, tx, d.stmts, minuteRollupsQuery(d, size), args, each); err != nil {
			return err
		}
		minutes = minutes[n:]
	}
	return nil
}

// minuteRollupsQuery is the query of readMinuteRollups for an IN list of n.
func minuteRollupsQuery(d dialect, n int) string {
	key := "minute-rollups/" + d.name + "/" + strconv.Itoa(n)
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	marks := make([]string, n)
	for i := range marks {
		marks[i] = "$" + strconv.Itoa(i+2)
	}
	q := "SELECT " + rollup.SelectColumns + " FROM " + rollupsFrom(d) + " WHERE level = 0 AND writer = $1 AND start_ns IN (" + strings.Join(marks, ", ") + ")"
	insertSQL.Store(key, q)
	return q
}

// markDirty marks the coarser units of minutes dirty for writer (minutes
// have only raw rows, never compacted: see rollup.Finer). The
// update of an existing mark (rather than doing nothing) takes its row lock
// on PostgreSQL, so that a compaction claiming the mark waits for this
// transaction and then reads what it wrote (see compactUnit).
func markDirty(ctx context.Context, tx *sql.Tx, d dialect, minutes []int64, writer string) error {
	type unit struct {
		level int
		start int64
	}
	var args []any
	seen := map[unit]bool{}
	for _, m := range minutes {
		for level := rollup.Minute + 1; level < rollup.NumLevels; level++ {
			u := unit{level, rollup.FloorUnit(m, rollup.Unit[level])}
			if !seen[u] {
				seen[u] = true
				args = append(args, int64(level), u.start, writer, int64(1))
			}
		}
	}
	_, err := insertRows(ctx, tx, d, "rollup_dirty", dirtyTable, args,
		"ON CONFLICT (level, start_ns, writer) DO UPDATE SET seq = rollup_dirty.seq + 1", "")
	if err != nil {
		return fmt.Errorf("mark rollups dirty: %w", err)
	}
	return nil
}

var dirtyTable = slices.Concat(store.Cols(store.IntCol, "level", "start_ns"), store.Cols(store.TextCol, "writer"), store.Cols(store.IntCol, "seq"))

// backfillWriter names the minute rollup rows made from the records stored
// before rollups existed.
const backfillWriter = "backfill"

// backfillRollups makes the rollups of every record already stored, when
// a database made before rollups (0003) is migrated: reads of
// the summaries come from rollups only, so records without them would be
// missing from every answer. It reads the records in time order, a page at
// a time, through the ingest path (writeRollups), in the migration's
// transaction.
func backfillRollups(ctx context.Context, tx *sql.Tx, d dialect) error {
	// Rollups are written with their records since 0003: a database that
	// has any was made or migrated since, and has all of them.
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM rollups LIMIT 1) r`).Scan(&have); err != nil {
		return fmt.Errorf("backfill rollups: %w", err)
	}
	if have > 0 {
		return nil
	}
	sel, err := selectRecordAsMigrated(ctx, tx)
	if err != nil {
		return fmt.Errorf("backfill rollups: %w", err)
	}
	const page = 5000
	var lastTS int64 = math.MinInt64
	lastID := ""
	for {
		rows, err := tx.QueryContext(ctx, "SELECT "+sel+" FROM requests r WHERE (r.timestamp_ns, r.request_id) > ($1, $2)"+
			" ORDER BY r.timestamp_ns, r.request_id LIMIT $3", lastTS, lastID, page)
		if err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		var recs []record.Record
		for rows.Next() {
			r, err := scanRecord(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("backfill rollups: %w", err)
			}
			recs = append(recs, r)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		if len(recs) == 0 {
			return nil
		}
		if err := readLabels(ctx, tx, recs); err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		ptrs := make([]*record.Record, len(recs))
		for i := range recs {
			ptrs[i] = &recs[i]
		}
		if err := writeRollups(ctx, tx, d, backfillWriter, ptrs); err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		last := &recs[len(recs)-1]
		lastTS, lastID = last.Timestamp.UnixNano(), last.RequestID
		if len(recs) < page {
			return nil
		}
	}
}

// readLabels fills the diagnosis labels of recs, in order.
func readLabels(ctx context.Context, q querier, recs []record.Record) error {
	byID := make(map[string]*record.Record, len(recs))
	args := make([]any, len(recs))
	marks := make([]string, len(recs))
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
		args[i] = recs[i].RequestID
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	rows, err := q.QueryContext(ctx, `SELECT request_id, label FROM request_labels WHERE request_id IN (`+
		strings.Join(marks, ", ")+`) ORDER BY request_id, position`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, label string
		if err := rows.Scan(&id, &label); err != nil {
			return err
		}
		if r := byID[id]; r != nil {
			r.Diagnosis = append(r.Diagnosis, label)
		}
	}
	return rows.Err()
}

// selectRecordAsMigrated is selectRecord for a migration that runs before
// later ones added columns to requests: a column the table does not have
// yet is read as its default (an empty string for text, 0, false, NULL for
// the rest), as the later migration fills old rows.
func selectRecordAsMigrated(ctx context.Context, tx *sql.Tx) (string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT * FROM requests LIMIT 0")
	if err != nil {
		return "", err
	}
	have, err := rows.Columns()
	rows.Close()
	if err != nil {
		return "", err
	}
	out := make([]string, len(store.RequestTable))
	for i, c := range store.RequestTable {
		switch {
		case slices.Contains(have, c.Name):
			out[i] = "r." + c.Name
		case c.Kind == store.TextCol:
			out[i] = "''"
		case c.Kind == store.IntCol:
			out[i] = "0"
		case c.Kind == store.BoolCol:
			out[i] = "CAST(0 AS BOOLEAN)"
		default:
			out[i] = "NULL"
		}
	}
	return strings.Join(out, ", "), nil
}
