package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/testenv"
)

// openTestClickHouse opens a store in a database of its own, dropped at the
// end; it skips (fails under TTFX_REQUIRE_ALL=1) without a test server.
func openTestClickHouse(t testing.TB) (Store, string) {
	t.Helper()
	dsn := testenv.ClickHouseDatabase(t)
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// clickhouseDump returns every row of every table in the store's database
// as text: ClickHouse compresses its files, so the canary search reads
// the tables rather than the disk.
func clickhouseDump(t *testing.T, s Store) []byte {
	db := readDB(s)
	rows, err := db.QueryContext(ctxT(t), "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if !slices.Contains(tables, "requests") || !slices.Contains(tables, "rollups") {
		t.Fatalf("tables %v", tables)
	}
	var dump bytes.Buffer
	for _, tbl := range tables {
		rows, err := db.QueryContext(ctxT(t), "SELECT * FROM "+tbl)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		dest := make([]any, len(cols))
		for i := range dest {
			dest[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				fmt.Fprintf(&dump, "%v\t", v)
			}
			dump.WriteByte('\n')
		}
		rows.Close()
	}
	return dump.Bytes()
}

// chCount runs a count query on s's read pool.
func chCount(t *testing.T, s Store, q string, args ...any) int {
	t.Helper()
	var n uint64
	if err := readDB(s).QueryRowContext(ctxT(t), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return int(n)
}

// statsTotal is the record count of a one-group summary of everything.
func statsTotal(t *testing.T, s Store, q StatsQuery) int {
	t.Helper()
	st, err := s.Stats(ctxT(t), q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range st.Groups {
		n += g.Count
	}
	return n
}

// TestClickHouseRetriedBatchCountsOnce: a batch retried after an
// ambiguous failure — one whose rows landed in part, or whole, while the
// writer saw an error — is stored once and counted once by every read,
// before ClickHouse merges the duplicate rows away and after.
func TestClickHouseRetriedBatchCountsOnce(t *testing.T) {
	s, _ := openTestClickHouse(t)
	ch := s.(*chStore)
	rng := rand.New(rand.NewPCG(16, 1))
	recs := randomRecords(rng, 400, 1, distributions[1])
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
	if err := chInsert(ctxT(t), ch.write, "requests", chRequestColumns, rows); err != nil {
		t.Fatal(err)
	}
	if err := ch.writeRollups(ctxT(t), token, ptrs); err != nil {
		t.Fatal(err)
	}
	// The retry, and a retry of that after a failure the client could not
	// tell from one before anything landed.
	insert(t, s, recs...)
	insert(t, s, recs...)
	// A later batch with one of these ids (and one new record) keeps the
	// stored record and adds only the new one.
	extra := fullRecord("req-extra", recs[0].Timestamp)
	dup := recs[1]
	dup.Model = "other-model"
	insert(t, s, dup, extra)
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

	if n := chCount(t, s, "SELECT count() FROM requests"); n <= want {
		t.Fatalf("%d physical rows: the retries wrote no duplicates, so this test checks nothing", n)
	}
	q := StatsQuery{Filter: Filter{From: rollupBase.Add(-time.Hour), To: rollupBase.Add(48 * time.Hour)}}
	check := func(stage string) {
		t.Helper()
		if n := countAll(t, s); n != want {
			t.Errorf("%s: List pages through %d records, want %d", stage, n, want)
		}
		if n := statsTotal(t, s, q); n != want {
			t.Errorf("%s: rollups count %d records, want %d", stage, n, want)
		}
		// A label filter is answered from the records themselves.
		lq := q
		lq.Filter.Label = label
		if n := statsTotal(t, s, lq); n != wantLabel {
			t.Errorf("%s: rows count %d records labelled %q, want %d", stage, n, label, wantLabel)
		}
		got, err := s.Get(ctxT(t), recs[1].RequestID)
		if err != nil || got.Model != recs[1].Model {
			t.Errorf("%s: the first record of an id was not kept: %v, model %q", stage, err, got.Model)
		}
	}
	check("before merges")
	compactAll(t, s, rollupBase.Add(72*time.Hour))
	check("compacted")
	for _, tbl := range []string{"requests", "request_ids", "rollups", "rollup_marks"} {
		if _, err := ch.write.ExecContext(ctxT(t), "OPTIMIZE TABLE "+tbl+" FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	if n := chCount(t, s, "SELECT count() FROM requests"); n != want {
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
	stores := make(chan Store, gateways)
	for range gateways {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), dsn)
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
	var s Store
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
	if n := chCount(t, s, "SELECT count() FROM schema_migrations"); n != len(ms) {
		t.Errorf("schema_migrations has %d rows, want %d (one per migration)", n, len(ms))
	}
	if n := chCount(t, s, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name LIKE 'schema_migrations_lock%'"); n != 0 {
		t.Errorf("%d lock tables left", n)
	}
	err = chInsert(ctxT(t), writeDB(s), "schema_migrations", []string{"version", "name", "applied_ns"}, [][]any{{int64(9999), "future.sql", int64(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if s3, err := Open(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), "newer") {
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
	s, _ := openTestClickHouse(t)
	var recs []record.Record
	for i := range 72 { // one an hour for three days
		recs = append(recs, sparseRecord(idN(i), rollupBase.Add(time.Duration(i)*time.Hour+time.Minute)))
	}
	insert(t, s, recs...)
	compactAll(t, s, rollupBase.Add(96*time.Hour))
	cut := rollupBase.Add(36 * time.Hour) // within the second day
	n, err := s.DeleteBefore(ctxT(t), cut, 5)
	if err != nil || n != 24 {
		t.Fatalf("DeleteBefore: %d, %v; want the first day's 24 records", n, err)
	}
	if n, err := s.DeleteBefore(ctxT(t), cut, 5); err != nil || n != 0 {
		t.Fatalf("again: %d, %v; want 0", n, err)
	}
	if _, err := s.Get(ctxT(t), idN(23)); !errors.Is(err, ErrNotFound) {
		t.Errorf("a record of the dropped day: %v", err)
	}
	if _, err := s.Get(ctxT(t), idN(24)); err != nil {
		t.Errorf("a record of the kept day before the cutoff: %v", err)
	}
	if n := countAll(t, s); n != 48 {
		t.Errorf("%d records left, want 48", n)
	}
	day := rollupBase.UnixNano() / chDayNs
	for _, tbl := range chDayTables {
		if n := chCount(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND active AND table = ? AND partition = ?",
			tbl, strconv.FormatInt(day, 10)); n != 0 {
			t.Errorf("%s keeps %d parts of the dropped day", tbl, n)
		}
	}
	if n := chCount(t, s, "SELECT count() FROM rollups WHERE start_ns < ?", rollupBase.Add(24*time.Hour).UnixNano()); n != 0 {
		t.Errorf("%d rollup rows of the dropped day", n)
	}
	q := StatsQuery{Filter: Filter{From: rollupBase, To: rollupBase.Add(72 * time.Hour)}}
	if n := statsTotal(t, s, q); n != 48 {
		t.Errorf("summaries count %d records, want 48", n)
	}
}

// TestClickHouseClosedDayIsOnePart: compacting a closed day merges its
// rollups into one part, which is what keeps a week's read to a few
// files per column; the summaries count the same before and after.
func TestClickHouseClosedDayIsOnePart(t *testing.T) {
	s, _ := openTestClickHouse(t)
	for b := range 4 { // four inserts, four parts at least
		var recs []record.Record
		for i := range 6 {
			n := b*6 + i
			recs = append(recs, sparseRecord(idN(n), rollupBase.Add(time.Duration(n)*time.Hour+time.Minute)))
		}
		insert(t, s, recs...)
	}
	q := StatsQuery{Filter: Filter{From: rollupBase, To: rollupBase.Add(24 * time.Hour)}}
	if n := statsTotal(t, s, q); n != 24 {
		t.Fatalf("before compaction the summary counts %d records, want 24", n)
	}
	// Marks are in whole seconds, and a unit changed in the second it was
	// compacted is compacted again (chDirtyHaving), which would write its
	// rows anew after the day was merged: the compaction starts in a
	// later second than the inserts, as it does in a gateway.
	time.Sleep(time.Second)
	compactAll(t, s, rollupBase.Add(48*time.Hour))
	day := strconv.FormatInt(rollupBase.UnixNano()/chDayNs, 10)
	if n := chCount(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND active AND table = 'rollups' AND partition = ?", day); n != 1 {
		t.Errorf("the closed day's rollups are in %d parts, want 1", n)
	}
	if n := statsTotal(t, s, q); n != 24 {
		t.Errorf("after compaction the summary counts %d records, want 24", n)
	}
}

// TestClickHouseOutage is TestPostgresOutage on ClickHouse: records queue
// while the server is unreachable, past the bound they are counted as
// dropped, and once it is back every queued record is written.
func TestClickHouseOutage(t *testing.T) {
	dsn := testenv.ClickHouseDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "9000"
	}
	proxy := newCutProxy(t, net.JoinHostPort(u.Hostname(), port))
	u.Host = proxy.ln.Addr().String()
	q := u.Query()
	q.Set("dial_timeout", "2s")
	u.RawQuery = q.Encode()
	s, err := Open(ctxT(t), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	direct, err := Open(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	opts := fastRetry
	opts.QueueSize = 200
	// Room for an insert on a loaded machine; the cut connection is
	// still noticed within it.
	opts.WriteTimeout = 5 * time.Second
	opts.FlushInterval = 50 * time.Millisecond
	w := NewWriter(s, opts)
	defer w.Close(context.Background())
	offered := 0
	offer := func(n int) {
		for range n {
			w.Record(new(fullRecord(idN(offered), testBase.Add(time.Duration(offered)*time.Millisecond))))
			offered++
		}
	}
	offer(20)
	waitFor(t, "the first records to be written", func() bool { return w.Stats().Written == 20 })
	proxy.cut()
	offer(150)
	waitFor(t, "the writer to notice the outage", func() bool { st := w.Stats(); return st.Retrying && st.FailedBatches > 0 })
	st := w.Stats()
	if st.Written != 20 || st.Queued != 150 || st.Dropped != 0 || st.LastError == "" {
		t.Errorf("during the outage: %+v", st)
	}
	accounted(t, st, offered)
	t.Logf("last error during the outage: %s", st.LastError)
	offer(100) // 250 waiting against a bound of 200
	if st = w.Stats(); st.Queued != 200 || st.Dropped != 50 {
		t.Errorf("past the bound: %+v", st)
	}
	accounted(t, st, offered)
	if n := countAll(t, direct); n != 20 {
		t.Errorf("%d records reached the database during the outage, want 20", n)
	}
	proxy.restore()
	waitFor(t, "the queue to drain after the outage", func() bool { return w.Stats().Queued == 0 })
	if st = w.Stats(); st.Written != 220 || st.Dropped != 50 || st.Retrying {
		t.Errorf("after the outage: %+v", st)
	}
	accounted(t, st, offered)
	if n := countAll(t, direct); n != 220 {
		t.Errorf("%d records in the database after the outage, want 220", n)
	}
	if n := statsTotal(t, direct, StatsQuery{Filter: Filter{From: testBase.Add(-time.Hour), To: testBase.Add(time.Hour)}}); n != 220 {
		t.Errorf("summaries count %d records after the outage, want 220", n)
	}
}

// TestClickHouseSchema pins the tables and their columns: the rollups'
// sketch columns are StatFields', and the requests row holds what
// chRequestColumns writes and nothing else (SPEC.md §7: no place for a
// prompt, a response, a key or a plaintext user id).
func TestClickHouseSchema(t *testing.T) {
	s, _ := openTestClickHouse(t)
	rows, err := readDB(s).QueryContext(ctxT(t), "SELECT table, name FROM system.columns WHERE database = currentDatabase()")
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
		"requests":          chRequestColumns,
		"request_ids":       {"request_id", "timestamp_ns", "batch"},
		"rollups":           chRollupColumns,
		"rollup_marks":      {"level", "start_ns", "kind", "at"},
		"schema_migrations": {"version", "name", "applied_ns"},
	}
	if len(got) != len(want) {
		t.Errorf("tables %v, want %v", keys(got), keys(want))
	}
	for tbl, cols := range want {
		if !slices.Equal(got[tbl], cols) {
			t.Errorf("%s columns\n got %v\nwant %v", tbl, got[tbl], cols)
		}
	}
}

// countingBatcher is a store that asks the Writer for its own batching and
// counts the batches it gets.
type countingBatcher struct {
	Store
	mu    sync.Mutex
	sizes []int
}

func (c *countingBatcher) WriterBatching() (int, time.Duration) { return 1000, 300 * time.Millisecond }

func (c *countingBatcher) Insert(ctx context.Context, recs []record.Record) error {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(recs))
	c.mu.Unlock()
	return c.Store.Insert(ctx, recs)
}

// TestWriterTakesTheStoresBatching: a store that asks for large batches
// and a flush interval gets them — records offered together are written in
// full batches, not one by one as an idle writer otherwise would.
func TestWriterTakesTheStoresBatching(t *testing.T) {
	s, _ := openTestSQLite(t)
	c := &countingBatcher{Store: s}
	w := NewWriter(c, WriterOptions{})
	for i := range 2500 {
		w.Record(new(sparseRecord(idN(i), testBase)))
	}
	if err := w.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.sizes, []int{1000, 1000, 500}) {
		t.Errorf("batches %v, want [1000 1000 500]", c.sizes)
	}
}

// TestClickHouseQuotedIDs: request ids reach ClickHouse inside IN lists as
// quoted literals; quotes, backslashes and placeholder characters in an id
// neither break the query nor match another id.
func TestClickHouseQuotedIDs(t *testing.T) {
	s, _ := openTestClickHouse(t)
	ids := []string{`it's`, `back\slash`, `back\\'both`, `q?mark`, `"dq"`, `$1`, `ünï`, `x' OR '1'='1`}
	var recs []record.Record
	for i, id := range ids {
		recs = append(recs, sparseRecord(id, testBase.Add(time.Duration(i)*time.Second)))
	}
	insert(t, s, recs...)
	insert(t, s, recs...) // the stored-id lookup names them all
	for _, id := range ids {
		r, err := s.Get(ctxT(t), id)
		if err != nil || r.RequestID != id {
			t.Errorf("Get(%q): %q, %v", id, r.RequestID, err)
		}
	}
	if _, err := s.Get(ctxT(t), `x`); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(x): %v", err)
	}
	p := must(s.List(ctxT(t), Filter{Limit: MaxLimit}))
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
