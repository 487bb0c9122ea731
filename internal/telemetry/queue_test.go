package telemetry

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// gate is a recorder that blocks until released, like a log handler
// writing to a pipe nobody reads.
type gate struct {
	release chan struct{}
	mu      sync.Mutex
	got     []string
}

func (g *gate) Record(rec *record.Record) {
	<-g.release
	g.mu.Lock()
	g.got = append(g.got, rec.RequestID)
	g.mu.Unlock()
}

func TestQueueNeverBlocksAndCountsDrops(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	q := NewQueue(4, g)
	done := make(chan struct{})
	go func() {
		// The worker takes one record and blocks on it; 4 more fill the
		// queue; the other 5 must be dropped at once.
		for i := range 10 {
			q.Record(&record.Record{RequestID: string(rune('a' + i))})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked behind a stuck recorder")
	}
	if d := q.Dropped(); d < 5 || d > 6 {
		// 5 when the worker had taken the first record before the
		// others came, 6 when it had not.
		t.Fatalf("dropped %d, want 5 or 6", d)
	}
	close(g.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(g.got) + int(q.Dropped()); n != 10 {
		t.Fatalf("handed on %d + dropped %d != 10", len(g.got), q.Dropped())
	}
	if g.got[0] != "a" {
		t.Fatalf("order: %v", g.got)
	}
	q.Record(&record.Record{RequestID: "late"})
	if len(g.got)+int(q.Dropped()) != 11 {
		t.Fatal("a record after Close was neither dropped nor handed on")
	}
}

func TestQueueCloseDrainsInOrder(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	close(g.release)
	var other []string
	var mu sync.Mutex
	q := NewQueue(0, g, recorderFunc(func(rec *record.Record) {
		mu.Lock()
		other = append(other, rec.RequestID)
		mu.Unlock()
	}))
	for _, id := range []string{"1", "2", "3"} {
		q.Record(&record.Record{RequestID: id})
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(g.got) != 3 || len(other) != 3 || g.got[2] != "3" || other[2] != "3" {
		t.Fatalf("after Close: %v %v", g.got, other)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestQueueCloseGivesUpAtDeadline(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	q := NewQueue(1, g)
	q.Record(&record.Record{RequestID: "stuck"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := q.Close(ctx); err == nil {
		t.Fatal("Close returned nil with a recorder still stuck")
	}
	close(g.release)
}

// TestQueueHoldsOnlyItsBacklog: an empty queue takes no room for the
// records it may one day hold, and the slices a burst grew are let go once
// it has drained (a channel of DefaultQueueSize records held 3.3 MB).
func TestQueueHoldsOnlyItsBacklog(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g := &gate{release: make(chan struct{})}
	q := NewQueue(0, g)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
		t.Fatalf("NewQueue allocated %d bytes", n)
	}
	const burst = 2000
	for i := range burst {
		q.Record(&record.Record{RequestID: strconv.Itoa(i)})
	}
	close(g.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		q.mu.Lock()
		held := cap(q.waiting)
		q.mu.Unlock()
		g.mu.Lock()
		got := len(g.got)
		g.mu.Unlock()
		if got == burst && held <= keepBatch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the burst: %d of %d handed on, a slice of %d records held", got, burst, held)
		}
		time.Sleep(time.Millisecond)
	}
	if q.Dropped() != 0 {
		t.Fatalf("dropped %d of a burst smaller than the queue", q.Dropped())
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

type recorderFunc func(*record.Record)

func (f recorderFunc) Record(rec *record.Record) { f(rec) }

// BenchmarkQueueRecord is what the queued exporters cost the request's
// goroutine: one copy of the record into the queue's slice.
func BenchmarkQueueRecord(b *testing.B) {
	q := NewQueue(0, recorderFunc(func(*record.Record) {}))
	defer q.Close(context.Background())
	rec := traceB()
	b.ReportAllocs()
	for b.Loop() {
		q.Record(&rec)
	}
}
