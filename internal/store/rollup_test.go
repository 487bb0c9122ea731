package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/timeline"
)

// rollupBase is a Monday 00:00 UTC: windows of the accuracy test start on
// whole days, so that they need no widening and the exact reference covers
// the same records.
var rollupBase = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)

// distribution draws one value of a field.
type distribution struct {
	name string
	draw func(r *rand.Rand) float64
}

var distributions = []distribution{
	{"uniform", func(r *rand.Rand) float64 { return 50 + r.Float64()*950 }},
	{"lognormal", func(r *rand.Rand) float64 { return 500 * math.Exp(r.NormFloat64()) }},
	{"bimodal", func(r *rand.Rand) float64 {
		if r.IntN(3) == 0 {
			return 4000 + 300*r.NormFloat64()
		}
		return 200 + 20*r.NormFloat64()
	}},
	{"pareto", func(r *rand.Rand) float64 { return 100 / math.Pow(r.Float64(), 1/1.2) }},
	{"with_zeros", func(r *rand.Rand) float64 {
		if r.IntN(4) == 0 {
			return 0
		}
		return r.ExpFloat64() * 3
	}},
}

// randomRecords makes n records over days days from rollupBase with keys
// drawn from small sets, a field's values from d, and about a fifth of
// every field absent.
func randomRecords(rng *rand.Rand, n, days int, d distribution) []record.Record {
	recs := make([]record.Record, n)
	span := int64(days) * int64(24*time.Hour)
	for i := range recs {
		r := record.Record{
			RequestID: fmt.Sprintf("req-%s-%07d", d.name, i),
			Timestamp: rollupBase.Add(time.Duration(rng.Int64N(span))),
			API:       []string{"openai.chat", "anthropic"}[rng.IntN(2)],
			Model:     []string{"m-a", "m-b", "m-c"}[rng.IntN(3)],
			Channel:   []string{"ch-1", "ch-2"}[rng.IntN(2)],
			Group:     []string{"g-1", "g-2"}[rng.IntN(2)],
			Stream:    rng.IntN(4) != 0,
			Status:    record.StatusOK,
		}
		r.Route = "POST /" + r.API
		if rng.IntN(10) == 0 {
			r.Status = []string{record.StatusTruncated, record.StatusHeaderTimeout, record.StatusUpstreamHTTPError}[rng.IntN(3)]
		}
		if rng.IntN(5) == 0 {
			r.Diagnosis = []string{"first_response_slow", "generation_slow"}[:1+rng.IntN(2)]
		}
		val := func() (time.Duration, bool) {
			if rng.IntN(5) == 0 {
				return 0, false
			}
			return time.Duration(d.draw(rng) * float64(time.Millisecond)), true
		}
		if v, ok := val(); ok {
			r.UpstreamHeadersMs = timeline.SpanOf(v)
		}
		if v, ok := val(); ok {
			r.FirstTextDeltaMs = timeline.At(v)
			if w, ok := val(); ok {
				r.FirstTextSentMs = timeline.At(v + w/100) // relay lag: tiny, sometimes 0
			}
		}
		if v, ok := val(); ok {
			r.VisibleOutputTPS = timeline.RateOf(float64(v) / float64(time.Millisecond) / 10)
		}
		if v, ok := val(); ok {
			r.MaxOutputGapMs = timeline.SpanOf(v)
		}
		recs[i] = r
	}
	return recs
}

// exactGroups summarises recs the way Stats should, exactly: R-7 over the
// values of each group (and bucket).
func exactGroups(recs []record.Record, q StatsQuery) map[string]*exactGroup {
	out := map[string]*exactGroup{}
	for i := range recs {
		r := &recs[i]
		if !matchesFilter(r, &q.Filter) {
			continue
		}
		k := rollupKeyOf(r)
		var key []string
		for _, d := range q.GroupBy {
			key = append(key, k.dim(Dimensions[d]))
		}
		var bucket int64
		if q.Bucket > 0 {
			bucket = floorDiv(r.Timestamp.UnixNano(), int64(q.Bucket))
		}
		id := strings.Join(key, "\x00") + "\x00" + strconv.FormatInt(bucket, 10)
		g := out[id]
		if g == nil {
			g = &exactGroup{values: map[string][]float64{}, statuses: map[string]int{}, labels: labelCounts{}}
			out[id] = g
		}
		g.count++
		g.statuses[r.Status]++
		for j, l := range r.Diagnosis {
			c := g.labels[l]
			c.Count++
			if j == 0 {
				c.Primary++
			}
			g.labels[l] = c
		}
		for _, f := range StatFields {
			if v, ok := f.of(r); ok {
				g.values[f.Name] = append(g.values[f.Name], v)
			}
		}
	}
	return out
}

