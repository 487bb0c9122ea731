package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"
)

// A rollup row names its key — api, route, model, group, channel, region,
// provider, stream flag and status — by the id of a row of rollup_series
// (migration 0038): the strings once, not in every row. At 100 000 records
// a week nearly every raw minute row summarises one record, and the key's
// strings (about 110 bytes, and again in the table's interior pages) were
// a fifth of the rollups' bytes. Reads join rollup_series (rollupsFrom),
// so the queries filter and group by the key's columns as before.

// seriesCache keeps the ids of the series a store has found stored before
// the transaction that looked them up: those are committed, so every
// later transaction may name them without a lookup. The ids of series a
// transaction added itself are not kept: it may yet roll back.
type seriesCache struct {
	ids  sync.Map // rollup.Key → int64
	mu   sync.Mutex
	byID map[int64]*seriesRow // see snapshot
}

// seriesTable is rollup_series' columns as ensureSeries inserts them (the
// id is the engine's: a rowid on SQLite, an identity on PostgreSQL).
var seriesTable = slices.Concat(store.Cols(store.TextCol, "api", "route", "model", "group_name", "channel", "region", "provider"),
	store.Cols(store.BoolCol, "stream"), store.Cols(store.TextCol, "status"))

var seriesKeyList = strings.Join(rollup.KeyColumns, ", ")

// rollupsFrom is the FROM clause of every read of rollup rows: the rows
// with their series' key columns. On SQLite CROSS JOIN keeps the rollups
// the outer loop (a range of level and start_ns, each row's series found
// by its id); the planner could otherwise start from rollup_series where a
// filter names a key column.
func rollupsFrom(d dialect) string {
	if d.name == "sqlite" {
		return "rollups CROSS JOIN rollup_series ON rollup_series.id = rollups.series"
	}
	return "rollups JOIN rollup_series ON rollup_series.id = rollups.series"
}

// ensureSeries returns the series id of each of keys, adding to
// rollup_series, in tx, those not stored yet.
func ensureSeries(ctx context.Context, tx *sql.Tx, d dialect, keys []rollup.Key) (map[rollup.Key]int64, error) {
	ids := make(map[rollup.Key]int64, len(keys))
	var unknown []rollup.Key
	for _, k := range keys {
		if _, ok := ids[k]; ok {
			continue
		}
		if d.series != nil {
			if v, ok := d.series.ids.Load(k); ok {
				ids[k] = v.(int64)
				continue
			}
		}
		ids[k] = 0
		unknown = append(unknown, k)
	}
	if len(unknown) == 0 {
		return ids, nil
	}
	// Those stored before this transaction began writing series: committed.
	err := lookupSeries(ctx, tx, d, unknown, func(k rollup.Key, id int64) {
		ids[k] = id
		if d.series != nil {
			d.series.ids.Store(k, id)
		}
	})
	if err != nil {
		return nil, err
	}
	var missing []rollup.Key
	for _, k := range unknown {
		if ids[k] == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return ids, nil
	}
	// Another gateway may add the same series at once: its row wins, and
	// the lookup below finds it once that gateway's transaction commits.
	// In key order, so that two transactions adding some of the same
	// series wait for each other, never in a cycle (PostgreSQL found such
	// deadlocks between two writers).
	slices.SortFunc(missing, func(a, b rollup.Key) int { return rollup.CompareKeys(&a, &b) })
	var args []any
	for _, k := range missing {
		args = append(args, k.API, k.Route, k.Model, k.Group, k.Channel, k.Region, k.Provider, k.Stream, k.Status)
	}
	if _, err := insertRows(ctx, tx, d, "rollup_series", seriesTable, args, "ON CONFLICT ("+seriesKeyList+") DO NOTHING", ""); err != nil {
		return nil, fmt.Errorf("add rollup series: %w", err)
	}
	if err := lookupSeries(ctx, tx, d, missing, func(k rollup.Key, id int64) { ids[k] = id }); err != nil {
		return nil, err
	}
	for _, k := range missing {
		if ids[k] == 0 {
			return nil, fmt.Errorf("rollup series of %s/%s/%s not found after adding it", k.API, k.Model, k.Status)
		}
	}
	return ids, nil
}

