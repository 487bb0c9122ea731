package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ttfx/ttfx/internal/record"
)

// faultyStore wraps a real store and injects failures: while down, Insert
// and Ping fail as they would with the database gone; refuse makes Insert
// fail with a data exception for any batch holding one of its ids (a
// record the database will not take).
type faultyStore struct {
	store.Store
	mu      sync.Mutex
	down    bool
	refuse  map[string]bool
	block   chan struct{} // when set, Insert waits for it to close
	inserts int
	flapAt  int // the Insert call (1-based) at which the store goes down for 30 ms
}

var errDown = errors.New("connection refused")

func (f *faultyStore) setDown(v bool) { f.mu.Lock(); f.down = v; f.mu.Unlock() }

func (f *faultyStore) Insert(ctx context.Context, recs []record.Record) error {
	f.mu.Lock()
	f.inserts++
	if f.inserts == f.flapAt {
		f.down = true
		time.AfterFunc(30*time.Millisecond, func() { f.setDown(false) })
	}
	down, block := f.down, f.block
	refused := slices.ContainsFunc(recs, func(r record.Record) bool { return f.refuse[r.RequestID] })
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if down {
		return errDown
	}
	if refused {
		// What PostgreSQL answers for a value its column cannot hold: a
		// data exception, the kind of failure that proves the record is
		// at fault.
		return fmt.Errorf("insert requests: %w", &pgconn.PgError{Severity: "ERROR", Code: "22003", Message: "value out of range"})
	}
	return f.Store.Insert(ctx, recs)
}

func (f *faultyStore) Ping(ctx context.Context) error {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return errDown
	}
	return f.Store.Ping(ctx)
}

// accounted checks the writer's invariant: every record offered is queued,
// written, dropped or rejected.
func accounted(t *testing.T, st store.WriterStats, offered int) {
	t.Helper()
	if got := uint64(st.Queued) + st.Written + st.Dropped + st.Rejected; got != uint64(offered) {
		t.Errorf("queued %d + written %d + dropped %d + rejected %d = %d, want %d offered",
			st.Queued, st.Written, st.Dropped, st.Rejected, got, offered)
	}
}

func TestWriterWritesAndDrains(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		w := store.NewWriter(s, store.WriterOptions{QueueSize: 5000, BatchSize: 100})
		for i := range 3000 {
			w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Millisecond))))
		}
		if err := w.Close(storetest.Ctx(t)); err != nil {
			t.Fatal(err)
		}
		st := w.Stats()
		if st.Written != 3000 || st.Queued != 0 || st.Dropped != 0 || st.FailedBatches != 0 {
			t.Errorf("stats after drain %+v", st)
		}
		if n := storetest.CountAll(t, s); n != 3000 {
			t.Errorf("%d records stored, want 3000", n)
		}
		// Records offered after Close are counted, not lost silently.
		w.Record(new(storetest.FullRecord("req-late", storetest.Base)))
		if st := w.Stats(); st.Dropped != 1 {
			t.Errorf("record after close: dropped %d", st.Dropped)
		}
		accounted(t, w.Stats(), 3001)
	})
}

func TestWriterWritesPromptly(t *testing.T) {
	// An idle writer stores a record at once: a request relayed by one
	// replica is readable right after it ends.
	s, _ := storetest.OpenSQLite(t)
	w := store.NewWriter(s, store.WriterOptions{})
	defer w.Close(context.Background())
	w.Record(new(storetest.FullRecord("req-now", storetest.Base)))
	storetest.WaitFor(t, "the record to be readable", func() bool {
		_, err := s.Get(context.Background(), "req-now")
		return err == nil
	})
}

// countingStore counts the Insert calls that reach its store and the
// records each carried.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	sizes []int
}

func (c *countingStore) Insert(ctx context.Context, recs []record.Record) error {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(recs))
	c.mu.Unlock()
	return c.Store.Insert(ctx, recs)
}

func (c *countingStore) batches() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sizes)
}

