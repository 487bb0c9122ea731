package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
)

// chunkFrame is one InvokeModelWithResponseStream chunk message carrying
// event, as Bedrock frames it (with its "p" padding).
func chunkFrame(dst []byte, event string) []byte {
	return eventstream.Append(dst, []eventstream.Header{{Name: ":event-type", Value: "chunk"}, {Name: ":content-type", Value: "application/json"}, {Name: ":message-type", Value: "event"}},
		[]byte(`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(event))+`",`+pad+`}`))
}

// classifyInvoke reads b with the relay's reader of InvokeModel streams,
// checks each piece's Raw is its frame as sent, and classifies it.
func classifyInvoke(t *testing.T, b []byte) (*protocol.Stream, []protocol.Kind, error) {
	t.Helper()
	s := protocol.NewStream(InvokeAPI)
	r := eventstream.NewChunkPieces(&chunkedReader{b: b, n: 5}, 0)
	var kinds []protocol.Kind
	var relayed []byte
	for {
		p, err := r.Next()
		if err == io.EOF {
			if !bytes.Equal(relayed, b) {
				t.Errorf("the pieces' Raw (%d bytes) is not the stream (%d bytes)", len(relayed), len(b))
			}
			return s, kinds, nil
		}
		if err != nil {
			return s, kinds, err
		}
		relayed = append(relayed, p.Raw...)
		kinds = append(kinds, s.Piece(p).Kinds)
	}
}

// chunkedReader returns b n bytes at a time: frames split across reads.
type chunkedReader struct {
	b []byte
	n int
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[n:]
	return n, nil
}

// anthropicChunks is a Claude model's InvokeModelWithResponseStream answer
// with extended thinking, as Bedrock sends it.
func anthropicChunks() []byte {
	var b []byte
	for _, e := range []string{
		`{"type":"message_start","message":{"id":"msg_bdrk_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`,
		`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":5,"invocationLatency":812,"firstByteLatency":301}}`,
	} {
		b = chunkFrame(b, e)
	}
	return b
}

func TestInvokeAnthropicStream(t *testing.T) {
	s, kinds, err := classifyInvoke(t, anthropicChunks())
	if err != nil {
		t.Fatal(err)
	}
	want := []protocol.Kind{Metadata, Metadata, Reasoning, Metadata, Metadata, Text, Metadata, Done, Done}
	if len(kinds) != len(want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i]&^Metadata != want[i]&^Metadata || kinds[i] == 0 {
			t.Errorf("chunk %d: %s, want %s", i, kinds[i], want[i])
		}
	}
	if s.Terminal() != protocol.TerminalDone || s.FinishReason() != "end_turn" || s.VisibleText() != "Hello" {
		t.Errorf("terminal %v finish %q text %q", s.Terminal(), s.FinishReason(), s.VisibleText())
	}
	if tok := s.Tokens(); tok.Input != 12 || tok.Output != 5 {
		t.Errorf("tokens %+v", tok)
	}
	if ms, ok := s.ProviderLatencyMs(); !ok || ms != 812 {
		t.Errorf("provider latency %d %v, want invocationLatency 812", ms, ok)
	}
	if c := s.Counts(); c.Unknown != 0 || c.Text != 1 || c.Reasoning != 1 {
		t.Errorf("counts %+v", c)
	}
}

// The other model families: each one's text, finish reason, usage and
// Bedrock's invocation latency.
func TestInvokeModelFamilies(t *testing.T) {
	metrics := `"amazon-bedrock-invocationMetrics":{"inputTokenCount":9,"outputTokenCount":4,"invocationLatency":640,"firstByteLatency":200}`
	for _, tc := range []struct {
		name, text, finish string
		in, out            int
		events             []string
	}{
		{"nova", "Hi there", "end_turn", 10, 3, []string{
			`{"messageStart":{"role":"assistant"}}`,
			`{"contentBlockDelta":{"delta":{"text":"Hi"},"contentBlockIndex":0}}`,
			`{"contentBlockDelta":{"delta":{"text":" there"},"contentBlockIndex":0}}`,
			`{"contentBlockStop":{"contentBlockIndex":0}}`,
			`{"messageStop":{"stopReason":"end_turn"}}`,
			`{"metadata":{"usage":{"inputTokens":10,"outputTokens":3},"metrics":{},"trace":{}},` + metrics + `}`,
		}},
		{"llama", "Hi there", "stop", 9, 4, []string{
			`{"generation":"Hi","prompt_token_count":9,"generation_token_count":1,"stop_reason":null}`,
			`{"generation":" there","prompt_token_count":null,"generation_token_count":2,"stop_reason":null}`,
			`{"generation":"","prompt_token_count":null,"generation_token_count":4,"stop_reason":"stop",` + metrics + `}`,
		}},
		{"mistral", "Hi there", "stop", 9, 4, []string{
			`{"outputs":[{"text":"Hi","stop_reason":null}]}`,
			`{"outputs":[{"text":" there","stop_reason":"stop"}],` + metrics + `}`,
		}},
		{"titan", "Hi there", "FINISH", 9, 4, []string{
			`{"outputText":"Hi","index":0,"totalOutputTextTokenCount":null,"completionReason":null,"inputTextTokenCount":9}`,
			`{"outputText":" there","index":0,"totalOutputTextTokenCount":4,"completionReason":"FINISH","inputTextTokenCount":null,` + metrics + `}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			for _, e := range tc.events {
				b = chunkFrame(b, e)
			}
			s, kinds, err := classifyInvoke(t, b)
			if err != nil {
				t.Fatal(err)
			}
			if s.VisibleText() != tc.text || s.Terminal() != protocol.TerminalDone || s.FinishReason() != tc.finish {
				t.Errorf("text %q terminal %v finish %q (kinds %v)", s.VisibleText(), s.Terminal(), s.FinishReason(), kinds)
			}
			if tok := s.Tokens(); tok.Input != tc.in || tok.Output != tc.out {
				t.Errorf("tokens %+v, want %d in %d out", tok, tc.in, tc.out)
			}
			if ms, ok := s.ProviderLatencyMs(); !ok || ms != 640 {
				t.Errorf("provider latency %d %v", ms, ok)
			}
			if c := s.Counts(); c.Unknown != 0 || c.Text != 2 {
				t.Errorf("counts %+v", c)
			}
		})
	}
	// A family whose events are not read (Cohere's) is relayed and
	// counted as unknown: no text, no finish; the metrics still count.
	b := chunkFrame(nil, `{"is_finished":false,"event_type":"text-generation","text":"Hi"}`)
	b = chunkFrame(b, `{"is_finished":true,"event_type":"stream-end","finish_reason":"COMPLETE",`+metrics+`}`)
	s, kinds, err := classifyInvoke(t, b)
	if err != nil || len(kinds) != 2 || kinds[0] != Unknown || s.Counts().Text != 0 {
		t.Errorf("cohere: %v %v %+v", err, kinds, s.Counts())
	}
	if tok := s.Tokens(); tok.Output != 4 {
		t.Errorf("cohere tokens %+v, want the metrics' 4", tok)
	}
	// A chunk whose payload is not base64 of JSON, and an exception.
	b = eventstream.Append(nil, []eventstream.Header{{Name: ":event-type", Value: "chunk"}, {Name: ":message-type", Value: "event"}}, []byte(`{"bytes":"%%%"}`))
	b = chunkFrame(b, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`)
	b = eventstream.AppendException(b, "modelStreamErrorException", []byte(`{"message":"The model stopped"}`))
	s, kinds, err = classifyInvoke(t, b)
	if err != nil || len(kinds) != 3 || kinds[0] != Unknown || kinds[1] != Text || kinds[2] != Error {
		t.Errorf("bad chunk, text, exception: %v %v", err, kinds)
	}
	if s.Terminal() != protocol.TerminalError || s.ErrorCode() != "modelStreamErrorException" {
		t.Errorf("terminal %v code %q", s.Terminal(), s.ErrorCode())
	}
}

func TestInvokeResponse(t *testing.T) {
	for _, tc := range []struct {
		name, body, finish string
		in, out            int
		kinds              protocol.Kind
	}{
		{"anthropic", `{"id":"msg_bdrk_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":5}}`, "end_turn", 12, 5, Text | Done},
		{"nova", `{"output":{"message":{"content":[{"text":"Hello"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":3,"totalTokens":13}}`, "end_turn", 10, 3, Text | Done},
		{"llama", `{"generation":"Hello","prompt_token_count":9,"generation_token_count":4,"stop_reason":"stop"}`, "stop", 9, 4, Text | Done},
		{"titan", `{"inputTextTokenCount":9,"results":[{"tokenCount":4,"outputText":"Hello","completionReason":"FINISH"}]}`, "FINISH", 9, 4, Text | Done},
	} {
		info, err := protocol.ParseResponse(InvokeAPI, []byte(tc.body))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if info.Kinds&tc.kinds != tc.kinds || info.FinishReason != tc.finish || info.Tokens.Input != tc.in || info.Tokens.Output != tc.out {
			t.Errorf("%s: %+v", tc.name, info)
		}
	}
	info, err := protocol.ParseResponse(InvokeAPI, []byte(`{"outputs":[{"text":"Hello","stop_reason":"stop"}]}`))
	if err != nil || !info.Text || info.FinishReason != "stop" {
		t.Errorf("mistral: %+v %v", info, err)
	}
	info, err = protocol.ParseResponse(InvokeAPI, []byte(`{"message":"Too many requests, please wait before trying again."}`))
	if err != nil || !info.Error {
		t.Errorf("error body: %+v %v", info, err)
	}
}

// FuzzInvoke reads any bytes as an InvokeModel stream, seeded with real
// shaped chunks, and classifies every frame: nothing panics, every frame
// is counted once, and the pieces' Raw is the bytes read.
func FuzzInvoke(f *testing.F) {
	whole := anthropicChunks()
	f.Add(whole)
	for rest := whole; len(rest) >= 4; {
		n := int(rest[0])<<24 | int(rest[1])<<16 | int(rest[2])<<8 | int(rest[3])
		f.Add(bytes.Clone(rest[:n]))
		rest = rest[n:]
	}
	f.Add(chunkFrame(nil, `{"generation":"Hi","stop_reason":"stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":1}}`))
	f.Add(chunkFrame(nil, `{"contentBlockDelta":{"delta":{"text":"Hi"}},"metadata":{"usage":{"outputTokens":1}}}`))
	f.Add(chunkFrame(nil, `{"outputs":[{"text":"Hi","stop_reason":null}]}`))
	f.Add(eventstream.AppendException(nil, "throttlingException", []byte(`{"message":"x"}`)))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := protocol.NewStream(InvokeAPI)
		r := eventstream.NewChunkPieces(bytes.NewReader(in), 1<<16)
		n, read := 0, 0
		for {
			p, err := r.Next()
			if err != nil {
				break
			}
			if !bytes.Equal(p.Raw, in[read:read+len(p.Raw)]) {
				t.Fatalf("piece %d's Raw is not the bytes read", n)
			}
			read += len(p.Raw)
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

// BenchmarkInvokeClassify is reading and classifying one chunk of an
// Anthropic text delta, as BenchmarkConverseClassify is for Converse.
func BenchmarkInvokeClassify(b *testing.B) {
	frame := chunkFrame(nil, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" Hello"}}`)
	r := eventstream.NewChunkPieces(&loopReader{data: frame}, 0)
	s := protocol.NewStream(InvokeAPI)
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

// FuzzInvokeResponse reads any bytes as a non-streaming InvokeModel body,
// seeded with each family's shape: a body that is not JSON is never read
// as an answer, and nothing panics.
func FuzzInvokeResponse(f *testing.F) {
	for _, b := range []string{
		`{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":5}}`,
		`{"output":{"message":{"content":[{"text":"Hello"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":3}}`,
		`{"generation":"Hello","prompt_token_count":9,"generation_token_count":4,"stop_reason":"stop"}`,
		`{"inputTextTokenCount":9,"results":[{"tokenCount":4,"outputText":"Hello","completionReason":"FINISH"}]}`,
		`{"outputs":[{"text":"Hello","stop_reason":"stop"}]}`,
		`{"message":"Too many requests"}`,
		`{"type":1,"generation":"x"}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := protocol.ParseResponse(InvokeAPI, body)
		if err == nil && !json.Valid(body) {
			t.Fatalf("invalid JSON %q read as %+v", body, info)
		}
	})
}