// lookupSeries calls found with the id of each of keys stored in
// rollup_series, in chunks of a few hundred keys (their nine columns in a
// row value each).
func lookupSeries(ctx context.Context, tx *sql.Tx, d dialect, keys []rollup.Key, found func(rollup.Key, int64)) error {
	const chunk = 200
	for len(keys) > 0 {
		n := min(len(keys), chunk)
		var b strings.Builder
		b.WriteString("SELECT id, " + seriesKeyList + " FROM rollup_series WHERE (" + seriesKeyList + ") IN (VALUES ")
		args := make([]any, 0, 9*n)
		for i, k := range keys[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j, v := range []any{k.API, k.Route, k.Model, k.Group, k.Channel, k.Region, k.Provider, k.Stream, k.Status} {
				if j > 0 {
					b.WriteString(", ")
				}
				args = append(args, v)
				mark := "?"
				if d.name != "sqlite" {
					mark = fmt.Sprintf("$%d", len(args))
				}
				if j == 7 {
					mark = "CAST(" + mark + " AS BOOLEAN)"
				}
				b.WriteString(mark)
			}
			b.WriteByte(')')
		}
		b.WriteByte(')')
		rows, err := tx.QueryContext(ctx, b.String(), args...)
		if err != nil {
			return fmt.Errorf("rollup series: %w", err)
		}
		for rows.Next() {
			var id int64
			var k rollup.Key
			var stream any
			if err := rows.Scan(&id, &k.API, &k.Route, &k.Model, &k.Group, &k.Channel, &k.Region, &k.Provider, &stream, &k.Status); err != nil {
				rows.Close()
				return fmt.Errorf("rollup series: %w", err)
			}
			switch v := stream.(type) {
			case bool:
				k.Stream = v
			case int64:
				k.Stream = v != 0
			default:
				rows.Close()
				return fmt.Errorf("rollup series stream flag of type %T", stream)
			}
			found(k, id)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("rollup series: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// toSeries is migration 0038's step: the series of the stored rollup
// rows go into rollup_series, and the rollups table is made again with
// their ids instead of the key columns (see the migration). On SQLite the
// new table is a WITHOUT ROWID one where the old one was (0036, a file of
// 16 KB pages); on PostgreSQL it has the indexes of 0037. Then the
// rollups of records stored before rollups existed are made, if any
// (backfillRollups: it writes rows of this shape).
func toSeries(ctx context.Context, tx *sql.Tx, d dialect) error {
	cols := []string{"level INTEGER NOT NULL", "start_ns BIGINT NOT NULL", "series BIGINT NOT NULL", "writer TEXT NOT NULL",
		"count BIGINT NOT NULL", "labels TEXT NOT NULL"}
	copied := []string{"level", "start_ns", "series", "writer", "count", "labels"}
	from := []string{"r.level", "r.start_ns", "s.id", "r.writer", "r.count", "r.labels"}
	for _, f := range store.StatFields {
		c := f.RollupColumn()
		cols = append(cols, c+" BYTEA")
		copied = append(copied, c)
		from = append(from, "r."+c)
	}
	cols = append(cols, "statuses TEXT NOT NULL DEFAULT ''")
	copied = append(copied, "statuses")
	from = append(from, "r.statuses")
	ddl := "CREATE TABLE rollups_series (\n\t" + strings.Join(cols, ",\n\t")
	var after []string
	if d.name == "sqlite" {
		var old string
		if err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'rollups'`).Scan(&old); err != nil {
			return fmt.Errorf("rollup series: %w", err)
		}
		ddl += ",\n\tPRIMARY KEY (level, start_ns, series, writer)\n)"
		if strings.HasSuffix(strings.ToUpper(strings.TrimSpace(old)), " WITHOUT ROWID") {
			ddl += " WITHOUT ROWID"
		}
	} else {
		ddl += "\n)"
		after = []string{
			"CREATE UNIQUE INDEX rollups_minutes ON rollups (level, start_ns, series, writer) WHERE level = 0",
			"CREATE INDEX rollups_units ON rollups (level, start_ns)",
		}
	}
	var on []string
	for _, c := range rollup.KeyColumns {
		on = append(on, "s."+c+" = r."+c)
	}
	stmts := []string{
		"INSERT INTO rollup_series (" + seriesKeyList + ") SELECT DISTINCT " + seriesKeyList + " FROM rollups",
		ddl,
		"INSERT INTO rollups_series (" + strings.Join(copied, ", ") + ") SELECT " + strings.Join(from, ", ") +
			" FROM rollups r JOIN rollup_series s ON " + strings.Join(on, " AND "),
		"DROP TABLE rollups",
		"ALTER TABLE rollups_series RENAME TO rollups",
	}
	for _, s := range append(stmts, after...) {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("rollup series: %.80s: %w", s, err)
		}
	}
	return backfillRollups(ctx, tx, d)
}

// seriesRow is one series as summaries read it: its key, and each of its
// KeyColumns as text (the stream flag "true" or "false").
type seriesRow struct {
	key  rollup.Key
	cols [9][]byte
}

// statusCol is the status' index in rollup.KeyColumns.
var statusCol = slices.Index(rollup.KeyColumns, "status")

// snapshot returns every series the read transaction tx sees, by id: the
// ones the store read last if they are at least as many (series are only
// ever added, never changed or deleted, so of two sets the larger holds
// the smaller), else rollup_series read again. A summary reads the
// rollups without joining it (see readRollups).
func (c *seriesCache) snapshot(ctx context.Context, tx *sql.Tx) (map[int64]*seriesRow, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM rollup_series`).Scan(&n); err != nil {
		return nil, fmt.Errorf("rollup series: %w", err)
	}
	c.mu.Lock()
	m := c.byID
	c.mu.Unlock()
	if m != nil && len(m) >= n {
		return m, nil
	}
	m = make(map[int64]*seriesRow, n)
	rows, err := tx.QueryContext(ctx, `SELECT id, `+seriesKeyList+` FROM rollup_series`)
	if err != nil {
		return nil, fmt.Errorf("rollup series: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var k rollup.Key
		var stream any
		if err := rows.Scan(&id, &k.API, &k.Route, &k.Model, &k.Group, &k.Channel, &k.Region, &k.Provider, &stream, &k.Status); err != nil {
			return nil, fmt.Errorf("rollup series: %w", err)
		}
		switch v := stream.(type) {
		case bool:
			k.Stream = v
		case int64:
			k.Stream = v != 0
		default:
			return nil, fmt.Errorf("rollup series stream flag of type %T", stream)
		}
		r := &seriesRow{key: k}
		for i, col := range rollup.KeyColumns {
			r.cols[i] = []byte(k.Dim(col))
		}
		m[id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("rollup series: %w", err)
	}
	c.mu.Lock()
	if len(m) > len(c.byID) {
		c.byID = m
	}
	c.mu.Unlock()
	return m, nil
}

// seriesFilter returns the condition on rollups.series of the rows of f's
// model, channel, group, status and stream ("" where f names none of
// them): the ids of the series that match, which are integers of the
// store's own and so written into the query as they are.
func seriesFilter(series map[int64]*seriesRow, f *store.Filter) string {
	if f.Model == "" && f.Channel == "" && f.Group == "" && f.Status == "" && f.Stream == nil {
		return ""
	}
	var ids []int64
	for id, r := range series {
		k := &r.key
		if f.Model != "" && k.Model != f.Model || f.Channel != "" && k.Channel != f.Channel || f.Group != "" && k.Group != f.Group ||
			f.Status != "" && k.Status != f.Status || f.Stream != nil && k.Stream != *f.Stream {
			continue
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "1 = 0"
	}
	slices.Sort(ids)
	var b strings.Builder
	b.WriteString("series IN (")
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	b.WriteByte(')')
	return b.String()
}
