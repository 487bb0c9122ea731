package anthropic_test

import (
	"testing"

	"github.com/ttfx/ttfx/internal/protocol/protocoltest"
	"github.com/ttfx/ttfx/internal/provider/anthropic"

	// Detect, which picks the fixtures that seed the fuzz target, weighs
	// every unit's claim.
	_ "github.com/ttfx/ttfx/internal/provider/all"
)

// textDelta is a typical content event as Anthropic sends it (from the
// fixtures).
const textDelta = "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'m doing well, thank you for asking. How are you doing today?"}}` + "\n\n"

func FuzzAnthropic(f *testing.F) {
	protocoltest.SeedEvents(f, anthropic.API, "../../../testdata/fixtures")
	f.Add("error", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) { protocoltest.CheckEvent(t, anthropic.API, typ, data) })
}

// BenchmarkParseClassify: SSE parsing plus classification of one typical
// content event, the per-event cost the relay and the bench client pay.
func BenchmarkParseClassify(b *testing.B) { protocoltest.ParseClassify(b, anthropic.API, textDelta) }

// BenchmarkClassify is classification alone, on an already parsed event.
func BenchmarkClassify(b *testing.B) { protocoltest.Classify(b, anthropic.API, textDelta) }

// TestHotPathAllocations holds the issue 2 target: at most one allocation
// per event for parse+classify of a typical chunk.
func TestHotPathAllocations(t *testing.T) {
	if n := protocoltest.AllocsPerEvent(t, anthropic.API, textDelta); n > 1 {
		t.Errorf("%v allocations per event, want ≤ 1", n)
	}
}
