package relay

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestPromptReader: the pieces of a spliced body read as one, whatever the
// reader's buffer, and the reader lets go of each piece once read.
func TestPromptReader(t *testing.T) {
	body := []byte(`{"model":"m","stream":true,"messages":[]}`)
	at := bytes.LastIndexByte(body, '}')
	want := string(body[:at]) + `,"stream_options":{"include_usage":true}` + string(body[at:])
	cr := &clientRequest{body: body, usage: &splice{at: at, cut: at, insert: `,"stream_options":{` + includeUsage + "}"}}
	p, injected, ok := cr.payload(false)
	if !injected || !ok || p.size() != len(want) || string(p.bytes()) != want {
		t.Fatalf("payload %q (injected %v, ok %v), want %q", p.bytes(), injected, ok, want)
	}
	for size := 1; size <= 8; size++ {
		r := &promptReader{p: p}
		var got strings.Builder
		buf := make([]byte, size)
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if got.String() != want {
			t.Errorf("read %d bytes at a time: %q, want %q", size, got.String(), want)
		}
		if r.p.size() != 0 || slices.ContainsFunc(r.p[:], func(b []byte) bool { return b != nil }) {
			t.Errorf("read %d bytes at a time: the reader still holds %q", size, r.p)
		}
	}
	if err := iotest.TestReader(&promptReader{p: p}, []byte(want)); err != nil {
		t.Error(err)
	}
	if p, injected, _ := cr.payload(true); injected || string(p.bytes()) != string(body) {
		t.Errorf("a channel without the usage option gets %q, want the body as sent", p.bytes())
	}
	cr.release()
	if _, _, ok := cr.payload(false); ok {
		t.Error("payload after release: want none")
	}
}

// TestReadBody: a declared length sizes the buffer, but only once the
// client has sent firstRead bytes of it; a body that is not the length
// declared still reads whole.
func TestReadBody(t *testing.T) {
	const limit = 32 << 20
	for _, size := range []int{10_000, 3 * firstRead} {
		body := strings.Repeat("0123456789", size/10)
		for _, tt := range []struct {
			name     string
			declared int64
		}{{"exact", int64(len(body))}, {"unknown", -1}, {"declared short", 100}, {"declared long", int64(len(body)) * 3}, {"larger than the limit", limit + 1}} {
			for _, r := range []io.Reader{strings.NewReader(body), iotest.HalfReader(strings.NewReader(body)), iotest.DataErrReader(strings.NewReader(body))} {
				got, err := readBody(context.Background(), r, tt.declared, limit, nil)
				if err != nil || string(got) != body {
					t.Errorf("%d bytes, %s: read %d bytes (%v)", len(body), tt.name, len(got), err)
				}
			}
		}
		if got, _ := readBody(context.Background(), strings.NewReader(body), int64(len(body)), limit, nil); cap(got) != len(body)+1 {
			t.Errorf("declared length: a buffer of %d bytes for a body of %d, want %d", cap(got), len(body), len(body)+1)
		}
	}
	// A client that declares megabytes and sends ten bytes gets a buffer
	// of firstRead, not of what it declared.
	if got, _ := readBody(context.Background(), strings.NewReader("0123456789"), 4<<20, limit, nil); cap(got) > firstRead {
		t.Errorf("declared %d, sent 10: a buffer of %d bytes, want at most %d", 4<<20, cap(got), firstRead)
	}
	// Nor does a length over the limit size anything.
	if got, _ := readBody(context.Background(), strings.NewReader("0123456789"), 2<<20, 1<<20, nil); cap(got) > 1<<10 {
		t.Errorf("declared over the limit: a buffer of %d bytes", cap(got))
	}
	errBroken := io.ErrUnexpectedEOF
	if _, err := readBody(context.Background(), iotest.ErrReader(errBroken), 10, limit, nil); err != errBroken {
		t.Errorf("a failing body: %v, want %v", err, errBroken)
	}
}

// usageBody returns the body with the usage option in one piece, or nil
// (for the tests that read it whole).
func (cr *clientRequest) usageBody() []byte {
	p, injected, _ := cr.payload(false)
	if !injected {
		return nil
	}
	return p.bytes()
}

// bytes returns the body in one piece.
func (p prompt) bytes() []byte { return slices.Concat(p[:]...) }

// TestPayloadModel: a channel that knows the model by another name gets
// the client's body with only the model's value replaced, wherever the
// member is and whatever spacing it has, beside the usage option spliced
// before or after it; the client's own body is left as it was.
func TestPayloadModel(t *testing.T) {
	ep := endpoint{hasBody: true, usage: true}
	for _, tt := range []struct{ body, want string }{
		{`{"model":"m","stream":true}`, `{"model":"dep-1","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true, "model" :  "m" }`, `{"stream":true, "model" :"dep-1" ,"stream_options":{"include_usage":true}}`},
		{`{"stream_options":{"include_usage":false},"model":"m","stream":true}`, `{"stream_options":{"include_usage":true},"model":"dep-1","stream":true}`},
		{`{"stream":true,"stream_options":null,"model":"m"}`, `{"stream":true,"stream_options":{"include_usage":true},"model":"dep-1"}`},
		{`{"model":"\u006d","stream":false}`, `{"model":"dep-1","stream":false}`},
	} {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		orig := []byte(tt.body)
		cr, herr := parseRequest(ep, r, bytes.Clone(orig))
		if herr != nil {
			t.Fatalf("%s: %v", tt.body, herr)
		}
		p, _, ok := cr.payloadFor(false, "dep-1")
		if got := string(p.bytes()); !ok || got != tt.want {
			t.Errorf("%s: upstream body %s, want %s", tt.body, got, tt.want)
		}
		if p, _, _ := cr.payloadFor(false, "m"); !strings.Contains(string(p.bytes()), `"m"`) && !strings.Contains(string(p.bytes()), `\u006d`) {
			t.Errorf("%s: the name asked changed the body: %s", tt.body, p.bytes())
		}
		if p, _, _ := cr.payloadFor(true, `we"ird`); !strings.Contains(string(p.bytes()), `"model":"we\"ird"`) && !strings.Contains(string(p.bytes()), `:"we\"ird"`) {
			t.Errorf("%s: a name with a quote is not JSON-escaped: %s", tt.body, p.bytes())
		}
		if !bytes.Equal(cr.body, orig) {
			t.Errorf("%s: the client's body was changed: %s", tt.body, cr.body)
		}
	}
}
