package bedrock

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
	"github.com/ttfx/ttfx/internal/sse"
)

// Shorter names for the kinds the tables use.
const (
	Metadata  = protocol.Metadata
	Reasoning = protocol.Reasoning
	Text      = protocol.Text
	Tool      = protocol.Tool
	Done      = protocol.Done
	Error     = protocol.Error
	Unknown   = protocol.Unknown
)

type step struct {
	typ, data string
	want      protocol.Kind
}

// run feeds the steps as events of a Converse stream and checks each kind.
func run(t *testing.T, steps ...step) *protocol.Stream {
	t.Helper()
	s := protocol.NewStream(API)
	for i, st := range steps {
		r := s.Event(&sse.Event{Type: []byte(st.typ), Data: []byte(st.data)})
		if r.Kinds != st.want {
			t.Errorf("event %d %s: kinds %s, want %s", i, st.data, r.Kinds, st.want)
		}
		if want := st.want&(Done|Error) != 0; r.Terminal != want {
			t.Errorf("event %d: Terminal = %v, want %v", i, r.Terminal, want)
		}
		if want := st.want&Text != 0 && strings.TrimSpace(st.data) != ""; r.Visible != want {
			t.Errorf("event %d: Visible = %v, want %v", i, r.Visible, want)
		}
	}
	return s
}

// loopReader returns the same bytes over and over: an endless stream of
// one frame for the benchmark.
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

// pad is the "p" field Bedrock adds to every Converse event (random
// letters that hide the length of the content); the classifier skips it.
const pad = `"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"`

// converseStream is a Converse stream shaped as Bedrock sends one for a
// Claude model with extended thinking and a tool: messageStart, a
// reasoning block (text deltas, then its signature), a text block, a
// toolUse block (its start, then input deltas), messageStop, metadata.
func converseStream() []byte {
	var b []byte
	ev := func(typ, payload string) { b = eventstream.AppendEvent(b, typ, []byte(payload)) }
	ev("messageStart", `{`+pad+`,"role":"assistant"}`)
	ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"The user wants"}},`+pad+`}`)
	ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqoBCkgIARABGAIiQ"}},`+pad+`}`)
	ev("contentBlockStop", `{"contentBlockIndex":0,`+pad+`}`)
	ev("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"text":"Let me check."},`+pad+`}`)
	ev("contentBlockStop", `{"contentBlockIndex":1,`+pad+`}`)
	ev("contentBlockStart", `{"contentBlockIndex":2,`+pad+`,"start":{"toolUse":{"name":"get_weather","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}}}`)
	ev("contentBlockDelta", `{"contentBlockIndex":2,"delta":{"toolUse":{"input":""}},`+pad+`}`)
	ev("contentBlockDelta", `{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"city\": \"Paris\"}"}},`+pad+`}`)
	ev("contentBlockStop", `{"contentBlockIndex":2,`+pad+`}`)
	ev("messageStop", `{`+pad+`,"stopReason":"tool_use"}`)
	ev("metadata", `{"metrics":{"latencyMs":1834},`+pad+`,"usage":{"cacheReadInputTokens":100,"inputTokens":412,"outputTokens":96,"totalTokens":608}}`)
	return b
}

// classifyFrames reads b with the relay's reader and classifies each frame.
func classifyFrames(t *testing.T, b []byte) (*protocol.Stream, []protocol.Kind, error) {
	t.Helper()
	s := protocol.NewStream(API)
	r := eventstream.NewPieces(bytes.NewReader(b), 0)
	var kinds []protocol.Kind
	for {
		p, err := r.Next()
		if err == io.EOF {
			return s, kinds, nil
		}
		if err != nil {
			return s, kinds, err
		}
		kinds = append(kinds, s.Piece(p).Kinds)
	}
}

