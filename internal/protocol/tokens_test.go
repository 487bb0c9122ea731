package protocol

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/tokens"
)

func chunk(text string) *sse.Event {
	b, _ := json.Marshal(text)
	return &sse.Event{Data: []byte(`{"choices":[{"delta":{"content":` + string(b) + `}}]}`)}
}

func TestTokensEstimateWithoutUsage(t *testing.T) {
	s := NewStream(OpenAIChat)
	parts := []string{"The quick", " brown fox", " jumps over\nthe \"lazy\" dog", " — ünïcödé ✓"}
	for _, p := range parts {
		s.Event(chunk(p))
	}
	want := strings.Join(parts, "")
	if s.VisibleText() != want {
		t.Fatalf("visible %q, want %q", s.VisibleText(), want)
	}
	tk := s.Tokens()
	if tk.Source != SourceEstimate || tk.Visible != tokens.Count(want) || tk.HasOutput || tk.HasInput {
		t.Errorf("tokens %+v, want estimate %d", tk, tokens.Count(want))
	}
}

func TestTokensNothingSeen(t *testing.T) {
	tk := NewStream(Anthropic).Tokens()
	if tk.HasVisible || tk.Source != "" {
		t.Errorf("no events: %+v", tk)
	}
	// Heartbeats only: still nothing classified as content, and no events
	// with data.
	s := NewStream(OpenAIChat)
	s.Event(&sse.Event{})
	if tk := s.Tokens(); tk.HasVisible || tk.Source != "" {
		t.Errorf("heartbeats only: %+v", tk)
	}
}

func TestTokensHiddenReasoningIsEstimated(t *testing.T) {
	// Usage with reasoning broken out: trusted even when output − reasoning
	// is far from the estimate (hidden reasoning is what it removes).
	s := NewStream(OpenAIChat)
	s.Event(chunk("Hi"))
	s.Event(&sse.Event{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":500,"completion_tokens_details":{"reasoning_tokens":450}}}`)})
	if tk := s.Tokens(); tk.Source != SourceUsage || tk.Visible != 50 {
		t.Errorf("broken-out reasoning: %+v", tk)
	}
	// Not broken out, and close to the estimate: usage.
	n := NewStream(OpenAIChat)
	n.Event(chunk(strings.Repeat(" word", 40)))
	n.Event(&sse.Event{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":52}}`)})
	if tk := n.Tokens(); tk.Source != SourceUsage || tk.Visible != 52 {
		t.Errorf("plausible usage: %+v", tk)
	}
	// Not broken out, and far beyond what the text holds: estimate.
	h := NewStream(OpenAIChat)
	h.Event(chunk(strings.Repeat(" word", 40)))
	h.Event(&sse.Event{Data: []byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":400}}`)})
	if tk := h.Tokens(); tk.Source != SourceEstimate || tk.Visible != 40 || tk.Output != 400 {
		t.Errorf("hidden reasoning: %+v", tk)
	}
}

func TestTokensReasoningLumpedIsEstimated(t *testing.T) {
	// Reasoning content seen, usage without a reasoning count (DeepSeek
	// style providers that omit completion_tokens_details): estimate.
	s := NewStream(OpenAIChat)
	s.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{"reasoning_content":"long thoughts"}}]}`)})
	s.Event(chunk("Yes."))
	s.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`)})
	if tk := s.Tokens(); tk.Source != SourceEstimate || tk.Visible != tokens.Count("Yes.") {
		t.Errorf("tokens %+v", tk)
	}
}

