package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/ttfx/ttfx/internal/record"
)

// Recorder receives finished records; relay.Recorder has the same method.
type Recorder interface {
	Record(rec record.Record)
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
type Queue struct {
	next    []Recorder
	ch      chan record.Record
	done    chan struct{} // closed when the worker has exited
	dropped atomic.Uint64

	mu     sync.RWMutex // guards closed against Record racing Close
	closed bool
}

// NewQueue starts a queue of size records (0 = DefaultQueueSize) feeding
// next, in order.
func NewQueue(size int, next ...Recorder) *Queue {
	if size <= 0 {
		size = DefaultQueueSize
	}
	q := &Queue{next: next, ch: make(chan record.Record, size), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *Queue) run() {
	defer close(q.done)
	for rec := range q.ch {
		for _, r := range q.next {
			r.Record(rec)
		}
	}
}

// Record queues rec, or drops and counts it when the queue is full or
// closed. The relay does not touch a record's slices after handing it on,
// so sharing them with the worker is safe.
func (q *Queue) Record(rec record.Record) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.dropped.Add(1)
		return
	}
	select {
	case q.ch <- rec:
	default:
		q.dropped.Add(1)
	}
}

// Dropped returns how many records were dropped.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// Close stops taking records and waits, until ctx ends, for the worker to
// hand on those already queued.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
