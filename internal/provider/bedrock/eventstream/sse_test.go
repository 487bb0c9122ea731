package eventstream

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sse"
)

func chunk(dst []byte, event string) []byte {
	return Append(dst, []Header{{":event-type", "chunk"}, {":content-type", "application/json"}, {":message-type", "event"}},
		[]byte(`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(event))+`","p":"abcdefgh"}`))
}

// The Anthropic events inside chunk frames come out as SSE events, one per
// frame, with their type on the event line; an exception becomes
// Anthropic's error event; other frames are skipped.
func TestSSEPieces(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"msg_bdrk_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}`,
		`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":5,"invocationLatency":812,"firstByteLatency":301}}`,
	}
	var b []byte
	for _, e := range events {
		b = chunk(b, e)
	}
	b = AppendEvent(b, "somethingElse", []byte(`{}`))
	b = AppendException(b, "throttlingException", []byte(`{"message":"Too many tokens, please wait before trying again."}`))
	r := NewSSEPieces(&chunkReader{b: b, n: 7}, 0)
	var got strings.Builder
	n, skipped := 0, 0
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind == sse.PieceSkipped {
			skipped++
			continue
		}
		if !bytes.HasSuffix(p.Raw, []byte("\n\n")) || !bytes.Contains(p.Raw, p.Event.Data) {
			t.Errorf("piece %q", p.Raw)
		}
		got.Write(p.Raw)
		n++
	}
	want := ""
	for _, e := range events {
		typ := e[len(`{"type":"`):]
		typ = typ[:strings.IndexByte(typ, '"')]
		want += "event: " + typ + "\ndata: " + e + "\n\n"
	}
	want += "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Too many tokens, please wait before trying again.\"}}\n\n"
	if got.String() != want {
		t.Errorf("got\n%s\nwant\n%s", got.String(), want)
	}
	if n != 7 || skipped != 1 {
		t.Errorf("%d events, %d skipped", n, skipped)
	}
}

func FuzzSSEPieces(f *testing.F) {
	f.Add(chunk(nil, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`))
	f.Add(chunk(nil, "not json"))
	f.Add(AppendException(nil, "modelStreamErrorException", []byte(`{"message":"x"}`)))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewSSEPieces(bytes.NewReader(in), 1<<16)
		for {
			p, err := r.Next()
			if err != nil {
				return
			}
			if len(p.Raw) > 0 && (!bytes.HasSuffix(p.Raw, []byte("\n\n")) || bytes.Count(p.Raw, []byte("\n\n")) != 1 || bytes.IndexByte(p.Event.Data, '\n') >= 0) {
				t.Fatalf("piece %q is not one SSE event", p.Raw)
			}
		}
	})
}