type exactGroup struct {
	count    int
	statuses map[string]int
	labels   labelCounts
	values   map[string][]float64
}

func rollupKeyOf(r *record.Record) rollupKey { return keyOf(r) }

func matchesFilter(r *record.Record, f *Filter) bool {
	ts := r.Timestamp.UnixNano()
	return (f.From.IsZero() || ts >= f.From.UnixNano()) && (f.To.IsZero() || ts < f.To.UnixNano()) &&
		(f.Model == "" || r.Model == f.Model) && (f.Channel == "" || r.Channel == f.Channel) &&
		(f.Group == "" || r.Group == f.Group) && (f.Status == "" || r.Status == f.Status) &&
		(f.Stream == nil || r.Stream == *f.Stream) &&
		(f.Label == "" || slices.Contains(r.Diagnosis, f.Label))
}

// checkAgainstExact compares an answer with the exact summary of the same
// records: counts, statuses and labels equal; min and max equal; mean within
// float rounding; each percentile within the sketch's bound of the exact
// R-7 value, relative to the two order statistics it interpolates.
// checkQueries checks every query of rollupQueries(days) on s against exact
// R-7 over recs.
func checkQueries(t *testing.T, s Store, recs []record.Record, days int, stage string) {
	t.Helper()
	for qi, q := range rollupQueries(days) {
		st, err := s.Stats(ctxT(t), q)
		if err != nil {
			t.Fatalf("%s query %d: %v", stage, qi, err)
		}
		checkAgainstExact(t, fmt.Sprintf("%s query %d", stage, qi), st, exactGroups(recs, q), q)
	}
}

