package sqlstore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestStatsScanOrIndex: SQLite's choice between the time index and a scan
// (wideWindow) changes how rows are read, never the answer.
func TestStatsScanOrIndex(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	storetest.StatsFixture(t, s)
	ss := s.(*sqlStore)
	q := store.StatsQuery{GroupBy: []string{"model"}, Filter: store.Filter{From: storetest.Base.Add(-time.Hour), To: storetest.Base.Add(time.Hour), Label: "generation_slow"}}
	tx, err := ss.read.BeginTx(storetest.Ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !wideWindow(storetest.Ctx(t), tx, &q.Filter) {
		t.Error("a window around every record is not wide")
	}
	narrow := store.Filter{From: storetest.Base.Add(-time.Hour), To: storetest.Base.Add(-time.Minute)}
	if wideWindow(storetest.Ctx(t), tx, &narrow) {
		t.Error("a window before every record is wide")
	}
	tx.Rollback()
	var answers []string
	for _, plan := range []bool{true, false} {
		ss.d.planTime = plan
		st, err := s.Stats(storetest.Ctx(t), q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(st)
		answers = append(answers, string(b))
	}
	if answers[0] != answers[1] {
		t.Errorf("scan and index disagree:\n%s\n%s", answers[0], answers[1])
	}
}
