package rollup

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/store"
)

// summarizeSketch summarises one field of a group from its sketch (nil when
// no record had it) and the group's record count.
func summarizeSketch(sk *sketch.Sketch, records int64) store.FieldSummary {
	if sk == nil || sk.Count() == 0 {
		return store.FieldSummary{Absent: int(records)}
	}
	n := int(sk.Count())
	s := store.FieldSummary{Count: n, Absent: int(records) - n}
	f := func(v float64) *float64 { return &v }
	lo, _ := sk.Min()
	hi, _ := sk.Max()
	mean, _ := sk.Mean()
	s.Min, s.Max, s.Mean = f(lo), f(hi), f(mean)
	var q [4]float64
	sk.Quantiles([]float64{0.50, 0.90, 0.95, 0.99}, q[:])
	s.P50, s.P90, s.P95, s.P99 = f(q[0]), f(q[1]), f(q[2]), f(q[3])
	return s
}

// DimValue is a group key's value of column col as the answer shows it:
// the stream flag is "true" or "false" on both engines (SQLite hands a
// BOOLEAN over as 1 or 0).
func DimValue(col string, v any) string {
	if col == "stream" {
		switch x := v.(type) {
		case bool:
			return strconv.FormatBool(x)
		case int64:
			return strconv.FormatBool(x != 0)
		}
	}
	return AsString(v)
}

// Source is an engine's two ways to a summary: the rollups of the
// window, or its records.
type Source interface {
	StatsFromRollups(ctx context.Context, q *store.StatsQuery, acc *Acc) (from, to time.Time, err error)
	StatsFromRows(ctx context.Context, q *store.StatsQuery, acc *Acc, why string) error
}

// Answer is Stats on every engine: one of slots held while it runs,
// from the rollups unless RowsReason names what only records hold.
func Answer(ctx context.Context, q store.StatsQuery, slots chan struct{}, src Source) (store.Stats, error) {
	fields, dimCols, err := store.ResolveStats(&q)
	if err != nil {
		return store.Stats{}, err
	}
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return store.Stats{}, fmt.Errorf("stats: waiting for one of %d summaries running to finish: %w", store.MaxConcurrentStats, ctx.Err())
	}
	acc := newStatsAcc(&q, fields, dimCols)
	st := store.NewStats(&q, fields)
	if why := store.RowsReason(&q); why != "" {
		st.Method = store.MethodRows
		st.From, st.To = q.Filter.From, q.Filter.To
		if err := src.StatsFromRows(ctx, &q, acc, why); err != nil {
			return store.Stats{}, err
		}
	} else {
		st.Method = store.MethodRollups
		if st.From, st.To, err = src.StatsFromRollups(ctx, &q, acc); err != nil {
			return store.Stats{}, err
		}
	}
	if acc.over {
		return store.Stats{}, acc.tooLarge()
	}
	if acc.err != nil {
		return store.Stats{}, acc.err
	}
	acc.finish(&st)
	return st, nil
}

// Over reports that the answer has passed its bound on values: the
// engines stop reading, since Answer refuses it whatever follows.
func (a *Acc) Over() bool { return a.over }

// Counting first (issue 50). A bucketed answer holds a sketch per field
// of every group × bucket until its last row is read, and the answer is
// refused only once its cells pass the bound: the probe's 6 days of 15m
// buckets by model made 1,066 cells × 15 fields of sketches (41 MB live,
// +111 to +166 MiB of RSS with the collector's headroom) before its 400.
// So where the answer may pass the bound, the engines first read only the
// rows' times and group keys (no sketch, nothing decoded) and count the
// distinct cells: an answer over the bound is refused before a sketch is
// made, and one within it is read knowing it fits.

// NeedsCount reports whether the engine should count the cells first: the
// answer is bucketed, and two groups in every bucket would pass the bound
// (below that, the buckets alone were checked before reading:
// store.CheckAnswerSize).
func (a *Acc) NeedsCount() bool {
	if a.bucketNs <= 0 {
		return false
	}
	f := a.q.Filter
	if f.From.IsZero() || f.To.IsZero() {
		return true
	}
	buckets := (f.To.Sub(f.From).Nanoseconds() + a.bucketNs - 1) / a.bucketNs
	return buckets*2 > int64(a.maxCells)
}

