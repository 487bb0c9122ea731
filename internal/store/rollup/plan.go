package rollup

import "sort"

// Span is a time range [from, to) read at one rollup level: from the
// raw minute rows (every dimension and status, per writer), or from the
// compacted rows of the plan's projection.
type Span struct {
	Level    int
	From, To int64 // Unix ns
	Raw      bool
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
	Spans   []Span
}

func (p *Plan) emit(level int, from, to int64, raw bool) {
	if from >= to {
		return
	}
	if n := len(p.Spans); n > 0 && p.Spans[n-1].Level == level && p.Spans[n-1].Raw == raw && p.Spans[n-1].To == from {
		p.Spans[n-1].To = to
		return
	}
	p.Spans = append(p.Spans, Span{level, from, to, raw})
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
		if p.Dirty[[2]int64{int64(level), t}] {
			p.Cover(finer, t, t+u)
		} else {
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
// for a summary of projection proj.
func (p *Plan) ByLevel(proj int) []SpanGroup {
	var gs []SpanGroup
	for level := range NumLevels {
		for _, raw := range []bool{true, false} {
			g := SpanGroup{Level: StoredLevel(level, proj)}
			if raw {
				g.Level = StoredLevel(Minute, 0)
			}
			for _, sp := range p.Spans {
				if sp.Level == level && sp.Raw == raw {
					g.Spans = append(g.Spans, sp)
				}
			}
			if len(g.Spans) > 0 {
				gs = append(gs, g)
			}
		}
	}
	return gs
}

// InSpans reports whether ns lies in one of spans (ordered, disjoint).
func InSpans(spans []Span, ns int64) bool {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].To > ns })
	return i < len(spans) && spans[i].From <= ns
}
