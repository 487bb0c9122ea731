package rollup

import (
	"math/bits"
	"slices"
	"sort"
)

// Span is a time range [from, to) read at one rollup level: from the
// raw minute rows (every dimension and status, per writer), or from the
// compacted rows of the plan's projection.
type Span struct {
	Level    int
	From, To int64 // Unix ns
	Raw      bool
	// Fallback: the units of the span do not store the plan's projection
	// (see Sparse); they are read in projection Proj instead.
	Fallback bool
	Proj     int
}

// Plan chooses, for the window [from, to), which rollup rows to read:
// whole days where a day row is up to date and the buckets allow it, else
// the next finer level's units likewise (six, three and one hours, thirty
// and ten minutes, minutes; see Finer). dirty holds the units whose
// finer rows changed since they were compacted (or that never were); their
// finer rows are read instead, down to a minute's raw rows.
// allowed[level] is false where a bucket does not divide into that level's
// units. Minutes are always read from their raw rows: minutes have no
// compacted rows (see Finer).
type Plan struct {
	Allowed [NumLevels]bool
	Dirty   map[[2]int64]bool // {level, start} → dirty
	// Missing holds, of the compacted units that left projections out
	// (see Sparse), which ones: a unit without the plan's projection Proj
	// is read in Fallback(Proj, missing), or in its finer units where that
	// is left out too. Nil: every unit stores every projection.
	Missing map[[2]int64]uint16
	Proj    int
	Spans   []Span
}

func (p *Plan) emit(level int, from, to int64, raw bool) {
	p.emitSpan(Span{Level: level, From: from, To: to, Raw: raw})
}

func (p *Plan) emitSpan(sp Span) {
	if sp.From >= sp.To {
		return
	}
	if n := len(p.Spans); n > 0 {
		if last := &p.Spans[n-1]; last.Level == sp.Level && last.Raw == sp.Raw && last.Fallback == sp.Fallback &&
			last.Proj == sp.Proj && last.To == sp.From {
			last.To = sp.To
			return
		}
	}
	p.Spans = append(p.Spans, sp)
}

// cover covers [from, to) with units of level and finer.
func (p *Plan) Cover(level int, from, to int64) {
	if from >= to {
		return
	}
	if level == Minute {
		p.emit(Minute, from, to, true)
		return
	}
	u, finer := int64(Unit[level]), Finer[level]
	first, last := CeilUnit(from, u), FloorUnit(to, Unit[level])
	if !p.Allowed[level] || first >= last {
		p.Cover(finer, from, to)
		return
	}
	p.Cover(finer, from, first)
	for t := first; t < last; t += u {
		k := [2]int64{int64(level), t}
		m := p.Missing[k]
		switch fb := Fallback(p.Proj, m); {
		case p.Dirty[k] || m&(1<<fb) != 0:
			p.Cover(finer, t, t+u)
		case fb != p.Proj:
			p.emitSpan(Span{Level: level, From: t, To: t + u, Fallback: true, Proj: fb})
		default:
			p.emit(level, t, t+u, false)
		}
	}
	p.Cover(finer, last, to)
}

func CeilUnit(ns, u int64) int64 {
	f := FloorDiv(ns, u) * u
	if f < ns {
		f += u
	}
	return f
}

// MaxSpansInSQL bounds the ranges one rollup query names; past it the
// query reads their envelope and drops the rows outside them.
const MaxSpansInSQL = 64

// SpanGroup is the spans of a plan read with one query: of one stored
// level (see StoredLevel).
type SpanGroup struct {
	Level int64
	Spans []Span
}

// ByLevel groups the plan's spans by the stored level they are read from,
// for a summary of projection proj: raw minute rows, proj's rows, or a
// fallback projection's where a unit left proj out.
func (p *Plan) ByLevel(proj int) []SpanGroup {
	var gs []SpanGroup
	for level := range NumLevels {
		for _, raw := range []bool{true, false} {
			var groups []SpanGroup
			for _, sp := range p.Spans {
				if sp.Level != level || sp.Raw != raw {
					continue
				}
				stored := StoredLevel(level, proj)
				switch {
				case raw:
					stored = StoredLevel(Minute, 0)
				case sp.Fallback:
					stored = StoredLevel(level, sp.Proj)
				}
				i := slices.IndexFunc(groups, func(g SpanGroup) bool { return g.Level == stored })
				if i < 0 {
					groups = append(groups, SpanGroup{Level: stored})
					i = len(groups) - 1
				}
				groups[i].Spans = append(groups[i].Spans, sp)
			}
			gs = append(gs, groups...)
		}
	}
	return gs
}