// Sealing (SQLite and PostgreSQL, whose two passes read one snapshot):
// the first pass also counts each cell's rows, and the second summarises a
// cell as soon as its last row is merged and gives its sketches back for
// the next cells (RowDone). A bucketed answer then holds the sketches of
// the cells being read, not of every group × bucket: the probe's 200 of
// 6 days of 1h buckets by model held 1,000 cells × 15 fields of sketches
// (44 MB live, +123 MiB of RSS) until its end. ClickHouse has no snapshot
// across two queries; it reads the rows ordered by cell instead and seals
// each cell when the next begins (Seal).

// Bucketed reports whether the answer has buckets.
func (a *Acc) Bucketed() bool { return a.bucketNs > 0 }

// SealAsRead makes the first pass count each cell's rows, so that the
// second seals each cell after its last (RowDone). Only for an engine
// whose passes see the same rows.
func (a *Acc) SealAsRead() { a.seal = true }

// RowDone tells that one row of c was merged; after its last (as the
// first pass counted them) c is summarised and its sketches go back to
// the pool.
func (a *Acc) RowDone(c *StatCell) {
	if !a.seal || a.counted == nil || c.id == "" {
		return
	}
	n := a.counted[c.id] - 1
	if n > 0 {
		a.counted[c.id] = n
		return
	}
	delete(a.counted, c.id)
	a.Seal(c)
}

// Seal summarises c now and gives its sketches back to the pool, for an
// engine that knows c's last row was merged: SQLite and PostgreSQL count
// each cell's rows first (RowDone), ClickHouse reads the rows ordered by
// cell, so that a cell is complete when the next begins. A row of c after
// this makes the answer an error (CellAt), never a wrong one. The
// overflow cell is never sealed: rows past the bound may still reach it.
func (a *Acc) Seal(c *StatCell) {
	if c == nil || c.id == "" || c.sums != nil {
		return
	}
	c.sums = make([]store.FieldSummary, len(a.Fields))
	for i, sk := range c.sk {
		c.sums[i] = summarizeSketch(sk, c.count)
		if sk != nil {
			c.sk[i] = nil
			sk.Reset()
			summarySketches.Put(sk)
		}
	}
}

// CountCell counts the cell of the row at hand (the key values set by
// SetDim, at timestamp ts) in the first pass, and reports whether the
// cells counted are past the bound: Over is then set and the engine
// stops.
func (a *Acc) CountCell(ts int64) bool {
	if a.counted == nil {
		a.counted, a.countedGroups, a.countedBuckets = map[string]int32{}, map[string]struct{}{}, map[int64]struct{}{}
	}
	bucket := FloorDiv(ts, a.bucketNs)
	a.key = a.key[:0]
	for _, v := range a.dims {
		a.key = append(a.key, v...)
		a.key = append(a.key, 0)
	}
	if _, ok := a.countedGroups[string(a.key)]; !ok {
		a.countedGroups[string(a.key)] = struct{}{}
	}
	a.key = strconv.AppendInt(a.key, bucket, 10)
	if n, ok := a.counted[string(a.key)]; ok {
		a.counted[string(a.key)] = n + 1
		return false
	}
	a.counted[string(a.key)] = 1
	a.countedBuckets[bucket] = struct{}{}
	if len(a.counted) > a.maxCells {
		a.over = true
	}
	return a.over
}

// DoneCounting lets a first pass's counts go, once it found the cells
// within the bound (but for the rows of each cell, when sealing).
func (a *Acc) DoneCounting() {
	a.countedGroups, a.countedBuckets = nil, nil
	if !a.seal {
		a.counted = nil
	}
}

// tooLarge is Answer's error for an answer that passed q's bound while it
// was read, or counted: how many groups (× buckets) it met, and what
// would fit.
func (a *Acc) tooLarge() error {
	fields := max(len(a.Fields), 1)
	groups := map[string]bool{}
	buckets := map[int64]bool{}
	for _, c := range a.order {
		groups[strings.Join(c.key, "\x00")] = true
		buckets[c.bucket] = true
	}
	cells := len(a.order)
	if a.countedGroups != nil {
		cells = len(a.counted)
		for g := range a.countedGroups {
			groups[g] = true
		}
		for b := range a.countedBuckets {
			buckets[b] = true
		}
	}
	advice := "group by fewer dimensions or narrow the filter (model=, channel=, group=)"
	if a.bucketNs > 0 {
		window := time.Duration(int64(len(buckets)) * a.bucketNs)
		if f := a.q.Filter; !f.From.IsZero() && !f.To.IsZero() {
			window = f.To.Sub(f.From)
		}
		advice = "a bucket of " + store.FitBucket(window, fields, a.q.MaxAnswerValues(), max(len(groups), 1)) +
			" fits the groups met so far, or " + advice
	}
	return fmt.Errorf("%w: the answer passed the bound of %d values (groups × buckets × fields; max_answer_values) "+
		"after %d groups × buckets of %d fields; %s, or name fewer fields (fields=…)",
		store.ErrBadQuery, a.q.MaxAnswerValues(), cells, fields, advice)
}

