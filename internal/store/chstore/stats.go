package chstore

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ttfx/ttfx/internal/record"
)

// chRollupColumns are the rollups table's columns as chStore writes them.
var chRollupColumns = func() []string {
	cs := slices.Concat([]string{"level", "start_ns"}, rollup.KeyColumns, []string{"writer", "count", "labels", "statuses"})
	for _, f := range store.StatFields {
		cs = append(cs, f.RollupColumn())
	}
	return append(cs, "version")
}()

// chRollupRow returns the values of one rollup row of projection p (see
// rollupArgs).
func chRollupRow(level, p int, start int64, k *rollup.Key, writer string, c *rollup.Cell) ([]any, error) {
	var stream uint8
	if k.Stream {
		stream = 1
	}
	statuses := ""
	if p > 0 {
		statuses = rollup.EncodeStatuses(c.Statuses)
	}
	row := []any{uint8(rollup.StoredLevel(level, p)), start, k.API, k.Route, k.Model, k.Group, k.Channel, k.Region, k.Provider,
		stream, k.Status, writer, c.Count, rollup.EncodeLabels(c.Labels), statuses}
	for _, sk := range c.Sketches {
		if sk == nil || sk.Count() == 0 {
			row = append(row, nil)
			continue
		}
		b, err := sk.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		row = append(row, string(b))
	}
	// The version: a unit compacted again holds at least the records it
	// held before, so the row with the larger count is the newer one.
	return append(row, uint64(c.Count)), nil
}

// Kinds of rollup_marks rows.
const (
	markChanged   = 0 // rows below the unit changed
	markCompacted = 1 // the unit was compacted
)

// serverNow is the ClickHouse server's clock in Unix seconds: every
// gateway stamps marks with it, so their order does not depend on the
// gateways' clocks agreeing.
func serverNow(ctx context.Context, db *sql.DB) (int64, error) {
	var now int64
	if err := db.QueryRowContext(ctx, "SELECT toInt64(now())").Scan(&now); err != nil {
		return 0, fmt.Errorf("server clock: %w", err)
	}
	return now, nil
}

// writeRollups writes the minute rollup rows of recs under the batch's
// token, then marks their ten-minute, hour and day units changed. The mark
// is stamped after the rows landed, which is what lets a compaction that
// began later trust that it read them (see Compact).
func (s *chStore) writeRollups(ctx context.Context, token string, recs []*record.Record) error {
	cells := map[rollup.UnitKey]*rollup.Cell{}
	for _, r := range recs {
		k := rollup.UnitKey{Start: rollup.FloorUnit(r.Timestamp.UnixNano(), time.Minute), Key: rollup.KeyOf(r)}
		c := cells[k]
		if c == nil {
			c = rollup.NewCell()
			cells[k] = c
		}
		c.Add(r)
	}
	keys := make([]rollup.UnitKey, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, rollup.CompareUnitKeys)
	rows := make([][]any, 0, len(keys))
	for _, k := range keys {
		row, err := chRollupRow(rollup.Minute, 0, k.Start, &k.Key, token, cells[k])
		if err != nil {
			return fmt.Errorf("write rollups: %w", err)
		}
		rows = append(rows, row)
	}
	if err := chInsert(ctx, s.write, "rollups", chRollupColumns, rows); err != nil {
		return fmt.Errorf("write rollups: %w", err)
	}
	now, err := serverNow(ctx, s.clock)
	if err != nil {
		return fmt.Errorf("write rollups: %w", err)
	}
	seen := map[[2]int64]bool{}
	var marks [][]any
	for _, k := range keys {
		for level := rollup.Minute + 1; level < rollup.NumLevels; level++ { // minutes are never compacted
			u := [2]int64{int64(level), rollup.FloorUnit(k.Start, rollup.Unit[level])}
			if !seen[u] {
				seen[u] = true
				marks = append(marks, []any{uint8(level), u[1], uint8(markChanged), now})
			}
		}
	}
	if err := chInsert(ctx, s.write, "rollup_marks", []string{"level", "start_ns", "kind", "at"}, marks); err != nil {
		return fmt.Errorf("mark rollups dirty: %w", err)
	}
	return nil
}

