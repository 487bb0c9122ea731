package sqlstore

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestSeriesOnUpgrade: rollups stored before 0038, each row with its key's
// nine columns, come through the upgrade as the same rows naming their
// key by a series id, one series a distinct key; summaries read from them
// are exact, and compaction and new records go on from there. On SQLite
// the table of a file of 16 KB pages stays WITHOUT ROWID.
func TestSeriesOnUpgrade(t *testing.T) {
	const days = 2
	for _, e := range storetest.SQLEngines() {
		t.Run(e.Name, func(t *testing.T) {
			ctx := storetest.Ctx(t)
			// The rollups of these records as this version writes them,
			// spelled out with their keys below.
			cur, _ := e.Open(t)
			recs := storetest.RandomRecords(rand.New(rand.NewPCG(38, 38)), 1500, days, storetest.Distributions[1])
			storetest.Insert(t, cur, recs[:1000]...)
			storetest.CompactAll(t, cur, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
			d := cur.(*sqlStore).d
			cols := []string{"level", "start_ns", "writer", "count", "labels", "statuses"}
			for _, f := range store.StatFields {
				cols = append(cols, f.RollupColumn())
			}
			cols = append(cols, strings.Split(seriesKeyList, ", ")...)
			var rows [][]any
			q, err := storetest.ReadDB(cur).QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM "+rollupsFrom(d))
			if err != nil {
				t.Fatal(err)
			}
			for q.Next() {
				row := make([]any, len(cols))
				dest := make([]any, len(cols))
				for i := range row {
					dest[i] = &row[i]
				}
				if err := q.Scan(dest...); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, row)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			keys := storetest.CountRows(t, cur, "SELECT COUNT(*) FROM (SELECT DISTINCT "+seriesKeyList+" FROM "+rollupsFrom(d)+") k")
			var units [][3]int64
			q, err = storetest.ReadDB(cur).QueryContext(ctx, "SELECT level, start_ns, missing FROM rollup_units")
			if err != nil {
				t.Fatal(err)
			}
			for q.Next() {
				var u [3]int64
				if err := q.Scan(&u[0], &u[1], &u[2]); err != nil {
					t.Fatal(err)
				}
				units = append(units, u)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			if len(rows) < 100 || len(units) == 0 {
				t.Fatalf("%d rollup rows, %d sparse units: too few to test", len(rows), len(units))
			}

			// A database of version 37 holding those rows.
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "old.db")
			var db *sql.DB
			if e.Name == "postgres" {
				dsn = testenv.PostgresSchema(t)
				d, db = openRaw(t, dsn)
			} else {
				d = sqliteDialect
				db, err = sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite:")+"?_pragma=page_size(16384)")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
			}
			if err := migrateTo(ctx, db, d, 37); err != nil {
				t.Fatal(err)
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			marks := make([]string, len(cols))
			for i := range marks {
				marks[i] = fmt.Sprintf("$%d", i+1)
			}
			for _, row := range rows {
				if _, err := tx.ExecContext(ctx, "INSERT INTO rollups ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(marks, ", ")+")", row...); err != nil {
					t.Fatal(err)
				}
			}
			for _, u := range units {
				if _, err := tx.ExecContext(ctx, "INSERT INTO rollup_units (level, start_ns, missing) VALUES ($1, $2, $3)", u[0], u[1], u[2]); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			db.Close()

			s, err := store.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if n := storetest.CountRows(t, s, "SELECT COUNT(*) FROM rollups"); n != len(rows) {
				t.Errorf("%d rollup rows after the upgrade, %d before", n, len(rows))
			}
			if n := storetest.CountRows(t, s, "SELECT COUNT(*) FROM rollup_series"); n != keys {
				t.Errorf("%d series for %d distinct keys", n, keys)
			}
			if e.Name == "sqlite" {
				var ddl string
				if err := storetest.ReadDB(s).QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE name = 'rollups'").Scan(&ddl); err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(ddl, "WITHOUT ROWID") || strings.Contains(ddl, "model") {
					t.Errorf("rollups after the upgrade: %s", ddl)
				}
			}
			// The queries the rollups answer (the old database has no
			// records to answer the others from).
			check := func(stage string, qs []store.StatsQuery, want func(q store.StatsQuery) map[string]*storetest.ExactGroup) {
				n := 0
				for _, q := range qs {
					st, err := s.Stats(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					if st.Method != store.MethodRollups {
						continue
					}
					n++
					storetest.CheckAgainstExact(t, stage, st, want(q), q)
				}
				if n < 5 {
					t.Errorf("%s: %d queries answered from the rollups", stage, n)
				}
			}
			check("upgraded", storetest.RollupQueries(days), func(q store.StatsQuery) map[string]*storetest.ExactGroup {
				return storetest.ExactGroups(recs[:1000], q)
			})
			// New records (their series added beside the migrated ones),
			// then every unit compacted again.
			storetest.Insert(t, s, recs[1000:]...)
			if _, err := storetest.WriteDB(s).ExecContext(ctx, "INSERT INTO rollup_dirty (level, start_ns, writer, seq) SELECT DISTINCT level % 10, start_ns, 'old', 1 FROM rollups WHERE level % 10 > 0"); err != nil {
				t.Fatal(err)
			}
			storetest.CompactAll(t, s, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
			check("recompacted", storetest.RollupQueries(days), func(q store.StatsQuery) map[string]*storetest.ExactGroup {
				return storetest.ExactGroups(recs, q)
			})
		})
	}
}
