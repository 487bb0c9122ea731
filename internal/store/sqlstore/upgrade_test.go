package sqlstore

import (
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestRollupsBackfilledOnUpgrade: a database made before rollups existed
// (schema version 2, its records written without rollups) gets the
// rollups of its records when a gateway of this version opens it.
func TestRollupsBackfilledOnUpgrade(t *testing.T) {
	for _, e := range storetest.SQLEngines() {
		t.Run(e.Name, func(t *testing.T) {
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "old.db")
			if e.Name == "postgres" {
				dsn = testenv.PostgresSchema(t)
			}
			d, db := openRaw(t, dsn)
			if err := migrateTo(storetest.Ctx(t), db, d, 2); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(5, 5))
			recs := storetest.RandomRecords(rng, 3000, 2, storetest.Distributions[2])
			tx, err := db.BeginTx(storetest.Ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			// This version's insert names upstream_model and
			// upstream_auth_ms, which a schema of version 2 lacks: the
			// columns are there only for the insert, and dropped again
			// before the upgrade adds them.
			for _, c := range []string{"upstream_model TEXT NOT NULL DEFAULT ''", "upstream_auth_ms DOUBLE PRECISION"} {
				if _, err := tx.ExecContext(storetest.Ctx(t), "ALTER TABLE requests ADD COLUMN "+c); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := insertRecordsAs(storetest.Ctx(t), tx, d, recs, 2, nil); err != nil {
				t.Fatal(err)
			}
			for _, c := range []string{"upstream_model", "upstream_auth_ms"} {
				if _, err := tx.ExecContext(storetest.Ctx(t), "ALTER TABLE requests DROP COLUMN "+c); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			db.Close()
			s, err := store.Open(storetest.Ctx(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, q := range storetest.RollupQueries(2)[:5] {
				st, err := s.Stats(storetest.Ctx(t), q)
				if err != nil {
					t.Fatal(err)
				}
				if st.Method != store.MethodRollups {
					t.Fatalf("method %s", st.Method)
				}
				storetest.CheckAgainstExact(t, "backfilled", st, storetest.ExactGroups(recs, q), q)
			}
			// The records themselves came through the upgrade whole (on
			// PostgreSQL, moved into day partitions in place).
			got := map[string]record.Record{}
			f := store.Filter{Limit: store.MaxLimit}
			for {
				p := storetest.Must(s.List(storetest.Ctx(t), f))
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
			if e.Name == "postgres" {
				var parts int
				if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t), `SELECT COUNT(*) FROM pg_partitioned_table p
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
