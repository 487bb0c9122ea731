package protocol

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sse"
)

// seedStreams adds the recorded streams under 8 KiB to f, whole.
func seedStreams(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/fixtures/*.sse")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(b) < 8192 {
			f.Add(b)
		}
	}
}

// FuzzStream runs whole byte streams through the SSE reader and a Stream
// of each API: every piece is classified, counted once (comment pieces once
// per comment line), and nothing panics.
func FuzzStream(f *testing.F) {
	seedStreams(f)
	f.Add([]byte(": ping\n\ndata:\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, api := range APIs() {
			s := NewStream(api)
			r := sse.NewReader(bytes.NewReader(in), 512)
			want := 0
			for {
				p, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				res := s.Piece(p)
				switch {
				case p.Kind == sse.PieceComment:
					want += commentLines(p.Raw)
				case p.Kind == sse.PieceSkipped:
					if res.Kinds != 0 || res.Event {
						t.Fatalf("%s: skipped block %q classified as %+v", api, p.Raw, res)
					}
				case res.Kinds == 0:
					t.Fatalf("%s: piece %q classified as nothing", api, p.Raw)
				default:
					want++
				}
			}
			c := s.Counts()
			if total := c.Heartbeat + c.Metadata + c.Reasoning + c.Tool + c.Text + c.Done + c.Error + c.Unknown; total != want {
				t.Fatalf("%s: counts %+v sum to %d, want %d", api, c, total, want)
			}
			if len(s.VisibleText()) > maxVisible {
				t.Fatalf("visible text past its bound")
			}
			s.Tokens()
		}
		Detect(in)
	})
}

// FuzzCompact streams any input, repeated to at least 16 KB so that text
// builds up past compactAt, to two Streams of each API: one compacted
// after every piece as the relay does, one not. Their visible token counts
// must agree: counting as the text settles changes nothing, whatever the
// events (malformed ones included).
func FuzzCompact(f *testing.F) {
	seedStreams(f)
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"one word, two\\nlines \"}}]}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 || len(in) > 8192 {
			return
		}
		in = bytes.Repeat(in, (16<<10)/len(in)+1)
		for _, api := range APIs() {
			compacted, whole := NewStream(api), NewStream(api)
			r := sse.NewReader(bytes.NewReader(in), 0)
			for {
				p, err := r.Next()
				if err != nil {
					break
				}
				compacted.Piece(p)
				whole.Piece(p)
				compacted.Compact()
			}
			if whole.c.rawTotal > whole.c.visibleRaw || compacted.c.rawTotal > compacted.c.visibleRaw {
				continue // past a bound both extrapolate, from different places
			}
			if got, want := compacted.Tokens(), whole.Tokens(); got != want {
				t.Fatalf("%s: compacted %+v, whole %+v", api, got, want)
			}
		}
	})
}

// FuzzParseResponse checks that any body either parses or fails with an
// error, and that invalid JSON always fails.
func FuzzParseResponse(f *testing.F) {
	for _, b := range []string{
		`{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
		`{"object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}`,
		`{"type":"message","content":[{"type":"text","text":"x"}],"stop_reason":"end_turn"}`,
		`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}`,
		`{"error":{"code":1,"message":"m","status":"S"}}`,
	} {
		for i := range APIs() {
			f.Add(uint8(i), []byte(b))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		api := APIs()[int(which)%len(APIs())]
		info, err := ParseResponse(api, body)
		if err == nil && !json.Valid(body) {
			t.Fatalf("%s: invalid JSON %q parsed as %+v", api, body, info)
		}
		if err != nil && info != (ResponseInfo{}) {
			t.Fatalf("error with a non-zero result")
		}
		if err == nil && strings.TrimSpace(string(body)) == "" {
			t.Fatalf("empty body parsed")
		}
	})
}
