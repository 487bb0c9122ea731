package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/tokens"
)

// Typical content chunks of each API as providers send them (taken from the
// fixtures), 150–300 bytes of event each.
var benchChunks = []struct {
	api   API
	event string
}{
	{OpenAIChat, `data: {"id":"chatcmpl-E6yvkr7hjcsBF18tAhF6z9yBFDts4","object":"chat.completion.chunk","created":1785332892,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_627de6ad19","choices":[{"index":0,"delta":{"content":" POST"},"logprobs":null,"finish_reason":null}],"obfuscation":"KTKPTyPbX"}` + "\n\n"},
	{OpenAIResponses, "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","content_index":0,"delta":" World","item_id":"msg_04e21c25f1df9e70016968ca722660819da8b53c713113f3bb","logprobs":[],"obfuscation":"O642Kk6nsU","output_index":1,"sequence_number":8}` + "\n\n"},
	{Anthropic, "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'m doing well, thank you for asking. How are you doing today?"}}` + "\n\n"},
	{Gemini, `data: {"candidates": [{"content": {"parts": [{"text": "Hi there! How can I help you today?"}],"role": "model"},"index": 0}],"usageMetadata": {"promptTokenCount": 2,"totalTokenCount": 353,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 2}],"thoughtsTokenCount": 344},"modelVersion": "gemini-2.5-flash","responseId": "jHIPaZKcEoOR0-kPxMfy0Ag"}` + "\r\n\r\n"},
}

// loopReader returns the same bytes over and over, so a benchmark reads an
// endless stream of one event with no per-iteration setup.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}

// BenchmarkParseClassify measures SSE parsing plus classification of one
// typical content event per API: the per-event cost the relay and the
// benchmark client pay. The visible-text buffer fills up to its bound
// (maxVisible) and then stays, as in a long stream.
func BenchmarkParseClassify(b *testing.B) {
	for _, bc := range benchChunks {
		b.Run(string(bc.api), func(b *testing.B) {
			r := sse.NewReader(&loopReader{data: []byte(bc.event)}, 0)
			s := NewStream(bc.api)
			b.SetBytes(int64(len(bc.event)))
			b.ReportAllocs()
			for b.Loop() {
				p, err := r.Next()
				if err != nil {
					b.Fatal(err)
				}
				if res := s.Piece(p); !res.Visible {
					b.Fatalf("not classified as text: %+v", res)
				}
			}
		})
	}
}

// BenchmarkClassify is classification alone, on an already parsed event.
func BenchmarkClassify(b *testing.B) {
	for _, bc := range benchChunks {
		b.Run(string(bc.api), func(b *testing.B) {
			r := sse.NewReader(&loopReader{data: []byte(bc.event)}, 0)
			p, _ := r.Next()
			ev := p.Event
			s := NewStream(bc.api)
			b.ReportAllocs()
			for b.Loop() {
				s.Event(&ev)
			}
		})
	}
}

// BenchmarkEncodingJSONChat is the alternative the scanner replaces: one
// encoding/json unmarshal of the same chat chunk into a struct with only the
// fields the classifier reads. It is the baseline that justifies
// internal/jsonscan (STYLE.md: no JSON library swap without a benchmark).
func BenchmarkEncodingJSONChat(b *testing.B) {
	data := []byte(benchChunks[0].event[len("data: ") : len(benchChunks[0].event)-2])
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

// TestHotPathAllocations holds the issue 2 target of at most one allocation
// per event for parse+classify of a typical chunk of each API (the visible
// text buffer grows now and then; nothing else allocates).
func TestHotPathAllocations(t *testing.T) {
	for _, bc := range benchChunks {
		r := sse.NewReader(&loopReader{data: []byte(bc.event)}, 0)
		s := NewStream(bc.api)
		allocs := testing.AllocsPerRun(2000, func() {
			p, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			s.Piece(p)
		})
		if allocs > 1 {
			t.Errorf("%s: %v allocations per event, want ≤ 1", bc.api, allocs)
		}
	}
}

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