// chDirtyHaving selects, of rollup_marks grouped by unit, the units changed
// since they were last compacted (or never compacted). Marks are in whole
// seconds, so a change in the second a compaction began leaves the unit
// dirty: it is compacted once more rather than trusted.
const chDirtyHaving = " GROUP BY level, start_ns HAVING maxIf(at, kind = 0) >= maxIf(at, kind = 1) OR countIf(kind = 1) = 0"

// Compact implements Compactor as on the SQL engines: units that ended
// CompactionGrace ago and changed since they were compacted, finest first,
// each made from the next finer level's rows. A level's units are made
// together, with one read and one insert: every insert is a part on disk
// that merges must fold away, and a part per unit outran them (ClickHouse
// delays inserts past 150 parts in a partition).
//
// Without transactions, the order of reads and writes carries the
// guarantee. A compaction reads the server's clock before it reads the
// finer rows and stamps its mark with that; an insert stamps its change
// mark after its rows landed. A change mark older (strictly) than the
// compaction's was made after rows the compaction read; any other leaves
// the unit dirty, to be read from finer rows and compacted again.
func (s *chStore) Compact(ctx context.Context, now time.Time) (int, error) {
	made := 0
	closedBy := now.Add(-store.CompactionGrace).UnixNano()
	closedDays := map[int64]bool{}           // closed days whose rollups this call changed
	for _, level := range rollup.Order[1:] { // minutes keep their raw rows only
		if made >= store.MaxCompactPerCall {
			break
		}
		n, err := s.compactLevel(ctx, level, now.Add(-rollup.Unit[level]-store.CompactionGrace).UnixNano(), store.MaxCompactPerCall-made, closedBy, closedDays)
		made += n
		if err != nil {
			return made, err
		}
	}
	// A closed day's rollups are read often and written rarely: merged
	// into one part, a read of its units opens each column once instead of
	// once per part (the day rows of a 10 M-record week read in 27 ms
	// instead of 56–107 ms, measured on 18.16; a week's stats went from 54
	// to 110 ms when each day had four parts). The merge also drops rows
	// written twice. Days close once, but a late record or a new level
	// compacts a closed day's units again.
	days := slices.Sorted(maps.Keys(closedDays))
	for _, start := range days {
		if err := s.mergeDay(ctx, start); err != nil {
			return made, fmt.Errorf("compact: merging the rollups of day %s: %w", time.Unix(0, start).UTC().Format(time.DateOnly), err)
		}
	}
	return made, nil
}

// CompactionBacklog implements store.Backlogger: the units changed since
// they were compacted that ended CompactionGrace before now.
func (s *chStore) CompactionBacklog(ctx context.Context, now time.Time) (int, error) {
	total := 0
	for level := rollup.Minute + 1; level < rollup.NumLevels; level++ {
		cut := now.Add(-rollup.Unit[level] - store.CompactionGrace).UnixNano()
		var n uint64
		err := s.read.QueryRowContext(ctx, "SELECT count() FROM (SELECT start_ns FROM rollup_marks WHERE level = ? AND start_ns <= ?"+
			chDirtyHaving+")", uint8(level), cut).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("compaction backlog: %w", err)
		}
		total += int(n)
	}
	return total, nil
}

// dirtyUnits returns the starts of level's dirty units in [from, to).
func (s *chStore) dirtyUnits(ctx context.Context, level int, from, to int64, limit int) ([]int64, error) {
	q := "SELECT start_ns FROM rollup_marks WHERE level = ? AND start_ns >= ? AND start_ns < ?" + chDirtyHaving + " ORDER BY start_ns"
	if limit > 0 {
		q += " LIMIT " + strconv.Itoa(limit)
	}
	rows, err := s.write.QueryContext(ctx, q, uint8(level), from, to)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var start int64
		if err := rows.Scan(&start); err != nil {
			return nil, err
		}
		out = append(out, start)
	}
	return out, rows.Err()
}

