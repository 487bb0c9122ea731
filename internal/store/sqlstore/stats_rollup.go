package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"
)

// StatsFromRollups answers q from the rollups, over its window widened to
// whole minutes, which it returns (zero for an open end). It reads the
// coarsest rows that are up to date — days, hours, ten minutes, minutes —
// so its cost
// follows the window's length and the variety of the traffic (the keys of
// a row: api, route, model, group, channel, region, provider, stream,
// status), not the number of records.
func (s *sqlStore) StatsFromRollups(ctx context.Context, q *store.StatsQuery, acc *rollup.Acc) (time.Time, time.Time, error) {
	tx, err := s.read.BeginTx(ctx, s.d.readTx)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback()

	// The window in whole minutes, and what of it holds data: the plan
	// then never walks the days of an open or far-reaching end.
	var fromT, toT time.Time
	from, to := int64(math.MinInt64), int64(math.MaxInt64)
	if !q.Filter.From.IsZero() {
		from = rollup.FloorUnit(store.UnixNano(q.Filter.From), time.Minute)
		fromT = time.Unix(0, from).UTC()
	}
	if !q.Filter.To.IsZero() {
		to = store.UnixNano(q.Filter.To)
		if to <= math.MaxInt64-int64(time.Minute) {
			to = rollup.CeilUnit(to, int64(time.Minute))
			toT = time.Unix(0, to).UTC()
		}
	}
	// Two subqueries: SQLite answers a lone MIN or MAX from the index, but
	// scans for both in one select.
	var lo, hi sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT MIN(start_ns) FROM rollups WHERE level = 0),
		(SELECT MAX(start_ns) FROM rollups WHERE level = 0)`).Scan(&lo, &hi); err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	if !lo.Valid {
		return fromT, toT, nil // no records at all
	}
	// Whole days around the data, so that a day row still counts as whole.
	from = max(from, rollup.FloorUnit(lo.Int64, 24*time.Hour))
	to = min(to, rollup.FloorUnit(hi.Int64, 24*time.Hour)+int64(24*time.Hour))
	if from >= to {
		return fromT, toT, nil
	}

	proj := rollup.ProjectionFor(q, acc.DimCols)
	plan := rollup.Plan{Dirty: map[[2]int64]bool{}}
	for level := range rollup.NumLevels {
		plan.Allowed[level] = q.Bucket == 0 || q.Bucket%rollup.Unit[level] == 0
	}
	rows, err := tx.QueryContext(ctx, `SELECT level, start_ns FROM rollup_dirty WHERE start_ns >= $1 AND start_ns < $2`, from, to)
	if err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	for rows.Next() {
		var level, start int64
		if err := rows.Scan(&level, &start); err != nil {
			rows.Close()
			return fromT, toT, fmt.Errorf("stats: %w", err)
		}
		plan.Dirty[[2]int64{level, start}] = true
	}
	if err := rows.Close(); err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	{
		// The units that left out proj (or projection 0, which a unit
		// without its fallback is read in).
		plan.Proj, plan.Missing = proj, map[[2]int64]uint16{}
		rows, err := tx.QueryContext(ctx, `SELECT level, start_ns, missing FROM rollup_units WHERE level IN (`+compactedLevels+
			`) AND start_ns >= $1 AND start_ns < $2 AND (missing & $3) <> 0`, from, to, int64(1)<<proj|1)
		if err != nil {
			return fromT, toT, fmt.Errorf("stats: %w", err)
		}
		for rows.Next() {
			var level, start, missing int64
			if err := rows.Scan(&level, &start, &missing); err != nil {
				rows.Close()
				return fromT, toT, fmt.Errorf("stats: %w", err)
			}
			plan.Missing[[2]int64{level, start}] = uint16(missing)
		}
		if err := rows.Close(); err != nil {
			return fromT, toT, fmt.Errorf("stats: %w", err)
		}
	}
	plan.Cover(rollup.Day, from, to)
	groups := plan.ByLevel(proj)
	series, err := s.d.series.snapshot(ctx, tx)
	if err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	rs := &rollupSeries{rows: series, cond: seriesFilter(series, &q.Filter)}
	if acc.Bucketed() {
		// The cells first, without a sketch (rollup.Acc.CountCell), and
		// each cell's rows, so that the second pass summarises a cell
		// after its last (rollup.Acc.RowDone): the transaction's snapshot
		// makes the second pass meet the same rows.
		acc.SealAsRead()
		for _, g := range groups {
			if err := s.readRollups(ctx, tx, rs, acc, g.Level, g.Spans, true); err != nil {
				return fromT, toT, err
			}
			if acc.Over() {
				return fromT, toT, nil
			}
		}
		acc.DoneCounting()
	}
	for _, g := range groups {
		if err := s.readRollups(ctx, tx, rs, acc, g.Level, g.Spans, false); err != nil {
			return fromT, toT, err
		}
	}
	return fromT, toT, nil
}

// compactedLevels lists the levels of compacted units, for an IN list that
// lets a range of start_ns use rollup_units' key.
var compactedLevels = func() string {
	var ls []string
	for level := rollup.Minute + 1; level < rollup.NumLevels; level++ {
		ls = append(ls, strconv.Itoa(level))
	}
	return strings.Join(ls, ", ")
}()

// spanQuery returns the query of the columns sel of the rollup rows (from:
// see rollupsFrom) of one stored level within spans (ordered, disjoint) that also meet the
// conditions filters adds. Past rollup.MaxSpansInSQL spans it reads their
// envelope, and the caller drops the rows outside them. Else, with union
// (SQLite), a range query per span joined by UNION ALL: with the spans
// ORed in one query SQLite searched each range of a rowid table's key
// index, but reads every row of the level in a WITHOUT ROWID table, which
// has no such plan (40 ms instead of 1 for a day's summary ending
// mid-minute at 100 000 records a week). PostgreSQL keeps the ORed ranges,
// which it searches as a bitmap of index ranges and plans once.
func spanQuery(sel, from string, level int64, spans []rollup.Span, filters func(*builder), union bool) (string, []any) {
	var b builder
	one := func(ranges [][2]int64) string {
		b.conds = nil
		b.cond("level = " + b.arg(level))
		var or []string
		for _, r := range ranges {
			or = append(or, "start_ns >= "+b.arg(r[0])+" AND start_ns < "+b.arg(r[1]))
		}
		if len(or) == 1 {
			b.cond(or[0])
		} else {
			b.cond("((" + strings.Join(or, ") OR (") + "))")
		}
		if filters != nil {
			filters(&b)
		}
		return "SELECT " + sel + " FROM " + from + b.where()
	}
	if len(spans) > rollup.MaxSpansInSQL {
		return one([][2]int64{{spans[0].From, spans[len(spans)-1].To}}), b.args
	}
	if !union {
		ranges := make([][2]int64, len(spans))
		for i, sp := range spans {
			ranges[i] = [2]int64{sp.From, sp.To}
		}
		return one(ranges), b.args
	}
	parts := make([]string, len(spans))
	for i, sp := range spans {
		parts[i] = one([][2]int64{{sp.From, sp.To}})
	}
	return strings.Join(parts, " UNION ALL "), b.args
}

// rollupSeries is what a summary's reads know of the series: every one
// its transaction sees, by id, and the condition on rollups.series of its
// filter ("" without one).
type rollupSeries struct {
	rows map[int64]*seriesRow
	cond string
}

// readRollups merges the rollup rows of one level within spans into acc;
// with count, it reads only their times and group keys, and counts
// acc's cells (acc.CountCell) until they pass the bound. A row's key is
// its series' (rs), not joined in SQL: PostgreSQL hashed every series
// again for each query of a summary, 4–8 ms each at 1 860 series under
// load, which doubled a week's summary.
func (s *sqlStore) readRollups(ctx context.Context, tx *sql.Tx, rs *rollupSeries, acc *rollup.Acc, level int64, spans []rollup.Span, count bool) error {
	filters := func(b *builder) {
		if rs.cond != "" {
			b.cond(rs.cond)
		}
	}
	sel := []string{"start_ns", "series", "count", "labels", "statuses"}
	if count {
		sel = []string{"start_ns", "series"}
	}
	if !count {
		for _, fi := range acc.Fields {
			sel = append(sel, store.StatFields[fi].RollupColumn())
		}
	}
	dimIdx := make([]int, len(acc.DimCols))
	for i, c := range acc.DimCols {
		dimIdx[i] = slices.Index(rollup.KeyColumns, c)
	}
	envelope := len(spans) > rollup.MaxSpansInSQL
	query, args := spanQuery(strings.Join(sel, ", "), "rollups", level, spans, filters, s.d.name == "sqlite")
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	defer rows.Close()
	var start, n, id int64
	var labels, statuses sql.RawBytes
	sketches := make([]sql.RawBytes, len(acc.Fields))
	dest := []any{&start, &id, &n, &labels, &statuses}
	if count {
		dest = dest[:2]
		sketches = nil
	}
	for i := range sketches {
		dest = append(dest, &sketches[i])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("stats: rollups: %w", err)
		}
		if envelope && !rollup.InSpans(spans, start) {
			continue
		}
		sr := rs.rows[id]
		if sr == nil {
			return fmt.Errorf("stats: rollup row of series %d, which is not in rollup_series", id)
		}
		for i, k := range dimIdx {
			acc.SetDim(i, sr.cols[k])
		}
		if count {
			if acc.CountCell(start) {
				break
			}
			continue
		}
		c := acc.CellAt(start)
		if acc.Over() {
			break // refused whatever follows
		}
		c.AddRowCounts(sr.cols[statusCol], n, statuses)
		if len(labels) > 0 {
			rollup.AddLabels(c.Labels, string(labels))
		}
		for i, sk := range sketches {
			if len(sk) == 0 {
				continue
			}
			if err := c.SketchOf(i).MergeBinary(sk); err != nil {
				return fmt.Errorf("stats: rollup of %s at %s: %w", store.StatFields[acc.Fields[i]].Name,
					time.Unix(0, start).UTC().Format(time.RFC3339), err)
			}
		}
		acc.RowDone(c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	return nil
}

// Stats summarises the records matching q. It answers from the rollups
// (see StatsFromRollups) unless a filter needs the records themselves (see
// RowsReason); then it reads them (StatsFromRows), bounded by MaxStatsRows.
// It waits while MaxConcurrentStats other calls run.
func (s *sqlStore) Stats(ctx context.Context, q store.StatsQuery) (store.Stats, error) {
	return rollup.Answer(ctx, q, s.statsSlots, s)
}
