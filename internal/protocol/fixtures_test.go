package protocol

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/tokens"
)

// milestones is what a classified stream showed, as INDEX.md states it:
// indexes over dispatched SSE events, -1 for none.
type milestones struct {
	firstEvent, firstResponse, firstText int
	results                              []Result // one per dispatched event
}

// oneByteReader returns its input n bytes per Read, so that events arrive
// split at every offset.
type nByteReader struct {
	data []byte
	n    int
}

func (r *nByteReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(r.n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// classify runs a whole recorded stream through a Stream, reading it readSize
// bytes at a time (0: all at once).
func classify(t testing.TB, api API, stream []byte, readSize int) (*Stream, milestones) {
	t.Helper()
	if readSize <= 0 {
		readSize = len(stream) + 1
	}
	s := NewStream(api)
	r := sse.NewReader(&nByteReader{data: stream, n: readSize}, 0)
	m := milestones{firstEvent: -1, firstResponse: -1, firstText: -1}
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		res := s.Piece(p)
		if p.Kind != sse.PieceEvent {
			continue
		}
		i := len(m.results)
		m.results = append(m.results, res)
		if res.Event && m.firstEvent < 0 {
			m.firstEvent = i
		}
		if res.Effective && m.firstResponse < 0 {
			m.firstResponse = i
		}
		if res.Visible && m.firstText < 0 {
			m.firstText = i
		}
	}
	return s, m
}

const none = -1

// fixtureWants are INDEX.md's expectations for every recorded stream, plus
// the usage numbers read from each file (none: the provider did not report
// that count) and the visible text it carries.
var fixtureWants = []struct {
	file                                 string
	api                                  API
	firstEvent, firstResponse, firstText int
	terminal                             Terminal
	finish                               string
	input, output, reasoning             int
	visible                              string
	source                               string // tokens source
	visibleTokens                        int    // none: tokens.Count(visible)
}{
	{"anthropic__messages__text-with-ping.sse", Anthropic, 0, 3, 3, TerminalDone, "end_turn", 12, 30, none,
		"Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?", SourceUsage, 30},
	{"anthropic__messages__tool-use-input-json-delta.sse", Anthropic, 0, 4, none, TerminalDone, "tool_use", 849, 47, none,
		"", SourceEstimate, 0},
	{"anthropic__messages__extended-thinking-signature-delta.sse", Anthropic, 0, 3, 16, TerminalDone, "end_turn", 69, 53, none,
		"925 ÷ 5 = 185", SourceEstimate, none},
	{"anthropic__messages__text-basic-sdk-fixture.sse", Anthropic, 0, 3, 3, TerminalDone, "end_turn", 11, 6, none,
		"Hello there!", SourceUsage, 6},
	{"anthropic__messages__text-then-tool-use-sdk-fixture.sse", Anthropic, 0, 3, 3, TerminalDone, "tool_use", 377, 65, none,
		"I'll check the current weather in Paris for you.", SourceEstimate, none},
	{"openai__responses__function-call-arguments-delta.sse", OpenAIResponses, 0, 3, none, TerminalDone, "completed", 45, 25, 0,
		"", SourceEstimate, 0},
	{"openai__responses__encrypted-reasoning-then-output-text.sse", OpenAIResponses, 0, 6, 6, TerminalDone, "completed", 19, 21, 11,
		"Hello, World!", SourceUsage, 10},
	{"openai__chat__text-then-tool-call-include-usage.sse", OpenAIChat, 0, 1, 1, TerminalDone, "tool_calls", 58, 12, 0,
		"PRE_TOOL", SourceEstimate, none},
	{"openai__chat__text-include-usage.sse", OpenAIChat, 0, 1, 1, TerminalDone, "stop", 86, 2, 0,
		"POST_TOOL", SourceUsage, 2},
	{"anthropic__openai-compat-chat__text-then-tool-call.sse", OpenAIChat, 0, 1, 1, TerminalDone, "tool_calls", none, none, none,
		"Reading it.", SourceEstimate, none},
	{"deepseek__chat__reasoning-content-then-text.sse", OpenAIChat, 0, 1, 89, TerminalDone, "stop", 97, 106, 88,
		"There are **3** “r”s in **“strawberry”**.", SourceUsage, 18},
	{"groq__chat__tool-call-x-groq-usage.sse", OpenAIChat, 0, 1, none, TerminalDone, "tool_calls", 210, 15, none,
		"", SourceEstimate, 0},
	{"groq__chat__reasoning-field-head-excerpt.sse", OpenAIChat, 0, 1, none, TerminalTruncated, "", none, none, none,
		"", SourceEstimate, 0},
	{"mistral__chat__tool-call-single-chunk.sse", OpenAIChat, 0, 1, none, TerminalDone, "tool_calls", 124, 22, none,
		"", SourceEstimate, 0},
	// Gemini omits zero counts: the MALFORMED_FUNCTION_CALL chunk reports
	// promptTokenCount 61 = totalTokenCount and no candidatesTokenCount, so
	// candidates = total − prompt − thoughts = 0: 0 output and 0 thoughts,
	// and with no visible text the visible count is 0 (from the usage).
	{"google__gemini-streamGenerateContent__text-then-empty-part-thought-signature.sse", Gemini, 0, 0, 0, TerminalDone, "STOP", 9, 23 + 185, 185,
		"There are **3** \"r\"s in strawberry.\n\nst**r**awbe**rr**y", SourceUsage, 23},
	{"google__gemini-streamGenerateContent__thought-parts-then-text.sse", Gemini, 0, 0, 3, TerminalDone, "STOP", 2, 7 + 344, 344,
		"Hi there! How can I help you today?", SourceUsage, 7},
	{"google__gemini-streamGenerateContent__thought-then-function-call.sse", Gemini, 0, 0, none, TerminalDone, "STOP", 52, 17 + 56, 56,
		"", SourceEstimate, 0},
	{"google__gemini-streamGenerateContent__malformed-function-call-terminal-crlf.sse", Gemini, 0, none, none, TerminalDone, "MALFORMED_FUNCTION_CALL", 61, 0, 0,
		"", SourceUsage, 0},
	{"ollama__openai-chat__text.sse", OpenAIChat, 0, 0, 0, TerminalDone, "stop", none, none, none,
		"My name is Neo Vim.", SourceEstimate, none},
	{"ollama__openai-chat__parallel-tool-calls.sse", OpenAIChat, 0, 0, none, TerminalDone, "tool_calls", none, none, none,
		"", SourceEstimate, 0},
	{"llamacpp__openai-chat__tool-call-timings-verbose.sse", OpenAIChat, 0, 2, none, TerminalDone, "tool_calls", none, none, none,
		"", SourceEstimate, 0},
	// 47 completion tokens for "Hi there!": the usage counts hidden
	// reasoning it does not break out, so the visible count is estimated.
	{"openrouter__chat__nemotron-text-then-usage-chunk.sse", OpenAIChat, 0, 1, 1, TerminalDone, "stop", 18, 47, none,
		"Hi there!", SourceEstimate, none},
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFixtureTableCoversEveryFile(t *testing.T) {
	files, err := filepath.Glob("../../testdata/fixtures/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	listed := map[string]bool{}
	for _, w := range fixtureWants {
		listed[w.file] = true
	}
	for _, f := range files {
		if !listed[filepath.Base(f)] {
			t.Errorf("fixture %s has no expectations in fixtureWants", filepath.Base(f))
		}
	}
}

func wantCount(t *testing.T, name string, got int, has bool, want int) {
	t.Helper()
	switch {
	case want == none && has:
		t.Errorf("%s = %d, want not reported", name, got)
	case want != none && (!has || got != want):
		t.Errorf("%s = %d (reported %v), want %d", name, got, has, want)
	}
}

func TestFixtures(t *testing.T) {
	for _, w := range fixtureWants {
		t.Run(w.file, func(t *testing.T) {
			stream := readFixture(t, w.file)
			if api, ok := Detect(stream); !ok || api != w.api {
				t.Errorf("Detect = %q, %v; want %q", api, ok, w.api)
			}
			// Whole, and split into 1- and 7-byte reads: the same answer.
			for _, size := range []int{0, 1, 7} {
				s, m := classify(t, w.api, stream, size)
				if m.firstEvent != w.firstEvent || m.firstResponse != w.firstResponse || m.firstText != w.firstText {
					t.Errorf("read size %d: first event/response/text = %d/%d/%d, want %d/%d/%d", size,
						m.firstEvent, m.firstResponse, m.firstText, w.firstEvent, w.firstResponse, w.firstText)
				}
				if got := s.Terminal(); got != w.terminal {
					t.Errorf("terminal %s, want %s", got, w.terminal)
				}
				if got := s.FinishReason(); got != w.finish {
					t.Errorf("finish reason %q, want %q", got, w.finish)
				}
				u := s.Usage()
				wantCount(t, "input", u.Input, u.HasInput, w.input)
				wantCount(t, "output", u.Output, u.HasOutput, w.output)
				wantCount(t, "reasoning", u.Reasoning, u.HasReasoning, w.reasoning)
				if got := s.VisibleText(); got != w.visible {
					t.Errorf("visible text %q, want %q", got, w.visible)
				}
				tk := s.Tokens()
				want := w.visibleTokens
				if want == none {
					want = tokens.Count(w.visible)
				}
				if tk.Source != w.source || !tk.HasVisible || tk.Visible != want {
					t.Errorf("tokens: visible %d (%v) from %q, want %d from %q", tk.Visible, tk.HasVisible, tk.Source, want, w.source)
				}
				if tk.Input != u.Input || tk.HasInput != u.HasInput || tk.Output != u.Output || tk.Reasoning != u.Reasoning {
					t.Errorf("tokens %+v do not carry the usage %+v", tk, u)
				}
				// Every dispatched event is counted once; comments too.
				c := s.Counts()
				total := c.Heartbeat + c.Metadata + c.Reasoning + c.Tool + c.Text + c.Done + c.Error + c.Unknown
				if comments := bytes.Count(stream, []byte("\n:")); total != len(m.results)+comments {
					t.Errorf("counts %+v sum to %d, want %d events + %d comment lines", c, total, len(m.results), comments)
				}
				if c.Unknown != 0 {
					t.Errorf("%d unknown events in a real provider stream", c.Unknown)
				}
			}
		})
	}
}