// InSpans reports whether ns lies in one of spans (ordered, disjoint).
func InSpans(spans []Span, ns int64) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].To > ns })
	return i < len(spans) && spans[i].From <= ns
}

// A compacted unit stores a projection only where it at least halves the
// rows a summary would otherwise read for it: at a few records a minute a
// projection's rows are hardly fewer than those of the projections that
// keep more dimensions, nor a unit's than those of its finer units (a
// ten-minute unit of a hundred records held about as many rows in most of
// its ten projections as its minutes held raw rows), and each row costs
// its sketches again. Sparse chooses, and Fallback says what a summary
// reads instead: another projection of the unit, or the finer units; a
// summary then reads at most twice the rows of the unit and projection it
// wants. At volume, where a unit or projection merges many rows into one,
// it is stored.

// byDims lists the projections with the most dimensions first (the lower
// index first among equals): every projection that keeps all of p's
// dimensions and more comes before p.
var byDims = func() []int {
	ps := make([]int, len(Projections))
	for i := range ps {
		ps[i] = i
	}
	slices.SortStableFunc(ps, func(a, b int) int {
		return bits.OnesCount16(uint16(Projections[b])) - bits.OnesCount16(uint16(Projections[a]))
	})
	return ps
}()

// Fallback returns the projection a unit's rows of projection p are read
// in when the unit left out the projections of missing: p if it is
// stored, else the stored projection that keeps every dimension of p with
// the fewest dimensions (the lower index among equals), else 0; where 0 is
// left out too, the unit is read in its finer units (see Plan.Cover).
func Fallback(p int, missing uint16) int {
	if missing&(1<<p) == 0 {
		return p
	}
	best := 0
	for q := 1; q < len(Projections); q++ {
		if q != p && missing&(1<<q) == 0 && Projections[q]&Projections[p] == Projections[p] &&
			bits.OnesCount16(uint16(Projections[q])) < bits.OnesCount16(uint16(Projections[best])) {
			best = q
		}
	}
	return best
}

// MinRecordsPerRow is the fewest records a row of a projection beyond 0
// must summarise on average to be stored: at fewer, a compacted row of a
// projection costs about what the sketches of its few records cost, and
// the rows a summary reads instead (its fallback's, or the finer units')
// are few. At 100 000 records a week (ten a minute) ten-minute units held
// their projections in rows of two to seven records; leaving those out
// saved about a third of the compacted rows' bytes, and summaries read at
// most 1.35× the rows (by model, by channel, a day or a week, bucketed by
// the dashboard's 30 minutes and 3 hours or not; a simulation of
// compaction over a seeded week, issue 47). Twelve would save another
// seventh but read up to 2.9× for a day's chart by channel. At volume
// every projection's rows merge far more than eight records each.
const MinRecordsPerRow = 8

// Sparse returns the projections a compacted unit of records records
// leaves out, of rows[p], the rows of each projection, and finer, the rows
// it was made from (its finer units' projection 0, or where they left that
// out, theirs, down to the raw minute rows): what a summary reads for the
// unit where it stores nothing. Projection 0 is left out where its rows
// are more than half of finer; each other projection p where its rows are
// more than half of those a summary would read instead (Fallback's,
// decided before p, or finer where that is a projection 0 left out), or
// where they average fewer than MinRecordsPerRow records.
func Sparse(rows []int, finer int, records int64) uint16 {
	var missing uint16
	if rows[0]*2 > finer {
		missing |= 1
	}
	for _, p := range byDims {
		if p == 0 {
			continue
		}
		instead := finer
		if fb := Fallback(p, missing|1<<p); missing&(1<<fb) == 0 {
			instead = rows[fb]
		}
		if rows[p]*2 > instead || int64(rows[p])*MinRecordsPerRow > records {
			missing |= 1 << p
		}
	}
	return missing
}
