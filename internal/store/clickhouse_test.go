package store_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/testenv"
)

// clickhouseDump returns every row of every table in the store's database
// as text: ClickHouse compresses its files, so the canary search reads
// the tables rather than the disk.
func clickhouseDump(t *testing.T, s store.Store) []byte {
	db := storetest.ReadDB(s)
	rows, err := db.QueryContext(storetest.Ctx(t), "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name")
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
		rows, err := db.QueryContext(storetest.Ctx(t), "SELECT * FROM "+tbl)
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
	s, err := store.Open(storetest.Ctx(t), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	direct, err := store.Open(storetest.Ctx(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	opts := storetest.FastRetry
	opts.QueueSize = 200
	// Room for an insert on a loaded machine: beside stress-ng and the
	// other ClickHouse tests, no insert finished within 5 s for a minute.
	// The cut resets the connection, so the writer notices it at once
	// whatever the timeout.
	opts.WriteTimeout = 30 * time.Second
	opts.FlushInterval = 50 * time.Millisecond
	w := store.NewWriter(s, opts)
	defer w.Close(context.Background())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("writer at the end: %+v", w.Stats())
		}
	})
	offered := 0
	offer := func(n int) {
		for range n {
			w.Record(new(storetest.FullRecord(storetest.IDN(offered), storetest.Base.Add(time.Duration(offered)*time.Millisecond))))
			offered++
		}
	}
	offer(20)
	storetest.WaitFor(t, "the first records to be written", func() bool { return w.Stats().Written == 20 })
	proxy.cut()
	offer(150)
	storetest.WaitFor(t, "the writer to notice the outage", func() bool { st := w.Stats(); return st.Retrying && st.FailedBatches > 0 })
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
	if n := storetest.CountAll(t, direct); n != 20 {
		t.Errorf("%d records reached the database during the outage, want 20", n)
	}
	proxy.restore()
	storetest.WaitFor(t, "the queue to drain after the outage", func() bool { return w.Stats().Queued == 0 })
	if st = w.Stats(); st.Written != 220 || st.Dropped != 50 || st.Retrying {
		t.Errorf("after the outage: %+v", st)
	}
	accounted(t, st, offered)
	if n := storetest.CountAll(t, direct); n != 220 {
		t.Errorf("%d records in the database after the outage, want 220", n)
	}
	if n := storetest.StatsTotal(t, direct, store.StatsQuery{Filter: store.Filter{From: storetest.Base.Add(-time.Hour), To: storetest.Base.Add(time.Hour)}}); n != 220 {
		t.Errorf("summaries count %d records after the outage, want 220", n)
	}
}

// countingBatcher is a store that asks the Writer for its own batching and
// counts the batches it gets.
type countingBatcher struct {
	store.Store
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
	s, _ := storetest.OpenSQLite(t)
	c := &countingBatcher{Store: s}
	w := store.NewWriter(c, store.WriterOptions{})
	for i := range 2500 {
		w.Record(new(storetest.SparseRecord(storetest.IDN(i), storetest.Base)))
	}
	if err := w.Close(storetest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.sizes, []int{1000, 1000, 500}) {
		t.Errorf("batches %v, want [1000 1000 500]", c.sizes)
	}
}
