package seed

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	_ "github.com/ttfx/ttfx/internal/store/sqlstore"
)

// TestRunReportsEveryPhase: Run reports writing and then compacting, each
// counting up to its total and ending with done = total, the compacting
// total being the units it made; and the store then has nothing left to
// compact.
func TestRunReportsEveryPhase(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "seed.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	to := time.Now()
	g := New(Options{Records: 3000, From: to.Add(-36 * time.Hour), To: to, Seed: 5})
	type call struct {
		phase       string
		done, total int
	}
	var calls []call
	res, err := Run(ctx, s, g, 500, func(phase string, done, total int) { calls = append(calls, call{phase, done, total}) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != 3000 || res.Compacted == 0 {
		t.Fatalf("result %+v", res)
	}
	last := map[string]call{}
	var order []string
	for _, c := range calls {
		p, seen := last[c.phase]
		if !seen {
			order = append(order, c.phase)
		} else if order[len(order)-1] != c.phase {
			t.Fatalf("phase %s reported again after %s", c.phase, order[len(order)-1])
		}
		if c.done < p.done || c.done > c.total || c.total < p.total && c.phase == PhaseWriting {
			t.Errorf("%s: %d/%d after %d/%d", c.phase, c.done, c.total, p.done, p.total)
		}
		last[c.phase] = c
	}
	if len(order) != 2 || order[0] != PhaseWriting || order[1] != PhaseCompacting {
		t.Fatalf("phases %v", order)
	}
	if w := last[PhaseWriting]; w.done != 3000 || w.total != 3000 {
		t.Errorf("writing ended at %d/%d", w.done, w.total)
	}
	if c := last[PhaseCompacting]; c.done != res.Compacted || c.total != res.Compacted {
		t.Errorf("compacting ended at %d/%d, %d units made", c.done, c.total, res.Compacted)
	}
	// As of the start (Run compacted as of a later now, so every unit due
	// then is made; one due only since would make this flaky).
	left, err := s.(store.Backlogger).CompactionBacklog(ctx, to)
	if err != nil || left != 0 {
		t.Errorf("%d units left to compact (%v)", left, err)
	}
}
