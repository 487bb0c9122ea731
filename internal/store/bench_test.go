package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

	"github.com/ttfx/ttfx/internal/record"
)

// BenchmarkWriter measures records stored per second through the batched
// Writer: each iteration offers 5000 full records (2 attempts and 2 labels
// each, so 25000 rows) and waits for the drain.
func BenchmarkWriter(b *testing.B) {
	for _, e := range storetest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			s, _ := e.Open(b)
			const perOp = 5000
			tmpl := storetest.FullRecord("", storetest.Base)
			n := 0
			for b.Loop() {
				w := store.NewWriter(s, store.WriterOptions{QueueSize: perOp})
				for range perOp {
					r := tmpl
					r.RequestID = fmt.Sprintf("req-%09d", n)
					r.Timestamp = storetest.Base.Add(time.Duration(n) * time.Millisecond)
					w.Record(&r)
					n++
				}
				if err := w.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				if st := w.Stats(); st.Dropped != 0 || st.Written != perOp {
					b.Fatalf("writer %+v", st)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkInsert measures one Insert of 500 records (the writer's batch
// size) without the queue.
func BenchmarkInsert(b *testing.B) {
	for _, e := range storetest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			s, _ := e.Open(b)
			batch := make([]record.Record, 500)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					batch[i] = storetest.FullRecord(fmt.Sprintf("req-%09d", n), storetest.Base.Add(time.Duration(n)*time.Millisecond))
					n++
				}
				if err := s.Insert(context.Background(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkRecord measures what the gateway pays per request: one
// Writer.Record call (validation, a mutex, an append, a wake-up). The
// store behind it discards batches, so the queue stays short and only the
// enqueue and the writer's competing take are timed.
func BenchmarkRecord(b *testing.B) {
	w := store.NewWriter(discardStore{}, store.WriterOptions{})
	defer w.Close(context.Background())
	r := storetest.FullRecord("req-bench", storetest.Base)
	b.ReportAllocs()
	for b.Loop() {
		w.Record(&r)
	}
	b.StopTimer()
	if st := w.Stats(); st.Dropped != 0 {
		b.Logf("%d of %d records dropped: the writer fell behind", st.Dropped, b.N)
	}
}

// discardStore accepts every batch and keeps nothing.
type discardStore struct{ store.Store }

func (discardStore) Insert(context.Context, []record.Record) error { return nil }
func (discardStore) Ping(context.Context) error                    { return nil }