// compactLevel makes up to limit dirty units of level that start by cut.
// A unit with a dirty finer unit stays dirty for a later call.
// The days of the units it made that ended by closedBy are added to
// closedDays.
func (s *chStore) compactLevel(ctx context.Context, level int, cut int64, limit int, closedBy int64, closedDays map[int64]bool) (int, error) {
	units, err := s.dirtyUnits(ctx, level, math.MinInt64, cut+1, limit)
	if err != nil || len(units) == 0 {
		return 0, err
	}
	u := int64(rollup.Unit[level])
	from, to := units[0], units[len(units)-1]+u
	finer := rollup.Finer[level]
	if finer > rollup.Minute {
		dirtyFiner, err := s.dirtyUnits(ctx, finer, from, to, 0)
		if err != nil {
			return 0, fmt.Errorf("compact: %w", err)
		}
		blocked := map[int64]bool{}
		for _, f := range dirtyFiner {
			blocked[rollup.FloorUnit(f, rollup.Unit[level])] = true
		}
		units = slices.DeleteFunc(units, func(start int64) bool { return blocked[start] })
		if len(units) == 0 {
			return 0, nil
		}
	}
	began, err := serverNow(ctx, s.clock)
	if err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	want := make(map[int64]bool, len(units))
	for _, start := range units {
		want[start] = true
	}
	// Made from the finer level's rows of every dimension and status (a
	// ten-minute unit from its minutes' raw rows, every writer's), or,
	// for a finer unit that left projection 0 out, from its own finer
	// rows: what a summary of projection 0 reads for the unit.
	plan := rollup.Plan{}
	for l := range rollup.NumLevels {
		plan.Allowed[l] = true
	}
	if finer > rollup.Minute {
		if plan.Missing, err = s.unitsMissing(ctx, from, to, 1); err != nil {
			return 0, fmt.Errorf("compact: %w", err)
		}
	}
	plan.Cover(max(finer, rollup.Minute), from, to)
	cells := map[int64]map[rollup.Key]*rollup.Cell{} // by unit
	read := map[int64]int{}                          // by unit: the finer rows it was made from
	for _, g := range plan.ByLevel(0) {
		rows, err := s.write.QueryContext(ctx, "SELECT "+rollup.SelectColumns+" FROM rollups FINAL WHERE level = ? AND start_ns >= ? AND start_ns < ?",
			uint8(g.Level), g.Spans[0].From, g.Spans[len(g.Spans)-1].To)
		if err != nil {
			return 0, fmt.Errorf("compact: %w", err)
		}
		for rows.Next() {
			var sr chScannedRollup
			if err := sr.scan(rows); err != nil {
				rows.Close()
				return 0, fmt.Errorf("compact: %w", err)
			}
			start := rollup.FloorUnit(sr.start, rollup.Unit[level])
			// The range may hold rows of units read at another level.
			if !want[start] || !rollup.InSpans(g.Spans, sr.start) {
				continue
			}
			read[start]++
			unit := cells[start]
			if unit == nil {
				unit = map[rollup.Key]*rollup.Cell{}
				cells[start] = unit
			}
			c := unit[sr.key]
			if c == nil {
				c = rollup.NewCell()
				unit[sr.key] = c
			}
			if err := c.MergeRow(sr.key.Status, sr.count, sr.statuses, sr.labels, sr.sketches); err != nil {
				rows.Close()
				return 0, fmt.Errorf("compact: %w", err)
			}
		}
		if err := rows.Close(); err != nil {
			return 0, fmt.Errorf("compact: %w", err)
		}
	}
	var out [][]any
	missing := make(map[int64]uint16, len(units))
	for _, start := range units {
		var records int64
		for _, c := range cells[start] {
			records += c.Count
		}
		m := rollup.Sparse(rollup.ProjectedRows(cells[start]), read[start], records)
		missing[start] = m
		for p, unit := range rollup.ProjectSome(cells[start], m) {
			if m&(1<<p) != 0 {
				continue
			}
			keys := make([]rollup.Key, 0, len(unit))
			for k := range unit {
				keys = append(keys, k)
			}
			slices.SortFunc(keys, func(a, b rollup.Key) int { return rollup.CompareKeys(&a, &b) })
			for _, k := range keys {
				row, err := chRollupRow(level, p, start, &k, "", unit[k])
				if err != nil {
					return 0, fmt.Errorf("compact: %w", err)
				}
				out = append(out, row)
			}
		}
	}
	if err := chInsert(ctx, s.write, "rollups", chRollupColumns, out); err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	// The compaction mark names what the unit left out; rows of those
	// projections from an earlier compaction stay until retention drops
	// their day, never read again.
	marks := make([][]any, len(units))
	for i, start := range units {
		marks[i] = []any{uint8(level), start, uint8(markCompacted), began, missing[start]}
	}
	if err := chInsert(ctx, s.write, "rollup_marks", []string{"level", "start_ns", "kind", "at", "missing"}, marks); err != nil {
		return 0, fmt.Errorf("compact: %w", err)
	}
	for _, start := range units {
		if day := rollup.FloorUnit(start, 24*time.Hour); day+int64(24*time.Hour) <= closedBy {
			closedDays[day] = true
		}
	}
	return len(units), nil
}

