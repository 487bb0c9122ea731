package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"

	"github.com/ttfx/ttfx/internal/store/rollup"
)

// Compact implements Compactor. Readers never need it for correct answers
// (a dirty hour is read from its minutes), only for fast ones.
func (s *sqlStore) Compact(ctx context.Context, now time.Time) (int, error) {
	if s.d.partitioned {
		if err := s.prepareDays(ctx, now); err != nil {
			return 0, fmt.Errorf("compact: %w", err)
		}
	}
	// Units that ended at least CompactionGrace ago, finest first, so
	// that a coarser unit is made from up-to-date finer ones.
	var b builder
	var or []string
	for level := rollup.Minute + 1; level < rollup.NumLevels; level++ {
		cut := now.Add(-rollup.Unit[level] - store.CompactionGrace).UnixNano()
		or = append(or, "(level = "+b.arg(int64(level))+" AND start_ns <= "+b.arg(cut)+")")
	}
	rows, err := s.write.QueryContext(ctx, `SELECT DISTINCT level, start_ns, `+levelRank+` AS rank FROM rollup_dirty WHERE `+strings.Join(or, " OR ")+
		` ORDER BY rank, start_ns LIMIT `+b.arg(store.MaxCompactPerCall), b.args...)
	if err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	var units [][2]int64
	for rows.Next() {
		var u [2]int64
		var rank int64
		if err := rows.Scan(&u[0], &u[1], &rank); err != nil {
			rows.Close()
			return 0, fmt.Errorf("compact: %w", err)
		}
		units = append(units, u)
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	made := 0
	for _, u := range units {
		ok, err := s.compactUnit(ctx, int(u[0]), u[1])
		if err != nil {
			return made, err
		}
		if ok {
			made++
		}
	}
	return made, nil
}

// CompactionBacklog implements store.Backlogger: the dirty units that
// ended CompactionGrace before now.
func (s *sqlStore) CompactionBacklog(ctx context.Context, now time.Time) (int, error) {
	var b builder
	var or []string
	for level := rollup.Minute + 1; level < rollup.NumLevels; level++ {
		cut := now.Add(-rollup.Unit[level] - store.CompactionGrace).UnixNano()
		or = append(or, "(level = "+b.arg(int64(level))+" AND start_ns <= "+b.arg(cut)+")")
	}
	var n int
	err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT DISTINCT level, start_ns FROM rollup_dirty WHERE `+
		strings.Join(or, " OR ")+`) u`, b.args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("compaction backlog: %w", err)
	}
	return n, nil
}

// levelRank is an SQL expression of a row's level that orders levels from
// the finest unit to the coarsest (see Order).
var levelRank = func() string {
	var b strings.Builder
	b.WriteString("CASE level")
	for i, l := range rollup.Order {
		fmt.Fprintf(&b, " WHEN %d THEN %d", l, i)
	}
	b.WriteString(" END")
	return b.String()
}()

// compactUnit remakes the rollup rows of one unit from the next finer
// level's and clears its dirty marks, in one transaction. It reports false
// when there was nothing to do: another gateway claimed the unit first, or
// one of its finer units is still dirty.
//
// The marks are claimed first (deleted), and only then are the finer rows
// read. A writer that changes a finer row marks the unit dirty in the same
// transaction, updating its existing mark (so taking its row lock) or
// inserting a new one: if it committed before the claim, the claim took
// its mark and the read sees its rows (on PostgreSQL each statement of a
// read-committed transaction sees what committed before it, and the claim
// waited for the writer's lock); if it commits after, its mark survives and
// the unit is compacted again. No change to a finer row is lost to a
// concurrent compaction.
func (s *sqlStore) compactUnit(ctx context.Context, level int, start int64) (bool, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM rollup_dirty WHERE level = $1 AND start_ns = $2`, int64(level), start)
	if err != nil {
		return false, fmt.Errorf("compact: claim: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	end := start + int64(rollup.Unit[level])
	finer := rollup.Finer[level]
	if finer > rollup.Minute {
		// A unit is made of up-to-date finer units only; a dirty one
		// keeps it dirty (the rollback restores its marks).
		var dirty int
		err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM rollup_dirty WHERE level = $1 AND start_ns >= $2 AND start_ns < $3`,
			int64(finer), start, end).Scan(&dirty)
		if err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
		if dirty > 0 {
			return false, nil
		}
	}
	// Made from the finer level's rows of every dimension and status (a
	// ten-minute unit from its minutes' raw rows, every writer's), or,
	// for a finer unit that left projection 0 out, from its own finer
	// rows: what a summary of projection 0 reads for the unit.
	plan := rollup.Plan{Missing: map[[2]int64]uint16{}}
	for l := range rollup.NumLevels {
		plan.Allowed[l] = true
	}
	if finer > rollup.Minute {
		rows, err := tx.QueryContext(ctx, `SELECT level, start_ns, missing FROM rollup_units WHERE level IN (`+compactedLevels+
			`) AND start_ns >= $1 AND start_ns < $2 AND (missing & 1) <> 0`, start, end)
		if err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
		for rows.Next() {
			var l, st, m int64
			if err := rows.Scan(&l, &st, &m); err != nil {
				rows.Close()
				return false, fmt.Errorf("compact: %w", err)
			}
			plan.Missing[[2]int64{l, st}] = uint16(m)
		}
		if err := rows.Close(); err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
	}
	plan.Cover(finer, start, end)
	cells := map[rollup.Key]*rollup.Cell{}
	read := 0
	sr := newScannedRollup()
	for _, g := range plan.ByLevel(0) {
		// Past rollup.MaxSpansInSQL spans the query reads their envelope,
		// which may hold rows read at another level: those are skipped.
		envelope := len(g.Spans) > rollup.MaxSpansInSQL
		query, args := spanQuery(rollup.SelectColumns, rollupsFrom(s.d), g.Level, g.Spans, nil, s.d.name == "sqlite")
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
		for rows.Next() {
			if err := sr.scan(rows); err != nil {
				rows.Close()
				return false, fmt.Errorf("compact: %w", err)
			}
			if envelope && !rollup.InSpans(g.Spans, sr.start) {
				continue
			}
			read++
			c := cells[sr.key]
			if c == nil {
				c = rollup.NewCell()
				cells[sr.key] = c
			}
			if err := c.MergeRow(sr.key.Status, sr.count, sr.statuses, sr.labels, sr.bytesOf()); err != nil {
				rows.Close()
				return false, fmt.Errorf("compact: %w", err)
			}
		}
		if err := rows.Close(); err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
	}
	var b builder
	levels := rollup.StoredLevels(level)
	marks := make([]string, len(levels))
	for i, l := range levels {
		marks[i] = b.arg(l)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM rollups WHERE level IN (`+strings.Join(marks, ", ")+`) AND start_ns = `+b.arg(start), b.args...); err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM rollup_units WHERE level = $1 AND start_ns = $2`, int64(level), start); err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	var records int64
	for _, c := range cells {
		records += c.Count
	}
	missing := rollup.Sparse(rollup.ProjectedRows(cells), read, records)
	projected := rollup.ProjectSome(cells, missing)
	if missing != 0 {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rollup_units (level, start_ns, missing) VALUES ($1, $2, $3)`,
			int64(level), start, int64(missing)); err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
	}
	var series []rollup.Key
	for p, cells := range projected {
		if missing&(1<<p) == 0 {
			for k := range cells {
				series = append(series, k)
			}
		}
	}
	ids, err := ensureSeries(ctx, tx, s.d, series)
	if err != nil {
		return false, fmt.Errorf("compact: %w", err)
	}
	for p, cells := range projected {
		if missing&(1<<p) != 0 {
			continue
		}
		keys := make([]rollup.Key, 0, len(cells))
		for k := range cells {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b rollup.Key) int { return rollup.CompareKeys(&a, &b) })
		var args []any
		for _, k := range keys {
			if args, err = rollupArgs(args, level, p, start, ids[k], "", cells[k]); err != nil {
				return false, fmt.Errorf("compact: %w", err)
			}
		}
		if _, err := insertRows(ctx, tx, s.d, "rollups", rollupTable, args, rollupUpsert(s.d), ""); err != nil {
			return false, fmt.Errorf("compact: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("compact: commit: %w", err)
	}
	return true, nil
}

// deleteRollupsBefore deletes the rollup rows and dirty marks of units
// that end at or before t: retention removes rollups with their records. A
// unit that straddles t keeps its row (and so still counts the records
// deleted from its first part) until it ends before the cutoff too.
func deleteRollupsBefore(ctx context.Context, tx *sql.Tx, t int64) error {
	for level := range rollup.NumLevels {
		last := t - int64(rollup.Unit[level]) // a unit starting at or before this ends by t
		for _, l := range rollup.StoredLevels(level) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM rollups WHERE level = $1 AND start_ns <= $2`, l, last); err != nil {
				return fmt.Errorf("delete rollups: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rollup_dirty WHERE level = $1 AND start_ns <= $2`, int64(level), last); err != nil {
			return fmt.Errorf("delete rollup marks: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM rollup_units WHERE level = $1 AND start_ns <= $2`, int64(level), last); err != nil {
			return fmt.Errorf("delete rollup marks: %w", err)
		}
	}
	return nil
}
