package seed

import (
	"context"
	"fmt"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

// Progress is called now and then during Run with the records handed to
// the writer so far.
type Progress func(done, total int)

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
	done := 0
	for !g.Done() {
		if err := ctx.Err(); err != nil {
			w.Close(context.Background())
			return Result{}, err
		}
		for w.Stats().Queued >= queue-batch/4 {
			time.Sleep(time.Millisecond)
		}
		for range batch / 4 {
			if g.Done() {
				break
			}
			r := g.Next()
			w.Record(&r)
			done++
		}
		if progress != nil && time.Since(lastReport) > 200*time.Millisecond {
			progress(done, g.Len())
			lastReport = time.Now()
		}
	}
	if err := w.Close(ctx); err != nil {
		return Result{}, fmt.Errorf("seed: %w", err)
	}
	if progress != nil {
		progress(done, g.Len())
	}
	st := w.Stats()
	res := Result{Written: st.Written, Dropped: st.Dropped, Rejected: st.Rejected}
	if c, ok := s.(store.Compactor); ok {
		// Compaction works in steps; run it until every closed unit is
		// compacted as of now, as the gateway would.
		now := time.Now()
		for {
			n, err := c.Compact(ctx, now)
			if err != nil {
				return res, fmt.Errorf("seed: compact: %w", err)
			}
			res.Compacted += n
			if n == 0 {
				break
			}
		}
	}
	res.Elapsed = time.Since(start)
	if st.LastError != "" && (res.Dropped > 0 || res.Rejected > 0) {
		return res, fmt.Errorf("seed: %d records dropped and %d rejected; last error: %s", res.Dropped, res.Rejected, st.LastError)
	}
	return res, nil
}
