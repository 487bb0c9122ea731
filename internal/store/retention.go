package store

import (
	"context"
	"log/slog"
	"time"
)

// Retention deletes in batches of this many records, pausing between
// batches, so that a large backlog never holds the write lock (SQLite has
// one writer) for long.
const (
	retentionBatch = 1000
	retentionPause = 20 * time.Millisecond
)

// RunRetention deletes records older than age (SPEC.md §7: default 30 days)
// at once and then every `every`, until ctx ends. now is the clock the
// cutoff is taken from; log may be nil. It blocks: run it in its own
// goroutine. An age or period of zero or less disables it.
func RunRetention(ctx context.Context, s Store, age, every time.Duration, now func() time.Time, log *slog.Logger) {
	if age <= 0 || every <= 0 {
		return
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		cutoff := now().Add(-age)
		n, err := purge(ctx, s, cutoff, retentionBatch, retentionPause)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("store: retention failed", "before", cutoff, "deleted", n, "err", err)
		case n > 0:
			log.Info("store: retention deleted records", "before", cutoff, "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// purge deletes every record before cutoff in batches of batch records and
// returns how many it deleted.
func purge(ctx context.Context, s Store, cutoff time.Time, batch int, pause time.Duration) (int, error) {
	total := 0
	for {
		n, err := s.DeleteBefore(ctx, cutoff, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
		select {
		case <-ctx.Done():
			return total, ctx.Err()
		case <-time.After(pause):
		}
	}
}
