package openaisim

import (
	"testing"

	"github.com/ttfx/ttfx/internal/sim"
)

// texts are deltas that exercise every escape the template must write as
// encoding/json does.
var texts = []string{" token", `a "quoted" <b> \ line` + "\n", "é😀\u2028"}

// TestTemplatesMatchMarshal checks that text deltas written through
// templates are the bytes the struct encoders write.
func TestTemplatesMatchMarshal(t *testing.T) {
	for _, text := range texts {
		r := &sim.Response{Model: "m&<x>", IncludeUsage: true, ID: sim.IDs{Chat: "chatcmpl-x", Completion: "cmpl-x", Fingerprint: "fp_x"}}
		chat := &chatEncoder{r: r}
		if got, want := string(chat.Frame(nil, sim.Step{Kind: sim.StepText, Text: text})), string(sim.AppendData(nil, chat.chunk(chatDelta{Content: sim.Ptr(text)}, nil))); got != want {
			t.Errorf("chat text:\n%s\nwant\n%s", got, want)
		}
		if got, want := string(chat.Frame(nil, sim.Step{Kind: sim.StepReasoning, Text: text})), string(sim.AppendData(nil, chat.chunk(chatDelta{ReasoningContent: sim.Ptr(text)}, nil))); got != want {
			t.Errorf("chat reasoning:\n%s\nwant\n%s", got, want)
		}
		comp := &completionEncoder{r: r}
		if got, want := string(comp.Frame(nil, sim.Step{Kind: sim.StepText, Text: text})), string(sim.AppendData(nil, comp.chunk(text, nil))); got != want {
			t.Errorf("completion text:\n%s\nwant\n%s", got, want)
		}
	}
}
