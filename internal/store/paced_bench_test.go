//go:build unix

package store_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

	"github.com/ttfx/ttfx/internal/record"
)

// BenchmarkRecordPaced measures the process's CPU per record when records
// come as a busy gateway's requests end, rather than in a tight loop: after
// each record the benchmark sleeps 200 µs, which Go's timers make about
// 1.1 ms on a 2-core VM (ns/op shows it), so about 900 records a second.
// The writer then waits in its Settle and Pace between them, and what a
// record costs includes waking it (or not). The process's CPU includes
// the benchmark's own sleeps, the same with and without the wakes. An op
// is one record.
func BenchmarkRecordPaced(b *testing.B) {
	w := store.NewWriter(discardStore{}, store.WriterOptions{})
	defer w.Close(context.Background())
	r := storetest.FullRecord("req-bench", storetest.Base)
	before := processCPU(b)
	for b.Loop() {
		w.Record(&r)
		time.Sleep(200 * time.Microsecond)
	}
	b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu_ns/record")
}

// processCPU is the CPU time (user + system) the benchmark process has
// used so far (getrusage, hence the unix build tag).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInsertBatch measures an Insert of the batch sizes a gateway's
// writer sees (one record when idle, tens to hundreds under load), per
// record. An op is one record; cpu_ns/record is the process's CPU (the
// writes are half system time, which ns/op on a busy machine blurs).
func BenchmarkInsertBatch(b *testing.B) {
	for _, e := range storetest.Engines() {
		for _, size := range []int{1, 25, 200} {
			b.Run(fmt.Sprintf("%s/%d", e.Name, size), func(b *testing.B) {
				s, _ := e.Open(b)
				batch := make([]record.Record, size)
				n := 0
				b.ReportAllocs()
				before := processCPU(b)
				for b.Loop() {
					i := n % size
					batch[i] = storetest.FullRecord(fmt.Sprintf("req-%09d", n), storetest.Base.Add(time.Duration(n)*time.Millisecond))
					n++
					if i == size-1 {
						if err := s.Insert(context.Background(), batch); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu_ns/record")
			})
		}
	}
}
