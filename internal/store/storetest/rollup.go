package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/store/rollup"
	"github.com/ttfx/ttfx/internal/timeline"
)

// RollupBase is a Monday 00:00 UTC: windows of the accuracy test start on
// whole days, so that they need no widening and the exact reference covers
// the same records.
var RollupBase = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)

// Distribution draws one value of a field.
type Distribution struct {
	Name string
	Draw func(r *rand.Rand) float64
}

var Distributions = []Distribution{
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

// RandomRecords makes n records over days days from RollupBase with keys
// drawn from small sets, a field's values from d, and about a fifth of
// every field absent.
func RandomRecords(rng *rand.Rand, n, days int, d Distribution) []record.Record {
	recs := make([]record.Record, n)
	span := int64(days) * int64(24*time.Hour)
	for i := range recs {
		r := record.Record{
			RequestID: fmt.Sprintf("req-%s-%07d", d.Name, i),
			Timestamp: RollupBase.Add(time.Duration(rng.Int64N(span))),
			API:       []string{"openai.chat", "openai.responses"}[rng.IntN(2)],
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
			return time.Duration(d.Draw(rng) * float64(time.Millisecond)), true
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

// ExactGroups summarises recs the way Stats should, exactly: R-7 over the
// values of each group (and bucket).
func ExactGroups(recs []record.Record, q store.StatsQuery) map[string]*ExactGroup {
	out := map[string]*ExactGroup{}
	for i := range recs {
		r := &recs[i]
		if !MatchesFilter(r, &q.Filter) {
			continue
		}
		k := rollupKeyOf(r)
		var key []string
		for _, d := range q.GroupBy {
			key = append(key, k.Dim(store.Dimensions[d]))
		}
		var bucket int64
		if q.Bucket > 0 {
			bucket = rollup.FloorDiv(r.Timestamp.UnixNano(), int64(q.Bucket))
		}
		id := strings.Join(key, "\x00") + "\x00" + strconv.FormatInt(bucket, 10)
		g := out[id]
		if g == nil {
			g = &ExactGroup{values: map[string][]float64{}, statuses: map[string]int{}, labels: rollup.LabelCounts{}}
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
		for _, f := range store.StatFields {
			if v, ok := f.Of(r); ok {
				g.values[f.Name] = append(g.values[f.Name], v)
			}
		}
	}
	return out
}

type ExactGroup struct {
	count    int
	statuses map[string]int
	labels   rollup.LabelCounts
	values   map[string][]float64
}

func rollupKeyOf(r *record.Record) rollup.Key { return rollup.KeyOf(r) }

func MatchesFilter(r *record.Record, f *store.Filter) bool {
	ts := r.Timestamp.UnixNano()
	return (f.From.IsZero() || ts >= f.From.UnixNano()) && (f.To.IsZero() || ts < f.To.UnixNano()) &&
		(f.Model == "" || r.Model == f.Model) && (f.Channel == "" || r.Channel == f.Channel) &&
		(f.Group == "" || r.Group == f.Group) && (f.Status == "" || r.Status == f.Status) &&
		(f.Stream == nil || r.Stream == *f.Stream) &&
		(f.Label == "" || slices.Contains(r.Diagnosis, f.Label))
}

// CheckAgainstExact compares an answer with the exact summary of the same
// records: counts, statuses and labels equal; min and max equal; mean within
// float rounding; each percentile within the sketch's bound of the exact
// R-7 value, relative to the two order statistics it interpolates.
// CheckQueries checks every query of RollupQueries(days) on s against exact
// R-7 over recs.
func CheckQueries(t *testing.T, s store.Store, recs []record.Record, days int, stage string) {
	t.Helper()
	for qi, q := range RollupQueries(days) {
		st, err := s.Stats(Ctx(t), q)
		if err != nil {
			t.Fatalf("%s query %d: %v", stage, qi, err)
		}
		CheckAgainstExact(t, fmt.Sprintf("%s query %d", stage, qi), st, ExactGroups(recs, q), q)
	}
}

func CheckAgainstExact(t *testing.T, what string, st store.Stats, want map[string]*ExactGroup, q store.StatsQuery) {
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
			bucket = rollup.FloorDiv(g.BucketStart.UnixNano(), int64(q.Bucket))
		}
		id := strings.Join(key, "\x00") + "\x00" + strconv.FormatInt(bucket, 10)
		e := want[id]
		if e == nil {
			t.Errorf("%s: unexpected group %v at %v", what, g.Key, g.BucketStart)
			continue
		}
		if g.Count != e.count || !MapsEqual(g.Statuses, e.statuses) || !MapsEqual(g.Labels, map[string]store.LabelCount(e.labels)) {
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
				exact := store.Percentile(vals, c.p)
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

func MapsEqual[V comparable](a, b map[string]V) bool {
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

// RollupQueries are the groupings, buckets and filters the accuracy test
// asks, over a window of whole days.
func RollupQueries(days int) []store.StatsQuery {
	w := store.Filter{From: RollupBase, To: RollupBase.Add(time.Duration(days) * 24 * time.Hour)}
	yes := true
	with := func(f store.Filter, edit func(*store.Filter)) store.Filter { edit(&f); return f }
	return []store.StatsQuery{
		{Filter: w},
		{Filter: w, GroupBy: []string{"model"}},
		{Filter: w, GroupBy: []string{"model", "channel", "stream"}},
		{Filter: w, GroupBy: []string{"group"}, Bucket: time.Hour},
		{Filter: w, GroupBy: []string{"api"}, Bucket: 24 * time.Hour},
		{Filter: w, Bucket: 10 * time.Minute, Fields: []string{"first_text_delta_ms"}},
		{Filter: with(w, func(f *store.Filter) { f.Model, f.Stream = "m-b", &yes }), GroupBy: []string{"channel"}},
		{Filter: with(w, func(f *store.Filter) { f.Status = record.StatusTruncated })},
		{Filter: with(w, func(f *store.Filter) { f.Status = record.StatusOK }), GroupBy: []string{"model"}, Bucket: 6 * time.Hour},
		{Filter: with(w, func(f *store.Filter) { f.Group = "g-a" }), GroupBy: []string{"channel"}},
		{Filter: with(w, func(f *store.Filter) { f.Stream = &yes }), GroupBy: []string{"route", "region", "provider"}},
		// A window of hours within a day, and one of minutes.
		{Filter: store.Filter{From: RollupBase.Add(3 * time.Hour), To: RollupBase.Add(17 * time.Hour)}, GroupBy: []string{"model"}},
		{Filter: store.Filter{From: RollupBase.Add(25*time.Hour + 7*time.Minute), To: RollupBase.Add(26*time.Hour + 3*time.Minute)}},
		// From rows: a label filter.
		{Filter: with(w, func(f *store.Filter) { f.Label = "generation_slow" }), GroupBy: []string{"model"}},
	}
}

// CompactAll compacts until nothing is left to do. A call has Ctx's
// deadline, a hang guard, not a fixed one: a call makes up to
// MaxCompactPerCall units (on PostgreSQL a few round trips and up to
// hundreds of rows each), and on this project's shared 2-core machine one
// took longer than 30 s at a load of 50, and longer than two minutes beside
// stress-ng --cpu 4; the gateway's own compaction has no deadline.
func CompactAll(t testing.TB, s store.Store, now time.Time) {
	t.Helper()
	for {
		ctx, cancel := context.WithDeadline(context.Background(), callDeadline(t))
		n, err := s.(store.Compactor).Compact(ctx, now)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

func CountRows(t testing.TB, s store.Store, q string, args ...any) int {
	t.Helper()
	var n int
	if err := ReadDB(s).QueryRowContext(Ctx(t), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// WaitMutations waits for the ClickHouse mutations of s's database to be
// done (ALTER … DELETE runs in the background).
func WaitMutations(t *testing.T, s store.Store) {
	t.Helper()
	for range 300 {
		if CountRows(t, s, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0") == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("ClickHouse mutations not done after 30 s")
}