func checkAgainstExact(t *testing.T, what string, st Stats, want map[string]*exactGroup, q StatsQuery) {
	t.Helper()
	if len(st.Groups) != len(want) {
		t.Errorf("%s: %d groups, want %d", what, len(st.Groups), len(want))
	}
	for _, g := range st.Groups {
		var key []string
		for _, d := range q.GroupBy {
			key = append(key, g.Key[d])
		}
		var bucket int64
		if g.BucketStart != nil {
			bucket = floorDiv(g.BucketStart.UnixNano(), int64(q.Bucket))
		}
		id := strings.Join(key, "\x00") + "\x00" + strconv.FormatInt(bucket, 10)
		e := want[id]
		if e == nil {
			t.Errorf("%s: unexpected group %v at %v", what, g.Key, g.BucketStart)
			continue
		}
		if g.Count != e.count || !mapsEqual(g.Statuses, e.statuses) || !mapsEqual(g.Labels, map[string]LabelCount(e.labels)) {
			t.Errorf("%s %v: count %d statuses %v labels %v; want %d %v %v", what, g.Key, g.Count, g.Statuses, g.Labels, e.count, e.statuses, e.labels)
		}
		for name, fs := range g.Fields {
			vals := slices.Clone(e.values[name])
			slices.Sort(vals)
			if fs.Count != len(vals) || fs.Absent != e.count-len(vals) {
				t.Errorf("%s %v %s: count %d absent %d, want %d %d", what, g.Key, name, fs.Count, fs.Absent, len(vals), e.count-len(vals))
				continue
			}
			if len(vals) == 0 {
				if fs.P50 != nil || fs.Min != nil {
					t.Errorf("%s %v %s: statistics of no values", what, g.Key, name)
				}
				continue
			}
			if *fs.Min != vals[0] || *fs.Max != vals[len(vals)-1] {
				t.Errorf("%s %v %s: min %v max %v, want %v %v", what, g.Key, name, *fs.Min, *fs.Max, vals[0], vals[len(vals)-1])
			}
			var sum float64
			for _, v := range vals {
				sum += v
			}
			if mean := sum / float64(len(vals)); math.Abs(*fs.Mean-mean) > 1e-9*math.Max(1, math.Abs(mean)) {
				t.Errorf("%s %v %s: mean %v, want %v", what, g.Key, name, *fs.Mean, mean)
			}
			for _, c := range []struct {
				p   float64
				got *float64
			}{{0.5, fs.P50}, {0.9, fs.P90}, {0.95, fs.P95}, {0.99, fs.P99}} {
				exact := Percentile(vals, c.p)
				h := float64(len(vals)-1) * c.p
				lo := int(math.Floor(h))
				hi := min(lo+1, len(vals)-1)
				bound := sketch.RelativeAccuracy*max(math.Abs(vals[lo]), math.Abs(vals[hi]))*(1+1e-9) + 1e-12
				if math.Abs(*c.got-exact) > bound {
					t.Errorf("%s %v %s p%g: %v, exact %v, off by %.3g (bound %.3g, n=%d)", what, g.Key, name, c.p*100,
						*c.got, exact, math.Abs(*c.got-exact), bound, len(vals))
				}
			}
		}
	}
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// rollupQueries are the groupings, buckets and filters the accuracy test
// asks, over a window of whole days.
func rollupQueries(days int) []StatsQuery {
	w := Filter{From: rollupBase, To: rollupBase.Add(time.Duration(days) * 24 * time.Hour)}
	yes := true
	with := func(f Filter, edit func(*Filter)) Filter { edit(&f); return f }
	return []StatsQuery{
		{Filter: w},
		{Filter: w, GroupBy: []string{"model"}},
		{Filter: w, GroupBy: []string{"model", "channel", "stream"}},
		{Filter: w, GroupBy: []string{"group"}, Bucket: time.Hour},
		{Filter: w, GroupBy: []string{"api"}, Bucket: 24 * time.Hour},
		{Filter: w, Bucket: 10 * time.Minute, Fields: []string{"first_text_delta_ms"}},
		{Filter: with(w, func(f *Filter) { f.Model, f.Stream = "m-b", &yes }), GroupBy: []string{"channel"}},
		{Filter: with(w, func(f *Filter) { f.Status = record.StatusTruncated })},
		{Filter: with(w, func(f *Filter) { f.Status = record.StatusOK }), GroupBy: []string{"model"}, Bucket: 6 * time.Hour},
		{Filter: with(w, func(f *Filter) { f.Group = "g-a" }), GroupBy: []string{"channel"}},
		{Filter: with(w, func(f *Filter) { f.Stream = &yes }), GroupBy: []string{"route", "region", "provider"}},
		// A window of hours within a day, and one of minutes.
		{Filter: Filter{From: rollupBase.Add(3 * time.Hour), To: rollupBase.Add(17 * time.Hour)}, GroupBy: []string{"model"}},
		{Filter: Filter{From: rollupBase.Add(25*time.Hour + 7*time.Minute), To: rollupBase.Add(26*time.Hour + 3*time.Minute)}},
		// From rows: a label filter.
		{Filter: with(w, func(f *Filter) { f.Label = "generation_slow" }), GroupBy: []string{"model"}},
	}
}

// TestRollupAccuracy: on random data of several shapes, with absent values,
// every grouping, bucket and filter answers within the sketch's stated
// error of the exact R-7 percentiles of the same records — read from
// minute rows, then from compacted hours and days, then with some of them
// made dirty again by late records.
func TestRollupAccuracy(t *testing.T) {
	const days = 3
	n := 6000
	if testing.Short() {
		n = 1500
	}
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			for di, d := range distributions {
				t.Run(d.name, func(t *testing.T) {
					seed := uint64(20251201 + di)
					rng := rand.New(rand.NewPCG(seed, 7))
					t.Logf("seed %d", seed)
					s, _ := e.open(t)
					recs := randomRecords(rng, n, days, d)
					for i := 0; i < len(recs); i += 700 {
						insert(t, s, recs[i:min(i+700, len(recs))]...)
					}
					check := func(stage string) { checkQueries(t, s, recs, days, stage) }
					check("minutes")
					compactAll(t, s, rollupBase.Add(days*24*time.Hour+time.Hour))
					// Every projection of every level, each coarser one
					// in fewer rows than projection 0 (minutes: no more
					// than the raw rows; few records share a minute).
					for level := levelMinute; level < numLevels; level++ {
						full := countRows(t, s, fmt.Sprint("SELECT COUNT(*) FROM rollups WHERE level = ", storedLevel(level, 0)))
						if full == 0 {
							t.Fatalf("no rollups of level %d after compaction", level)
						}
						for p := 1; p < len(projections); p++ {
							if n := countRows(t, s, fmt.Sprint("SELECT COUNT(*) FROM rollups WHERE level = ", storedLevel(level, p))); n == 0 || n > full || (n == full && level > levelMinute) {
								t.Errorf("level %d projection %d: %d rows, projection 0 %d", level, p, n, full)
							}
						}
					}
					check("compacted")
					// Late records dirty an hour and its day again.
					late := randomRecords(rand.New(rand.NewPCG(seed, 8)), 50, 1, d)
					for i := range late {
						late[i].RequestID += "-late"
						late[i].Timestamp = rollupBase.Add(30*time.Hour + time.Duration(i)*time.Second)
					}
					insert(t, s, late...)
					recs = append(recs, late...)
					check("dirty")
				})
			}
		})
	}
}

