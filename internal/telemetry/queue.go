package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/ttfx/ttfx/internal/record"
)

// Recorder receives finished records; relay.Recorder has the same method.
// rec is lent for the call: a recorder that keeps it copies *rec.
type Recorder interface {
	Record(rec *record.Record)
}

// DefaultQueueSize is how many records a Queue holds before it drops: at
// a few thousand requests per second, about a second of headroom for a
// log pipe or an OTLP batch that is briefly slow.
const DefaultQueueSize = 4096

// Queue hands records to slower recorders on a goroutine of its own. The
// relay calls Record on the request's goroutine before the handler returns,
// and for HTTP/1.1 the chunked stream's last chunk goes out only after
// that: a log handler writing to a full pipe, or span building, must not
// hold the client. Record never waits; a record the full queue cannot take
// is dropped and counted (Dropped), as SPEC.md §7 asks of anything lost.
//
// The records wait in a slice that grows with the backlog; the worker
// takes all of them at once, swapping in the slice it emptied last, and
// lets both slices go when it finds nothing waiting after a burst (issue
// 15). A channel of
// DefaultQueueSize records was 3.3 MB of heap held for the process's
// life, resident once 4,096 requests had passed, and scanned by every GC.
type Queue struct {
	next    []Recorder
	size    int           // most records held: waiting plus being handed on
	wake    chan struct{} // 1-buffered: a record was queued, or Close was called
	done    chan struct{} // closed when the worker has exited
	dropped atomic.Uint64
	busy    atomic.Int64 // records the worker has taken and not yet handed on

	mu      sync.Mutex // guards waiting and closed
	waiting []record.Record
	closed  bool
}

// keepBatch is the largest slice (about 200 KB of records) the queue keeps
// once it has been emptied: one burst's backlog does not stay in the heap.
const keepBatch = 256

// NewQueue starts a queue of size records (0 = DefaultQueueSize) feeding
// next, in order.
func NewQueue(size int, next ...Recorder) *Queue {
	if size <= 0 {
		size = DefaultQueueSize
	}
	q := &Queue{next: next, size: size, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *Queue) run() {
	defer close(q.done)
	var batch []record.Record
	for {
		q.mu.Lock()
		batch, q.waiting = q.waiting, batch[:0]
		closed := q.closed
		q.busy.Store(int64(len(batch)))
		if len(batch) == 0 && cap(q.waiting) > keepBatch {
			q.waiting = nil // idle after a burst: let its backlog's slices go
		}
		q.mu.Unlock()
		if len(batch) == 0 {
			if closed {
				return
			}
			if cap(batch) > keepBatch {
				batch = nil
			}
			<-q.wake
			continue
		}
		for i := range batch {
			for _, r := range q.next {
				r.Record(&batch[i])
			}
			batch[i] = record.Record{} // let the record's slices go
			q.busy.Add(-1)
		}
	}
}

// Record queues a copy of rec, or drops and counts it when the queue is
// full or closed. The relay does not touch a record's slices after handing
// it on, so sharing them with the worker is safe.
func (q *Queue) Record(rec *record.Record) {
	q.mu.Lock()
	if q.closed || len(q.waiting)+int(q.busy.Load()) >= q.size {
		q.mu.Unlock()
		q.dropped.Add(1)
		return
	}
	q.waiting = append(q.waiting, *rec)
	first := len(q.waiting) == 1
	q.mu.Unlock()
	if first {
		// The worker may have found nothing waiting: wake it. While
		// records wait it takes them before it sleeps again.
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// Dropped returns how many records were dropped.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// Close stops taking records and waits, until ctx ends, for the worker to
// hand on those already queued.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
