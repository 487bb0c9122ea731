package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/url"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/timeline"
)

func TestPercentile(t *testing.T) {
	// Reference values are numpy.percentile's default (linear, R-7).
	cases := []struct {
		in                 []float64
		p50, p90, p95, p99 float64
	}{
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5.5, 9.1, 9.55, 9.91},
		{[]float64{50, 15, 40, 20, 35}, 35, 46, 48, 49.6},
		{[]float64{7}, 7, 7, 7, 7},
		{[]float64{3, 1}, 2, 2.8, 2.9, 2.98},
		{[]float64{-2, 0, 0, 0, 8}, 0, 4.8, 6.4, 7.68},
	}
	for _, c := range cases {
		s := store.Summarize(append([]float64(nil), c.in...), 3)
		for name, pair := range map[string][2]float64{"p50": {*s.P50, c.p50}, "p90": {*s.P90, c.p90}, "p95": {*s.P95, c.p95}, "p99": {*s.P99, c.p99}} {
			if math.Abs(pair[0]-pair[1]) > 1e-9 {
				t.Errorf("%v %s = %v, want %v", c.in, name, pair[0], pair[1])
			}
		}
		if s.Count != len(c.in) || s.Absent != 3 {
			t.Errorf("%v: count %d absent %d", c.in, s.Count, s.Absent)
		}
	}
	if got := store.Percentile([]float64{1, 2}, 0); got != 1 {
		t.Errorf("p0 = %v", got)
	}
	if got := store.Percentile([]float64{1, 2}, 1); got != 2 {
		t.Errorf("p100 = %v", got)
	}
	empty := store.Summarize(nil, 4)
	if empty.Count != 0 || empty.Absent != 4 || empty.P50 != nil || empty.Min != nil || empty.Mean != nil {
		t.Errorf("empty summary %+v", empty)
	}
	if b, _ := json.Marshal(empty); !strings.Contains(string(b), `"p50":null`) {
		t.Errorf("empty summary JSON %s", b)
	}
}

func approx(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = null, want %v", what, want)
		return
	}
	if math.Abs(*got-want) > 1e-9 {
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

// approxP checks a percentile of a summary against the exact R-7 value of
// the same records: within the sketch's bound, relative to the larger of
// the two order statistics it interpolates (neighbour, the other one; for
// these small fixtures within 10% of want).
func approxP(t *testing.T, what string, got *float64, want, neighbour float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s = null, want %v", what, want)
		return
	}
	if bound := sketch.RelativeAccuracy*max(math.Abs(want), math.Abs(neighbour)) + 1e-9; math.Abs(*got-want) > bound {
		t.Errorf("%s = %v, want %v ± %v", what, *got, want, bound)
	}
}

