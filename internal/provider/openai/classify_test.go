package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/protocol/protocoltest"
	"github.com/ttfx/ttfx/internal/provider/openai"

	// Detect, which picks the fixtures that seed the fuzz targets, weighs
	// every unit's claim.
	_ "github.com/ttfx/ttfx/internal/provider/all"
)

const fixtures = "../../../testdata/fixtures"

// Typical content events as OpenAI sends them (from the fixtures).
const (
	chatChunk      = `data: {"id":"chatcmpl-E6yvkr7hjcsBF18tAhF6z9yBFDts4","object":"chat.completion.chunk","created":1785332892,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_627de6ad19","choices":[{"index":0,"delta":{"content":" POST"},"logprobs":null,"finish_reason":null}],"obfuscation":"KTKPTyPbX"}` + "\n\n"
	responsesChunk = "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","content_index":0,"delta":" World","item_id":"msg_04e21c25f1df9e70016968ca722660819da8b53c713113f3bb","logprobs":[],"obfuscation":"O642Kk6nsU","output_index":1,"sequence_number":8}` + "\n\n"
)

func FuzzChat(f *testing.F) {
	protocoltest.SeedEvents(f, openai.Chat, fixtures)
	f.Add("", []byte(`{"choices":[{"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"x"}]}]}}]}`))
	f.Add("", []byte(`{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"a"}]}}]}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) { protocoltest.CheckEvent(t, openai.Chat, typ, data) })
}

func FuzzResponses(f *testing.F) {
	protocoltest.SeedEvents(f, openai.Responses, fixtures)
	f.Add("error", []byte(`{"type":"error","code":"x","message":"y"}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) { protocoltest.CheckEvent(t, openai.Responses, typ, data) })
}

// BenchmarkParseClassify: SSE parsing plus classification of one typical
// content event, the per-event cost the relay and the bench client pay.
func BenchmarkParseClassify(b *testing.B) {
	b.Run("openai.chat", func(b *testing.B) { protocoltest.ParseClassify(b, openai.Chat, chatChunk) })
	b.Run("openai.responses", func(b *testing.B) { protocoltest.ParseClassify(b, openai.Responses, responsesChunk) })
}

// BenchmarkClassify is classification alone, on an already parsed event.
func BenchmarkClassify(b *testing.B) {
	b.Run("openai.chat", func(b *testing.B) { protocoltest.Classify(b, openai.Chat, chatChunk) })
	b.Run("openai.responses", func(b *testing.B) { protocoltest.Classify(b, openai.Responses, responsesChunk) })
}

// TestHotPathAllocations holds the issue 2 target: at most one allocation
// per event for parse+classify of a typical chunk.
func TestHotPathAllocations(t *testing.T) {
	for api, ev := range map[protocol.API]string{openai.Chat: chatChunk, openai.Responses: responsesChunk} {
		if n := protocoltest.AllocsPerEvent(t, api, ev); n > 1 {
			t.Errorf("%s: %v allocations per event, want ≤ 1", api, n)
		}
	}
}

// BenchmarkEncodingJSONChat is the alternative the scanner replaces: one
// encoding/json unmarshal of the same chat chunk into a struct with only the
// fields the classifier reads. It is the baseline that justifies
// internal/jsonscan (STYLE.md: no JSON library swap without a benchmark).
func BenchmarkEncodingJSONChat(b *testing.B) {
	data := []byte(chatChunk[len("data: ") : len(chatChunk)-2])
	type chunk struct {
		Choices []struct {
			Delta struct {
				Content          *string `json:"content"`
				Refusal          *string `json:"refusal"`
				ReasoningContent *string `json:"reasoning_content"`
				Reasoning        *string `json:"reasoning"`
				ToolCalls        []struct {
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
	}
}