func TestConverseStream(t *testing.T) {
	s, kinds, err := classifyFrames(t, converseStream())
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Kind{Metadata, Reasoning, Metadata, Metadata, Text, Metadata, Metadata, Metadata, Tool, Metadata, Done, Metadata}
	if len(kinds) != len(want) {
		t.Fatalf("%d frames classified, want %d: %v", len(kinds), len(want), kinds)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Errorf("frame %d: %s, want %s", i, kinds[i], want[i])
		}
	}
	if s.Terminal() != protocol.TerminalDone || s.FinishReason() != "tool_use" {
		t.Errorf("terminal %v finish %q", s.Terminal(), s.FinishReason())
	}
	if s.VisibleText() != "Let me check." {
		t.Errorf("visible text %q", s.VisibleText())
	}
	tok := s.Tokens()
	if !tok.HasInput || tok.Input != 512 || !tok.HasOutput || tok.Output != 96 {
		t.Errorf("tokens %+v: want input 412+100 cached, output 96", tok)
	}
	if ms, ok := s.ProviderLatencyMs(); !ok || ms != 1834 {
		t.Errorf("latencyMs %d %v", ms, ok)
	}
	c := s.Counts()
	if c.Metadata != 8 || c.Reasoning != 1 || c.Text != 1 || c.Tool != 1 || c.Done != 1 {
		t.Errorf("counts %+v", c)
	}
}

func TestConverseCases(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"text block start is metadata", []step{{"contentBlockStart", `{"contentBlockIndex":0,"start":{"text":""}}`, Metadata}}},
		{"empty text delta is metadata", []step{{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":""}}`, Metadata}}},
		{"whitespace text delta is metadata", []step{{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"  "}}`, Metadata}}},
		{"redacted reasoning is reasoning", []step{{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"RXFvQkNrZ0lB"}}}`, Reasoning}}},
		{"citation is metadata", []step{{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"citation":{"title":"x"}}}`, Metadata}}},
		{"messageStop without a reason is done", []step{{"messageStop", `{}`, Done}}},
		{"unknown event type", []step{{"somethingNew", `{"a":1}`, Unknown}}},
		{"not an object", []step{{"contentBlockDelta", `[1]`, Unknown}}},
		{"broken JSON", []step{{"contentBlockDelta", `{"delta":{"text":"a"`, Unknown}}},
		{"delta outside a contentBlockDelta is skipped", []step{{"messageStart", `{"delta":{"text":"x"},"role":"assistant"}`, Metadata}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.steps...) })
	}
}

// An exception message ends the stream as an error, its :exception-type
// the code, after whatever content came first.
func TestConverseExceptions(t *testing.T) {
	for _, typ := range []string{"throttlingException", "modelStreamErrorException", "validationException", "serviceUnavailableException", "internalServerException"} {
		t.Run(typ, func(t *testing.T) {
			b := eventstream.AppendEvent(nil, "messageStart", []byte(`{"role":"assistant"}`))
			b = eventstream.AppendEvent(b, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"Hel"}}`))
			b = eventstream.AppendException(b, typ, []byte(`{"message":"Too many tokens, please wait before trying again."}`))
			s, kinds, err := classifyFrames(t, b)
			if err != nil {
				t.Fatal(err)
			}
			if kinds[2] != Error || s.Terminal() != protocol.TerminalError || s.ErrorCode() != typ {
				t.Errorf("kinds %v terminal %v code %q", kinds, s.Terminal(), s.ErrorCode())
			}
			if s.Counts().Error != 1 || s.VisibleText() != "Hel" {
				t.Errorf("counts %+v text %q", s.Counts(), s.VisibleText())
			}
		})
	}
	// A :message-type error message (a service-level failure) too.
	b := eventstream.Append(nil, []eventstream.Header{
		{Name: ":message-type", Value: "error"}, {Name: ":error-code", Value: "InternalFailure"}, {Name: ":error-message", Value: "x"},
	}, nil)
	s, kinds, err := classifyFrames(t, b)
	if err != nil || len(kinds) != 1 || kinds[0] != Error || s.ErrorCode() != "InternalFailure" {
		t.Errorf("error message: %v %v %q", err, kinds, s.ErrorCode())
	}
}

// A frame whose CRC does not match ends the read with an error (the relay
// records upstream_stream_error), after the frames before it.
func TestConverseBadCRC(t *testing.T) {
	b := converseStream()
	b[len(b)-1] ^= 0xff
	_, kinds, err := classifyFrames(t, b)
	if err == nil || len(kinds) != 11 {
		t.Fatalf("%d frames, err %v: want 11 and a CRC error", len(kinds), err)
	}
}

