package chstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestClickHouseRetriedBatchCountsOnce: a batch retried after an
// ambiguous failure — one whose rows landed in part, or whole, while the
// writer saw an error — is stored once and counted once by every read,
// before ClickHouse merges the duplicate rows away and after.
func TestClickHouseRetriedBatchCountsOnce(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	ch := s.(*chStore)
	rng := rand.New(rand.NewPCG(16, 1))
	recs := storetest.RandomRecords(rng, 400, 1, storetest.Distributions[1])
	ids := make([]string, len(recs))
	ptrs := make([]*record.Record, len(recs))
	for i := range recs {
		ids[i], ptrs[i] = recs[i].RequestID, &recs[i]
	}
	token := batchToken(ids)

	// The first attempt: the records' rows and rollups landed, the id
	// index did not (the connection broke before it).
	rows := make([][]any, len(recs))
	for i := range recs {
		rows[i] = chRequestRow(&recs[i], token)
	}
	if err := chInsert(storetest.Ctx(t), ch.write, "requests", chRequestColumns, rows); err != nil {
		t.Fatal(err)
	}
	if err := ch.writeRollups(storetest.Ctx(t), token, ptrs); err != nil {
		t.Fatal(err)
	}
	// The retry, and a retry of that after a failure the client could not
	// tell from one before anything landed.
	storetest.Insert(t, s, recs...)
	storetest.Insert(t, s, recs...)
	// A later batch with one of these ids (and one new record) keeps the
	// stored record and adds only the new one.
	extra := storetest.FullRecord("req-extra", recs[0].Timestamp)
	dup := recs[1]
	dup.Model = "other-model"
	storetest.Insert(t, s, dup, extra)
	want := len(recs) + 1
	label, wantLabel := "", 0
	for _, r := range recs {
		if label == "" && len(r.Diagnosis) > 0 {
			label = r.Diagnosis[0]
		}
		if label != "" && slices.Contains(r.Diagnosis, label) {
			wantLabel++
		}
	}
	if label == "" || wantLabel == len(recs) {
		t.Fatalf("the records' labels cannot tell a label filter apart: %q on %d of %d", label, wantLabel, len(recs))
	}

	if n := storetest.ChCount(t, s, "SELECT count() FROM requests"); n <= want {
		t.Fatalf("%d physical rows: the retries wrote no duplicates, so this test checks nothing", n)
	}
	q := store.StatsQuery{Filter: store.Filter{From: storetest.RollupBase.Add(-time.Hour), To: storetest.RollupBase.Add(48 * time.Hour)}}
	check := func(stage string) {
		t.Helper()
		if n := storetest.CountAll(t, s); n != want {
			t.Errorf("%s: List pages through %d records, want %d", stage, n, want)
		}
		if n := storetest.StatsTotal(t, s, q); n != want {
			t.Errorf("%s: rollups count %d records, want %d", stage, n, want)
		}
		// A label filter is answered from the records themselves.
		lq := q
		lq.Filter.Label = label
		if n := storetest.StatsTotal(t, s, lq); n != wantLabel {
			t.Errorf("%s: rows count %d records labelled %q, want %d", stage, n, label, wantLabel)
		}
		got, err := s.Get(storetest.Ctx(t), recs[1].RequestID)
		if err != nil || got.Model != recs[1].Model {
			t.Errorf("%s: the first record of an id was not kept: %v, model %q", stage, err, got.Model)
		}
	}
	check("before merges")
	storetest.CompactAll(t, s, storetest.RollupBase.Add(72*time.Hour))
	check("compacted")
	for _, tbl := range []string{"requests", "request_ids", "rollups", "rollup_marks"} {
		if _, err := ch.write.ExecContext(storetest.Ctx(t), "OPTIMIZE TABLE "+tbl+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	if n := storetest.ChCount(t, s, "SELECT count() FROM requests"); n != want {
		t.Errorf("%d rows after the merge, want %d", n, want)
	}
	check("merged")
}

// TestClickHouseMigrationsOnce: gateways starting at once against an empty
// database apply each migration exactly once (schema_migrations is a plain
// MergeTree: a second application would be a second row), and a database
// of a newer schema is refused.
func TestClickHouseMigrationsOnce(t *testing.T) {
	dsn := testenv.ClickHouseDatabase(t)
	const gateways = 6
	var wg sync.WaitGroup
	errs := make(chan error, gateways)
	stores := make(chan store.Store, gateways)
	for range gateways {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := store.Open(context.Background(), dsn)
			if err != nil {
				errs <- err
				return
			}
			stores <- s
		}()
	}
	wg.Wait()
	close(errs)
	close(stores)
	for err := range errs {
		t.Error(err)
	}
	var s store.Store
	for st := range stores {
		if s == nil {
			s = st
			defer s.Close()
		} else {
			st.Close()
		}
	}
	if s == nil {
		t.Fatal("no gateway opened the store")
	}
	ms, err := loadCHMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if n := storetest.ChCount(t, s, "SELECT count() FROM schema_migrations"); n != len(ms) {
		t.Errorf("schema_migrations has %d rows, want %d (one per migration)", n, len(ms))
	}
	if n := storetest.ChCount(t, s, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name LIKE 'schema_migrations_lock%'"); n != 0 {
		t.Errorf("%d lock tables left", n)
	}
	err = chInsert(storetest.Ctx(t), storetest.WriteDB(s), "schema_migrations", []string{"version", "name", "applied_ns"}, [][]any{{int64(9999), "future.sql", int64(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if s3, err := store.Open(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		if s3 != nil {
			s3.Close()
		}
		t.Errorf("open of a newer schema: %v", err)
	}
}

// TestClickHouseDeleteBeforeDropsDays: retention drops the day partitions
// that end by the cutoff — records, id index, rollups and marks — and keeps
// the day the cutoff falls within whole.
func TestClickHouseDeleteBeforeDropsDays(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	var recs []record.Record
	for i := range 72 { // one an hour for three days
		recs = append(recs, storetest.SparseRecord(storetest.IDN(i), storetest.RollupBase.Add(time.Duration(i)*time.Hour+time.Minute)))
	}
	storetest.Insert(t, s, recs...)
	storetest.CompactAll(t, s, storetest.RollupBase.Add(96*time.Hour))
	cut := storetest.RollupBase.Add(36 * time.Hour) // within the second day
	n, err := s.DeleteBefore(storetest.Ctx(t), cut, 5)
	if err != nil || n != 24 {
		t.Fatalf("DeleteBefore: %d, %v; want the first day's 24 records", n, err)
	}
	if n, err := s.DeleteBefore(storetest.Ctx(t), cut, 5); err != nil || n != 0 {
		t.Fatalf("again: %d, %v; want 0", n, err)
	}
	if _, err := s.Get(storetest.Ctx(t), storetest.IDN(23)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a record of the dropped day: %v", err)
	}
	if _, err := s.Get(storetest.Ctx(t), storetest.IDN(24)); err != nil {
		t.Errorf("a record of the kept day before the cutoff: %v", err)
	}
	if n := storetest.CountAll(t, s); n != 48 {
		t.Errorf("%d records left, want 48", n)
	}
	day := storetest.RollupBase.UnixNano() / chDayNs
	for _, tbl := range chDayTables {
		if n := storetest.ChCount(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND active AND table = ? AND partition = ?",
			tbl, strconv.FormatInt(day, 10)); n != 0 {
			t.Errorf("%s keeps %d parts of the dropped day", tbl, n)
		}
	}
	if n := storetest.ChCount(t, s, "SELECT count() FROM rollups WHERE start_ns < ?", storetest.RollupBase.Add(24*time.Hour).UnixNano()); n != 0 {
		t.Errorf("%d rollup rows of the dropped day", n)
	}
	q := store.StatsQuery{Filter: store.Filter{From: storetest.RollupBase, To: storetest.RollupBase.Add(72 * time.Hour)}}
	if n := storetest.StatsTotal(t, s, q); n != 48 {
		t.Errorf("summaries count %d records, want 48", n)
	}
}

// TestClickHouseClosedDayIsOnePart: compacting a closed day merges its
// rollups into one part, which is what keeps a week's read to a few
// files per column; the summaries count the same before and after.
func TestClickHouseClosedDayIsOnePart(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	for b := range 4 { // four inserts, four parts at least
		var recs []record.Record
		for i := range 6 {
			n := b*6 + i
			recs = append(recs, storetest.SparseRecord(storetest.IDN(n), storetest.RollupBase.Add(time.Duration(n)*time.Hour+time.Minute)))
		}
		storetest.Insert(t, s, recs...)
	}
	q := store.StatsQuery{Filter: store.Filter{From: storetest.RollupBase, To: storetest.RollupBase.Add(24 * time.Hour)}}
	if n := storetest.StatsTotal(t, s, q); n != 24 {
		t.Fatalf("before compaction the summary counts %d records, want 24", n)
	}
	// Marks are in whole seconds, and a unit changed in the second it was
	// compacted is compacted again (chDirtyHaving), which would write its
	// rows anew after the day was merged: the compaction starts in a
	// later second than the inserts, as it does in a gateway.
	time.Sleep(time.Second)
	storetest.CompactAll(t, s, storetest.RollupBase.Add(48*time.Hour))
	day := strconv.FormatInt(storetest.RollupBase.UnixNano()/chDayNs, 10)
	if n := storetest.ChCount(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND active AND table = 'rollups' AND partition = ?", day); n != 1 {
		t.Errorf("the closed day's rollups are in %d parts, want 1", n)
	}
	if n := storetest.StatsTotal(t, s, q); n != 24 {
		t.Errorf("after compaction the summary counts %d records, want 24", n)
	}
}

// TestClickHouseSchema pins the tables and their columns: the rollups'
// sketch columns are StatFields', and the requests row holds what
// chRequestColumns writes and nothing else (SPEC.md §7: no place for a
// prompt, a response, a key or a plaintext user id).
func TestClickHouseSchema(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	rows, err := storetest.ReadDB(s).QueryContext(storetest.Ctx(t), "SELECT table, name FROM system.columns WHERE database = currentDatabase()")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for rows.Next() {
		var tbl, col string
		if err := rows.Scan(&tbl, &col); err != nil {
			t.Fatal(err)
		}
		got[tbl] = append(got[tbl], col)
	}
	rows.Close()
	want := map[string][]string{
		"requests":           chTableColumns(),
		"request_ids":        {"request_id", "timestamp_ns", "batch"},
		"rollups":            chRollupColumns,
		"rollup_marks":       {"level", "start_ns", "kind", "at", "missing"},
		"schema_migrations":  {"version", "name", "applied_ns"},
		"channel_states":     {"channel", "state", "set_by", "set_ns"},
		"channel_state_acks": {"replica", "channel", "set_ns", "applied_ns"},
	}
	if len(got) != len(want) {
		t.Errorf("tables %v, want %v", storetest.Keys(got), storetest.Keys(want))
	}
	for tbl, cols := range want {
		if !slices.Equal(got[tbl], cols) {
			t.Errorf("%s columns\n got %v\nwant %v", tbl, got[tbl], cols)
		}
	}
}

// TestClickHouseQuotedIDs: request ids reach ClickHouse inside IN lists as
// quoted literals; quotes, backslashes and placeholder characters in an id
// neither break the query nor match another id.
func TestClickHouseQuotedIDs(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	ids := []string{`it's`, `back\slash`, `back\\'both`, `q?mark`, `"dq"`, `$1`, `ünï`, `x' OR '1'='1`}
	var recs []record.Record
	for i, id := range ids {
		recs = append(recs, storetest.SparseRecord(id, storetest.Base.Add(time.Duration(i)*time.Second)))
	}
	storetest.Insert(t, s, recs...)
	storetest.Insert(t, s, recs...) // the stored-id lookup names them all
	for _, id := range ids {
		r, err := s.Get(storetest.Ctx(t), id)
		if err != nil || r.RequestID != id {
			t.Errorf("Get(%q): %q, %v", id, r.RequestID, err)
		}
	}
	if _, err := s.Get(storetest.Ctx(t), `x`); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(x): %v", err)
	}
	p := storetest.Must(s.List(storetest.Ctx(t), store.Filter{Limit: store.MaxLimit}))
	var got []string
	for _, r := range p.Records {
		got = append(got, r.RequestID)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, want) {
		t.Errorf("listed %q, want %q", got, want)
	}
}

// TestClickHouseIDsByMinute: request_ids holds each record's minute, not
// its time (it compresses to 16 bytes a row instead of 23), and Get finds
// a record by it wherever in the minute the record lies; a row written by
// an older gateway, with the exact time, is found too.
func TestClickHouseIDsByMinute(t *testing.T) {
	s, _ := storetest.OpenClickHouse(t)
	ch := s.(*chStore)
	ctx := storetest.Ctx(t)
	minute := storetest.Base.Truncate(time.Minute).Add(time.Hour)
	var recs []record.Record
	for i, off := range []time.Duration{0, 1, 17*time.Second + 3, time.Minute - 1} {
		recs = append(recs, storetest.FullRecord(storetest.IDN(i), minute.Add(off)))
	}
	storetest.Insert(t, s, recs...)
	if n := storetest.ChCount(t, s, "SELECT count() FROM request_ids WHERE timestamp_ns = ?", minute.UnixNano()); n != len(recs) {
		t.Errorf("%d of %d ids hold their minute's start", n, len(recs))
	}
	old := storetest.FullRecord("req-old", minute.Add(42*time.Second+5))
	if err := chInsert(ctx, ch.write, "requests", chRequestColumns, [][]any{chRequestRow(&old, "old-batch")}); err != nil {
		t.Fatal(err)
	}
	if err := chInsert(ctx, ch.write, "request_ids", []string{"request_id", "timestamp_ns", "batch"},
		[][]any{{old.RequestID, old.Timestamp.UnixNano(), "old-batch"}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range append(recs, old) {
		got, err := s.Get(ctx, want.RequestID)
		if err != nil {
			t.Errorf("Get %s at %s: %v", want.RequestID, want.Timestamp.Format(time.RFC3339Nano), err)
			continue
		}
		if !got.Timestamp.Equal(want.Timestamp) || got.Model != want.Model {
			t.Errorf("Get %s: at %s model %q, want %s %q", want.RequestID, got.Timestamp, got.Model, want.Timestamp, want.Model)
		}
	}
}
