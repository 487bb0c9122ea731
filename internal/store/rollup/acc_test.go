package rollup

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

// TestAccBoundBeforeTruncation: bucketed, the groups × buckets past
// MaxStatsGroups make the answer over its bound (refused with ErrBadQuery
// naming the bound), even with one field, whose bound on values (16,000)
// is past MaxStatsGroups; without buckets the keys past MaxStatsGroups
// still share the overflow group (a client's invented model names do not
// fail everyone's summary).
func TestAccBoundBeforeTruncation(t *testing.T) {
	fill := func(a *Acc, models, buckets int) {
		for m := range models {
			for b := range buckets {
				a.SetDim(0, []byte("model-"+strconv.Itoa(m)))
				a.CellAt(int64(b)*time.Minute.Nanoseconds()).AddCount([]byte("ok"), 1)
			}
		}
	}
	q := &store.StatsQuery{Bucket: time.Minute}
	a := newStatsAcc(q, []int{0}, []string{"model"})
	fill(a, 7, 1440) // a day of minutes by model: 10,080 cells
	if !a.Over() {
		t.Fatalf("7 models × 1,440 one-minute buckets, one field: not over its bound (%d cells)", len(a.Cells))
	}
	if err := a.tooLarge(); !errors.Is(err, store.ErrBadQuery) || !strings.Contains(err.Error(), "max_answer_values") ||
		!strings.Contains(err.Error(), "a bucket of") {
		t.Errorf("refusal: %v", err)
	}
	if len(a.Cells) > store.MaxStatsGroups {
		t.Errorf("%d cells held, want at most %d", len(a.Cells), store.MaxStatsGroups)
	}

	q = &store.StatsQuery{}
	a = newStatsAcc(q, []int{0}, []string{"model"})
	fill(a, store.MaxStatsGroups+5, 1)
	if a.Over() || a.Overflow == nil || len(a.Cells) != store.MaxStatsGroups {
		t.Errorf("%d models without buckets: over %v, overflow %v, %d cells; want the overflow group", store.MaxStatsGroups+5, a.Over(), a.Overflow != nil, len(a.Cells))
	}
}
