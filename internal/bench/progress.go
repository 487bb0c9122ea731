package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Progress shows a run's progress on a terminal (or, when the output is
// not one, a line every few seconds): requests done of the sample,
// errors, and the current p50 of first visible text over the successful
// requests so far.
type Progress struct {
	W        io.Writer
	TTY      bool          // redraw one line in place; otherwise print a line every Every
	Every    time.Duration // non-TTY interval; 0 means 5 s
	Total    int           // measured requests asked for; 0 in duration mode
	Duration time.Duration // measured phase length in duration mode
	Now      func() time.Time

	mu        sync.Mutex // guards the fields below
	measuring bool
	started   time.Time
	done      int
	errors    int
	firstText []float64 // sorted
}

func (p *Progress) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Measure notes that the measured phase started (warmup is over).
func (p *Progress) Measure() {
	p.mu.Lock()
	p.measuring, p.started = true, p.now()
	p.mu.Unlock()
}

// Add counts a finished measured row.
func (p *Progress) Add(r Row) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if r.failed() {
		p.errors++
	}
	if v, ok := r.FirstTextDeltaMs.Ms(); ok && r.ok() {
		i, _ := slices.BinarySearch(p.firstText, v)
		p.firstText = slices.Insert(p.firstText, i, v)
	}
}

// Line renders the current state.
func (p *Progress) Line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.measuring {
		return "warming up…"
	}
	frac := 0.0
	count := fmt.Sprintf("%d", p.done)
	switch {
	case p.Total > 0:
		frac = float64(p.done) / float64(p.Total)
		count = fmt.Sprintf("%d/%d", p.done, p.Total)
	case p.Duration > 0:
		frac = float64(p.now().Sub(p.started)) / float64(p.Duration)
	}
	frac = min(max(frac, 0), 1)
	const width = 24
	fill := int(frac * width)
	bar := strings.Repeat("#", fill) + strings.Repeat("-", width-fill)
	p50 := "-"
	if len(p.firstText) > 0 {
		p50 = fmt.Sprintf("%.1f ms", Percentile(p.firstText, 0.5))
	}
	return fmt.Sprintf("[%s] %3.0f%%  %s done  %d errors  p50 first text %s", bar, frac*100, count, p.errors, p50)
}

// Run draws until ctx is done, then draws the last state and ends the line.
func (p *Progress) Run(ctx context.Context) {
	every := 200 * time.Millisecond
	if !p.TTY {
		every = p.Every
		if every <= 0 {
			every = 5 * time.Second
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			p.draw(true)
			return
		case <-t.C:
			p.draw(false)
		}
	}
}

func (p *Progress) draw(last bool) {
	line := p.Line()
	if p.TTY {
		// \r and erase-line redraw in place.
		fmt.Fprintf(p.W, "\r\x1b[2K%s", line)
		if last {
			fmt.Fprintln(p.W)
		}
		return
	}
	fmt.Fprintln(p.W, line)
}