// unitsMissing returns, of the compacted units that start in [from, to),
// those whose newest compaction left out a projection of mask (a bit per
// projection), with every projection they left out (see rollup.Sparse).
func (s *chStore) unitsMissing(ctx context.Context, from, to int64, mask uint16) (map[[2]int64]uint16, error) {
	rows, err := s.write.QueryContext(ctx, "SELECT level, start_ns, argMaxIf(missing, at, kind = 1) AS m FROM rollup_marks"+
		" WHERE level > 0 AND start_ns >= ? AND start_ns < ? GROUP BY level, start_ns HAVING bitAnd(m, ?) != 0", from, to, mask)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[[2]int64]uint16{}
	for rows.Next() {
		var level uint8
		var start int64
		var m uint16
		if err := rows.Scan(&level, &start, &m); err != nil {
			return nil, err
		}
		out[[2]int64{int64(level), start}] = m
	}
	return out, rows.Err()
}

// mergeDay merges the rollups of the day that starts at start into one
// part, on every node that holds some of them (on a cluster, each shard
// merges its own). OPTIMIZE does nothing, silently, while a background
// merge holds some of the day's parts; asked to say so
// (optimize_throw_if_noop), it is tried again until that merge is done,
// for up to about three seconds, after which the background merges are
// left to finish the work. A node without the day's partition is skipped:
// there OPTIMIZE could only say it did nothing.
func (s *chStore) mergeDay(ctx context.Context, start int64) error {
	part := strconv.FormatInt(start/chDayNs, 10)
	q := "OPTIMIZE TABLE rollups PARTITION " + part + " FINAL"
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"optimize_throw_if_noop": 1}))
	for _, db := range s.partPools() {
		var parts uint64
		err := db.QueryRowContext(ctx, `SELECT count() FROM system.parts WHERE database = currentDatabase() AND active
			AND table = 'rollups' AND partition = ?`, part).Scan(&parts)
		if err != nil {
			return err
		}
		if parts == 0 {
			continue
		}
		if err := optimizeRetried(ctx, db, q); err != nil {
			return err
		}
	}
	return nil
}

