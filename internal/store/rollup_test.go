package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestRollupAccuracy: on random data of several shapes, with absent values,
// every grouping, bucket and filter answers within the sketch's stated
// error of the exact R-7 percentiles of the same records — read from
// minute rows, then from compacted hours and days, then with some of them
// made dirty again by late records.
//
// Each distribution has a store of its own, so they run in parallel: most
// of the time goes to compaction's round trips to the database (a
// transaction per unit), which a loaded machine stretches (last stop, at a
// load average of 22–50, the test took 21 of the package's 25 minutes).
// 3,000 records over three days, not 6,000: beside stress-ng --cpu 4 it
// still took 24 minutes, and the time is CPU (6 s of CPU in 32 s for one
// SQLite distribution; on /dev/shm no faster), which grows with the
// records. The checks hold at any count: each percentile against the
// sketch's bound around the exact R-7 value of the same records.
func TestRollupAccuracy(t *testing.T) {
	const days = 3
	n := 3000
	if testing.Short() {
		n = 1500
	}
	storetest.EachEngineAtOnce(t, func(t *testing.T, e storetest.Engine) {
		// The distributions too run at once (not t.Parallel, whose
		// -parallel bound of GOMAXPROCS would queue all nine behind two).
		var wg sync.WaitGroup
		defer wg.Wait()
		for di, d := range storetest.Distributions {
			// The sketches are the engines' common code: every
			// distribution runs on SQLite; PostgreSQL and ClickHouse,
			// whose storage and merging differ and not the sketch, run
			// two (one with zeros). All fifteen took 22 of the store
			// package's 25 minutes at load ~28.
			if e.Name != "sqlite" && d.Name != "lognormal" && d.Name != "with_zeros" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				t.Run(d.Name, func(t *testing.T) { accuracyOf(t, e, d, di, n, days) })
			}()
		}
	})
}

// accuracyOf is one engine and distribution of TestRollupAccuracy.
func accuracyOf(t *testing.T, e storetest.Engine, d storetest.Distribution, di, n, days int) {
	seed := uint64(20251201 + di)
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	s, _ := e.Open(t)
	recs := storetest.RandomRecords(rng, n, days, d)
	for i := 0; i < len(recs); i += 700 {
		storetest.Insert(t, s, recs[i:min(i+700, len(recs))]...)
	}
	check := func(stage string) { storetest.CheckQueries(t, s, recs, days, stage) }
	check("minutes")
	storetest.CompactAll(t, s, storetest.RollupBase.Add(time.Duration(days)*24*time.Hour+time.Hour))
	// Minutes only in their raw rows; every projection of
	// every coarser level, each in fewer rows than
	// projection 0.
	for p := 1; p < len(rollup.Projections); p++ {
		if n := storetest.CountRows(t, s, fmt.Sprint("SELECT COUNT(*) FROM rollups WHERE level = ", rollup.StoredLevel(rollup.Minute, p))); n != 0 {
			t.Errorf("minutes of projection %d: %d rows, want none", p, n)
		}
	}
	for level := rollup.Minute + 1; level < rollup.NumLevels; level++ {
		checkSparse(t, s, level)
	}
	check("compacted")
	// Late records dirty an hour and its day again.
	late := storetest.RandomRecords(rand.New(rand.NewPCG(seed, 8)), 50, 1, d)
	for i := range late {
		late[i].RequestID += "-late"
		late[i].Timestamp = storetest.RollupBase.Add(30*time.Hour + time.Duration(i)*time.Second)
	}
	storetest.Insert(t, s, late...)
	recs = append(recs, late...)
	check("dirty")
}