// TestWriterPaces: records arriving faster than the pace gather into one
// transaction per pace, while a record that finds the writer idle is
// written after the settle, long before a pace.
func TestWriterPaces(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	c := &countingStore{Store: s}
	const pace = 400 * time.Millisecond
	w := store.NewWriter(c, store.WriterOptions{Pace: pace})
	defer w.Close(context.Background())
	began := time.Now()
	n := 0
	for time.Since(began) < 5*pace/2 { // a record a millisecond for a second
		w.Record(new(storetest.FullRecord(storetest.IDN(n), storetest.Base)))
		n++
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(began)
	storetest.WaitFor(t, "the records to be written", func() bool { return w.Stats().Written == uint64(n) })
	sizes := c.batches()
	// One write at once, then at most one per pace (and one for what
	// arrived during the last).
	if most := 2 + int(elapsed/pace); len(sizes) > most {
		t.Errorf("%d records in %v went in %d writes %v, want at most %d", n, elapsed.Round(time.Millisecond), len(sizes), sizes, most)
	}
	// The first write holds what came during the settle (5 ms at a record
	// a millisecond: about 5; 50 leaves room for a loaded machine), not
	// what came in a pace (about 400).
	if sizes[0] > 50 {
		t.Errorf("the first record waited for others longer than the settle: first write of %d of %d", sizes[0], n)
	}
	// After a quiet pace, a record is written at once again.
	time.Sleep(2 * pace)
	at := time.Now()
	w.Record(new(storetest.FullRecord("req-after-quiet", storetest.Base)))
	storetest.WaitFor(t, "the record after a quiet pace", func() bool { return w.Stats().Written == uint64(n+1) })
	// Later only by what this process's timers were seen to slip
	// meanwhile, twice (the writer's wake-up and this check's).
	if d, slip := time.Since(at), testenv.Slip(time.Second); d > pace/2+2*slip {
		t.Errorf("after a quiet pace a record took %v to be written; want at once, well within the pace %v (timers slipped up to %v)", d, pace, slip)
	}
}

func TestWriterOutage(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	f := &faultyStore{Store: s}
	opts := storetest.FastRetry
	opts.QueueSize = 100
	w := store.NewWriter(f, opts)
	defer w.Close(context.Background())

	f.setDown(true)
	for i := range 130 {
		w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base)))
	}
	storetest.WaitFor(t, "a failed batch", func() bool { st := w.Stats(); return st.FailedBatches >= 2 && st.Retrying })
	st := w.Stats()
	if st.Queued != 100 || st.Dropped != 30 || st.Written != 0 || st.LastError != errDown.Error() || st.LastErrorAt.IsZero() {
		t.Errorf("during the outage: %+v", st)
	}
	accounted(t, st, 130)

	f.setDown(false)
	storetest.WaitFor(t, "the queue to drain", func() bool { return w.Stats().Queued == 0 })
	st = w.Stats()
	if st.Written != 100 || st.Dropped != 30 || st.Retrying {
		t.Errorf("after the outage: %+v", st)
	}
	if n := storetest.CountAll(t, s); n != 100 {
		t.Errorf("%d records stored, want 100", n)
	}
	accounted(t, st, 130)
}

func TestWriterRejectsPoisonRecord(t *testing.T) {
	// A record the database refuses while it otherwise answers storetest.Must not
	// hold up the records queued with it.
	s, _ := storetest.OpenSQLite(t)
	f := &faultyStore{Store: s, refuse: map[string]bool{storetest.IDN(3): true}, block: make(chan struct{})}
	w := store.NewWriter(f, storetest.FastRetry)
	// Hold the first insert until all ten are queued, so they share a batch.
	for i := range 10 {
		w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base)))
	}
	f.mu.Lock()
	close(f.block)
	f.block = nil
	f.mu.Unlock()
	if err := w.Close(storetest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Written != 9 || st.Rejected != 1 || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}
	if _, err := s.Get(storetest.Ctx(t), storetest.IDN(3)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("poison record: %v", err)
	}
	if n := storetest.CountAll(t, s); n != 9 {
		t.Errorf("%d stored, want 9", n)
	}
	accounted(t, st, 10)
}

