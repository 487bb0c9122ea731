package relay

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestAttemptDeadlines: an attempt's total, header and first-output
// deadlines share one timer; the earliest one not stopped cancels the
// attempt with its own cause, and a stopped one never does.
func TestAttemptDeadlines(t *testing.T) {
	const u = 40 * time.Millisecond
	tests := []struct {
		name      string
		stop      []int // deadlines stopped right away: 0 total, 1 headers, 2 first output
		want      error
		wantAfter time.Duration
	}{
		{"headers first", nil, errHeaderTimeout, 2 * u},
		{"headers arrived: first output", []int{1}, errFirstOutputTimeout, 4 * u},
		{"output came: total", []int{1, 2}, errTotalTimeout, 6 * u},
		{"all stopped", []int{0, 1, 2}, nil, 8 * u},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			a := &attempt{ctx: ctx, cancel: cancel}
			start := time.Now()
			// Registered as start() does: total, then headers, then first output.
			dls := []*deadline{a.after(6*u, errTotalTimeout), a.after(2*u, errHeaderTimeout), a.after(4*u, errFirstOutputTimeout)}
			for _, i := range tt.stop {
				dls[i].Stop()
			}
			select {
			case <-ctx.Done():
				took := time.Since(start)
				if tt.want == nil || !errors.Is(context.Cause(ctx), tt.want) {
					t.Fatalf("cancelled after %v with %v, want %v", took, context.Cause(ctx), tt.want)
				}
				// Never early; late only by the machine's scheduling:
				// 5u, and twice what this process's timers were seen to
				// slip meanwhile on a loaded machine.
				slip := testenv.Slip(time.Second)
				if took < tt.wantAfter || took > tt.wantAfter+5*u+2*slip {
					t.Errorf("cancelled after %v, want %v (timers ran up to %v late meanwhile)", took, tt.wantAfter, slip)
				}
			case <-time.After(tt.wantAfter + 10*u):
				if tt.want != nil {
					t.Fatalf("not cancelled after %v, want %v at %v", time.Since(start), tt.want, tt.wantAfter)
				}
			}
			a.stop()
		})
	}
	// A fourth deadline (more than the shared timer holds) still works.
	ctx, cancel := context.WithCancelCause(context.Background())
	a := &attempt{ctx: ctx, cancel: cancel}
	for range 3 {
		a.after(time.Hour, errTotalTimeout)
	}
	a.after(u, errIdleTimeout)
	select {
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errIdleTimeout) {
			t.Fatalf("fourth deadline cancelled with %v", context.Cause(ctx))
		}
	case <-time.After(50 * u):
		t.Fatal("a fourth deadline never fired")
	}
	a.stop()
}