func TestStats(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		storetest.StatsFixture(t, s)
		st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{GroupBy: []string{"model"}})
		if err != nil {
			t.Fatal(err)
		}
		if st.PercentileMethod != store.SketchMethod || !strings.Contains(st.PercentileMethod, "R-7") || st.Method != store.MethodRollups {
			t.Errorf("method %q %q", st.Method, st.PercentileMethod)
		}
		for _, f := range store.StatFields {
			if st.Definitions[f.Name] == "" {
				t.Errorf("no definition of %s", f.Name)
			}
		}
		if len(st.Groups) != 2 || st.Groups[0].Key["model"] != "m1" || st.Groups[1].Key["model"] != "m2" {
			t.Fatalf("groups %+v", st.Groups)
		}
		m1, m2 := st.Groups[0], st.Groups[1]
		if m1.Count != 12 || m1.Errors != 0 || m1.ErrorRate != 0 {
			t.Errorf("m1 counts %d %d %v", m1.Count, m1.Errors, m1.ErrorRate)
		}
		ft := m1.Fields["first_text_delta_ms"]
		if ft.Count != 10 || ft.Absent != 2 {
			t.Errorf("m1 first_text_delta_ms count %d absent %d, want 10, 2", ft.Count, ft.Absent)
		}
		approxP(t, "m1 p50", ft.P50, 5.5, 6)
		approxP(t, "m1 p90", ft.P90, 9.1, 10)
		approxP(t, "m1 p95", ft.P95, 9.55, 10)
		approxP(t, "m1 p99", ft.P99, 9.91, 10)
		approx(t, "m1 min", ft.Min, 1)
		approx(t, "m1 max", ft.Max, 10)
		approx(t, "m1 mean", ft.Mean, 5.5)
		approxP(t, "m1 tps p50", m1.Fields["visible_output_tps"].P50, 55, 60)
		lag := m1.Fields["relay_lag_ms"]
		approxP(t, "m1 relay lag p99", lag.P99, 0.5, 0.5)
		if lag.Count != 10 || lag.Absent != 2 {
			t.Errorf("relay lag count %d absent %d", lag.Count, lag.Absent)
		}
		if up := m1.Fields["upstream_headers_ms"]; up.Count != 0 || up.Absent != 12 || up.P50 != nil {
			t.Errorf("all-absent field %+v", up)
		}
		if got := m1.Labels; got["generation_slow"] != (store.LabelCount{4, 3}) || got["truncated"] != (store.LabelCount{1, 1}) || len(got) != 2 {
			t.Errorf("m1 labels %+v", got)
		}
		if m2.Count != 5 || m2.Errors != 1 || math.Abs(m2.ErrorRate-0.2) > 1e-12 {
			t.Errorf("m2 counts %d %d %v", m2.Count, m2.Errors, m2.ErrorRate)
		}
		if m2.Statuses[record.StatusOK] != 4 || m2.Statuses[record.StatusTruncated] != 1 {
			t.Errorf("m2 statuses %v", m2.Statuses)
		}
		ft = m2.Fields["first_text_delta_ms"]
		approxP(t, "m2 p50", ft.P50, 35, 35)
		approxP(t, "m2 p95", ft.P95, 48, 50)
		approxP(t, "m2 p99", ft.P99, 49.6, 50)

		// One group, a filter by label, a subset of fields.
		st, err = s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{Label: "truncated"}, Fields: []string{"first_text_delta_ms"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Groups) != 1 || st.Groups[0].Count != 2 || len(st.Groups[0].Key) != 0 {
			t.Fatalf("label filter groups %+v", st.Groups)
		}
		g := st.Groups[0]
		// The counts, the one field, and truncated.
		if len(g.Fields) != 1 || len(st.Definitions) != len(store.CountDefinitions)+3 || st.Method != store.MethodRows {
			t.Errorf("fields %v definitions %v", g.Fields, st.Definitions)
		}
		approxP(t, "truncated p50", g.Fields["first_text_delta_ms"].P50, (4+40)/2.0, 40)

		// Buckets of a minute, grouped by model and channel.
		st, err = s.Stats(storetest.Ctx(t), store.StatsQuery{GroupBy: []string{"model", "channel"}, Bucket: time.Minute,
			Filter: store.Filter{Model: "m1"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Groups) != 3 || st.BucketMs != 60000 {
			t.Fatalf("buckets: %d groups, bucket %v", len(st.Groups), st.BucketMs)
		}
		start := storetest.Base.Truncate(time.Minute)
		for i, want := range []struct {
			at           time.Time
			count, label int
		}{{start, 5, 4}, {start.Add(time.Minute), 5, 0}, {start.Add(2 * time.Minute), 2, 0}} {
			g := st.Groups[i]
			if g.BucketStart == nil || !g.BucketStart.Equal(want.at) || g.Count != want.count || g.Labels["generation_slow"].Count != want.label {
				t.Errorf("bucket %d: start %v count %d labels %v; want %v %d %d", i, g.BucketStart, g.Count, g.Labels, want.at, want.count, want.label)
			}
			if g.Key["channel"] != "ch-1" {
				t.Errorf("bucket %d key %v", i, g.Key)
			}
		}

		// Nothing matched: no groups, not an error.
		st, err = s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{Model: "none"}})
		if err != nil || len(st.Groups) != 0 {
			t.Errorf("empty stats: %v %+v", err, st.Groups)
		}

		for _, q := range []store.StatsQuery{
			{GroupBy: []string{"prompt"}},
			{GroupBy: []string{"model", "model"}},
			{Fields: []string{"ttft"}},
			{Bucket: time.Millisecond},
			{Bucket: time.Second, Filter: store.Filter{From: storetest.Base, To: storetest.Base.Add(24 * time.Hour)}},
		} {
			if _, err := s.Stats(storetest.Ctx(t), q); !errors.Is(err, store.ErrBadQuery) {
				t.Errorf("stats %+v: %v, want ErrBadQuery", q, err)
			}
		}
	})
}

