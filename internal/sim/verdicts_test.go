package sim

import (
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/diagnose"
)

// TestBuiltinVerdictsClear: the built-in examples the demo relays to show
// a verdict sit clear of its default threshold (a quarter of it at least),
// so that every API, and every machine's timing, gets the verdict.
func TestBuiltinVerdictsClear(t *testing.T) {
	th := diagnose.Default
	msd := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

	s, err := Builtin()["reasoning"].Schedule()
	if err != nil {
		t.Fatal(err)
	}
	gap := offset(s.FirstText) - offset(s.FirstResponse)
	if limit := msd(th.ResponseToTextGapMs); gap < limit*5/4 {
		t.Errorf("reasoning: %v from first response to first text, want at least %v (the threshold %v + 25%%)", gap, limit*5/4, limit)
	}

	f, err := parseFault(Builtin()["stall"].Fault)
	if err != nil || f.kind != faultStall {
		t.Fatalf("stall: fault %+v %v", f, err)
	}
	if limit := msd(th.GenerationStalledMs); f.stall < limit*5/4 {
		t.Errorf("stall: stalls %v, want at least %v (the threshold %v + 25%%)", f.stall, limit*5/4, limit)
	}
}