// compactAll compacts until nothing is left to do.
func compactAll(t testing.TB, s Store, now time.Time) {
	t.Helper()
	for {
		n, err := s.(Compactor).Compact(ctxT(t), now)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func countRows(t testing.TB, s Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := readDB(s).QueryRowContext(ctxT(t), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRollupPlan(t *testing.T) {
	day, hour, minute := int64(24*time.Hour), int64(time.Hour), int64(time.Minute)
	d0 := rollupBase.UnixNano()
	type span = unitSpan
	for _, c := range []struct {
		name     string
		from, to int64
		bucket   time.Duration
		dirty    [][2]int64
		want     []span
	}{
		{"whole days", d0, d0 + 2*day, 0, nil, []span{{levelDay, d0, d0 + 2*day, false}}},
		{"edges in hours and minutes", d0 + 23*hour - 5*minute, d0 + day + 2*hour + 3*minute, 0, nil, []span{
			{levelMinute, d0 + 23*hour - 5*minute, d0 + 23*hour, true}, {levelHour, d0 + 23*hour, d0 + day + 2*hour, false},
			{levelMinute, d0 + day + 2*hour, d0 + day + 2*hour + 3*minute, true}}},
		{"a dirty day is read in six hours", d0, d0 + 2*day, 0, [][2]int64{{levelDay, d0 + day}}, []span{
			{levelDay, d0, d0 + day, false}, {levelSixHours, d0 + day, d0 + 2*day, false}}},
		{"a dirty six hours is read in three hours", d0, d0 + day, 0, [][2]int64{{levelDay, d0}, {levelSixHours, d0 + 6*hour}}, []span{
			{levelSixHours, d0, d0 + 6*hour, false}, {levelThreeHours, d0 + 6*hour, d0 + 12*hour, false}, {levelSixHours, d0 + 12*hour, d0 + day, false}}},
		{"a dirty three hours is read in hours", d0, d0 + 6*hour, 0, [][2]int64{{levelSixHours, d0}, {levelThreeHours, d0 + 3*hour}}, []span{
			{levelThreeHours, d0, d0 + 3*hour, false}, {levelHour, d0 + 3*hour, d0 + 6*hour, false}}},
		{"the last 24 hours: six hours, and the coarsest units that fit at its ends", d0 + 15*hour + 37*minute, d0 + day + 15*hour + 37*minute, 0, nil, []span{
			{levelMinute, d0 + 15*hour + 37*minute, d0 + 15*hour + 40*minute, true},
			{levelTenMinute, d0 + 15*hour + 40*minute, d0 + 16*hour, false}, {levelHour, d0 + 16*hour, d0 + 18*hour, false},
			{levelSixHours, d0 + 18*hour, d0 + day + 12*hour, false}, {levelThreeHours, d0 + day + 12*hour, d0 + day + 15*hour, false},
			{levelHalfHour, d0 + day + 15*hour, d0 + day + 15*hour + 30*minute, false},
			{levelMinute, d0 + day + 15*hour + 30*minute, d0 + day + 15*hour + 37*minute, true}}},
		{"a dirty hour is read in half hours", d0, d0 + 3*hour, 0, [][2]int64{{levelThreeHours, d0}, {levelHour, d0 + hour}}, []span{
			{levelHour, d0, d0 + hour, false}, {levelHalfHour, d0 + hour, d0 + 2*hour, false}, {levelHour, d0 + 2*hour, d0 + 3*hour, false}}},
		{"a dirty half hour is read in ten minutes, a dirty ten minutes in minutes", d0, d0 + hour, 0,
			[][2]int64{{levelHour, d0}, {levelHalfHour, d0}, {levelTenMinute, d0 + 20*minute}}, []span{
				{levelTenMinute, d0, d0 + 20*minute, false}, {levelMinute, d0 + 20*minute, d0 + 30*minute, true}, {levelHalfHour, d0 + 30*minute, d0 + hour, false}}},
		{"edges of ten minutes and half hours", d0 + 7*minute, d0 + hour + 25*minute, 0, nil, []span{
			{levelMinute, d0 + 7*minute, d0 + 10*minute, true}, {levelTenMinute, d0 + 10*minute, d0 + 30*minute, false},
			{levelHalfHour, d0 + 30*minute, d0 + hour, false}, {levelTenMinute, d0 + hour, d0 + hour + 20*minute, false},
			{levelMinute, d0 + hour + 20*minute, d0 + hour + 25*minute, true}}},
		{"edges of hours and ten minutes", d0 + 7*minute, d0 + 2*hour + 25*minute, 0, nil, []span{
			{levelMinute, d0 + 7*minute, d0 + 10*minute, true}, {levelTenMinute, d0 + 10*minute, d0 + 30*minute, false},
			{levelHalfHour, d0 + 30*minute, d0 + hour, false},
			{levelHour, d0 + hour, d0 + 2*hour, false}, {levelTenMinute, d0 + 2*hour, d0 + 2*hour + 20*minute, false},
			{levelMinute, d0 + 2*hour + 20*minute, d0 + 2*hour + 25*minute, true}}},
		{"hourly buckets use no days", d0, d0 + day, time.Hour, nil, []span{{levelHour, d0, d0 + day, false}}},
		{"12-hour buckets use six hours, no days", d0, d0 + day, 12 * time.Hour, nil, []span{{levelSixHours, d0, d0 + day, false}}},
		{"3-hour buckets use three hours", d0, d0 + day, 3 * time.Hour, nil, []span{{levelThreeHours, d0, d0 + day, false}}},
		{"30-minute buckets use half hours", d0, d0 + hour, 30 * time.Minute, nil, []span{{levelHalfHour, d0, d0 + hour, false}}},
		{"10-minute buckets use no hours", d0, d0 + hour, 10 * time.Minute, nil, []span{{levelTenMinute, d0, d0 + hour, false}}},
		{"5-minute buckets use minutes", d0, d0 + hour, 5 * time.Minute, nil, []span{{levelMinute, d0, d0 + hour, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := rollupPlan{dirty: map[[2]int64]bool{}}
			for level := range numLevels {
				p.allowed[level] = c.bucket == 0 || c.bucket%levelUnit[level] == 0
			}
			for _, d := range c.dirty {
				p.dirty[d] = true
			}
			p.cover(levelDay, c.from, c.to)
			if !slices.Equal(p.spans, c.want) {
				t.Errorf("spans %v, want %v", p.spans, c.want)
			}
		})
	}
}

// TestTwoWritersConcurrently: two gateways (two stores on one database)
// insert and compact at once, each from two goroutines as a Writer's lanes
// do; every record is counted exactly once.
func TestTwoWritersConcurrently(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			s1, dsn := e.open(t)
			s2, err := Open(ctxT(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			const perStore, batch = 3000, 100
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for si, s := range []Store{s1, s2} {
				rng := rand.New(rand.NewPCG(uint64(si), 1))
				recs := randomRecords(rng, perStore, 1, distributions[1])
				for i := range recs {
					recs[i].RequestID = fmt.Sprintf("w%d-%s", si, recs[i].RequestID)
				}
				wg.Add(3)
				for lane := range 2 { // alternate batches
					go func() {
						defer wg.Done()
						for i := lane * batch; i < len(recs); i += 2 * batch {
							if err := s.Insert(context.Background(), recs[i:i+batch]); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				go func() {
					// Compaction at once, over and over, as if the day
					// were long over.
					defer wg.Done()
					for range 20 {
						if _, err := s.(Compactor).Compact(context.Background(), rollupBase.Add(72*time.Hour)); err != nil {
							errs <- err
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			q := StatsQuery{Filter: Filter{From: rollupBase, To: rollupBase.Add(24 * time.Hour)}, GroupBy: []string{"model"}}
			total := func() int {
				st, err := s1.Stats(ctxT(t), q)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, g := range st.Groups {
					n += g.Count
				}
				return n
			}
			if n := total(); n != 2*perStore {
				t.Errorf("before the last compaction: %d records counted, want %d", n, 2*perStore)
			}
			compactAll(t, s2, rollupBase.Add(72*time.Hour))
			if n := total(); n != 2*perStore {
				t.Errorf("compacted: %d records counted, want %d", n, 2*perStore)
			}
			dirty := "SELECT COUNT(*) FROM rollup_dirty"
			if e.name == "clickhouse" {
				dirty = "SELECT count() FROM (SELECT level, start_ns FROM rollup_marks FINAL" + chDirtyHaving + ")"
			}
			if n := countRows(t, s1, dirty); n != 0 {
				t.Errorf("%d dirty marks left after compacting everything", n)
			}
		})
	}
}

// TestRetentionDeletesRollups: once every record of a unit is gone, so is
// its rollup, and summaries of the deleted time are empty.
func TestRetentionDeletesRollups(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s Store) {
		rng := rand.New(rand.NewPCG(3, 3))
		recs := randomRecords(rng, 2000, 3, distributions[0])
		insert(t, s, recs...)
		compactAll(t, s, rollupBase.Add(96*time.Hour))
		cut := rollupBase.Add(48 * time.Hour)
		for {
			n, err := s.DeleteBefore(ctxT(t), cut, 500)
			if err != nil {
				t.Fatal(err)
			}
			if n < 500 {
				break
			}
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM rollups WHERE start_ns < $1", cut.UnixNano()); n != 0 {
			t.Errorf("%d rollup rows before the cutoff", n)
		}
		st, err := s.Stats(ctxT(t), StatsQuery{Filter: Filter{From: rollupBase, To: rollupBase.Add(96 * time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		kept := 0
		for _, r := range recs {
			if !r.Timestamp.Before(cut) {
				kept++
			}
		}
		if len(st.Groups) != 1 || st.Groups[0].Count != kept {
			t.Errorf("after retention: %+v, want %d records", st.Groups, kept)
		}
	})
}

// TestRollupsBackfilledOnUpgrade: a database made before rollups existed
// (schema version 2, its records written without rollups) gets the
// rollups of its records when a gateway of this version opens it.
func TestRollupsBackfilledOnUpgrade(t *testing.T) {
	for _, e := range sqlEngines() {
		t.Run(e.name, func(t *testing.T) {
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "old.db")
			if e.name == "postgres" {
				dsn = testenv.PostgresSchema(t)
			}
			d, db := openRaw(t, dsn)
			if err := migrateTo(ctxT(t), db, d, 2); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			recs := randomRecords(rng, 3000, 2, distributions[2])
			tx, err := db.BeginTx(ctxT(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := insertRecordsAs(ctxT(t), tx, d, recs, false); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s, err := Open(ctxT(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, q := range rollupQueries(2)[:5] {
				st, err := s.Stats(ctxT(t), q)
				if err != nil {
					t.Fatal(err)
				}
				if st.Method != MethodRollups {
					t.Fatalf("method %s", st.Method)
				}
				checkAgainstExact(t, "backfilled", st, exactGroups(recs, q), q)
			}
			// The records themselves came through the upgrade whole (on
			// PostgreSQL, moved into day partitions in place).
			got := map[string]record.Record{}
			f := Filter{Limit: MaxLimit}
			for {
				p := must(s.List(ctxT(t), f))
				for _, r := range p.Records {
					got[r.RequestID] = r
				}
				if p.Next == "" {
					break
				}
				f.Cursor = p.Next
			}
			if len(got) != len(recs) {
				t.Fatalf("%d records after the upgrade, want %d", len(got), len(recs))
			}
			for _, r := range recs[:50] {
				if g := got[r.RequestID]; len(g.Attempts) != len(r.Attempts) || !slices.Equal(g.Diagnosis, r.Diagnosis) {
					t.Errorf("%s: attempts %d labels %v after the upgrade, want %d %v",
						r.RequestID, len(g.Attempts), g.Diagnosis, len(r.Attempts), r.Diagnosis)
				}
			}
			if e.name == "postgres" {
				var parts int
				if err := s.(*sqlStore).read.QueryRowContext(ctxT(t), `SELECT COUNT(*) FROM pg_partitioned_table p
					JOIN pg_class c ON c.oid = p.partrelid WHERE c.relname IN ('requests', 'request_attempts', 'request_labels')
					AND c.relnamespace = to_regnamespace(current_schema())`).Scan(&parts); err != nil || parts != 3 {
					t.Errorf("%d of the 3 record tables partitioned (%v)", parts, err)
				}
			}
		})
	}
}

// openRaw opens the database of a test DSN without migrating it.
func openRaw(t *testing.T, dsn string) (dialect, *sql.DB) {
	t.Helper()
	d, driver, src := postgresDialect, "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		d, driver, src = sqliteDialect, "sqlite", path
	}
	db, err := sql.Open(driver, src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return d, db
}

// TestProjectionFor: a summary reads the coarsest projection that keeps
// every dimension it filters or groups by.
func TestProjectionFor(t *testing.T) {
	yes := true
	for _, c := range []struct {
		q    StatsQuery
		cols []string
		want int
	}{
		{StatsQuery{}, nil, 8},
		{StatsQuery{Filter: Filter{Stream: &yes}}, nil, 8},
		{StatsQuery{Filter: Filter{Stream: &yes, Group: "g"}}, nil, 5},
		{StatsQuery{}, []string{"channel"}, 7},
		{StatsQuery{Filter: Filter{Group: "g"}}, []string{"channel"}, 4},
		{StatsQuery{Filter: Filter{Model: "m"}}, nil, 6},
		{StatsQuery{Filter: Filter{Model: "m", Group: "g"}}, nil, 3},
		{StatsQuery{Filter: Filter{Model: "m"}}, []string{"channel"}, 9},
		{StatsQuery{Filter: Filter{Model: "m", Group: "g"}}, []string{"channel"}, 2},
		{StatsQuery{}, []string{"api"}, 1},
		{StatsQuery{}, []string{"provider", "stream"}, 1},
		{StatsQuery{Filter: Filter{Status: "ok"}}, nil, 0},
	} {
		if got := projectionFor(&c.q, c.cols); got != c.want {
			t.Errorf("filter %+v, group columns %v: projection %d, want %d", c.q.Filter, c.cols, got, c.want)
		}
	}
	// Each projection keeps what it says and no more.
	k := rollupKey{api: "a", route: "r", model: "m", group: "g", channel: "c", region: "e", provider: "p", stream: true, status: "ok"}
	for p, proj := range projections {
		pk := k.project(proj)
		for _, col := range rollupKeyColumns {
			if kept := pk.dim(col) == k.dim(col); kept != proj.has(col) {
				t.Errorf("projection %d: %s kept %v", p, col, kept)
			}
		}
	}
}

// TestStatusesRoundTrip: per-status counts survive the statuses column,
// whatever characters a status holds.
func TestStatusesRoundTrip(t *testing.T) {
	in := map[string]int64{"ok": 1 << 40, "upstream_error": 3, "a,b=c%2C": 2, "": 1, "%": 7}
	got := map[string]int64{}
	addStatuses(got, encodeStatuses(in))
	if !mapsEqual(got, in) {
		t.Errorf("got %v, want %v (encoded %q)", got, in, encodeStatuses(in))
	}
	addStatuses(got, "ok=1,broken,=x,ok=2")
	if got["ok"] != 1<<40+3 {
		t.Errorf("malformed parts not skipped: ok=%d", got["ok"])
	}
}

// TestRollupPlanProjected: a summary of a projection other than 0 reads
// minutes from their compacted rows, and a dirty minute from its raw ones.
func TestRollupPlanProjected(t *testing.T) {
	hour, minute := int64(time.Hour), int64(time.Minute)
	d0 := rollupBase.UnixNano()
	p := rollupPlan{dirty: map[[2]int64]bool{}, projected: true}
	for level := range numLevels {
		p.allowed[level] = true
	}
	for _, d := range [][2]int64{{levelMinute, d0 + 8*minute}, {levelHalfHour, d0 + 30*minute}, {levelTenMinute, d0 + 50*minute}, {levelMinute, d0 + 52*minute}, {levelMinute, d0 + hour + 12*minute}} {
		p.dirty[d] = true
	}
	p.cover(levelDay, d0+7*minute, d0+hour+13*minute)
	want := []unitSpan{
		{levelMinute, d0 + 7*minute, d0 + 8*minute, false}, {levelMinute, d0 + 8*minute, d0 + 9*minute, true},
		{levelMinute, d0 + 9*minute, d0 + 10*minute, false}, {levelTenMinute, d0 + 10*minute, d0 + 50*minute, false},
		{levelMinute, d0 + 50*minute, d0 + 52*minute, false}, {levelMinute, d0 + 52*minute, d0 + 53*minute, true},
		{levelMinute, d0 + 53*minute, d0 + hour, false}, {levelTenMinute, d0 + hour, d0 + hour + 10*minute, false},
		{levelMinute, d0 + hour + 10*minute, d0 + hour + 12*minute, false}, {levelMinute, d0 + hour + 12*minute, d0 + hour + 13*minute, true},
	}
	if !slices.Equal(p.spans, want) {
		t.Errorf("spans %v, want %v", p.spans, want)
	}
	groups := p.byLevel(3)
	var levels []int64
	for _, g := range groups {
		levels = append(levels, g.level)
	}
	if !slices.Equal(levels, []int64{0, 30, 31}) {
		t.Errorf("stored levels read %v, want raw minutes, minutes and ten minutes of projection 3", levels)
	}
}

// TestLevelsOnUpgrade: a database whose rollups were compacted before the
// six-hour, half-hour and three-hour levels existed gets them when a
// gateway of this version opens it: their units are marked
// (0008_six_hours.sql and 0009_half_hours_three_hours.sql, ClickHouse
// 0004 and 0005), read from finer rows until compacted, and then
// compacted — answers exact all along, including a day that late records
// had left dirty.
func TestLevelsOnUpgrade(t *testing.T) {
	const days = 3
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			old, dsn := e.open(t)
			rng := rand.New(rand.NewPCG(6, 6))
			recs := randomRecords(rng, 3000, days, distributions[1])
			insert(t, old, recs...)
			compactAll(t, old, rollupBase.Add(days*24*time.Hour+time.Hour))
			late := randomRecords(rand.New(rand.NewPCG(6, 7)), 40, 1, distributions[1])
			for i := range late {
				late[i].RequestID += "-late"
				late[i].Timestamp = rollupBase.Add(31*time.Hour + time.Duration(i)*time.Second)
			}
			insert(t, old, late...)
			recs = append(recs, late...)
			// What a gateway of the version before left: no rows or marks
			// of the new levels, and no record of their migrations.
			stmts := []string{
				"DELETE FROM rollups WHERE level % 10 >= 4",
				"DELETE FROM rollup_dirty WHERE level >= 4",
				"DELETE FROM schema_migrations WHERE version >= 8",
			}
			if e.name == "clickhouse" {
				stmts = []string{
					"ALTER TABLE rollups DELETE WHERE level % 10 >= 4",
					"ALTER TABLE rollup_marks DELETE WHERE level >= 4",
					"ALTER TABLE schema_migrations DELETE WHERE version >= 4",
				}
			}
			for _, st := range stmts {
				if _, err := writeDB(old).ExecContext(ctxT(t), st); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
			}
			if e.name == "clickhouse" {
				waitMutations(t, old)
			}
			if n := countRows(t, old, "SELECT COUNT(*) FROM rollups WHERE level % 10 >= 4"); n != 0 {
				t.Fatalf("%d rows of the new levels left", n)
			}
			s, err := Open(ctxT(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			check := func(stage string) { checkQueries(t, s, recs, days, stage) }
			check("migrated")
			compactAll(t, s, rollupBase.Add(days*24*time.Hour+time.Hour))
			// Every unit of the new levels in the three days (the
			// records fill every half hour), in every projection.
			for _, l := range []struct{ level, perDay int }{{levelSixHours, 4}, {levelThreeHours, 8}, {levelHalfHour, 48}} {
				for p := range projections {
					if n := countRows(t, s, fmt.Sprint("SELECT COUNT(DISTINCT start_ns) FROM rollups WHERE level = ", storedLevel(l.level, p))); n != l.perDay*days {
						t.Errorf("level %d projection %d: %d units after compaction, want %d", l.level, p, n, l.perDay*days)
					}
				}
			}
			check("compacted")
			if e.name == "clickhouse" {
				// The closed days' new units were merged into one part
				// each, as a day's own compaction merges them.
				for d := range days {
					day := strconv.FormatInt(rollupBase.Add(time.Duration(d)*24*time.Hour).UnixNano()/chDayNs, 10)
					if n := chCount(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND active AND table = 'rollups' AND partition = ?", day); n != 1 {
						t.Errorf("day %d: its rollups are in %d parts, want 1", d, n)
					}
				}
			}
		})
	}
}

// waitMutations waits for the ClickHouse mutations of s's database to be
// done (ALTER … DELETE runs in the background).
func waitMutations(t *testing.T, s Store) {
	t.Helper()
	for range 300 {
		if countRows(t, s, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0") == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("ClickHouse mutations not done after 30 s")
}
