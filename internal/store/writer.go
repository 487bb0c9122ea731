package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// WriterOptions tune a Writer. Zero fields take the defaults.
type WriterOptions struct {
	// QueueSize bounds the records held in memory: queued plus the batch
	// being written. A record that finds it full is dropped and counted.
	// Default 10000.
	QueueSize int
	// BatchSize is the most records one Insert carries. Default 500, or
	// what the store asks for (see Batcher).
	BatchSize int
	// FlushInterval is how long a batch smaller than BatchSize waits for
	// more records before it is written; 0 writes at once. Default 0, or
	// what the store asks for (see Batcher): ClickHouse wants few large
	// inserts, SQLite and PostgreSQL want records readable at once.
	FlushInterval time.Duration
	// Pace is the least time between the starts of two writes when no
	// FlushInterval is set: a record that finds the writer idle for Pace
	// is written after Settle, and records arriving faster gather into one
	// transaction per Pace (or per BatchSize). A transaction costs the
	// store its fixed work — SQLite writes a WAL frame per page touched
	// (the requests table, its indexes, attempts, labels, rollups), ~0.6 ms
	// of CPU for one record against ~0.2 ms a record in batches of tens,
	// measured — so a gateway serving a few requests a second stops
	// paying it per request. Default 250ms, the most that Busy already
	// holds a write back under steady load: relaying 4-event streams one
	// after another (a record every ~80 ms), the gateway's CPU per request
	// was 2.9–3.3 ms with 50ms, where each record had a transaction of its
	// own, and 1.9 with 250ms (issue 15); their first text came
	// 0.07–0.12 ms later at p50, which followed the 3 ms polls of Busy
	// that each write had with 50ms, not the writes. Negative writes every
	// record at once.
	Pace time.Duration
	// Settle is how long a record that finds the writer idle waits before
	// its write begins (with Pace, not FlushInterval). A record is made when
	// a response ends, and that is when a client in a loop — an agent, a
	// chat turn, a benchmark — sends its next request: a transaction begun
	// at once takes a core (~0.6 ms of CPU on SQLite) while the gateway
	// sets that request up. Measured at one stream at a time over loopback
	// (2 cores, issue 15): client request → upstream request p50/p90/p99
	// 217/554/938 µs when written at once, 177/294/353 µs with 5 ms.
	// Default 5ms; negative writes at once.
	Settle time.Duration
	// Busy, if set, tells the writer the gateway is setting requests up
	// (relay.Starting): with a Pace, a write that is due then waits, in
	// steps of a few milliseconds, until Busy reports false, BatchSize
	// records are queued, or MaxDefer has passed. A transaction takes a
	// core for a while (200 records: ~12 ms of CPU on SQLite), and when
	// many requests begin at once — a burst, or every client of a
	// finished wave sending its next request — it lands on their time to
	// first token: on a 2-core machine, 200 streams following on
	// kept-alive connections got their first text 4–8 ms later with it
	// than with a writer that stored nothing (issue 15).
	Busy func() bool
	// MaxDefer bounds how long Busy holds a write back. Default 250ms:
	// under steady load, where some request is always starting, writes
	// come that often and records are readable that much later.
	MaxDefer time.Duration
	// WriteTimeout bounds one Insert, so that a database that accepts
	// connections but does not answer cannot hold the writer. Default 10s.
	WriteTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries while the
	// store fails; it doubles from one to the other. Defaults 100ms, 10s.
	MinBackoff, MaxBackoff time.Duration
	// Log receives the writer's warnings; nil discards them.
	Log *slog.Logger
	// Now stamps LastErrorAt; nil means time.Now.
	Now func() time.Time
}