// TestTokensSource: where the visible count comes from, stream by stream
// (chat chunks).
func TestTokensSource(t *testing.T) {
	const thinking = `{"choices":[{"index":0,"delta":{"reasoning":"Let me think about this problem carefully, considering all the angles and the history of the question, and how best to phrase an answer that is helpful."}}]}`
	const toolArgs = `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"city\":\"Paris\"}"}}]}}]}`
	const hi = `{"choices":[{"index":0,"delta":{"content":"Hi there!"},"finish_reason":"stop"}]}`
	for _, tt := range []struct {
		name    string
		events  []string
		visible int
		source  string
	}{
		{"streamed reasoning, reasoning_tokens 0: estimate", []string{thinking, hi,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":47,"completion_tokens_details":{"reasoning_tokens":0}}}`},
			tokens.Count("Hi there!"), SourceEstimate},
		{"streamed reasoning, reasoning_tokens absent: estimate", []string{thinking, hi,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":47}}`},
			tokens.Count("Hi there!"), SourceEstimate},
		{"streamed reasoning, reasoning broken out: usage", []string{thinking, hi,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":47,"completion_tokens_details":{"reasoning_tokens":44}}}`},
			3, SourceUsage},
		{"tool arguments, reasoning_tokens 0: estimate", []string{toolArgs, hi,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":12,"completion_tokens_details":{"reasoning_tokens":0}}}`},
			tokens.Count("Hi there!"), SourceEstimate},
		{"no reasoning, reasoning_tokens 0, plausible: usage", []string{hi,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"completion_tokens_details":{"reasoning_tokens":0}}}`},
			4, SourceUsage},
		{"whitespace only, content_filter, usage: 0 from usage", []string{
			`{"choices":[{"index":0,"delta":{"content":"  \n"},"finish_reason":"content_filter"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":12}}`},
			0, SourceUsage},
		{"whitespace only, no usage: estimate 0", []string{
			`{"choices":[{"index":0,"delta":{"content":"  \n\n  "}}]}`, `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`},
			0, SourceEstimate},
		{"reasoning only, usage lumps it: estimate 0", []string{thinking,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":40}}`},
			0, SourceEstimate},
		{"reasoning only, broken out: 0 from usage", []string{thinking,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":40,"completion_tokens_details":{"reasoning_tokens":38}}}`},
			0, SourceUsage},
		{"no reasoning, reasoning_tokens 0, hidden reasoning: margin says estimate", []string{hi,
			`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":47,"completion_tokens_details":{"reasoning_tokens":0}}}`},
			tokens.Count("Hi there!"), SourceEstimate},
	} {
		s := NewStream(OpenAIChat)
		for _, ev := range tt.events {
			s.Event(&sse.Event{Data: []byte(ev)})
		}
		if tk := s.Tokens(); tk.Visible != tt.visible || tk.Source != tt.source || !tk.HasVisible {
			t.Errorf("%s: visible %d from %q, want %d from %q", tt.name, tk.Visible, tk.Source, tt.visible, tt.source)
		}
	}
}

func TestVisibleTextIsBounded(t *testing.T) {
	s := NewStream(OpenAIChat)
	piece := strings.Repeat(" hello", 1000) // 6000 bytes, 1000 tokens
	const n = 250                           // 1.5 MB in all
	for range n {
		s.Event(chunk(piece))
	}
	if got := len(s.VisibleText()); got > maxVisible {
		t.Fatalf("kept %d bytes of visible text, limit %d", got, maxVisible)
	}
	tk := s.Tokens()
	want := 1000 * n
	if tk.Source != SourceEstimate || tk.Visible < want*99/100 || tk.Visible > want*101/100 {
		t.Errorf("extrapolated estimate %d, want %d ± 1%%", tk.Visible, want)
	}
}

func TestUsageJSON(t *testing.T) {
	b, err := json.Marshal(Usage{Input: 3, HasInput: true, Reasoning: 0, HasReasoning: true})
	if err != nil || string(b) != `{"input":3,"output":null,"reasoning":0}` {
		t.Errorf("%s %v", b, err)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		typ, data string
		want      API
		ok        bool
	}{
		{"", `[DONE]`, OpenAIChat, true},
		{"", `{"id":"x","object":"chat.completion.chunk","choices":[]}`, OpenAIChat, true},
		{"", `{"choices":[],"prompt_filter_results":[]}`, OpenAIChat, true},
		{"", `{"object":"text_completion","choices":[{"text":"a"}]}`, OpenAIChat, true},
		{"response.created", `{"type":"response.created","response":{}}`, OpenAIResponses, true},
		{"", `{"type":"keepalive","sequence_number":3}`, OpenAIResponses, true},
		{"error", `{"type":"error","code":"x","message":"y","param":null}`, OpenAIResponses, true},
		{"message_start", `{"type":"message_start","message":{}}`, Anthropic, true},
		{"ping", `{"type": "ping"}`, Anthropic, true},
		{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Anthropic, true},
		{"error", `{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"x"},"sequence_number":0}`, OpenAIResponses, true},
		{"", `{"sequence_number":3,"type":"error","error":{"type":"server_error"}}`, OpenAIResponses, true},
		{"content_block_delta", `not json`, Anthropic, true}, // the SSE type tells
		{"", `{"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`, Gemini, true},
		{"", `{"usageMetadata":{"promptTokenCount":1}}`, Gemini, true},
		{"", `{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`, Gemini, true},
		{"", `{"error":{"message":"x","type":"server_error","code":null}}`, OpenAIChat, true},
		{"", ``, "", false},
		{"", `{"foo":1}`, "", false},
		{"", `garbage`, "", false},
	}
	for _, tt := range tests {
		got, ok := DetectData([]byte(tt.typ), []byte(tt.data))
		if got != tt.want || ok != tt.ok {
			t.Errorf("DetectData(%q, %q) = %q, %v; want %q, %v", tt.typ, tt.data, got, ok, tt.want, tt.ok)
		}
	}
	// A whole stream: heartbeats first do not decide.
	stream := ": hi\n\ndata:\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n"
	if api, ok := Detect([]byte(stream)); !ok || api != Anthropic {
		t.Errorf("Detect = %q, %v", api, ok)
	}
	if _, ok := Detect([]byte(": only comments\n\n")); ok {
		t.Error("Detect decided on comments only")
	}
}

// TestCompactCountsEverything streams 200 KB of the project's docs and
// sources (3 times maxVisible) as chat chunks of 1 to 400 bytes. Calling
// Compact after each, as the relay does while it waits, the stream keeps
// at most about compactAt of text; without the calls it compacts itself
// at maxVisible/2. Either way the estimate is the exact count of the whole
// text: before Compact, the first maxVisible bytes were counted and the
// rest extrapolated (436,918 tokens for 460,398 when this was written).
func TestCompactCountsEverything(t *testing.T) {
	text := projectText(t)[:200_000] // under maxCounted, escaped as JSON
	compacted, self := NewStream(OpenAIChat), NewStream(OpenAIChat)
	kept, selfKept := 0, 0
	for i, n := 0, 1; i < len(text); n = n%400 + 37 {
		end := min(i+n, len(text))
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++ // whole runes in every chunk, or JSON would replace the halves
		}
		ev := chunk(text[i:end])
		compacted.Event(ev)
		self.Event(ev)
		compacted.Compact()
		kept = max(kept, len(compacted.VisibleText()))
		selfKept = max(selfKept, len(self.VisibleText()))
		i = end
	}
	want := tokens.Count(text)
	for _, s := range []*Stream{compacted, self} {
		if tk := s.Tokens(); tk.Visible != want || tk.Source != SourceEstimate {
			t.Errorf("%d visible tokens from %q, want all %d", tk.Visible, tk.Source, want)
		}
	}
	if kept > compactAt+1000 || selfKept > maxVisible/2+1000 {
		t.Errorf("kept up to %d bytes of text with Compact, %d without; want at most about %d and %d", kept, selfKept, compactAt, maxVisible/2)
	}
	t.Logf("%d bytes, %d tokens; kept at most %d bytes with Compact, %d without", len(text), want, kept, selfKept)
}

// TestCountingIsBounded: past maxCounted of text, a stream counts no more
// and extrapolates, so counting costs a stream a bounded time.
func TestCountingIsBounded(t *testing.T) {
	text := projectText(t) // 1.5 MB
	s := NewStream(OpenAIChat)
	for i := 0; i < len(text); {
		end := min(i+300, len(text))
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		s.Event(chunk(text[i:end]))
		s.Compact()
		i = end
	}
	if s.c.visibleRaw > maxCounted {
		t.Errorf("counted %d bytes, bound %d", s.c.visibleRaw, maxCounted)
	}
	want := tokens.Count(text)
	if tk := s.Tokens(); tk.Visible == want || tk.Visible < want*9/10 || tk.Visible > want*11/10 {
		t.Errorf("%d visible tokens, want an extrapolation near %d", tk.Visible, want)
	}
}

// TestCompactWithoutSpaces: text that never ends a word with a space
// cannot be cut; it is kept up to maxVisible and extrapolated, as without
// Compact.
func TestCompactWithoutSpaces(t *testing.T) {
	s := NewStream(OpenAIChat)
	piece := strings.Repeat("日本語のテキスト。", 20) // 540 bytes
	for range 200 {
		s.Event(chunk(piece))
		s.Compact()
	}
	// A rune cut at the bound is kept as U+FFFD: up to 3 bytes over.
	if got := len(s.VisibleText()); got < maxVisible-len(piece) || got > maxVisible+3 {
		t.Fatalf("kept %d bytes, want about %d", got, maxVisible)
	}
	want := 200 * tokens.Count(piece)
	if tk := s.Tokens(); tk.Visible < want*98/100 || tk.Visible > want*102/100 {
		t.Errorf("%d visible tokens, want about %d", tk.Visible, want)
	}
}

// TestCompactThenMalformedEvent: an event that does not parse leaves the
// counts as they were after the last Compact.
func TestCompactThenMalformedEvent(t *testing.T) {
	s := NewStream(OpenAIChat)
	words := strings.Repeat("word ", 1000) // 5000 bytes, 1000 tokens
	s.Event(chunk(words))
	s.Compact()
	s.Event(chunk("tail"))
	s.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{"content":"lost words here"}}`)}) // cut short
	want := tokens.Count(words + "tail")
	if tk := s.Tokens(); tk.Visible != want {
		t.Errorf("%d visible tokens, want %d", tk.Visible, want)
	}
}

// projectText is the project's docs and Go sources, for long real text.
func projectText(tb testing.TB) string {
	var b strings.Builder
	for _, pattern := range []string{"../../docs/*.md", "../*/*.go"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range files {
			t, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			b.Write(t)
		}
	}
	if b.Len() < 3<<19 {
		tb.Fatalf("only %d bytes of text", b.Len())
	}
	return b.String()[:3<<19]
}

// TestCompactOtherScripts: words that end in any letter before a space,
// and lines of Chinese, are counted as they settle too.
func TestCompactOtherScripts(t *testing.T) {
	for _, piece := range []string{
		strings.Repeat("Съешь же ещё этих мягких французских булок, да выпей чаю. ", 6),
		strings.Repeat("Ο Ζεύς και η Ήρα. Café résumé naïve élan. ", 8),
		strings.Repeat("我们今天讨论的是网关的延迟。\n第二行也没有空格：", 12),
	} {
		s := NewStream(OpenAIChat)
		kept := 0
		for range 100 {
			s.Event(chunk(piece))
			s.Compact()
			kept = max(kept, len(s.VisibleText()))
		}
		if kept > compactAt+len(piece) {
			t.Errorf("%.20q…: kept up to %d bytes, want at most about %d", piece, kept, compactAt)
		}
		if want := tokens.Count(strings.Repeat(piece, 100)); s.Tokens().Visible != want {
			t.Errorf("%.20q…: %d visible tokens, want %d", piece, s.Tokens().Visible, want)
		}
	}
}

// TestCompactLetsABurstGo: the buffer a burst grew is let go of with the
// text, not kept for the rest of the stream.
func TestCompactLetsABurstGo(t *testing.T) {
	s := NewStream(OpenAIChat)
	s.Event(chunk(strings.Repeat("a burst of words ", 2000))) // 34 KB
	s.Compact()
	if c := cap(s.c.visible); c > 4*compactAt {
		t.Errorf("after the burst's text was counted, its buffer holds %d bytes", c)
	}
}
