//go:build unix

package store

import (
	"context"
	"syscall"
	"testing"
	"time"
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
	w := NewWriter(discardStore{}, WriterOptions{})
	defer w.Close(context.Background())
	r := fullRecord("req-bench", testBase)
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
