package sqlstore

import (
	"slices"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestPostgresRollupIndexes: on PostgreSQL (0037) the rollups have a
// unique index of the raw minute rows only and an index of (level,
// start_ns), no primary key; records of one minute and key written by two
// inserts still make one raw row (the upsert finds the partial index), and
// the answers stay exact before and after compaction.
func TestPostgresRollupIndexes(t *testing.T) {
	s, _ := storetest.OpenPostgres(t)
	db := storetest.ReadDB(s)
	rows, err := db.QueryContext(storetest.Ctx(t), `SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'rollups' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	if !slices.Equal(names, []string{"rollups_minutes", "rollups_units"}) {
		t.Errorf("rollups indexes %v", names)
	}
	// More inserts of one minute and key than the store has writer lanes
	// (each lane writes raw rows of its own): some lane writes its row
	// twice or more, and must update it.
	lanes := s.(interface{ WriterLanes() int }).WriterLanes()
	n := 2*lanes + 1
	for i := range n {
		storetest.Insert(t, s, storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Millisecond)))
	}
	if rows := storetest.CountRows(t, s, "SELECT COUNT(*) FROM rollups WHERE level = 0"); rows > lanes {
		t.Errorf("%d raw minute rows for %d records of one minute and key over %d writer lanes", rows, n, lanes)
	}
	if c := storetest.CountRows(t, s, "SELECT COALESCE(SUM(count), 0) FROM rollups WHERE level = 0"); c != n {
		t.Errorf("raw minute rows count %d records, want %d", c, n)
	}
	storetest.CompactAll(t, s, storetest.Base.Add(48*time.Hour))
	q := store.StatsQuery{Filter: store.Filter{From: storetest.Base.Add(-time.Hour), To: storetest.Base.Add(24 * time.Hour)}}
	if c := storetest.StatsTotal(t, s, q); c != n {
		t.Errorf("compacted: stats count %d records, want %d", c, n)
	}
}