// WriterStats are a Writer's counters, for /metrics and /api/health.
// Every record handed to Record ends up in exactly one of Queued (still
// held), Written, Dropped or Rejected.
type WriterStats struct {
	Queued        int       `json:"queued"`         // held in memory: queued or in the batch being written
	Written       uint64    `json:"written"`        // stored
	Dropped       uint64    `json:"dropped"`        // not kept: the queue was full, or the writer closed before it could write them
	Rejected      uint64    `json:"rejected"`       // refused as invalid (Validate), or by the database for their data (a constraint or data exception)
	FailedBatches uint64    `json:"failed_batches"` // Insert calls that failed (each was retried or split)
	Retrying      bool      `json:"retrying"`       // the last Insert failed (not for its records' data) and the writer is waiting to retry
	LastError     string    `json:"last_error"`     // the most recent failure, without addresses or credentials (ErrorMessage); empty if none
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`
	LastWriteAt   time.Time `json:"last_write_at,omitzero"`
}

// Writer stores records off the request path: Record only appends to a
// bounded in-memory queue, and one goroutine writes the queue in batches
// (one per lane where the store takes several inserts at once, see Laner).
// Under load the batches grow by themselves (records arriving during one
// Insert form the next, and writes are at most one per Pace), and when the
// writer has been idle for Pace a record is written within Settle (a few
// milliseconds), so it is readable right after the request ends.
//
// When the store fails the writer keeps its batch and retries with backoff
// while new records queue up to QueueSize; past that, records are dropped
// and counted. Only when the database refuses a batch for its data (a
// constraint or data exception, see DataFault) is the batch written record
// by record and the records it still refuses counted as rejected, so one
// bad record cannot stall the queue. Nothing is lost without being counted
// (SPEC.md §7).
type Writer struct {
	s    Store
	opts WriterOptions
	log  *slog.Logger

	wake chan struct{} // a first record or a full batch is queued (capacity 1; see Record)
	stop chan struct{} // Close was called: drain, then exit
	done chan struct{} // the goroutine has exited

	ctx    context.Context // cancelled when Close gives up draining
	cancel context.CancelFunc

	mu       sync.Mutex // guards everything below
	queue    []record.Record
	head     int // queue[head:] are waiting
	pending  int // len(queue)-head plus the batch being written
	closed   bool
	dropping bool // the last record offered was dropped (for logging transitions)
	stats    WriterStats
}

// NewWriter starts a writer over s. Close stops it.
func NewWriter(s Store, opts WriterOptions) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 10000
	}
	if b, ok := s.(Batcher); ok {
		size, flush := b.WriterBatching()
		if opts.BatchSize <= 0 {
			opts.BatchSize = size
		}
		if opts.FlushInterval <= 0 {
			opts.FlushInterval = flush
		}
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if opts.Pace == 0 {
		opts.Pace = 250 * time.Millisecond
	}
	if opts.Settle == 0 {
		opts.Settle = 5 * time.Millisecond
	}
	if opts.MaxDefer <= 0 {
		opts.MaxDefer = 250 * time.Millisecond
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 10 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(10*time.Second, opts.MinBackoff)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		s: s, opts: opts, log: log,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		ctx: ctx, cancel: cancel,
	}
	lanes := 1
	if l, ok := s.(Laner); ok && opts.FlushInterval <= 0 {
		lanes = max(1, l.WriterLanes())
	}
	var wg sync.WaitGroup
	for range lanes {
		wg.Go(w.run)
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

// Record hands a copy of r to the writer. It never blocks: r is queued, or
// counted as dropped (queue full, writer closed) or rejected (invalid). The
// copy shares r's slices; the caller must not change them afterwards.
func (w *Writer) Record(r *record.Record) {
	if err := Validate(r); err != nil {
		w.mu.Lock()
		w.stats.Rejected++
		w.noteError(err)
		w.mu.Unlock()
		w.log.Warn("store: record rejected", "request_id", Clean(r.RequestID, MaxIDLen), "err", err)
		return
	}
	w.mu.Lock()
	if w.closed || w.pending >= w.opts.QueueSize {
		w.stats.Dropped++
		first := !w.dropping
		w.dropping = true
		closed := w.closed
		w.mu.Unlock()
		if first {
			w.log.Warn("store: dropping records", "queue_size", w.opts.QueueSize, "closed", closed)
		}
		return
	}
	w.dropping = false
	w.queue = append(w.queue, *r)
	w.pending++
	n := len(w.queue) - w.head
	w.mu.Unlock()
	// A lane waits for a first record (an empty queue) or for a full
	// batch; between the two it waits out its Settle, Pace or
	// FlushInterval, and a wake for each record (one goroutine switch per
	// request, to find the batch not full yet) would be work for nothing.
	if n == 1 || n >= w.opts.BatchSize {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.Queued = w.pending
	return st
}

// Close stops accepting records and writes those still queued, retrying as
// usual, until the queue is empty or ctx ends; records it could not write
// by then are counted as dropped and reported in the error. It does not
// Capacity returns the records the queue holds at most (QueueSize): past
// it, records are dropped.
func (w *Writer) Capacity() int { return w.opts.QueueSize }

// close the Store.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	already := w.closed
	w.closed = true
	w.mu.Unlock()
	if !already {
		close(w.stop)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		w.cancel()
		<-w.done
	}
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := w.pending; n > 0 {
		// Only reached when the drain was cut short.
		w.stats.Dropped += uint64(n)
		w.pending = 0
		w.queue, w.head = nil, 0
		return fmt.Errorf("store writer: %d records not written: %w", n, ctx.Err())
	}
	return nil
}

// run is the goroutine of one of the writer's lanes, owned by the Writer
// and ended by Close. A store that can take several inserts at once
// (Laner: PostgreSQL) gets a lane per insert; batches then overlap, each
// lane taking what is queued when it is free.
func (w *Writer) run() {
	batch := make([]record.Record, 0, w.opts.BatchSize)
	var last time.Time // when the last write began
	for {
		w.gather()
		w.pace(last)
		batch = w.take(batch[:0])
		if len(batch) == 0 {
			select {
			case <-w.wake:
				continue
			case <-w.stop:
				// Records queued between take and Close are still
				// there: take again before leaving.
				if batch = w.take(batch[:0]); len(batch) == 0 {
					return
				}
			}
		}
		last = time.Now()
		w.write(batch)
		clear(batch) // let written records be collected
		if w.ctx.Err() != nil {
			return
		}
	}
}

// gather waits, with a FlushInterval, until BatchSize records are queued,
// the interval has passed, or Close was called; it returns at once when
// the queue is empty.
func (w *Writer) gather() {
	if w.opts.FlushInterval > 0 {
		w.fill(w.opts.FlushInterval)
	}
}

// pace waits, without a FlushInterval, until Pace has passed since the
// write that began at last (Settle when the writer was idle for Pace),
// BatchSize records are queued, or Close was called; it returns at once
// when the queue is empty.
func (w *Writer) pace(last time.Time) {
	if w.opts.FlushInterval > 0 || w.opts.Pace <= 0 {
		return
	}
	wait := w.opts.Settle
	if !last.IsZero() {
		wait = max(wait, w.opts.Pace-time.Since(last))
	}
	if wait > 0 {
		w.fill(wait)
	}
	w.deferWhileBusy()
}

// deferStep is how often a deferred write asks Busy again.
const deferStep = 3 * time.Millisecond

// deferWhileBusy holds a due write back while opts.Busy reports the
// gateway busy, for at most MaxDefer; it returns at once when the queue is
// empty or holds BatchSize records, and when Close was called.
func (w *Writer) deferWhileBusy() {
	if w.opts.Busy == nil {
		return
	}
	start := time.Now()
	for w.opts.Busy() {
		left := w.opts.MaxDefer - time.Since(start)
		if left <= 0 {
			return
		}
		select {
		case <-w.stop:
			return
		default:
		}
		w.mu.Lock()
		n := len(w.queue) - w.head
		w.mu.Unlock()
		if n == 0 || n >= w.opts.BatchSize {
			return
		}
		w.fill(min(deferStep, left))
	}
}

// fill lets records gather for up to d: it returns when the queue is empty
// or holds BatchSize records, when d has passed, or when Close was called.
func (w *Writer) fill(d time.Duration) {
	var timer *time.Timer
	for {
		w.mu.Lock()
		n := len(w.queue) - w.head
		w.mu.Unlock()
		if n == 0 || n >= w.opts.BatchSize {
			break
		}
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		}
		select {
		case <-w.wake:
			continue
		case <-timer.C:
		case <-w.stop:
		case <-w.ctx.Done():
		}
		break
	}
}

// take moves up to BatchSize queued records into batch.
func (w *Writer) take(batch []record.Record) []record.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.queue)-w.head, w.opts.BatchSize)
	batch = append(batch, w.queue[w.head:w.head+n]...)
	clear(w.queue[w.head : w.head+n])
	w.head += n
	switch {
	case w.head == len(w.queue):
		w.queue, w.head = w.queue[:0], 0
	case w.head > len(w.queue)/2:
		// Compact so the backing array does not grow without bound
		// while a backlog drains.
		m := copy(w.queue, w.queue[w.head:])
		clear(w.queue[m:])
		w.queue, w.head = w.queue[:m], 0
	}
	return batch
}

// write stores batch, retrying with backoff while the store is failing,
// until every record is written or rejected, or Close gives up.
//
// Only a failure proven to be about the records' data (see DataFault) sends
// the batch record by record to find the one at fault. Everything else —
// a lock held by another session, a full disk, a read-only database after a
// failover, a write slower than WriteTimeout, a lost connection — is an
// outage: the database answering a ping says nothing about whether it can
// take this write now, and throwing records away for it would lose them
// while /api/health says ok. The whole batch waits for the store instead.
func (w *Writer) write(batch []record.Record) {
	backoff := w.opts.MinBackoff
	for len(batch) > 0 {
		err := w.insert(batch)
		if err == nil {
			w.settle(len(batch), 0)
			return
		}
		if w.ctx.Err() != nil {
			return // Close gave up; it counts what is left
		}
		if DataFault(err) {
			// Some record in the batch can never be stored: record by
			// record isolates it, so one bad record cannot stall the queue.
			var n int
			n, err = w.writeEach(batch)
			batch = batch[n:]
			if len(batch) == 0 || w.ctx.Err() != nil {
				return
			}
			// A record failed for another reason: an outage began
			// meanwhile. Back off with the rest.
		}
		w.mu.Lock()
		w.stats.Retrying = true
		w.mu.Unlock()
		w.log.Warn("store: write failed, will retry", "records", len(batch), "in", backoff, "err", err)
		if !w.sleep(backoff) {
			return
		}
		backoff = min(2*backoff, w.opts.MaxBackoff)
	}
}

// writeEach stores batch one record at a time and returns how many records
// it settled. A record the store refuses for its data is rejected at once
// (the refusal is deterministic: retrying would only refuse it again). On
// any other failure writeEach stops and returns it, and the caller backs
// off with the rest.
func (w *Writer) writeEach(batch []record.Record) (int, error) {
	for i := range batch {
		err := w.insert(batch[i : i+1])
		switch {
		case err == nil:
			w.settle(1, 0)
		case w.ctx.Err() == nil && DataFault(err):
			w.settle(0, 1)
			w.log.Error("store: record rejected by the store", "request_id", batch[i].RequestID, "err", err)
		default:
			return i, err
		}
	}
	return len(batch), nil
}

// DataFault reports whether err proves that the records themselves cannot
// be stored, as opposed to the store being unable to take them now. Only
// these are grounds to reject a record:
//
//   - ErrInvalidRecord (Validate);
//   - an error a registered engine's DataFault names: a PostgreSQL error of
//     SQLSTATE class 22 (data exception) or 23 (integrity constraint
//     violation); a SQLite SQLITE_CONSTRAINT, SQLITE_MISMATCH or
//     SQLITE_TOOBIG result; a ClickHouse exception that names the data, or
//     a value the driver could not convert to its column's type.
//
// Everything else is not: timeouts, SQLITE_BUSY/LOCKED, SQLITE_FULL,
// PostgreSQL 25006 (read-only transaction, as after a failover), lock and
// statement timeouts, connection errors, and any error this function does
// not recognise — an unknown failure costs a retry, a wrong rejection
// costs the record.
func DataFault(err error) bool {
	if errors.Is(err, ErrInvalidRecord) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	for _, e := range Engines() {
		if e.DataFault != nil && e.DataFault(err) {
			return true
		}
	}
	return false
}

// insert runs one Insert with the write timeout and counts a failure.
func (w *Writer) insert(recs []record.Record) error {
	ctx, cancel := context.WithTimeout(w.ctx, w.opts.WriteTimeout)
	defer cancel()
	err := w.s.Insert(ctx, recs)
	if err != nil {
		w.mu.Lock()
		w.stats.FailedBatches++
		w.noteError(err)
		w.mu.Unlock()
	}
	return err
}

// sleep waits d, or until Close gives up; it reports whether to go on.
func (w *Writer) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// settle moves records out of pending into written or rejected.
func (w *Writer) settle(written, rejected int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending -= written + rejected
	w.stats.Written += uint64(written)
	w.stats.Rejected += uint64(rejected)
	if written > 0 {
		w.stats.Retrying = false
		w.stats.LastWriteAt = w.opts.Now()
	}
}

// noteError records err as the last error; w.mu must be held. The stats
// are shown by /api/health, so the text leaves out the database's address
// and credentials (ErrorMessage); the log keeps it whole.
func (w *Writer) noteError(err error) {
	w.stats.LastError = ErrorMessage(err)
	w.stats.LastErrorAt = w.opts.Now()
}
