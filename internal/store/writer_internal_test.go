package store

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// TestWriterWakesOnlyWhenALaneWaits: a lane waits for the first record of
// an empty queue or for a full batch, and Record wakes it for those only,
// not for every record (a goroutine switch per request: 30-45 µs of CPU
// a record at about 900 records a second, BenchmarkRecordPaced). The
// writer is built without its lanes, so the wake channel shows what
// Record signalled.
func TestWriterWakesOnlyWhenALaneWaits(t *testing.T) {
	w := &Writer{opts: WriterOptions{QueueSize: 100, BatchSize: 4}, log: slog.New(slog.DiscardHandler), wake: make(chan struct{}, 1)}
	woke := func() bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	for i, want := range []bool{true, false, false, true, true} {
		w.Record(&record.Record{RequestID: fmt.Sprintf("req-%d", i), Timestamp: time.Now()})
		if got := woke(); got != want {
			t.Fatalf("record %d (queue %d of a batch of 4): woke the writer %v, want %v", i+1, i+1, got, want)
		}
	}
	if got := len(w.take(nil)); got != 4 {
		t.Fatalf("took %d records, want a batch of 4", got)
	}
	w.take(nil) // the queue is empty again
	w.Record(&record.Record{RequestID: "req-after", Timestamp: time.Now()})
	if !woke() {
		t.Fatal("the first record of an empty queue did not wake the writer")
	}
}