// StatCell accumulates one group (and bucket).
type StatCell struct {
	key      []string
	bucket   int64 // bucket index; 0 without buckets
	count    int64
	errors   int64
	statuses []statusCount // few: a slice finds one without hashing or allocating
	Labels   LabelCounts
	sk       []*sketch.Sketch     // per selected field; nil until a value comes
	id       string               // its key in Acc.Cells; "" for the overflow cell
	sums     []store.FieldSummary // per selected field, once sealed (RowDone)
}

type statusCount struct {
	status string
	n      int64
}

// Acc accumulates the groups of one answer, from rollup rows or from
// records alike.
type Acc struct {
	q        *store.StatsQuery
	Fields   []int    // indexes in StatFields
	DimCols  []string // group columns
	bucketNs int64
	Cells    map[string]*StatCell
	order    []*StatCell
	Overflow *StatCell // the rows of keys past MaxStatsGroups; nil until there are some
	// maxCells is how many cells fit q's bound on values; past it, over
	// is set, further rows go to the overflow cell (memory stays
	// bounded) and the answer is refused (tooLarge).
	maxCells int
	over     bool
	err      error // the passes disagreed (see CellAt)
	// dims holds the group key values of the row at hand, filled by the
	// caller before cell; key is scratch for the map key.
	dims [][]byte
	key  []byte
	// counted holds the cells (group key and bucket) a first pass met,
	// countedGroups their group keys and countedBuckets their buckets
	// (see CountCell); nil when none ran.
	counted        map[string]int32 // and each cell's rows
	seal           bool
	countedGroups  map[string]struct{}
	countedBuckets map[int64]struct{}
}

func newStatsAcc(q *store.StatsQuery, fields []int, dimCols []string) *Acc {
	a := &Acc{q: q, Fields: fields, DimCols: dimCols, bucketNs: q.Bucket.Nanoseconds(),
		Cells: map[string]*StatCell{}, dims: make([][]byte, len(dimCols)),
		maxCells: max(q.MaxAnswerValues()/max(len(fields), 1), 1)}
	if a.bucketNs > 0 {
		// Bucketed, the groups × buckets past MaxStatsGroups are refused
		// too, not folded into the overflow group: a bucketless "(other)"
		// cell of every bucket answers nothing, and with one field the
		// bound on values (16,000) would never be met before it (issue 50's
		// probe: 6 days of 1-minute buckets by model, one field, 10,001
		// groups and 4.7 MB answered).
		a.maxCells = min(a.maxCells, store.MaxStatsGroups)
	}
	return a
}

func (a *Acc) newCell() *StatCell {
	return &StatCell{Labels: LabelCounts{}, sk: make([]*sketch.Sketch, len(a.Fields))}
}

// SetDim sets the i-th group key value of the row at hand, normalising the
// stream flag to "true" or "false" (SQLite hands a BOOLEAN over as 1 or 0,
// PostgreSQL as a bool, and database/sql makes text of either).
func (a *Acc) SetDim(i int, v []byte) {
	if a.DimCols[i] == "stream" {
		switch string(v) {
		case "1", "true", "t":
			v = trueBytes
		default:
			v = falseBytes
		}
	}
	a.dims[i] = v
}

var trueBytes, falseBytes = []byte("true"), []byte("false")

// cell returns the cell of the group whose key values are a.dims, in the
// bucket of timestamp ts. Looking one up allocates nothing.
func (a *Acc) CellAt(ts int64) *StatCell {
	var bucket int64
	if a.bucketNs > 0 {
		bucket = FloorDiv(ts, a.bucketNs)
	}
	a.key = a.key[:0]
	for _, v := range a.dims {
		a.key = append(a.key, v...)
		a.key = append(a.key, 0)
	}
	a.key = strconv.AppendInt(a.key, bucket, 10)
	if c := a.Cells[string(a.key)]; c != nil {
		if c.sums != nil {
			// Sealed, yet another row: the passes saw different rows,
			// which one snapshot rules out, or the rows did not come
			// ordered by cell.
			a.err = fmt.Errorf("stats: a row of %s at %d came after its group was summarised", strings.Join(c.key, "/"), c.bucket)
		}
		return c
	}
	if len(a.Cells) >= a.maxCells {
		a.over = true
	}
	if len(a.Cells) >= store.MaxStatsGroups || a.over {
		// Any client can make a model name up, and unknown models
		// still get records: past the bound, new keys share one group
		// instead of failing the answer for everyone.
		if a.Overflow == nil {
			a.Overflow = a.newCell()
			for range a.DimCols {
				a.Overflow.key = append(a.Overflow.key, store.OtherKey)
			}
		}
		return a.Overflow
	}
	c := a.newCell()
	c.bucket = bucket
	for _, v := range a.dims {
		c.key = append(c.key, string(v))
	}
	c.id = string(a.key)
	a.Cells[c.id] = c
	a.order = append(a.order, c)
	return c
}