// optimizeRetried runs the OPTIMIZE q until it is not refused for a merge
// in progress, up to 30 times 100 ms apart.
func optimizeRetried(ctx context.Context, db *sql.DB, q string) error {
	for range 30 {
		_, err := db.ExecContext(ctx, q)
		if chCode(err) != chCannotAssignOptimize {
			return err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// chCannotAssignOptimize is ClickHouse's CANNOT_ASSIGN_OPTIMIZE: OPTIMIZE
// found nothing it could merge now.
const chCannotAssignOptimize = 388

// chScannedRollup is one rollup row read with SelectColumns.
type chScannedRollup struct {
	start    int64
	key      rollup.Key
	count    int64
	labels   string
	statuses string
	sketches [][]byte
}

func (r *chScannedRollup) scan(rows *sql.Rows) error {
	var level, stream uint8
	raw := make([]sql.RawBytes, len(store.StatFields))
	dest := []any{&level, &r.start, &r.key.API, &r.key.Route, &r.key.Model, &r.key.Group, &r.key.Channel,
		&r.key.Region, &r.key.Provider, &stream, &r.key.Status, &r.count, &r.labels, &r.statuses}
	for i := range raw {
		dest = append(dest, &raw[i])
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	r.key.Stream = stream != 0
	r.sketches = make([][]byte, len(raw))
	for i, b := range raw {
		r.sketches[i] = b
	}
	return nil
}

// Stats implements Store.Stats as on the SQL engines — the same rollups,
// the same plan over days, hours, ten minutes and minutes, the same
// sketches merged by the same code — so the three engines answer alike.
func (s *chStore) Stats(ctx context.Context, q store.StatsQuery) (store.Stats, error) {
	return rollup.Answer(ctx, q, s.statsSlots, s)
}

// StatsFromRollups is StatsFromRollups over ClickHouse: the
// dirty units come from rollup_marks, and rows are read FINAL so that a
// row written twice counts once.
func (s *chStore) StatsFromRollups(ctx context.Context, q *store.StatsQuery, acc *rollup.Acc) (time.Time, time.Time, error) {
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
	// One read of the change and compaction marks of the window's units
	// gives both the days that hold data (every record marks its day) and
	// the dirty units: each query to a loaded server costs tens of
	// milliseconds whatever it reads, so fewer is faster. GROUP BY takes
	// the latest of each kind, as FINAL would.
	if from == math.MinInt64 {
		from = 0 // stored timestamps lie after 1970 (Validate)
	}
	// Only days and dirty units come back: a week's clean minutes would
	// be ten thousand rows to send and skip.
	// The same read gives the units that left out the summary's
	// projection (or projection 0, which a unit without its fallback is
	// read in; see rollup.Sparse).
	proj := rollup.ProjectionFor(q, acc.DimCols)
	rows, err := s.read.QueryContext(ctx, "SELECT level, start_ns, maxIf(at, kind = 0) >= maxIf(at, kind = 1) OR countIf(kind = 1) = 0 AS dirty,"+
		" argMaxIf(missing, at, kind = 1) AS left_out"+
		" FROM rollup_marks WHERE start_ns >= ? AND start_ns < ? GROUP BY level, start_ns HAVING level = ? OR dirty OR bitAnd(left_out, ?) != 0",
		rollup.FloorUnit(from, 24*time.Hour), to, uint8(rollup.Day), uint16(1<<proj|1))
	if err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	plan := rollup.Plan{Dirty: map[[2]int64]bool{}, Missing: map[[2]int64]uint16{}, Proj: proj}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for rows.Next() {
		var level, dirty uint8
		var start int64
		var missing uint16
		if err := rows.Scan(&level, &start, &dirty, &missing); err != nil {
			rows.Close()
			return fromT, toT, fmt.Errorf("stats: %w", err)
		}
		if level == rollup.Day {
			lo, hi = min(lo, start), max(hi, start)
		}
		if dirty != 0 {
			plan.Dirty[[2]int64{int64(level), start}] = true
		}
		if missing&(1<<proj|1) != 0 {
			plan.Missing[[2]int64{int64(level), start}] = missing
		}
	}
	if err := rows.Close(); err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	if lo > hi {
		return fromT, toT, nil // no records in the window's days
	}
	// Whole days around the data, so that a day row still counts as whole.
	from = max(from, lo)
	to = min(to, hi+int64(24*time.Hour))
	if from >= to {
		return fromT, toT, nil
	}
	for level := range rollup.NumLevels {
		plan.Allowed[level] = q.Bucket == 0 || q.Bucket%rollup.Unit[level] == 0
	}
	plan.Cover(rollup.Day, from, to)
	groups := plan.ByLevel(proj)
	if acc.NeedsCount() {
		// The cells first, without a sketch (rollup.Acc.CountCell).
		// Rows written between the passes may still pass the bound in
		// the second: then it is refused as it reads (acc.Over).
		if err := s.countRollups(ctx, q, acc, groups); err != nil || acc.Over() {
			return fromT, toT, err
		}
		acc.DoneCounting()
	}
	if err := s.readRollups(ctx, q, acc, groups); err != nil {
		return fromT, toT, err
	}
	return fromT, toT, nil
}

// rollupQuery is the query of sel over the rollup rows of each group's
// level within its spans and q's filter, as branches of a UNION ALL, and
// the groups read as one range (their rows to be checked against their
// spans).
func rollupQuery(q *store.StatsQuery, groups []rollup.SpanGroup, sel []string) ([]string, []any, map[int64][]rollup.Span) {
	var w chWhere
	var levels []string
	envelope := map[int64][]rollup.Span{} // the groups read as one range, checked here
	for _, g := range groups {
		cond := "level = " + strconv.FormatInt(g.Level, 10) + " AND "
		if len(g.Spans) > rollup.MaxSpansInSQL {
			envelope[g.Level] = g.Spans
			cond += "start_ns >= " + strconv.FormatInt(g.Spans[0].From, 10) + " AND start_ns < " + strconv.FormatInt(g.Spans[len(g.Spans)-1].To, 10)
		} else {
			var or []string
			for _, sp := range g.Spans {
				or = append(or, "(start_ns >= "+strconv.FormatInt(sp.From, 10)+" AND start_ns < "+strconv.FormatInt(sp.To, 10)+")")
			}
			cond += "(" + strings.Join(or, " OR ") + ")"
		}
		levels = append(levels, "("+cond+")")
	}
	f := &q.Filter
	for _, c := range []struct{ col, v string }{{"model", f.Model}, {"channel", f.Channel}, {"group_name", f.Group}, {"status", f.Status}} {
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
	// A branch per level: 18.16 narrows the parts' ranges by the key
	// (level, start_ns) for each branch, where one WHERE of ORs read
	// three times the granules (measured).
	var query []string
	var args []any
	for _, lv := range levels {
		query = append(query, "SELECT "+strings.Join(sel, ", ")+" FROM rollups WHERE "+strings.Join(append([]string{lv}, w.conds...), " AND "))
		args = append(args, w.args...)
	}
	return query, args, envelope
}

// countRollups counts acc's cells (acc.CountCell) in the rollup rows of
// groups, reading only their times and group keys, until they pass the
// bound. A row written twice counts one cell, as it is one.
func (s *chStore) countRollups(ctx context.Context, q *store.StatsQuery, acc *rollup.Acc, groups []rollup.SpanGroup) error {
	if len(groups) == 0 {
		return nil
	}
	query, args, envelope := rollupQuery(q, groups, append([]string{"level", "start_ns"}, acc.DimCols...))
	rows, err := s.read.QueryContext(ctx, strings.Join(query, " UNION ALL "), args...)
	if err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	defer rows.Close()
	var level uint8
	var start int64
	dims := make([]sql.RawBytes, len(acc.DimCols))
	dest := []any{&level, &start}
	for i := range dims {
		dest = append(dest, &dims[i])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("stats: rollups: %w", err)
		}
		if spans, ok := envelope[int64(level)]; ok && !rollup.InSpans(spans, start) {
			continue
		}
		for i, d := range dims {
			acc.SetDim(i, d)
		}
		if acc.CountCell(start) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	return nil
}

// readRollups merges the rollup rows of each group's level within its
// spans into acc, in one query: each query to ClickHouse costs
// milliseconds of its own whatever it reads (5–15 ms on 18.16, measured),
// and a summary of a week reads days, hours, ten minutes and minutes.
//
// It reads without FINAL, which costs ClickHouse 18.16 a single-threaded
// merge of every part (five times the plain read of a week's day rows,
// measured), and drops duplicates itself. A minute row is named by its
// unit, key and batch token, and two rows of one name are one batch
// written twice, alike: the first is kept. A compacted row (level 1 and
// up) is named by its unit and key, and of two the one with the larger
// count is the newer (see chRollupRow).
//
// The rows come ordered by cell (bucket, then group key; cellOrder): a
// cell is complete when the next begins, so it is summarised then and its
// sketches serve the next cells (rollup.Acc.Seal), and a row's duplicates,
// which name its cell, are looked for among the rows of its cell only.
// The answer holds the sketches and compacted rows of one cell at a time,
// not of every group × bucket: 6 days of 1h buckets by model, 1,000
// cells × 15 fields, held ~44 MB of sketches to the end (issue 50).
// ClickHouse sorts on its side; a row of a cell already summarised (an
// order not kept) makes the answer an error, never a wrong one.
func (s *chStore) readRollups(ctx context.Context, q *store.StatsQuery, acc *rollup.Acc, groups []rollup.SpanGroup) error {
	if len(groups) == 0 {
		return nil
	}
	// The row's name (every key column and the writer), then what acc
	// needs.
	sel := slices.Concat([]string{"level", "start_ns", "count", "labels", "statuses"}, rollup.KeyColumns, []string{"writer"})
	nk := len(rollup.KeyColumns)
	dimAt := make([]int, len(acc.DimCols)) // index in KeyColumns
	for i, c := range acc.DimCols {
		dimAt[i] = slices.Index(rollup.KeyColumns, c)
	}
	statusAt := slices.Index(rollup.KeyColumns, "status")
	for _, fi := range acc.Fields {
		sel = append(sel, store.StatFields[fi].RollupColumn())
	}
	query, args, envelope := rollupQuery(q, groups, sel)
	sqlText := strings.Join(query, " UNION ALL ")
	if order := cellOrder(q, acc, "start_ns"); order != "" {
		sqlText = "SELECT * FROM (" + sqlText + ")" + order
	}
	rows, err := s.read.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	defer rows.Close()
	var level uint8
	var start, count int64
	var labels, statuses sql.RawBytes
	keyCols := make([]sql.RawBytes, nk+1) // and the writer
	sketches := make([]sql.RawBytes, len(acc.Fields))
	dest := []any{&level, &start, &count, &labels, &statuses}
	for i := range keyCols {
		dest = append(dest, &keyCols[i])
	}
	for i := range sketches {
		dest = append(dest, &sketches[i])
	}
	type heldRow struct {
		start, count             int64
		labels, statuses, status []byte
		sketches                 []sql.RawBytes
	}
	merge := func(c *rollup.StatCell, start, count int64, labels, statuses, status []byte, sketches []sql.RawBytes) error {
		c.AddRowCounts(status, count, statuses)
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
		return nil
	}
	// Of the cell being read: its minute rows' names read, and the
	// largest compacted row of each name, merged when the cell ends.
	var cell *rollup.StatCell
	seen := map[string]struct{}{}
	held := map[string]*heldRow{}
	endCell := func() error {
		for _, h := range held {
			if err := merge(cell, h.start, h.count, h.labels, h.statuses, h.status, h.sketches); err != nil {
				return err
			}
		}
		clear(held)
		clear(seen)
		acc.Seal(cell)
		return nil
	}
	var name []byte
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("stats: rollups: %w", err)
		}
		if spans, ok := envelope[int64(level)]; ok && !rollup.InSpans(spans, start) {
			continue
		}
		for i := range acc.DimCols {
			acc.SetDim(i, keyCols[dimAt[i]])
		}
		c := acc.CellAt(start)
		if acc.Over() {
			return nil // refused whatever follows
		}
		if c != cell {
			if cell != nil {
				if err := endCell(); err != nil {
					return err
				}
			}
			cell = c
		}
		// The level is part of the name, as several levels are read
		// together.
		name = strconv.AppendInt(name[:0], int64(level), 10)
		name = append(name, '/')
		name = strconv.AppendInt(name, start, 10)
		for _, k := range keyCols {
			name = append(name, 0)
			name = append(name, k...)
		}
		if int64(level) == rollup.StoredLevel(rollup.Minute, 0) { // raw minute rows
			if _, ok := seen[string(name)]; ok {
				continue
			}
			seen[string(name)] = struct{}{}
			if err := merge(c, start, count, labels, statuses, keyCols[statusAt], sketches); err != nil {
				return err
			}
			continue
		}
		if h := held[string(name)]; h != nil && h.count >= count {
			continue
		}
		// RawBytes are valid until the next Scan: keep copies.
		h := &heldRow{start: start, count: count, labels: slices.Clone(labels), statuses: slices.Clone(statuses),
			status: slices.Clone(keyCols[statusAt]), sketches: make([]sql.RawBytes, len(sketches))}
		for i, b := range sketches {
			h.sketches[i] = slices.Clone(b)
		}
		held[string(name)] = h
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	if cell != nil {
		return endCell()
	}
	return nil
}

// cellOrder is the ORDER BY that brings the rows of each of acc's cells
// together, bucket (of the time column ts) then group key (see
// readRollups), or "" for a single cell. Stored times lie after 1970
// (Validate), where intDiv is the floor that rollup.Acc.CellAt takes.
func cellOrder(q *store.StatsQuery, acc *rollup.Acc, ts string) string {
	var by []string
	if q.Bucket > 0 {
		by = append(by, "intDiv("+ts+", "+strconv.FormatInt(q.Bucket.Nanoseconds(), 10)+")")
	}
	by = append(by, acc.DimCols...)
	if len(by) == 0 {
		return ""
	}
	return " ORDER BY " + strings.Join(by, ", ")
}

// StatsFromRows answers q from the records (see StatsFromRows):
// one query reads the group keys, status, fields and labels of each
// matching record, FINAL so that a record written twice counts once.
func (s *chStore) StatsFromRows(ctx context.Context, q *store.StatsQuery, acc *rollup.Acc, why string) error {
	var raw []string
	colIdx := make([][]int, len(acc.Fields))
	for i, fi := range acc.Fields {
		for _, c := range store.StatFields[fi].Columns {
			j := slices.Index(raw, c)
			if j < 0 {
				j = len(raw)
				raw = append(raw, c)
			}
			colIdx[i] = append(colIdx[i], j)
		}
	}
	dimCols := acc.DimCols
	rawExprs := make([]string, len(raw))
	for i, c := range raw {
		rawExprs[i] = chReadExpr(c)
	}
	sel := slices.Concat(dimCols, []string{"timestamp_ns", "status", "labels"}, rawExprs)
	var w chWhere
	w.match(&q.Filter)
	// Ordered by cell, as readRollups reads rollups, so that each cell is
	// summarised when the next begins: a bucketed answer of 990 cells ×
	// 15 fields from records grew RSS by 112 MiB holding every cell's
	// sketches to the end. The LIMIT (one past the bound) keeps
	// ClickHouse's sort to what is read.
	order := cellOrder(q, acc, "timestamp_ns")
	if order != "" {
		order += " LIMIT " + strconv.Itoa(s.maxStatsRows+1)
	}
	rows, err := s.read.QueryContext(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM requests FINAL"+w.String()+order, w.args...)
	if err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	defer rows.Close()
	vals := make([]any, len(sel))
	dest := make([]any, len(sel))
	for i := range dest {
		dest[i] = &vals[i]
	}
	nd := len(dimCols)
	in := make([]float64, 2)
	scanned := 0
	var cell *rollup.StatCell // the cell being read
	for rows.Next() {
		if scanned++; scanned > s.maxStatsRows {
			return fmt.Errorf("%w: more than %d records match, and %s makes this summary read records rather than rollups; "+
				"narrow the window or filter, or drop %[3]s to have it answered from rollups", store.ErrBadQuery, s.maxStatsRows, why)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("stats: %w", err)
		}
		for i := range nd {
			v := vals[i]
			if dimCols[i] == "stream" {
				if b, ok := v.(uint8); ok {
					v = b != 0
				}
			}
			acc.SetDim(i, []byte(rollup.DimValue(dimCols[i], v)))
		}
		ts, _ := vals[nd].(int64)
		c := acc.CellAt(ts)
		if acc.Over() {
			break // refused whatever follows
		}
		if c != cell {
			acc.Seal(cell)
			cell = c
		}
		c.AddCount([]byte(rollup.AsString(vals[nd+1])), 1)
		labels, _ := vals[nd+2].([]string)
		for i, l := range labels {
			lc := c.Labels[l]
			lc.Count++
			if i == 0 {
				lc.Primary++
			}
			c.Labels[l] = lc
		}
		c.AddFields(acc, colIdx, vals[nd+3:], in)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	return nil
}
