package diagnose

import (
	"fmt"
	"io"
	"strings"

	"github.com/ttfx/ttfx/internal/record"
)

// writeRouting prints the routing decision of rec (docs/SPEC.md §12): the
// channels skipped as ejected, and each attempt's role and outcome, so that
// a hedge race or a fallback reads at a glance.
func writeRouting(w io.Writer, rec record.Record) {
	if len(rec.Attempts) == 0 && len(rec.SkippedEjected) == 0 && len(rec.SkippedRateLimited) == 0 {
		return
	}
	var parts []string
	for i, a := range rec.Attempts {
		p := fmt.Sprintf("%d %s", i+1, a.Channel)
		if a.Role != "" {
			p += " " + a.Role
		}
		if a.Outcome != "" {
			p += " " + a.Outcome
		}
		if t4, ok := a.FirstResponseAtMs.Ms(); ok {
			p += fmt.Sprintf(" (first response at %.1f ms)", t4)
		}
		parts = append(parts, p)
	}
	fmt.Fprintf(w, "  routing: attempts %s", strings.Join(parts, "; "))
	if len(rec.SkippedEjected) > 0 {
		fmt.Fprintf(w, "; skipped as ejected: %s", strings.Join(rec.SkippedEjected, ", "))
	}
	for _, s := range rec.SkippedRateLimited {
		// The provider's budget as its last answers told it (issue 49).
		fmt.Fprintf(w, "; skipped for its provider budget: %s (%d %s left, %d needed, whole in %.0f ms)",
			s.Channel, s.Remaining, s.Limit, s.Need, s.ResetMs)
	}
	fmt.Fprintln(w)
}