// TestStatsSameOnBothEngines compares the whole answer, byte for byte, for
// the same records on SQLite and PostgreSQL.
func TestStatsSameOnBothEngines(t *testing.T) {
	var answers []string
	for _, e := range storetest.Engines() {
		s, _ := e.Open(t)
		storetest.StatsFixture(t, s)
		var recs []record.Record
		for i := range 200 {
			r := storetest.FullRecord(storetest.IDN(1000+i), storetest.Base.Add(time.Duration(i)*7*time.Second))
			r.FirstTextDeltaMs = timeline.At(time.Duration(i*i*7919%100003) * time.Microsecond)
			r.Model = []string{"a", "b", "c"}[i%3]
			if i%5 == 0 {
				r.VisibleOutputTPS = timeline.Rate{}
			}
			recs = append(recs, r)
		}
		storetest.Insert(t, s, recs...)
		st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{GroupBy: []string{"model", "route"}, Bucket: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		answers = append(answers, string(b))
	}
	if answers[0] != answers[1] {
		t.Errorf("engines disagree:\nsqlite   %s\npostgres %s", answers[0], answers[1])
	}
}

// TestSummarizeMatchesSort: the selection Summarize uses gives exactly the
// percentiles of the sorted values, for many sizes and with heavy
// duplication (timings repeat at coarse clocks).
func TestSummarizeMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 3000 {
		n := 1 + rng.IntN(300)
		if trial%100 == 0 {
			n = 1 + rng.IntN(20000)
		}
		vals := make([]float64, n)
		for i := range vals {
			switch trial % 3 {
			case 0:
				vals[i] = rng.Float64() * 1000
			case 1:
				vals[i] = float64(rng.IntN(5)) // few distinct values
			default:
				vals[i] = float64(i) // already sorted
				if trial%2 == 0 {
					vals[i] = float64(n - i) // reversed
				}
			}
		}
		sorted := slices.Clone(vals)
		slices.Sort(sorted)
		s := store.Summarize(vals, 0)
		for _, c := range []struct {
			p   float64
			got *float64
		}{{0.5, s.P50}, {0.9, s.P90}, {0.95, s.P95}, {0.99, s.P99}} {
			if want := store.Percentile(sorted, c.p); *c.got != want {
				t.Fatalf("n=%d trial %d p%v: %v, want %v", n, trial, c.p, *c.got, want)
			}
		}
		if *s.Min != sorted[0] || *s.Max != sorted[n-1] {
			t.Fatalf("n=%d: min %v max %v", n, *s.Min, *s.Max)
		}
	}
}

func TestStatsRowBound(t *testing.T) {
	// A summary that storetest.Must read records (a key_name or label filter) stops
	// past the bound with ErrBadQuery naming the filter, instead of
	// reading without end; the bound is lowered here from MaxStatsRows so
	// as not to store millions of records. Without that filter the same
	// summary comes from the rollups, whatever the number of records.
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		var recs []record.Record
		for i := range 60 {
			r := storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Second))
			if i%2 == 1 {
				r.Model = "other"
			}
			recs = append(recs, r)
		}
		storetest.Insert(t, s, recs...)
		storetest.SetMaxStatsRows(s, 50)
		_, err := s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{KeyName: "team-a-app"}})
		if !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), "narrow the window or filter") ||
			!strings.Contains(err.Error(), "key_name") {
			t.Errorf("60 records past a bound of 50: %v", err)
		}
		// Grouped and bucketed (each cell's records counted first on
		// SQLite and PostgreSQL): refused alike,
		// and answered alike at 60.
		grouped := store.StatsQuery{Filter: store.Filter{KeyName: "team-a-app"}, GroupBy: []string{"model"}, Bucket: 7 * time.Second}
		if _, err := s.Stats(storetest.Ctx(t), grouped); !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), "more than 50 records match") {
			t.Errorf("60 records by model and bucket past a bound of 50: %v", err)
		}
		// Narrowed, the same store answers.
		for _, f := range []store.Filter{{Model: "other", KeyName: "team-a-app"}, {To: storetest.Base.Add(50 * time.Second), KeyName: "team-a-app"}} {
			st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: f})
			if err != nil || len(st.Groups) != 1 || st.Groups[0].Count > 50 || st.Method != store.MethodRows {
				t.Errorf("narrowed to %+v: %v %+v", f, err, st.Groups)
			}
		}
		// Without the filter: rollups, no bound.
		if st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{}); err != nil || st.Groups[0].Count != 60 || st.Method != store.MethodRollups {
			t.Errorf("60 records from rollups at a row bound of 50: %v %+v", err, st)
		}
		storetest.SetMaxStatsRows(s, 60)
		if st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{KeyName: "team-a-app"}}); err != nil || st.Groups[0].Count != 60 {
			t.Errorf("60 records at a bound of 60: %v", err)
		}
		st, err := s.Stats(storetest.Ctx(t), grouped)
		total, cells := 0, map[string]bool{}
		for _, g := range st.Groups {
			total += g.Count
		}
		for _, r := range recs {
			cells[fmt.Sprint(r.Model, r.Timestamp.UnixNano()/int64(grouped.Bucket))] = true
		}
		if err != nil || st.Method != store.MethodRows || len(st.Groups) != len(cells) || total != 60 {
			t.Errorf("60 records by model and 7 s bucket at a bound of 60: %v, method %q, %d groups (want %d), %d records", err, st.Method, len(st.Groups), len(cells), total)
		}
	})
}

