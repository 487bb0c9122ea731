package seed

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

// Phases of Run, in order.
const (
	PhaseWriting    = "writing"    // records stored, of all
	PhaseCompacting = "compacting" // rollup units compacted, of those due
)

// Progress is called now and then during Run: in each phase with the work
// done so far and the work of the whole phase (records stored; rollup
// units compacted), and once more when the phase ends with done = total.
type Progress func(phase string, done, total int)

// Result is what Run did.
type Result struct {
	Written   uint64        // records stored
	Dropped   uint64        // records the writer did not keep (none unless the store failed for good)
	Rejected  uint64        // records the store refused
	Compacted int           // rollup units compacted after the last write
	Elapsed   time.Duration // writing and compaction
}

// Run writes every record of g to s through the gateway's own Writer — the
// same batches, transactions and per-minute rollups as live traffic — and
// then compacts the rollups as a running gateway's compaction would have,
// so that the store reads as one that served the traffic. It holds the
// generator back while the writer's queue is nearly full, so nothing is
// dropped for being fast.
func Run(ctx context.Context, s store.Store, g *Generator, batch int, progress Progress) (Result, error) {
	start := time.Now()
	if batch <= 0 {
		batch = 2000
	}
	queue := 4 * batch
	w := store.NewWriter(s, store.WriterOptions{QueueSize: queue, BatchSize: batch, WriteTimeout: 2 * time.Minute})
	lastReport := time.Time{}
	report := func() {
		if progress != nil && time.Since(lastReport) > 200*time.Millisecond {
			progress(PhaseWriting, int(w.Stats().Written), g.Len())
			lastReport = time.Now()
		}
	}
	for !g.Done() {
		if err := ctx.Err(); err != nil {
			w.Close(context.Background())
			return Result{}, err
		}
		for w.Stats().Queued >= queue-batch/4 {
			time.Sleep(time.Millisecond)
			report()
		}
		for range batch / 4 {
			if g.Done() {
				break
			}
			r := g.Next()
			w.Record(&r)
		}
		report()
	}
	// The last batches: the queue drains while Close waits.
	closed := make(chan error, 1)
	go func() { closed <- w.Close(ctx) }()
	for waiting := true; waiting; {
		select {
		case err := <-closed:
			if err != nil {
				return Result{}, fmt.Errorf("seed: %w", err)
			}
			waiting = false
		case <-time.After(200 * time.Millisecond):
			report()
		}
	}
	st := w.Stats()
	if progress != nil {
		progress(PhaseWriting, int(st.Written), g.Len())
	}
	res := Result{Written: st.Written, Dropped: st.Dropped, Rejected: st.Rejected}
	if c, ok := s.(store.Compactor); ok {
		n, err := compact(ctx, s, c, progress)
		res.Compacted = n
		if err != nil {
			return res, err
		}
	}
	res.Elapsed = time.Since(start)
	if st.LastError != "" && (res.Dropped > 0 || res.Rejected > 0) {
		return res, fmt.Errorf("seed: %d records dropped and %d rejected; last error: %s", res.Dropped, res.Rejected, st.LastError)
	}
	return res, nil
}

// compact runs s's compaction until every closed unit is compacted as of
// now, as the gateway would, and returns the units it made. Compact works
// in steps of up to store.MaxCompactPerCall units; while it runs, the
// units still due are counted down every progressEvery when the store can
// say how many there are (store.Backlogger), so that the display moves
// within a step too.
func compact(ctx context.Context, s store.Store, c store.Compactor, progress Progress) (int, error) {
	now := time.Now()
	b, counts := s.(store.Backlogger)
	due := 0
	if counts {
		n, err := b.CompactionBacklog(ctx, now)
		if err != nil {
			return 0, fmt.Errorf("seed: compact: %w", err)
		}
		due = n
	}
	var made atomic.Int64
	done := make(chan error, 1)
	go func() {
		for {
			n, err := c.Compact(ctx, now)
			made.Add(int64(n))
			if err != nil || n == 0 {
				done <- err
				return
			}
		}
	}()
	report := func() {
		if progress == nil {
			return
		}
		n := int(made.Load())
		if counts {
			if left, err := b.CompactionBacklog(ctx, now); err == nil {
				n = max(n, due-left)
			}
		}
		progress(PhaseCompacting, n, max(due, n))
	}
	report()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			n := int(made.Load())
			if err != nil {
				return n, fmt.Errorf("seed: compact: %w", err)
			}
			if progress != nil {
				progress(PhaseCompacting, n, n)
			}
			return n, nil
		case <-tick.C:
			report()
		}
	}
}

// progressEvery is how often the compacting phase reports its progress.
const progressEvery = 250 * time.Millisecond
