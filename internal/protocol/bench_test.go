package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/tokens"
)

// BenchmarkEstimateAtBound measures the token estimate at the end of a
// stream of 1.5 MB of visible text that reported no usage: what it costs
// the handler at the stream's end. Prose and code (the project's docs and
// Go sources) are counted as they settle (Compact), so only their last few
// KiB are left to count; text with no space after a word (Japanese here)
// is kept up to maxVisible, the most an estimate counts at the end.
func BenchmarkEstimateAtBound(b *testing.B) {
	for _, bc := range []struct{ name, text string }{
		{"prose", projectText(b)},
		{"no-spaces", strings.Repeat("日本語の文章には単語の間に空白がありません。", 3<<19/66)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewStream(OpenAIChat)
			for piece := range slices.Chunk([]byte(bc.text), 400) {
				q, _ := json.Marshal(string(piece))
				s.Event(&sse.Event{Data: []byte(`{"choices":[{"index":0,"delta":{"content":` + string(q) + `}}]}`)})
				s.Compact()
			}
			tokens.Count("warm the vocabulary up")
			b.ReportAllocs()
			for b.Loop() {
				if tk := s.Tokens(); tk.Source != SourceEstimate || tk.Visible == 0 {
					b.Fatalf("tokens %+v", tk)
				}
			}
			b.ReportMetric(float64(len(s.VisibleText())), "kept_B")
		})
	}
}