func TestStatsConcurrencyBound(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		storetest.Insert(t, s, storetest.FullRecord("req-1", storetest.Base))
		slots := storetest.StatsSlots(s)
		if cap(slots) != store.MaxConcurrentStats {
			t.Fatalf("%d slots, want %d", cap(slots), store.MaxConcurrentStats)
		}
		// Two calls running: a third waits, and gives up with its context.
		for range store.MaxConcurrentStats {
			slots <- struct{}{}
		}
		ctx, cancel := context.WithTimeout(storetest.Ctx(t), 150*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := s.Stats(ctx, store.StatsQuery{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a third call: %v, want it to wait for its deadline", err)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("the third call returned after %v without waiting", d)
		}
		// One finishes: the waiting call runs.
		done := make(chan error, 1)
		go func() {
			_, err := s.Stats(storetest.Ctx(t), store.StatsQuery{})
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("ran with every slot taken: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		<-slots
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting call did not run once a slot was free")
		}
		<-slots
		if len(slots) != 0 {
			t.Errorf("%d slots still held after every call returned", len(slots))
		}
	})
}

func TestStatsConcurrencyBoundPostgres(t *testing.T) {
	// Real calls, blocked in PostgreSQL by a table lock: only
	// MaxConcurrentStats of them reach the database at once.
	dsn := testenv.PostgresSchema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own sessions, told apart from every other in
	// pg_stat_activity by their application name.
	app := "stats_bound_" + u.Query().Get("search_path")
	s, err := store.Open(storetest.Ctx(t), dsn+"&application_name="+app)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.Insert(t, s, storetest.FullRecord("req-1", storetest.Base))
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	release := holdTable(t, admin, "rollups")
	const calls = 5
	done := make(chan error, calls)
	for range calls {
		go func() {
			_, err := s.Stats(storetest.Ctx(t), store.StatsQuery{})
			done <- err
		}()
	}
	waiting := func() int {
		var n int
		if err := admin.QueryRowContext(storetest.Ctx(t), `SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	storetest.WaitFor(t, "summaries waiting on the lock", func() bool { return waiting() == store.MaxConcurrentStats })
	time.Sleep(300 * time.Millisecond) // time for any further call to arrive
	if n := waiting(); n != store.MaxConcurrentStats {
		t.Errorf("%d summaries in the database at once, want %d", n, store.MaxConcurrentStats)
	}
	release()
	for range calls {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestStatsOverflowGroup(t *testing.T) {
	// A client sends more distinct model names than an answer has
	// groups: group_by=model still answers, the keys past the bound
	// share one "(other)" group, and no record goes uncounted.
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		const models = store.MaxStatsGroups + 1
		want := map[string]int{} // model → records
		var recs []record.Record
		for i := range models + 4 {
			r := storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Millisecond))
			r.Model = fmt.Sprintf("m%05d", i%models) // m00000..m00003 twice
			r.Diagnosis = []string{"generation_slow"}
			want[r.Model]++
			recs = append(recs, r)
		}
		storetest.Insert(t, s, recs...)
		st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{GroupBy: []string{"model"}, Fields: []string{"first_text_delta_ms"}})
		if err != nil {
			t.Fatal(err)
		}
		if !st.Truncated || len(st.Groups) != store.MaxStatsGroups+1 {
			t.Fatalf("truncated %v, %d groups; want true, %d", st.Truncated, len(st.Groups), store.MaxStatsGroups+1)
		}
		other := st.Groups[len(st.Groups)-1]
		if other.Key["model"] != store.OtherKey || other.BucketStart != nil {
			t.Errorf("last group %v at %v, want the overflow group", other.Key, other.BucketStart)
		}
		kept := 0
		seen := map[string]bool{}
		for _, g := range st.Groups[:len(st.Groups)-1] {
			m := g.Key["model"]
			if seen[m] || want[m] == 0 {
				t.Fatalf("group %q: seen before %v, records %d", m, seen[m], want[m])
			}
			seen[m] = true
			if g.Count != want[m] || g.Labels["generation_slow"].Count != want[m] {
				t.Errorf("group %q: %d records, %+v labels; want %d", m, g.Count, g.Labels, want[m])
			}
			kept += g.Count
		}
		if total := kept + other.Count; total != len(recs) || other.Count < 1 {
			t.Errorf("counts add up to %d (overflow %d), want %d", total, other.Count, len(recs))
		}
		// The overflow group summarises its records like any other.
		if lc := other.Labels["generation_slow"]; lc.Count != other.Count || lc.Primary != other.Count {
			t.Errorf("overflow labels %+v for %d records", lc, other.Count)
		}
		if f := other.Fields["first_text_delta_ms"]; f.Count != other.Count || f.P50 == nil {
			t.Errorf("overflow field summary %+v for %d records", f, other.Count)
		}
		b, _ := json.Marshal(st)
		if !strings.Contains(string(b), `"truncated":true`) || st.Definitions["truncated"] != store.TruncatedDefinition {
			t.Errorf("the answer does not say it is truncated, or what that means: %.300s", b)
		}
		// Under the bound nothing is folded, and the answer says so.
		st, err = s.Stats(storetest.Ctx(t), store.StatsQuery{GroupBy: []string{"model"}, Filter: store.Filter{Model: "m00001"}})
		if err != nil || st.Truncated || len(st.Groups) != 1 || st.Groups[0].Count != 2 {
			t.Errorf("one model: %v truncated %v %+v", err, st.Truncated, st.Groups)
		}
		if b, _ := json.Marshal(st); !strings.Contains(string(b), `"truncated":false`) {
			t.Errorf("untruncated answer: %.300s", b)
		}
	})
}

// TestStatsStreamDimension groups and filters by the stream flag, which both
// engines storetest.Must name "true" and "false" alike.
func TestStatsStreamDimension(t *testing.T) {
	for _, e := range storetest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			s, _ := e.Open(t)
			base := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
			var recs []record.Record
			for i := range 6 {
				r := storetest.FullRecord(fmt.Sprintf("req-s%d", i), base.Add(time.Duration(i)*time.Second))
				r.Stream = i%3 != 0 // 4 streaming, 2 not
				recs = append(recs, r)
			}
			storetest.Insert(t, s, recs...)
			st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{From: base, To: base.Add(time.Hour)}, GroupBy: []string{"stream"}, Fields: []string{"upstream_headers_ms"}})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, g := range st.Groups {
				got[g.Key["stream"]] = g.Count
			}
			if want := map[string]int{"true": 4, "false": 2}; !maps.Equal(got, want) {
				t.Errorf("groups by stream %v, want %v", got, want)
			}
			no := false
			st, err = s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{From: base, To: base.Add(time.Hour), Stream: &no}})
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Groups) != 1 || st.Groups[0].Count != 2 {
				t.Errorf("stream=false: %+v, want one group of 2", st.Groups)
			}
		})
	}
}

// TestStatsAnswerBound: an answer whose groups × buckets × fields pass
// StatsQuery.MaxValues is refused with ErrBadQuery naming the bound, on
// every engine and on both paths (rollups, and rows for a key_name
// filter), instead of being held whole in memory (issue 50: one stats
// call took a gateway from 34 to 435 MB of RSS). Its buckets alone are
// checked before anything is read (CheckAnswerSize).
func TestStatsAnswerBound(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		var recs []record.Record
		for i := range 300 {
			r := storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Second))
			r.Model = fmt.Sprintf("m%03d", i)
			recs = append(recs, r)
		}
		storetest.Insert(t, s, recs...)
		fields := []string{"first_text_delta_ms", "total_handler_ms"}
		for _, f := range []store.Filter{{}, {KeyName: "team-a-app"}} {
			q := store.StatsQuery{Filter: f, GroupBy: []string{"model"}, Fields: fields, MaxValues: 400}
			_, err := s.Stats(storetest.Ctx(t), q)
			if !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), "passed the bound of 400 values") ||
				!strings.Contains(err.Error(), "max_answer_values") {
				t.Errorf("300 groups × 2 fields past 400 values, filter %+v: %v", f, err)
			}
			// 300 groups × 2 fields fit a bound of 600 exactly.
			q.MaxValues = 600
			if st, err := s.Stats(storetest.Ctx(t), q); err != nil || len(st.Groups) != 300 || st.Truncated {
				t.Errorf("300 groups × 2 fields at a bound of 600, filter %+v: %v, %d groups", f, err, len(st.Groups))
			}
			// One field each: 300 values.
			q.MaxValues, q.Fields = 400, fields[:1]
			if st, err := s.Stats(storetest.Ctx(t), q); err != nil || len(st.Groups) != 300 {
				t.Errorf("300 groups × 1 field at a bound of 400, filter %+v: %v, %d groups", f, err, len(st.Groups))
			}
		}
		// Buckets count too: 300 one-second buckets of one group.
		q := store.StatsQuery{Filter: store.Filter{KeyName: "team-a-app"}, Bucket: time.Second, Fields: fields[:1], MaxValues: 100}
		if _, err := s.Stats(storetest.Ctx(t), q); !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), "bound of 100") {
			t.Errorf("300 buckets past 100 values: %v", err)
		}
	})
}

// TestStatsRefusedBeforeSketches: a bucketed answer past the bound is
// refused before its sketches are made, and one within it reuses them. Where it may pass, the engine
// counts the cells first from the rows' times and group keys alone
// (rollup.Acc.CountCell), so the refused call allocates a fraction of
// what the answer itself takes; before, it merged max_answer_values ÷
// fields cells of sketches and then refused (issue 50's probe: 6 days of
// 15m buckets by model, +111 to +166 MiB of RSS for a 400), about two
// thirds of its sketches here.
//
// The accepted answer, 1,000 cells of every field, seals each cell once
// its last row is read (SQLite and PostgreSQL: each cell's rows counted
// first, rollup.Acc.RowDone; ClickHouse: rows read ordered by cell,
// rollup.Acc.Seal), from minute rows and again from compacted ten-minute
// rows (which ClickHouse de-duplicates within each cell): its sketches go
// back to the pool for the next cells.
func TestStatsRefusedBeforeSketches(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		// Four records a cell, two minutes apart, their latencies a
		// factor of 3 apart: each cell's sketches span buckets, as real
		// traffic's do.
		const models, units, each = 20, 50, 4
		var recs []record.Record
		for m := range models {
			for u := range units {
				for k := range each {
					at := storetest.RollupBase.Add(time.Duration(u)*10*time.Minute + time.Duration(k)*(2*time.Minute+time.Second))
					r := storetest.FullRecord(storetest.IDN(len(recs)), at)
					r.Model = fmt.Sprintf("m%02d", m)
					f := math.Pow(3, float64(k))
					r.Fields.UpstreamHeadersMs = timeline.SpanOf(storetest.Ms(40 * f))
					r.Fields.FirstSSEEventMs = timeline.At(storetest.Ms(50 * f))
					r.Fields.FirstResponseMs = timeline.At(storetest.Ms(60 * f))
					r.Fields.FirstTextDeltaMs = timeline.At(storetest.Ms(70 * f))
					r.Fields.FirstTextSentMs = timeline.At(storetest.Ms(71 * f))
					r.Fields.UpstreamDoneMs = timeline.At(storetest.Ms(900 * f))
					r.Fields.TotalHandlerMs = timeline.At(storetest.Ms(901 * f))
					recs = append(recs, r)
				}
			}
		}
		storetest.Insert(t, s, recs...)
		cells := models * units
		fields := len(store.StatFields)
		allocated := func(q store.StatsQuery) (store.Stats, error, uint64) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.GC() // and the summaries' pool of sketches is empty
			runtime.ReadMemStats(&before)
			st, err := s.Stats(storetest.Ctx(t), q)
			runtime.ReadMemStats(&after)
			return st, err, after.TotalAlloc - before.TotalAlloc
		}
		q := store.StatsQuery{GroupBy: []string{"model"}, Bucket: 10 * time.Minute, MaxValues: cells * fields}
		whole := func(stage string) (store.Stats, uint64) {
			st, err, n := allocated(q)
			if err != nil || len(st.Groups) != cells || st.Method != store.MethodRollups {
				t.Fatalf("%s: %d cells × %d fields within a bound of as many: %v, %d groups, method %q", stage, cells, fields, err, len(st.Groups), st.Method)
			}
			// Sealed, it allocated 8–17 MiB on the three engines; holding
			// every cell's sketches to the end, 52–56 MiB.
			t.Logf("%s: the answer allocated %d KiB", stage, n>>10)
			if n > uint64(cells)*24<<10 {
				t.Errorf("%s: %d cells × %d fields allocated %d KiB, want at most 24 KiB a cell (each cell's sketches reused once it is summarised)",
					stage, cells, fields, n>>10)
			}
			return st, n
		}
		minutes, wholeAlloc := whole("minute rows")
		q.MaxValues = cells * fields * 2 / 3 // 666 cells fit
		_, err, refused := allocated(q)
		if !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), fmt.Sprintf("passed the bound of %d values", q.MaxValues)) {
			t.Fatalf("%d cells past a bound of %d values: %v", cells, q.MaxValues, err)
		}
		t.Logf("its refusal %d KiB", refused>>10)
		if refused > wholeAlloc/8 {
			t.Errorf("the refused answer allocated %d KiB, the whole answer %d KiB: want at most an eighth (its sketches were made before the refusal)",
				refused>>10, wholeAlloc>>10)
		}
		// From records (a bucket not a whole number of minutes), about as
		// many cells: SQLite and PostgreSQL count each cell's records
		// first, ClickHouse reads them ordered by cell, and each cell is
		// sealed after its last record. Holding
		// every cell's sketches to the end, SQLite and PostgreSQL
		// allocated 52.9 MiB, ClickHouse 48.7.
		rowsQ := store.StatsQuery{GroupBy: []string{"model"}, Bucket: 601 * time.Second, MaxValues: 2 * cells * fields}
		st, err, n := allocated(rowsQ)
		if err != nil || len(st.Groups) < cells || st.Method != store.MethodRows {
			t.Fatalf("601s buckets: %v, %d groups, method %q", err, len(st.Groups), st.Method)
		}
		t.Logf("from records: %d cells allocated %d KiB", len(st.Groups), n>>10)
		if n > uint64(len(st.Groups))*24<<10 {
			t.Errorf("from records: %d cells × %d fields allocated %d KiB, want at most 24 KiB a cell", len(st.Groups), fields, n>>10)
		}
		// The same answer from the ten-minute rows compaction writes.
		storetest.CompactAll(t, s, storetest.RollupBase.Add(25*time.Hour))
		q.MaxValues = cells * fields
		if compacted, _ := whole("compacted"); !reflect.DeepEqual(compacted.Groups, minutes.Groups) {
			t.Errorf("compacted rows answer otherwise than minute rows")
		}
	})
}

func TestCheckAnswerSize(t *testing.T) {
	// The probe's query: 6 days of 1-minute buckets, every field.
	q := store.StatsQuery{Bucket: time.Minute}
	err := store.CheckAnswerSize(&q, 6*24*time.Hour)
	if !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), fmt.Sprintf("8640 buckets × %d fields", len(store.StatFields))) ||
		!strings.Contains(err.Error(), "bound of 16000") || !strings.Contains(err.Error(), "a bucket of 15m fits") {
		t.Errorf("6d of 1m buckets: %v", err)
	}
	for _, ok := range []store.StatsQuery{
		{Bucket: 15 * time.Minute},
		{Bucket: time.Minute, Fields: []string{"first_text_delta_ms"}},
		{Bucket: time.Minute, MaxValues: 8640 * len(store.StatFields)},
		{},
	} {
		if err := store.CheckAnswerSize(&ok, 6*24*time.Hour); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}
