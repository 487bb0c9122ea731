package anthropicsim

import (
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sim"
)

// TestTemplatesMatchMarshal checks that text deltas written through the
// template are the bytes the struct encoder writes.
func TestTemplatesMatchMarshal(t *testing.T) {
	for _, text := range []string{" token", `a "quoted" <b> \ line` + "\n", "é😀\u2028"} {
		an := newAnthEncoder(&sim.Response{Model: "m&<x>", ID: sim.IDs{Msg01: "msg_01x", Signature: "Erx=="}})
		an.Frame(nil, sim.Step{Kind: sim.StepStart})
		an.Frame(nil, sim.Step{Kind: sim.StepReasoning, Text: "x", Last: true})
		got := string(an.Frame(nil, sim.Step{Kind: sim.StepText, Text: text}))
		if want := string(sim.AppendTyped(nil, "content_block_delta", an.deltaEvent(anthTextDelta{"text_delta", text}))); !strings.HasSuffix(got, want) {
			t.Errorf("anthropic text:\n%s\nwant suffix\n%s", got, want)
		}
	}
}
