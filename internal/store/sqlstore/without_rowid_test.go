package sqlstore

import (
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestWithoutRowidOnUpgrade: a SQLite store made before migration 0034
// (its attempts and labels rowid tables, each with an automatic index of
// its primary key) gets the two tables rebuilt WITHOUT ROWID
// when a gateway of this version opens it, with every row, column and
// index kept: the same rows, the same exact answers, records whole.
func TestWithoutRowidOnUpgrade(t *testing.T) {
	const days = 1
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "old.db")
	old, err := store.Open(storetest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	recs := storetest.RandomRecords(rand.New(rand.NewPCG(34, 34)), 1500, days, storetest.Distributions[1])
	storetest.Insert(t, old, recs...)
	// Compact half the day, so that compacted rows and dirty marks are
	// there too.
	storetest.CompactAll(t, old, storetest.RollupBase.Add(12*time.Hour))
	counts := func(s store.Store) map[string]int {
		m := map[string]int{}
		for _, tbl := range withoutRowidTables {
			m[tbl] = storetest.CountRows(t, s, "SELECT COUNT(*) FROM "+tbl)
		}
		return m
	}
	before := counts(old)
	// What the version before left: rowid tables, no record of 0034.
	tx, err := storetest.WriteDB(old).BeginTx(storetest.Ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tbl := range withoutRowidTables {
		if err := rebuildTable(storetest.Ctx(t), tx, tbl, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.ExecContext(storetest.Ctx(t), "DELETE FROM schema_migrations WHERE version = 34"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	shape := func(s store.Store) (without, autoindexes int) {
		for _, tbl := range withoutRowidTables {
			var ddl string
			if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t),
				`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, tbl).Scan(&ddl); err != nil {
				t.Fatal(err)
			}
			if strings.HasSuffix(strings.ToUpper(ddl), "WITHOUT ROWID") {
				without++
			}
			autoindexes += storetest.CountRows(t, s, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NULL`, tbl)
		}
		return without, autoindexes
	}
	if w, a := shape(old); w != 0 || a != len(withoutRowidTables) {
		t.Fatalf("old shape: %d tables without rowid, %d automatic indexes", w, a)
	}
	old.Close()

	s, err := store.Open(storetest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if w, a := shape(s); w != len(withoutRowidTables) || a != 0 {
		t.Errorf("after the upgrade: %d of %d tables without rowid, %d automatic indexes left", w, len(withoutRowidTables), a)
	}
	if n := storetest.CountRows(t, s, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'request_labels_label'`); n != 1 {
		t.Errorf("request_labels_label: %d, want 1", n)
	}
	if got := counts(s); !maps.Equal(got, before) {
		t.Errorf("rows after the upgrade %v, before %v", got, before)
	}
	storetest.CheckQueries(t, s, recs, days, "migrated")
	var listed int
	f := store.Filter{Limit: store.MaxLimit}
	byID := map[string]int{}
	for i, r := range recs {
		byID[r.RequestID] = i
	}
	for {
		p := storetest.Must(s.List(storetest.Ctx(t), f))
		for _, g := range p.Records {
			r := recs[byID[g.RequestID]]
			if len(g.Attempts) != len(r.Attempts) || strings.Join(g.Diagnosis, ",") != strings.Join(r.Diagnosis, ",") {
				t.Errorf("%s: attempts %d labels %v after the upgrade, want %d %v",
					r.RequestID, len(g.Attempts), g.Diagnosis, len(r.Attempts), r.Diagnosis)
			}
			listed++
		}
		if p.Next == "" {
			break
		}
		f.Cursor = p.Next
	}
	if listed != len(recs) {
		t.Errorf("%d records listed after the upgrade, want %d", listed, len(recs))
	}
	// The rebuilt tables take writes and compaction as before.
	storetest.CompactAll(t, s, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
	storetest.CheckQueries(t, s, recs, days, "compacted")
}

// TestPageSizeAndRollupsWithoutRowid: a new SQLite file has pages of
// 16 KB and its rollups are a WITHOUT ROWID table (0036); a file made
// before, of 4 KB pages, keeps both as they were when it migrates, and
// both answer exactly.
func TestPageSizeAndRollupsWithoutRowid(t *testing.T) {
	const days = 1
	recs := storetest.RandomRecords(rand.New(rand.NewPCG(36, 36)), 800, days, storetest.Distributions[1])
	shape := func(s store.Store) (page int, without bool) {
		db := storetest.ReadDB(s)
		if err := db.QueryRowContext(storetest.Ctx(t), "PRAGMA page_size").Scan(&page); err != nil {
			t.Fatal(err)
		}
		var ddl string
		if err := db.QueryRowContext(storetest.Ctx(t), `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'rollups'`).Scan(&ddl); err != nil {
			t.Fatal(err)
		}
		return page, strings.HasSuffix(strings.ToUpper(strings.TrimSpace(ddl)), "WITHOUT ROWID")
	}
	for _, c := range []struct {
		name    string
		oldPage int // 0: a new file
		page    int
		without bool
	}{{"new", 0, 16384, true}, {"4 KB pages", 4096, 4096, false}} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s.db")
			if c.oldPage != 0 {
				// A file that exists before this version opens it: its
				// page size is fixed by its first table.
				db, err := sql.Open("sqlite", file)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{fmt.Sprintf("PRAGMA page_size = %d", c.oldPage), "CREATE TABLE before_0036 (x INTEGER)"} {
					if _, err := db.ExecContext(storetest.Ctx(t), q); err != nil {
						t.Fatal(err)
					}
				}
				db.Close()
			}
			s, err := store.Open(storetest.Ctx(t), "sqlite:"+file)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if page, without := shape(s); page != c.page || without != c.without {
				t.Errorf("page size %d, rollups without rowid %v; want %d, %v", page, without, c.page, c.without)
			}
			var mode string
			if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal mode %q (%v), want wal", mode, err)
			}
			storetest.Insert(t, s, recs...)
			storetest.CheckQueries(t, s, recs, days, "minutes")
			storetest.CompactAll(t, s, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
			storetest.CheckQueries(t, s, recs, days, "compacted")
		})
	}
}
