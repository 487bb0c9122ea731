package store

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// CompactionGrace is how long after a unit (ten minutes, an hour, a day)
// ends its rollup is compacted: records are written when their request ends, after the minute
// they started in, and most arrive within it. A record that arrives later
// still (a long stream, a writer that waited out a database outage) marks
// its hour and day dirty again, and they are compacted anew.
const CompactionGrace = 2 * time.Minute

// Compactor is a store whose rollups are compacted (see Compact).
type Compactor interface {
	// Compact makes the rollups of closed dirty units from the finer
	// ones — the projections of a minute from its raw rows, ten minutes
	// from minutes, hours from ten minutes, days from hours — as of now,
	// every projection of each (see projections); it returns how many
	// units it made. Several
	// gateways may compact one database at once. On PostgreSQL it also
	// makes the partitions of today and tomorrow ahead of their records.
	Compact(ctx context.Context, now time.Time) (int, error)
}

// Backlogger is a Compactor that can say how much compaction work is due:
// the units that Compact calls as of now would make, until none is left.
// A progress display counts them down (see ttfx seed).
type Backlogger interface {
	CompactionBacklog(ctx context.Context, now time.Time) (int, error)
}

// Sizer is a store that can say what it costs on disk, table by table:
// how bytes per record is measured (see ttfx seed).
type Sizer interface {
	// StorageSize returns every table's bytes on disk, its indexes
	// included, largest first. Pages the engine keeps free for reuse
	// (SQLite's freelist) count as the table "(free)".
	StorageSize(ctx context.Context) ([]TableSize, error)
}

// TableSize is one table's bytes on disk, indexes included.
type TableSize struct {
	Table string
	Bytes int64
}

// MaxCompactPerCall bounds the units one Compact call makes, so that a
// backlog (after an upgrade, or an outage) is worked off in steps.
const MaxCompactPerCall = 500

// RunCompaction compacts s's rollups at once and then every `every`, until
// ctx ends; s must be a Compactor, else it returns at once. It blocks: run
// it in its own goroutine.
func RunCompaction(ctx context.Context, s Store, every time.Duration, now func() time.Time, log *slog.Logger) {
	c, ok := s.(Compactor)
	if !ok || every <= 0 {
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
		for {
			n, err := c.Compact(ctx, now())
			if err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("store: rollup compaction failed", "err", ErrorMessage(err))
			}
			if err != nil || n < MaxCompactPerCall {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
