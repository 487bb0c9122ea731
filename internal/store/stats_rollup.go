package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// unitSpan is a time range [from, to) read at one rollup level: from the
// raw minute rows (every dimension and status, per writer), or from the
// compacted rows of the plan's projection.
type unitSpan struct {
	level    int
	from, to int64 // Unix ns
	raw      bool
}

// rollupPlan chooses, for the window [from, to), which rollup rows to read:
// whole days where a day row is up to date and the buckets allow it, else
// the next finer level's units likewise (six, three and one hours, thirty
// and ten minutes, minutes; see finerLevel). dirty holds the units whose
// finer rows changed since they were compacted (or that never were); their
// finer rows are read instead, down to a minute's raw rows.
// allowed[level] is false where a bucket does not divide into that level's
// units. projected is whether the summary reads a projection other than 0,
// which minutes have compacted rows of; else minutes are read raw.
type rollupPlan struct {
	allowed   [numLevels]bool
	projected bool
	dirty     map[[2]int64]bool // {level, start} → dirty
	spans     []unitSpan
}

func (p *rollupPlan) emit(level int, from, to int64, raw bool) {
	if from >= to {
		return
	}
	if n := len(p.spans); n > 0 && p.spans[n-1].level == level && p.spans[n-1].raw == raw && p.spans[n-1].to == from {
		p.spans[n-1].to = to
		return
	}
	p.spans = append(p.spans, unitSpan{level, from, to, raw})
}

// cover covers [from, to) with units of level and finer.
func (p *rollupPlan) cover(level int, from, to int64) {
	if from >= to {
		return
	}
	if level == levelMinute {
		if !p.projected {
			p.emit(levelMinute, from, to, true)
			return
		}
		m := int64(time.Minute)
		for t := floorUnit(from, time.Minute); t < to; t += m {
			p.emit(levelMinute, max(t, from), min(t+m, to), p.dirty[[2]int64{levelMinute, t}])
		}
		return
	}
	u, finer := int64(levelUnit[level]), finerLevel[level]
	first, last := ceilUnit(from, u), floorUnit(to, levelUnit[level])
	if !p.allowed[level] || first >= last {
		p.cover(finer, from, to)
		return
	}
	p.cover(finer, from, first)
	for t := first; t < last; t += u {
		if p.dirty[[2]int64{int64(level), t}] {
			p.cover(finer, t, t+u)
		} else {
			p.emit(level, t, t+u, false)
		}
	}
	p.cover(finer, last, to)
}

func ceilUnit(ns, u int64) int64 {
	f := floorDiv(ns, u) * u
	if f < ns {
		f += u
	}
	return f
}

// maxSpansInSQL bounds the ranges one rollup query names; past it the
// query reads their envelope and drops the rows outside them.
const maxSpansInSQL = 64