// AddCount adds n records of one status to c.
func (c *StatCell) AddCount(status []byte, n int64) { addCount(c, status, n) }

// AddRowCounts adds a rollup row's count to c: of status, or, for a row of
// a projection without the status, of each status its statuses column
// counts.
func (c *StatCell) AddRowCounts(status []byte, count int64, statuses []byte) {
	if len(statuses) == 0 {
		addCount(c, status, count)
		return
	}
	EachStatus(string(statuses), func(status string, n int64) { addCount(c, status, n) })
}

func addCount[S string | []byte](c *StatCell, status S, n int64) {
	c.count += n
	if string(status) != record.StatusOK {
		c.errors += n
	}
	for i := range c.statuses {
		if c.statuses[i].status == string(status) {
			c.statuses[i].n += n
			return
		}
	}
	c.statuses = append(c.statuses, statusCount{string(status), n})
}

// SketchOf returns c's sketch of the i-th selected field, made on first use.
func (c *StatCell) SketchOf(i int) *sketch.Sketch {
	if c.sk[i] == nil {
		c.sk[i] = summarySketches.Get().(*sketch.Sketch)
	}
	return c.sk[i]
}

// summarySketches recycles the sketches summaries merge rollups into
// (finish returns them, empty): their bucket arrays, grown to a busy key's
// range as rows merge in, were 40 % of what a summary of a week of 10 M
// records allocated.
var summarySketches = sync.Pool{New: func() any { return new(sketch.Sketch) }}

// finish writes the groups into st, ordered by key, then bucket, with the
// overflow group last.
func (a *Acc) finish(st *store.Stats) {
	slices.SortFunc(a.order, func(x, y *StatCell) int {
		if c := slices.Compare(x.key, y.key); c != 0 {
			return c
		}
		return CmpInt(x.bucket, y.bucket)
	})
	order := a.order
	if a.Overflow != nil {
		st.Truncated = true
		order = append(order, a.Overflow)
	}
	for _, c := range order {
		g := store.Group{
			Key:       map[string]string{},
			Count:     int(c.count),
			Errors:    int(c.errors),
			ErrorRate: float64(c.errors) / float64(c.count),
			Statuses:  make(map[string]int, len(c.statuses)),
			Labels:    c.Labels,
			Fields:    make(map[string]store.FieldSummary, len(a.Fields)),
		}
		for _, sc := range c.statuses {
			g.Statuses[sc.status] = int(sc.n)
		}
		for i, d := range a.q.GroupBy {
			g.Key[d] = c.key[i]
		}
		if a.bucketNs > 0 && c != a.Overflow {
			t := time.Unix(0, c.bucket*a.bucketNs).UTC()
			g.BucketStart = &t
		}
		for i, f := range a.Fields {
			if c.sums != nil {
				g.Fields[store.StatFields[f].Name] = c.sums[i]
				continue
			}
			g.Fields[store.StatFields[f].Name] = summarizeSketch(c.sk[i], c.count)
			if sk := c.sk[i]; sk != nil {
				c.sk[i] = nil
				sk.Reset()
				summarySketches.Put(sk)
			}
		}
		st.Groups = append(st.Groups, g)
	}
}

// AddFields adds a record's values of acc's fields to c's sketches: vals
// are the record's field columns, colIdx[i] where field i's inputs are in
// them (two for a derived field), in scratch space for those inputs. A
// field with an input absent is absent.
func (c *StatCell) AddFields(acc *Acc, colIdx [][]int, vals []any, in []float64) {
	for i, fi := range acc.Fields {
		ok := true
		for k, j := range colIdx[i] {
			v, present := AsFloat(vals[j])
			if !present {
				ok = false
				break
			}
			in[k] = v
		}
		if !ok {
			continue
		}
		v := in[0]
		if f := &store.StatFields[fi]; f.Derive != nil {
			v = f.Derive(in)
		}
		c.SketchOf(i).Add(v)
	}
}
