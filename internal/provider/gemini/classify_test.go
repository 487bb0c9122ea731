package gemini_test

import (
	"testing"

	"github.com/ttfx/ttfx/internal/protocol/protocoltest"
	"github.com/ttfx/ttfx/internal/provider/gemini"

	// Detect, which picks the fixtures that seed the fuzz target, weighs
	// every unit's claim.
	_ "github.com/ttfx/ttfx/internal/provider/all"
)

// chunk is a typical content event as Gemini sends it, CRLF-framed (from
// the fixtures).
const chunk = `data: {"candidates": [{"content": {"parts": [{"text": "Hi there! How can I help you today?"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 2,"totalTokenCount": 353,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 2}],"thoughtsTokenCount": 344},"modelVersion": "gemini-2.5-flash","responseId": "jHIPaZKcEoOR0-kPxMfy0Ag"}` + "\r\n\r\n"

func FuzzGemini(f *testing.F) {
	protocoltest.SeedEvents(f, gemini.API, "../../../testdata/fixtures")
	f.Add("", []byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.a","stringValue":"b"}],"willContinue":true}}]}}]}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) { protocoltest.CheckEvent(t, gemini.API, typ, data) })
}

// BenchmarkParseClassify: SSE parsing plus classification of one typical
// content event, the per-event cost the relay and the bench client pay.
func BenchmarkParseClassify(b *testing.B) { protocoltest.ParseClassify(b, gemini.API, chunk) }

// BenchmarkClassify is classification alone, on an already parsed event.
func BenchmarkClassify(b *testing.B) { protocoltest.Classify(b, gemini.API, chunk) }

// TestHotPathAllocations holds the issue 2 target: at most one allocation
// per event for parse+classify of a typical chunk.
func TestHotPathAllocations(t *testing.T) {
	if n := protocoltest.AllocsPerEvent(t, gemini.API, chunk); n > 1 {
		t.Errorf("%v allocations per event, want ≤ 1", n)
	}
}
