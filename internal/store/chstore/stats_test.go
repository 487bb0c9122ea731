package chstore

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestClickHouseCellsReadInOrder: grouped and bucketed answers read their
// rollup rows ordered by cell and summarise each cell when the next begins
// (readRollups), so duplicates are dropped within a cell: minute rows
// written twice (a retried batch) and the older version of a compacted
// row beside the newer one (its unit compacted again after late records)
// count once, exactly as the records say. Background merges, which would
// drop the duplicates, are stopped (and the day stays open: compaction
// merges a closed day's part).
func TestClickHouseCellsReadInOrder(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	ch := s.(*chStore)
	ctx := storetest.Ctx(t)
	if _, err := ch.write.ExecContext(ctx, "SYSTEM STOP MERGES rollups"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.write.Exec("SYSTEM START MERGES rollups") })
	half := func(seed uint64, suffix string) []record.Record {
		var out []record.Record
		for _, r := range storetest.RandomRecords(rand.New(rand.NewPCG(50, seed)), 600, 1, storetest.Distributions[1]) {
			if r.Timestamp.Before(storetest.RollupBase.Add(12 * time.Hour)) {
				r.RequestID += suffix
				out = append(out, r)
			}
		}
		return out
	}
	recs := half(4, "")
	ids := make([]string, len(recs))
	ptrs := make([]*record.Record, len(recs))
	for i := range recs {
		ids[i], ptrs[i] = recs[i].RequestID, &recs[i]
	}
	// The batch's rollups land, the writer sees an error, and retries it
	// whole: each minute row twice, under one token.
	if err := ch.writeRollups(ctx, batchToken(ids), ptrs); err != nil {
		t.Fatal(err)
	}
	minutes := storetest.ChCount(t, s, "SELECT count() FROM rollups")
	storetest.Insert(t, s, recs...)
	if n := storetest.ChCount(t, s, "SELECT count() FROM rollups WHERE level = 0"); n != 2*minutes {
		t.Fatalf("%d minute rows after the retry, want %d twice", n, minutes)
	}

	w := store.Filter{From: storetest.RollupBase, To: storetest.RollupBase.Add(24 * time.Hour)}
	queries := []store.StatsQuery{
		{Filter: w, GroupBy: []string{"model"}, Bucket: time.Hour},
		{Filter: w, GroupBy: []string{"model", "channel"}},
		{Filter: w, GroupBy: []string{"channel", "stream"}, Bucket: 10 * time.Minute, Fields: []string{"first_text_delta_ms", "total_handler_ms"}},
		{Filter: w, Bucket: 6 * time.Hour},
	}
	check := func(stage string) {
		t.Helper()
		for i, q := range queries {
			st, err := s.Stats(storetest.Ctx(t), q)
			if err != nil {
				t.Fatalf("%s query %d: %v", stage, i, err)
			}
			storetest.CheckAgainstExact(t, stage+" query "+strconv.Itoa(i), st, storetest.ExactGroups(recs, q), q)
		}
	}
	check("minute rows twice")

	now := storetest.RollupBase.Add(13 * time.Hour) // the day open
	storetest.CompactAll(t, s, now)
	check("compacted")
	// Late records make the units dirty, and they are compacted again:
	// each row of the newer version beside its older, smaller one.
	recs = append(recs, half(5, "-late")...)
	storetest.Insert(t, s, recs[len(ids):]...)
	check("late records")
	storetest.CompactAll(t, s, now)
	compacted := " FROM rollups WHERE level % " + strconv.Itoa(rollup.ProjStride) + " != 0"
	names := strings.Join(append([]string{"level", "start_ns"}, rollup.KeyColumns...), ", ")
	if older := storetest.ChCount(t, s, "SELECT count() - uniqExact("+names+")"+compacted); older == 0 {
		t.Fatalf("no older compacted rows beside the newer (%d rows)", storetest.ChCount(t, s, "SELECT count()"+compacted))
	} else {
		t.Logf("%d older compacted rows beside the newer", older)
	}
	check("compacted again")
}