// statsFromRollups answers q from the rollups, over its window widened to
// whole minutes, which it returns (zero for an open end). It reads the
// coarsest rows that are up to date — days, hours, ten minutes, minutes —
// so its cost
// follows the window's length and the variety of the traffic (the keys of
// a row: api, route, model, group, channel, region, provider, stream,
// status), not the number of records.
func (s *sqlStore) statsFromRollups(ctx context.Context, q *StatsQuery, acc *statsAcc) (time.Time, time.Time, error) {
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
		from = floorUnit(unixNano(q.Filter.From), time.Minute)
		fromT = time.Unix(0, from).UTC()
	}
	if !q.Filter.To.IsZero() {
		to = unixNano(q.Filter.To)
		if to <= math.MaxInt64-int64(time.Minute) {
			to = ceilUnit(to, int64(time.Minute))
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
	from = max(from, floorUnit(lo.Int64, 24*time.Hour))
	to = min(to, floorUnit(hi.Int64, 24*time.Hour)+int64(24*time.Hour))
	if from >= to {
		return fromT, toT, nil
	}

	proj := projectionFor(q, acc.dimCols)
	plan := rollupPlan{dirty: map[[2]int64]bool{}, projected: proj > 0}
	for level := range numLevels {
		plan.allowed[level] = q.Bucket == 0 || q.Bucket%levelUnit[level] == 0
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
		plan.dirty[[2]int64{level, start}] = true
	}
	if err := rows.Close(); err != nil {
		return fromT, toT, fmt.Errorf("stats: %w", err)
	}
	plan.cover(levelDay, from, to)
	for _, g := range plan.byLevel(proj) {
		if err := s.readRollups(ctx, tx, q, acc, g.level, g.spans); err != nil {
			return fromT, toT, err
		}
	}
	return fromT, toT, nil
}

// spanGroup is the spans of a plan read with one query: of one stored
// level (see storedLevel).
type spanGroup struct {
	level int64
	spans []unitSpan
}

// byLevel groups the plan's spans by the stored level they are read from,
// for a summary of projection proj.
func (p *rollupPlan) byLevel(proj int) []spanGroup {
	var gs []spanGroup
	for level := range numLevels {
		for _, raw := range []bool{true, false} {
			g := spanGroup{level: storedLevel(level, proj)}
			if raw {
				g.level = storedLevel(levelMinute, 0)
			}
			for _, sp := range p.spans {
				if sp.level == level && sp.raw == raw {
					g.spans = append(g.spans, sp)
				}
			}
			if len(g.spans) > 0 {
				gs = append(gs, g)
			}
		}
	}
	return gs
}

// readRollups merges the rollup rows of one level within spans into acc.
func (s *sqlStore) readRollups(ctx context.Context, tx *sql.Tx, q *StatsQuery, acc *statsAcc, level int64, spans []unitSpan) error {
	var b builder
	b.cond("level = " + b.arg(level))
	envelope := len(spans) > maxSpansInSQL
	if envelope {
		b.cond("start_ns >= " + b.arg(spans[0].from) + " AND start_ns < " + b.arg(spans[len(spans)-1].to))
	} else {
		var or []string
		for _, sp := range spans {
			or = append(or, "(start_ns >= "+b.arg(sp.from)+" AND start_ns < "+b.arg(sp.to)+")")
		}
		b.cond("(" + strings.Join(or, " OR ") + ")")
	}
	f := &q.Filter
	for _, c := range []struct{ col, v string }{{"model", f.Model}, {"channel", f.Channel}, {"group_name", f.Group}, {"status", f.Status}} {
		if c.v != "" {
			b.cond(c.col + " = " + b.arg(c.v))
		}
	}
	if f.Stream != nil {
		b.cond("stream = " + b.arg(*f.Stream))
	}
	sel := []string{"start_ns", "status", "count", "labels", "statuses"}
	sel = append(sel, acc.dimCols...)
	for _, fi := range acc.fields {
		sel = append(sel, StatFields[fi].rollupCol())
	}
	rows, err := tx.QueryContext(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM rollups"+b.where(), b.args...)
	if err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	defer rows.Close()
	var start, count int64
	var status, labels, statuses sql.RawBytes
	nd := len(acc.dimCols)
	dims := make([]sql.RawBytes, nd)
	sketches := make([]sql.RawBytes, len(acc.fields))
	dest := []any{&start, &status, &count, &labels, &statuses}
	for i := range dims {
		dest = append(dest, &dims[i])
	}
	for i := range sketches {
		dest = append(dest, &sketches[i])
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("stats: rollups: %w", err)
		}
		if envelope && !inSpans(spans, start) {
			continue
		}
		for i := range nd {
			acc.setDim(i, dims[i])
		}
		c := acc.cell(start)
		c.addRowCounts(status, count, statuses)
		if len(labels) > 0 {
			addLabels(c.labels, string(labels))
		}
		for i, sk := range sketches {
			if len(sk) == 0 {
				continue
			}
			if err := c.sketchOf(i).MergeBinary(sk); err != nil {
				return fmt.Errorf("stats: rollup of %s at %s: %w", StatFields[acc.fields[i]].Name,
					time.Unix(0, start).UTC().Format(time.RFC3339), err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stats: rollups: %w", err)
	}
	return nil
}

// inSpans reports whether ns lies in one of spans (ordered, disjoint).
func inSpans(spans []unitSpan, ns int64) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].to > ns })
	return i < len(spans) && spans[i].from <= ns
}
