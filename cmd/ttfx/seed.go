package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/seed"
	"github.com/ttfx/ttfx/internal/store"
)

func init() {
	register(command{name: "seed", summary: "fill a store with synthetic, realistic records (to see the dashboard at volume, and for benchmarks)", run: runSeed})
}

const seedUsage = `usage: ttfx seed [flags]

Fills a store with synthetic request records through the gateway's own
writer and rollups: spread over a time range ending now, across five
channels and a backup, seven models, three groups and four APIs, streaming
and not, with heavy-tailed timings, the slow stages of SPEC §4 and every
terminal status in plausible shares, each record diagnosed by the
gateway's rules. Nothing in them came from a provider. Start a gateway on
the same store to see them (its keys are its own).

flags:
  --store DSN      the store (default sqlite:ttfx.db; postgres://… for PostgreSQL)
  --records N      how many records (default 100000)
  --days D         spread over the last D days (default 7; e.g. 7, 7d, 36h)
  --seed N         random seed: the same flags make the same records (default 1)
  --batch N        records per insert (default 2000)
`

func runSeed(ctx context.Context, args []string) error {
	return seedMain(ctx, args, os.Stderr, time.Now)
}

func seedMain(ctx context.Context, args []string, stderr io.Writer, now func() time.Time) error {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	dsn := fs.String("store", "sqlite:ttfx.db", "")
	n := fs.Int("records", 100000, "")
	days := fs.String("days", "7", "")
	seedN := fs.Uint64("seed", 1, "")
	batch := fs.Int("batch", 2000, "")
	if err := parseNoArgs(fs, args, seedUsage, os.Stdout); err != nil {
		return err
	}
	span, err := seedSpan(*days)
	if err != nil {
		return usageError("--days: %v", err)
	}
	if *n <= 0 || *n > 1_000_000_000 {
		return usageError("--records must be between 1 and 1000000000, not %d", *n)
	}
	if *batch <= 0 || *batch > 50000 {
		return usageError("--batch must be between 1 and 50000, not %d", *batch)
	}
	s, err := store.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer s.Close()
	to := now()
	g := seed.New(seed.Options{Records: *n, From: to.Add(-span), To: to, Seed: *seedN})
	fmt.Fprintf(stderr, "seeding %d records over %s into %s\n", *n, span, store.Redact(*dsn))
	bar := newProgressBar(stderr)
	res, err := seed.Run(ctx, s, g, *batch, bar.update)
	bar.finish()
	if err != nil {
		return err
	}
	rate := float64(res.Written) / res.Elapsed.Seconds()
	fmt.Fprintf(stderr, "wrote %d records in %s (%.0f records/s, rollups included; %d rollup units compacted)\n",
		res.Written, res.Elapsed.Round(100*time.Millisecond), rate, res.Compacted)
	return nil
}

// seedSpan reads --days: a bare number of days, or a duration (7d, 36h).
func seedSpan(s string) (time.Duration, error) {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		s += "d"
	}
	d, err := config.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 || d > 3660*24*time.Hour {
		return 0, fmt.Errorf("want between 1s and 3660 days, not %s", s)
	}
	return d, nil
}

// progressBar draws the progress of a long job on a terminal, or prints a
// line every tenth of the way when the output is not one.
type progressBar struct {
	w     io.Writer
	tty   bool
	start time.Time
	last  int // the tenth last printed, when not a terminal
	drawn bool
}

func newProgressBar(w io.Writer) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, tty: tty, start: time.Now(), last: -1}
}

func (p *progressBar) update(done, total int) {
	frac := float64(done) / float64(max(total, 1))
	el := time.Since(p.start)
	rate := float64(done) / max(el.Seconds(), 1e-9)
	eta := "-"
	if rate > 0 && done < total {
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	line := fmt.Sprintf("%6.1f%%  %d/%d  %.0f records/s  eta %s", 100*frac, done, total, rate, eta)
	if p.tty {
		const width = 30
		fill := int(frac * width)
		fmt.Fprintf(p.w, "\r[%s%s] %s\x1b[K", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), line)
		p.drawn = true
		return
	}
	if tenth := int(frac * 10); tenth > p.last {
		p.last = tenth
		fmt.Fprintln(p.w, line)
	}
}

func (p *progressBar) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}
