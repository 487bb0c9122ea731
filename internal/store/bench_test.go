package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// BenchmarkWriter measures records stored per second through the batched
// Writer: each iteration offers 5000 full records (2 attempts and 2 labels
// each, so 25000 rows) and waits for the drain.
func BenchmarkWriter(b *testing.B) {
	for _, e := range engines() {
		b.Run(e.name, func(b *testing.B) {
			s, _ := e.open(b)
			const perOp = 5000
			tmpl := fullRecord("", testBase)
			n := 0
			for b.Loop() {
				w := NewWriter(s, WriterOptions{QueueSize: perOp})
				for range perOp {
					r := tmpl
					r.RequestID = fmt.Sprintf("req-%09d", n)
					r.Timestamp = testBase.Add(time.Duration(n) * time.Millisecond)
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
	for _, e := range engines() {
		b.Run(e.name, func(b *testing.B) {
			s, _ := e.open(b)
			batch := make([]record.Record, 500)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					batch[i] = fullRecord(fmt.Sprintf("req-%09d", n), testBase.Add(time.Duration(n)*time.Millisecond))
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
	w := NewWriter(discardStore{}, WriterOptions{})
	defer w.Close(context.Background())
	r := fullRecord("req-bench", testBase)
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
type discardStore struct{ Store }

func (discardStore) Insert(context.Context, []record.Record) error { return nil }
func (discardStore) Ping(context.Context) error                    { return nil }