func TestConverseResponse(t *testing.T) {
	body := `{"metrics":{"latencyMs":912},"output":{"message":{"content":[{"reasoningContent":{"reasoningText":{"signature":"Eq","text":"hmm"}}},{"text":"Hello there."},{"toolUse":{"input":{"city":"Paris"},"name":"get_weather","toolUseId":"t1"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":20,"outputTokens":30,"totalTokens":50}}`
	info, err := protocol.ParseResponse(API, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if info.Kinds&(Reasoning|Text|Tool|Done) != Reasoning|Text|Tool|Done || info.FinishReason != "tool_use" || !info.Text {
		t.Errorf("%+v", info)
	}
	if !info.HasProviderLatency || info.ProviderLatencyMs != 912 || info.Tokens.Output != 30 {
		t.Errorf("latency %v %d tokens %+v", info.HasProviderLatency, info.ProviderLatencyMs, info.Tokens)
	}
	info, err = protocol.ParseResponse(API, []byte(`{"message":"Too many requests, please wait before trying again."}`))
	if err != nil || !info.Error {
		t.Errorf("error body: %+v %v", info, err)
	}
}

// FuzzConverse reads any bytes as an event stream, seeded with whole
// Bedrock-shaped streams and single frames, and classifies every frame:
// nothing panics, every frame is counted once, a stream with a bad frame
// ends with the reader's error.
func FuzzConverse(f *testing.F) {
	whole := converseStream()
	f.Add(whole)
	for rest := whole; len(rest) >= 4; {
		n := int(rest[0])<<24 | int(rest[1])<<16 | int(rest[2])<<8 | int(rest[3])
		f.Add(bytes.Clone(rest[:n]))
		rest = rest[n:]
	}
	f.Add(eventstream.AppendException(nil, "throttlingException", []byte(`{"message":"x"}`)))
	f.Add(eventstream.AppendEvent(nil, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"AA=="}}}`)))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := protocol.NewStream(API)
		r := eventstream.NewPieces(bytes.NewReader(in), 1<<16)
		n := 0
		for {
			p, err := r.Next()
			if err != nil {
				break
			}
			res := s.Piece(p)
			if res.Kinds == 0 {
				t.Fatalf("frame %q classified as nothing", p.Raw)
			}
			if res.Kinds&Unknown != 0 && (res.Effective || res.Terminal) {
				t.Fatalf("unknown frame with content: %+v", res)
			}
			n++
		}
		c := s.Counts()
		if total := c.Heartbeat + c.Metadata + c.Reasoning + c.Tool + c.Text + c.Done + c.Error + c.Unknown; total != n {
			t.Fatalf("counts %+v sum to %d, want %d", c, total, n)
		}
		s.Tokens()
		s.Terminal()
	})
}

// BenchmarkConverseClassify is classifying one Converse text frame (the
// frame already read), as BenchmarkClassify is for the SSE APIs.
func BenchmarkConverseClassify(b *testing.B) {
	frame := eventstream.AppendEvent(nil, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":" Hello"},`+pad+`}`))
	r := eventstream.NewPieces(&loopReader{data: frame}, 0)
	s := protocol.NewStream(API)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		if res := s.Piece(p); !res.Visible {
			b.Fatalf("not text: %+v", res)
		}
	}
}

// TestConverseAllocsPerEvent: reading and classifying a Converse frame
// once more in a long stream of it allocates at most once (the visible
// text's buffer grows now and then; nothing else), for each kind of
// content event and the metadata event, as the SSE APIs' tests require.
func TestConverseAllocsPerEvent(t *testing.T) {
	for _, ev := range []struct{ typ, payload string }{
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" Hello"}}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":" so"}}}`},
		{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"q\":"}}}`},
		{"contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t1","name":"search"}}}`},
		{"metadata", `{"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7},"metrics":{"latencyMs":300}}`},
	} {
		frame := eventstream.AppendEvent(nil, ev.typ, []byte(ev.payload))
		r := eventstream.NewPieces(&loopReader{data: frame}, 0)
		s := protocol.NewStream(API)
		n := testing.AllocsPerRun(2000, func() {
			p, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if res := s.Piece(p); res.Kinds == 0 {
				t.Fatalf("%s %s: no kind", ev.typ, ev.payload)
			}
		})
		if n > 1 {
			t.Errorf("%s %s: %.2f allocations per event, want ≤ 1", ev.typ, ev.payload, n)
		}
		t.Logf("%s %.40s: %.3f allocations per event", ev.typ, ev.payload, n)
	}
}
