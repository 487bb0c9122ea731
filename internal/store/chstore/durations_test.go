package chstore

import (
	"slices"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/timeline"
)

// TestClickHouseDurationsNs: durations are stored in whole nanoseconds
// (migration 0027) and read back exactly, and a row written before 0027 —
// or by an older gateway during an upgrade — with its durations in float
// milliseconds reads the same: Get, List and a summary from the rows (a
// label filter) see both alike.
func TestClickHouseDurationsNs(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	ch := s.(*chStore)
	old := storetest.FullRecord("req-old", storetest.Base)
	fresh := storetest.FullRecord("req-new", storetest.Base.Add(time.Second))
	// Nanoseconds no float millisecond holds exactly.
	fresh.Fields.TotalHandlerMs = timeline.At(12345*time.Millisecond + 678_901)
	fresh.Attempts[1].UpstreamHeadersMs = timeline.SpanOf(240*time.Millisecond + 250_001)
	fresh.InterTokenLatencyMs = timeline.SpanOf(18*time.Millisecond + 3)

	// The old row: every duration in its milliseconds column, as written
	// before 0027.
	row := chRequestRow(&old, "old-batch")
	args := store.RequestArgs(nil, &old)
	for _, i := range chNsPositions {
		row[i] = args[i]
	}
	for i, c := range chReadColumns {
		if chNsColumns[c] && slices.Contains(attemptArrays, c) {
			ns := row[i].([]*int64)
			ms := make([]*float64, len(ns))
			for j, p := range ns {
				if p != nil {
					v := float64(*p) / 1e6
					ms[j] = &v
				}
			}
			row[i] = ms
		}
	}
	ctx := storetest.Ctx(t)
	if err := chInsert(ctx, ch.write, "requests", chReadColumns, [][]any{row}); err != nil {
		t.Fatal(err)
	}
	if err := chInsert(ctx, ch.write, "request_ids", []string{"request_id", "timestamp_ns", "batch"},
		[][]any{{old.RequestID, old.Timestamp.UnixNano(), "old-batch"}}); err != nil {
		t.Fatal(err)
	}
	storetest.Insert(t, s, fresh)

	if n := storetest.ChCount(t, s, "SELECT count() FROM requests WHERE total_handler_ns IS NULL AND total_handler_ms = 10200.333 AND empty(attempt_upstream_start_ns)"); n != 1 {
		t.Errorf("%d rows hold their durations in milliseconds only, want the old one", n)
	}
	if n := storetest.ChCount(t, s, "SELECT count() FROM requests WHERE total_handler_ns = 12345678901 AND total_handler_ms IS NULL AND empty(attempt_upstream_start_ms) AND length(attempt_upstream_start_ns) = 2"); n != 1 {
		t.Errorf("%d rows hold their durations in nanoseconds only, want the new one", n)
	}
	same := func(what string, got, want *record.Record) {
		t.Helper()
		if got.Fields != want.Fields || got.InterTokenLatencyMs != want.InterTokenLatencyMs || got.ProviderLatencyMs != want.ProviderLatencyMs {
			t.Errorf("%s %s: fields\n got %+v %v %v\nwant %+v %v %v", what, want.RequestID, got.Fields, got.InterTokenLatencyMs, got.ProviderLatencyMs,
				want.Fields, want.InterTokenLatencyMs, want.ProviderLatencyMs)
		}
		if len(got.Attempts) != len(want.Attempts) {
			t.Fatalf("%s %s: %d attempts, want %d", what, want.RequestID, len(got.Attempts), len(want.Attempts))
		}
		for i := range got.Attempts {
			g, w := &got.Attempts[i], &want.Attempts[i]
			if g.UpstreamStartMs != w.UpstreamStartMs || g.UpstreamHeadersMs != w.UpstreamHeadersMs ||
				g.UpstreamHeadersAtMs != w.UpstreamHeadersAtMs || g.FirstResponseAtMs != w.FirstResponseAtMs {
				t.Errorf("%s %s attempt %d: %+v, want %+v", what, want.RequestID, i, *g, *w)
			}
		}
	}
	for _, want := range []*record.Record{&old, &fresh} {
		got, err := s.Get(ctx, want.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		same("Get", &got, want)
	}
	p := storetest.Must(s.List(ctx, store.Filter{}))
	if len(p.Records) != 2 {
		t.Fatalf("listed %d records, want 2", len(p.Records))
	}
	same("List", &p.Records[0], &fresh)
	same("List", &p.Records[1], &old)
	// A label filter is answered from the rows.
	st, err := s.Stats(ctx, store.StatsQuery{Filter: store.Filter{From: storetest.Base.Add(-time.Hour), To: storetest.Base.Add(time.Hour),
		Label: "local_overhead"}, Fields: []string{"total_handler_ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 1 || st.Groups[0].Count != 2 {
		t.Fatalf("stats from rows: %+v", st.Groups)
	}
	f := st.Groups[0].Fields["total_handler_ms"]
	if f.Count != 2 || *f.Min != 10200.333 || *f.Max != 12345.678901 {
		t.Errorf("total_handler_ms from rows: count %d min %v max %v, want 2, 10200.333, 12345.678901", f.Count, *f.Min, *f.Max)
	}
}