func TestWriterRejectsInvalid(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	w := store.NewWriter(s, store.WriterOptions{})
	w.Record(&record.Record{RequestID: "", Timestamp: storetest.Base})
	w.Record(new(storetest.FullRecord("req-ok", storetest.Base)))
	if err := w.Close(storetest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Rejected != 1 || st.Written != 1 || st.LastError == "" {
		t.Errorf("stats %+v", st)
	}
}

func TestWriterCloseDeadline(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	f := &faultyStore{Store: s}
	f.setDown(true)
	w := store.NewWriter(f, storetest.FastRetry)
	for i := range 10 {
		w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := w.Close(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("close during an outage: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("close took %v past its deadline", d)
	}
	st := w.Stats()
	if st.Dropped != 10 || st.Queued != 0 || st.Written != 0 {
		t.Errorf("stats %+v", st)
	}
	accounted(t, st, 10)
}

func TestWriterRecordNeverBlocks(t *testing.T) {
	// While the store hangs, Record still returns: every call either
	// queues or counts a drop.
	s, _ := storetest.OpenSQLite(t)
	f := &faultyStore{Store: s, block: make(chan struct{})}
	opts := storetest.FastRetry
	opts.QueueSize = 1000
	w := store.NewWriter(f, opts)
	done := make(chan struct{})
	go func() {
		for i := range 5000 {
			w.Record(new(storetest.FullRecord(fmt.Sprint("req-", i), storetest.Base)))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked while the store hung")
	}
	st := w.Stats()
	if st.Queued != 1000 || st.Dropped != 4000 {
		t.Errorf("stats %+v", st)
	}
	close(f.block)
	if err := w.Close(storetest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 1000 {
		t.Errorf("written %d after the store came back", st.Written)
	}
}

func TestWriterPoisonRecordDuringFlap(t *testing.T) {
	// The store refuses one record, and goes away while the writer is
	// isolating it record by record: the rest waits out the outage, the
	// poison record is still rejected, and every other record is written.
	s, _ := storetest.OpenSQLite(t)
	f := &faultyStore{Store: s, refuse: map[string]bool{storetest.IDN(2): true}, block: make(chan struct{}), flapAt: 5}
	w := store.NewWriter(f, storetest.FastRetry)
	for i := range 10 {
		w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base)))
	}
	f.mu.Lock()
	close(f.block)
	f.block = nil
	f.mu.Unlock()
	if err := w.Close(storetest.Ctx(t)); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Written != 9 || st.Rejected != 1 || st.Queued != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	if n := storetest.CountAll(t, s); n != 9 {
		t.Errorf("%d stored, want 9", n)
	}
	accounted(t, st, 10)
}

// TestWriterDefaultPaceSharesTransactions: with the default options, a
// record every 80 ms — a gateway relaying short streams one after another —
// is not a transaction per record (each costs SQLite its fixed work; issue
// 15), while the first record, finding the writer idle, is still written
// within the settle.
func TestWriterDefaultPaceSharesTransactions(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	c := &countingStore{Store: s}
	w := store.NewWriter(c, store.WriterOptions{})
	defer w.Close(context.Background())
	at := time.Now()
	w.Record(new(storetest.FullRecord(storetest.IDN(0), storetest.Base)))
	storetest.WaitFor(t, "the first record", func() bool { return w.Stats().Written == 1 })
	if d, slip := time.Since(at), testenv.Slip(time.Second); d > store.WriterOpts(w).Pace/2+2*slip {
		t.Errorf("the first record took %v to be written; want about the settle, well within the pace %v (timers slipped up to %v)", d, store.WriterOpts(w).Pace, slip)
	}
	began := time.Now()
	n := 1
	for ; n < 13; n++ {
		time.Sleep(80 * time.Millisecond)
		w.Record(new(storetest.FullRecord(storetest.IDN(n), storetest.Base)))
	}
	elapsed := time.Since(began)
	storetest.WaitFor(t, "the records to be written", func() bool { return w.Stats().Written == uint64(n) })
	sizes := c.batches()
	// The first write, then at most one per 200 ms and one for what
	// arrived during the last: 6 for 12 records in about 960 ms, where a
	// transaction per record is 13 (a slow machine's longer sleeps widen
	// the bound with the time they took).
	if most := 2 + int(elapsed/(200*time.Millisecond)); len(sizes) > most {
		t.Errorf("%d records 80 ms apart (%v) went in %d writes %v, want at most %d", n, elapsed.Round(time.Millisecond), len(sizes), sizes, most)
	}
}

// TestWriterDefersWhileBusy: with Busy, a due write waits while the
// gateway reports requests being set up, and goes once they are done, when
// MaxDefer has passed, when a batch is full, or at Close.
func TestWriterDefersWhileBusy(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	var busy atomic.Bool
	busy.Store(true)
	newWriter := func(opts store.WriterOptions) *store.Writer {
		opts.Busy = busy.Load
		return store.NewWriter(s, opts)
	}
	written := func(w *store.Writer, n int) func() bool {
		return func() bool { return w.Stats().Written == uint64(n) }
	}

	// Held while busy — 60 times the settle — and written once not.
	w := newWriter(store.WriterOptions{MaxDefer: time.Minute})
	w.Record(new(storetest.FullRecord("req-held", storetest.Base)))
	time.Sleep(300 * time.Millisecond)
	if st := w.Stats(); st.Written != 0 || st.Queued != 1 {
		t.Fatalf("while busy: %+v, want the record held", st)
	}
	busy.Store(false)
	at := time.Now()
	storetest.WaitFor(t, "the held record once not busy", written(w, 1))
	if d, slip := time.Since(at), testenv.Slip(time.Second); d > 250*time.Millisecond+2*slip {
		t.Errorf("written %v after the gateway stopped being busy; want within a few steps of %v (timers slipped up to %v)", d, store.DeferStep, slip)
	}
	w.Close(context.Background())

	// Busy for good: written after MaxDefer.
	busy.Store(true)
	const maxDefer = 150 * time.Millisecond
	w = newWriter(store.WriterOptions{MaxDefer: maxDefer})
	at = time.Now()
	w.Record(new(storetest.FullRecord("req-bounded", storetest.Base)))
	storetest.WaitFor(t, "the record after MaxDefer", written(w, 1))
	if d := time.Since(at); d < maxDefer {
		t.Errorf("written after %v while busy; want no sooner than MaxDefer %v", d, maxDefer)
	}
	w.Close(context.Background())

	// A full batch does not wait.
	w = newWriter(store.WriterOptions{MaxDefer: time.Minute, BatchSize: 10})
	for i := range 10 {
		w.Record(new(storetest.FullRecord(storetest.IDN(1000+i), storetest.Base)))
	}
	storetest.WaitFor(t, "a full batch while busy", written(w, 10))
	w.Close(context.Background())

	// Close writes what is held at once.
	w = newWriter(store.WriterOptions{MaxDefer: time.Minute})
	w.Record(new(storetest.FullRecord("req-closing", storetest.Base)))
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	at = time.Now()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 1 || st.Dropped != 0 {
		t.Errorf("after Close: %+v, want the held record written", st)
	}
	if d := time.Since(at); d > 5*time.Second {
		t.Errorf("Close took %v with a record held back", d)
	}
}
