package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
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
	// A batch job whose heap is a few queues of records: collecting it
	// less often costs a few megabytes and saved a fifth of seed's CPU.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	s, err := store.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer s.Close()
	to := now()
	g := seed.New(seed.Options{Records: *n, From: to.Add(-span), To: to, Seed: *seedN})
	fmt.Fprintf(stderr, "seeding %s records over %s into %s; their channels are named %s…, apart from real ones\n",
		thousands(*n), span, store.Redact(*dsn), seed.ChannelPrefix)
	bar := newProgressBar(stderr)
	res, err := seed.Run(ctx, s, g, *batch, bar.update)
	bar.finish()
	if err != nil {
		return err
	}
	rate := float64(res.Written) / res.Elapsed.Seconds()
	fmt.Fprintf(stderr, "wrote %s records in %s (%s records/s, rollups included; %s rollup units compacted)\n",
		thousands(int(res.Written)), res.Elapsed.Round(100*time.Millisecond), thousands(int(rate)), thousands(res.Compacted))
	if sz, ok := s.(store.Sizer); ok && res.Written > 0 {
		tables, err := sz.StorageSize(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(stderr, sizeLine(tables, res.Written))
	}
	return nil
}

// sizeLine says what the store costs on disk per record stored, in all and
// per table (indexes included), largest first.
func sizeLine(tables []store.TableSize, records uint64) string {
	var total int64
	for _, t := range tables {
		total += t.Bytes
	}
	var parts []string
	for _, t := range tables {
		if b := t.Bytes / int64(records); b > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", t.Table, thousands(int(b))))
		}
	}
	return fmt.Sprintf("store: %.1f MB, %s bytes per record (%s)", float64(total)/1e6, thousands(int(total/int64(records))), strings.Join(parts, ", "))
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

// progressBar draws the progress of a long job on a terminal, one line
// per phase, or prints a line every tenth of each phase when the output is
// not one. Each phase has its own rate and time remaining.
type progressBar struct {
	w     io.Writer
	tty   bool
	phase string
	start time.Time // of the phase
	last  int       // the tenth last printed, when not a terminal
	drawn bool
}

func newProgressBar(w io.Writer) *progressBar {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progressBar{w: w, tty: tty, last: -1}
}

// phaseUnits names what each phase of seed.Run counts.
var phaseUnits = map[string]string{seed.PhaseWriting: "records", seed.PhaseCompacting: "rollup units"}

func (p *progressBar) update(phase string, done, total int) {
	if phase != p.phase {
		p.finish()
		p.phase, p.start, p.last, p.drawn = phase, time.Now(), -1, false
	}
	frac := 1.0
	if total > 0 {
		frac = min(float64(done)/float64(total), 1)
	}
	el := time.Since(p.start)
	rate := float64(done) / max(el.Seconds(), 1e-9)
	eta := "0s"
	if done < total {
		eta = "-"
		if rate > 0 {
			eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
		}
	}
	units := phaseUnits[phase]
	line := fmt.Sprintf("%-10s %6.1f%%  %s/%s %s  %s/s  %s elapsed, %s left", phase, 100*frac,
		thousands(done), thousands(total), units, thousands(int(rate)), el.Round(time.Second), eta)
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
		p.drawn = false
	}
}

// thousands writes n with its thousands grouped by commas (84,983), as the
// dashboard writes counts.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
