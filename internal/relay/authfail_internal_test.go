package relay

import (
	"strconv"
	"testing"
	"time"
)

// TestAuthFailuresBounded: a flood from more sources than the table holds
// shares one entry past the bound, and the next minute makes room again.
func TestAuthFailuresBounded(t *testing.T) {
	a := newAuthFailures(3, 0)
	t0 := time.Unix(1_000_000*60, 0)
	for i := range maxFailSources + 100 {
		a.fail("10.0."+strconv.Itoa(i), t0)
	}
	if n := len(a.sources); n != maxFailSources+1 {
		t.Fatalf("%d sources tracked, want the bound and the shared entry", n)
	}
	if w := a.sources["*"]; w == nil || w.count != 100 {
		t.Fatalf("shared entry %+v, want the 100 sources past the bound", w)
	}
	// Past the bound, the shared entry is limited as one source.
	if v := a.fail("192.0.2.1", t0); !v.limited {
		t.Fatal("a new source past the bound is not limited with the others")
	}
	// A minute later the recorded ones are pruned and a new source has
	// its own entry.
	if v := a.fail("192.0.2.2", t0.Add(time.Minute)); v.limited || !v.record {
		t.Fatalf("next minute: %+v", v)
	}
	if n := len(a.sources); n > maxFailSources {
		t.Fatalf("%d sources after the next minute's prune", n)
	}
	if a.total.Load() != maxFailSources+102 {
		t.Fatalf("total %d", a.total.Load())
	}
}