// checkSparse checks every compacted unit of level: each projection
// beyond 0 is stored where it at least halves the rows of its stored
// fallback and its rows average rollup.MinRecordsPerRow records
// (rollup.Sparse), and left out, in rollup_units (on ClickHouse: the
// unit's newest compaction mark), where it does not; a unit without a row
// of projection 0 left it out; and some units of the level store rows.
func checkSparse(t *testing.T, s store.Store, level int) {
	t.Helper()
	db := storetest.ReadDB(s)
	ctx := storetest.Ctx(t)
	rows := map[int64][]int{}
	records := map[[2]int64]int64{} // {level, start} → the records its rows summarise
	q, err := db.QueryContext(ctx, "SELECT level, start_ns, COUNT(*), CAST(SUM(count) AS BIGINT) FROM rollups WHERE level % 10 = $1 GROUP BY level, start_ns", int64(level))
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var l, start, recs int64
		var n int
		if err := q.Scan(&l, &start, &n, &recs); err != nil {
			t.Fatal(err)
		}
		records[[2]int64{l, start}] = recs
		if rows[start] == nil {
			rows[start] = make([]int, len(rollup.Projections))
		}
		rows[start][l/rollup.ProjStride] = n
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	missing := map[int64]uint16{}
	leftOut := "SELECT start_ns, missing FROM rollup_units WHERE level = $1"
	if s.Engine() == "clickhouse" {
		leftOut = "SELECT start_ns, toInt64(argMaxIf(missing, at, kind = 1)) FROM rollup_marks WHERE level = $1 GROUP BY start_ns HAVING countIf(kind = 1) > 0"
	}
	q, err = db.QueryContext(ctx, leftOut, int64(level))
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var start, m int64
		if err := q.Scan(&start, &m); err != nil {
			t.Fatal(err)
		}
		missing[start] = uint16(m)
		if rows[start] == nil {
			rows[start] = make([]int, len(rollup.Projections))
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	left, kept, whole := 0, 0, 0
	for start, r := range rows {
		m := missing[start]
		for p, n := range r {
			if m&(1<<p) != 0 {
				left++
				if n != 0 {
					t.Errorf("level %d unit %d: projection %d left out but %d rows stored", level, start, p, n)
				}
				continue
			}
			if n == 0 {
				t.Errorf("level %d unit %d: projection %d neither stored nor left out", level, start, p)
			}
			if p > 0 {
				kept++
			}
			if fb := rollup.Fallback(p, m|1<<p); p > 0 && m&(1<<fb) == 0 && 2*n > r[fb] {
				t.Errorf("level %d unit %d: projection %d stored in %d rows, its fallback %d holds %d", level, start, p, n, fb, r[fb])
			}
			if recs := records[[2]int64{rollup.StoredLevel(level, p), start}]; p > 0 && int64(n)*rollup.MinRecordsPerRow > recs {
				t.Errorf("level %d unit %d: projection %d stored in %d rows of %d records", level, start, p, n, recs)
			}
		}
		if m&1 != 0 {
			whole++
		}
	}
	t.Logf("level %d: %d units, %d without projection 0, %d projections left out, %d stored beyond projection 0", level, len(rows), whole, left, kept)
	if len(rows) == 0 || whole == len(rows) && kept == 0 {
		t.Errorf("level %d: no rows stored in %d units", level, len(rows))
	}
}

// TestTwoWritersConcurrently: two gateways (two stores on one database)
// insert and compact at once, each from two goroutines as a Writer's lanes
// do; every record is counted exactly once.
func TestTwoWritersConcurrently(t *testing.T) {
	storetest.EachEngineAtOnce(t, func(t *testing.T, e storetest.Engine) {
		s1, dsn := e.Open(t)
		s2, err := store.Open(storetest.Ctx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		const batch = 100
		perStore := 3000
		if e.Name == "clickhouse" {
			// Each insert there runs the rollups' views: beside
			// stress-ng and two suites, 6,000 records took 8 of the
			// store package's 25 minutes. The race is the same with
			// 1,000 a store: 10 batches a lane against 20 compactions.
			perStore = 1000
		}
		var busyCompactions atomic.Int32
		defer func() {
			if n := busyCompactions.Load(); n == 40 {
				t.Errorf("no compaction of 40 got SQLite's write lock")
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for si, s := range []store.Store{s1, s2} {
			rng := rand.New(rand.NewPCG(uint64(si), 1))
			recs := storetest.RandomRecords(rng, perStore, 1, storetest.Distributions[1])
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
					_, err := s.(store.Compactor).Compact(context.Background(), storetest.RollupBase.Add(72*time.Hour))
					if busy(err) {
						// The other gateway held SQLite's write lock past
						// the busy timeout (10 s, seen at load ~28):
						// RunCompaction logs it and tries again at its
						// next tick, as here. Nothing was written.
						t.Logf("compaction: %v; again", err)
						busyCompactions.Add(1)
					} else if err != nil {
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
		q := store.StatsQuery{Filter: store.Filter{From: storetest.RollupBase, To: storetest.RollupBase.Add(24 * time.Hour)}, GroupBy: []string{"model"}}
		total := func() int {
			st, err := s1.Stats(storetest.Ctx(t), q)
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
		storetest.CompactAll(t, s2, storetest.RollupBase.Add(72*time.Hour))
		if n := total(); n != 2*perStore {
			t.Errorf("compacted: %d records counted, want %d", n, 2*perStore)
		}
		dirty := "SELECT COUNT(*) FROM rollup_dirty"
		if e.Name == "clickhouse" {
			dirty = "SELECT count() FROM (SELECT level, start_ns FROM rollup_marks FINAL" +
				" GROUP BY level, start_ns HAVING maxIf(at, kind = 0) >= maxIf(at, kind = 1) OR countIf(kind = 1) = 0)" // chstore's dirty units
		}
		if n := storetest.CountRows(t, s1, dirty); n != 0 {
			t.Errorf("%d dirty marks left after compacting everything", n)
		}
	})
}

// TestRetentionDeletesRollups: once every record of a unit is gone, so is
// its rollup, and summaries of the deleted time are empty.
func TestRetentionDeletesRollups(t *testing.T) {
	storetest.ForEachEngineAtOnce(t, func(t *testing.T, s store.Store) {
		rng := rand.New(rand.NewPCG(3, 3))
		recs := storetest.RandomRecords(rng, 2000, 3, storetest.Distributions[0])
		storetest.Insert(t, s, recs...)
		storetest.CompactAll(t, s, storetest.RollupBase.Add(96*time.Hour))
		cut := storetest.RollupBase.Add(48 * time.Hour)
		sql := !strings.HasSuffix(t.Name(), "/clickhouse")
		if sql && storetest.CountRows(t, s, "SELECT COUNT(*) FROM rollup_units WHERE start_ns < $1", cut.UnixNano()) == 0 {
			t.Fatal("no unit before the cutoff left a projection out: nothing to check")
		}
		for {
			n, err := s.DeleteBefore(storetest.Ctx(t), cut, 500)
			if err != nil {
				t.Fatal(err)
			}
			if n < 500 {
				break
			}
		}
		if n := storetest.CountRows(t, s, "SELECT COUNT(*) FROM rollups WHERE start_ns < $1", cut.UnixNano()); n != 0 {
			t.Errorf("%d rollup rows before the cutoff", n)
		}
		st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: store.Filter{From: storetest.RollupBase, To: storetest.RollupBase.Add(96 * time.Hour)}})
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

// TestLevelsOnUpgrade: a database whose rollups were compacted before the
// six-hour, half-hour and three-hour levels existed gets them when a
// gateway of this version opens it: their units are marked
// (0008_six_hours.sql and 0009_half_hours_three_hours.sql, ClickHouse
// 0004 and 0005), read from finer rows until compacted, and then
// compacted — answers exact all along, including a day that late records
// had left dirty.
func TestLevelsOnUpgrade(t *testing.T) {
	const days = 3
	storetest.EachEngineAtOnce(t, func(t *testing.T, e storetest.Engine) {
		old, dsn := e.Open(t)
		rng := rand.New(rand.NewPCG(6, 6))
		recs := storetest.RandomRecords(rng, 3000, days, storetest.Distributions[1])
		storetest.Insert(t, old, recs...)
		storetest.CompactAll(t, old, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
		late := storetest.RandomRecords(rand.New(rand.NewPCG(6, 7)), 40, 1, storetest.Distributions[1])
		for i := range late {
			late[i].RequestID += "-late"
			late[i].Timestamp = storetest.RollupBase.Add(31*time.Hour + time.Duration(i)*time.Second)
		}
		storetest.Insert(t, old, late...)
		recs = append(recs, late...)
		// What a gateway of the version before left: no rows or marks
		// of the new levels, and no record of their migrations (only
		// theirs: a later migration's tables, such as 0024's
		// channel_states, stay applied, since running it again would
		// meet its tables).
		stmts := []string{
			"DELETE FROM rollups WHERE level % 10 >= 4",
			"DELETE FROM rollup_dirty WHERE level >= 4",
			"DELETE FROM schema_migrations WHERE version IN (8, 9)",
		}
		if e.Name == "clickhouse" {
			stmts = []string{
				"ALTER TABLE rollups DELETE WHERE level % 10 >= 4",
				"ALTER TABLE rollup_marks DELETE WHERE level >= 4",
				"ALTER TABLE schema_migrations DELETE WHERE version IN (4, 5)",
			}
		}
		for _, st := range stmts {
			if _, err := storetest.WriteDB(old).ExecContext(storetest.Ctx(t), st); err != nil {
				t.Fatalf("%s: %v", st, err)
			}
		}
		if e.Name == "clickhouse" {
			storetest.WaitMutations(t, old)
		}
		if n := storetest.CountRows(t, old, "SELECT COUNT(*) FROM rollups WHERE level % 10 >= 4"); n != 0 {
			t.Fatalf("%d rows of the new levels left", n)
		}
		s, err := store.Open(storetest.Ctx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		check := func(stage string) { storetest.CheckQueries(t, s, recs, days, stage) }
		check("migrated")
		storetest.CompactAll(t, s, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
		// Every unit of the new levels in the three days (the
		// records fill every half hour), in every projection: stored,
		// or left out where it would not halve the rows read
		// (rollup_units; on ClickHouse the unit's newest compaction
		// mark).
		for _, l := range []struct{ level, perDay int }{{rollup.SixHours, 4}, {rollup.ThreeHours, 8}, {rollup.HalfHour, 48}} {
			for p := range rollup.Projections {
				q := fmt.Sprintf("SELECT COUNT(DISTINCT start_ns) FROM (SELECT start_ns FROM rollups WHERE level = %d UNION ALL"+
					" SELECT start_ns FROM rollup_marks WHERE level = %d GROUP BY start_ns HAVING bitAnd(argMaxIf(missing, at, kind = 1), %d) != 0)",
					rollup.StoredLevel(l.level, p), l.level, 1<<p)
				if e.Name != "clickhouse" {
					q = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT DISTINCT start_ns FROM rollups WHERE level = %d"+
						" UNION SELECT start_ns FROM rollup_units WHERE level = %d AND (missing & %d) <> 0) u", rollup.StoredLevel(l.level, p), l.level, 1<<p)
				}
				if n := storetest.CountRows(t, s, q); n != l.perDay*days {
					t.Errorf("level %d projection %d: %d units after compaction, want %d", l.level, p, n, l.perDay*days)
				}
			}
		}
		check("compacted")
		if e.Name == "clickhouse" {
			// The closed days' new units were merged into one part
			// each, as a day's own compaction merges them.
			for d := range days {
				day := strconv.FormatInt(storetest.RollupBase.Add(time.Duration(d)*24*time.Hour).UnixNano()/int64(24*time.Hour), 10)
				if n := storetest.ChCount(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND active AND table = 'rollups' AND partition = ?", day); n != 1 {
					t.Errorf("day %d: its rollups are in %d parts, want 1", d, n)
				}
			}
		}
	})
}

// TestMinutesRawOnlyOnUpgrade: a store made before minutes kept their raw
// rows only (0010_minutes_raw_only.sql, ClickHouse 0006) held compacted
// minute rows of every other projection (levels 10, 20, … 90) and dirty
// marks of minutes; the migration removes both, and answers stay exact.
func TestMinutesRawOnlyOnUpgrade(t *testing.T) {
	const days = 1
	storetest.EachEngineAtOnce(t, func(t *testing.T, e storetest.Engine) {
		old, dsn := e.Open(t)
		recs := storetest.RandomRecords(rand.New(rand.NewPCG(10, 10)), 1500, days, storetest.Distributions[1])
		storetest.Insert(t, old, recs...)
		// What a gateway of the version before left: copies of the raw
		// minute rows as projection rows (if they were read, every
		// count would double), minute marks, and no record of the
		// migration.
		// (The SQL engines' rows name their key by a series id.)
		sel := "start_ns, series, count, labels, statuses"
		for _, f := range store.StatFields {
			sel += ", " + f.RollupColumn()
		}
		stmts := []string{
			"INSERT INTO rollups (level, " + sel + ", writer) SELECT level + 30, " + sel + ", writer FROM rollups WHERE level = 0",
			"INSERT INTO rollup_dirty (level, start_ns, writer, seq) SELECT DISTINCT 0, start_ns, 'old', 1 FROM rollups WHERE level = 0",
			"DELETE FROM schema_migrations WHERE version = 10",
		}
		if e.Name == "clickhouse" {
			sel = strings.Replace(rollup.SelectColumns, "level, ", "", 1)
			stmts = []string{
				"INSERT INTO rollups (level, " + sel + ", writer) SELECT toUInt8(level + 30), " + sel + ", writer FROM rollups WHERE level = 0",
				"INSERT INTO rollup_marks (level, start_ns, kind, at) SELECT DISTINCT toUInt8(0), start_ns, toUInt8(0), now() FROM rollups WHERE level = 0",
				"ALTER TABLE schema_migrations DELETE WHERE version = 6",
			}
		}
		for _, st := range stmts {
			if _, err := storetest.WriteDB(old).ExecContext(storetest.Ctx(t), st); err != nil {
				t.Fatalf("%s: %v", st, err)
			}
		}
		if e.Name == "clickhouse" {
			storetest.WaitMutations(t, old)
		}
		if n := storetest.CountRows(t, old, "SELECT COUNT(*) FROM rollups WHERE level = 30"); n == 0 {
			t.Fatal("no minute rows of projection 3 made")
		}
		s, err := store.Open(storetest.Ctx(t), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if e.Name == "clickhouse" {
			storetest.WaitMutations(t, s)
		}
		marks := "SELECT COUNT(*) FROM rollup_dirty WHERE level = 0"
		if e.Name == "clickhouse" {
			marks = "SELECT count() FROM rollup_marks WHERE level = 0"
		}
		if n := storetest.CountRows(t, s, "SELECT COUNT(*) FROM rollups WHERE level % 10 = 0 AND level > 0"); n != 0 {
			t.Errorf("%d compacted minute rows left", n)
		}
		if n := storetest.CountRows(t, s, marks); n != 0 {
			t.Errorf("%d minute marks left", n)
		}
		storetest.CheckQueries(t, s, recs, days, "migrated")
		storetest.CompactAll(t, s, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
		storetest.CheckQueries(t, s, recs, days, "compacted")
	})
}

// busy reports whether err is SQLite's "database is locked" (SQLITE_BUSY):
// another connection held the write lock past the busy timeout.
func busy(err error) bool {
	var lite *sqlite.Error
	return errors.As(err, &lite) && lite.Code()&0xff == sqlite3.SQLITE_BUSY
}
