package sim

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

var fuzzAPIs = []API{APIChat, APICompletions, APIResponses, APIAnthropic, APIGemini, APIEmbeddings}

// FuzzParseRequest feeds arbitrary bodies to the request parser of every
// API: it must never panic, and what it accepts must be usable.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"fast","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"fast","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"system":"s"}`,
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"s"}]}}`,
		`{"model":"fast","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]}]}`,
		`{"model":"fast","input":[[1,2],[3]],"dimensions":4,"encoding_format":"base64"}`,
		`{"model":"fast","prompt":["a","b"]}`,
		`{"model":5}`, `null`, `[]`, `{"model":"fast","messages":null}`, `{"stream_options":7}`, "\xff",
	} {
		for i := range fuzzAPIs {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		api := fuzzAPIs[int(which)%len(fuzzAPIs)]
		req, err := parseRequest(units[api], body, "fast", api == APIGemini)
		if err != nil {
			if err.status < 400 || err.status > 499 || err.msg == "" {
				t.Fatalf("bad error %+v", err)
			}
			// The error body must be valid in the protocol's format.
			if b := errorBody(wire.LookupAPI(string(api)), err); !bytes.HasPrefix(b, []byte("{")) {
				t.Fatalf("error body %s", b)
			}
			return
		}
		if req.Model == "" {
			t.Fatalf("accepted a request without a model: %q", body)
		}
		if api == APIEmbeddings && len(req.EmbedInputs) == 0 {
			t.Fatalf("accepted embeddings without inputs: %q", body)
		}
		countPrompt(req.prompt)
	})
}

// FuzzHandler sends arbitrary bodies to the simulator's endpoints through
// its real handler: every answer is a complete response with a status.
func FuzzHandler(f *testing.F) {
	paths := []string{"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/completions",
		"/v1beta/models/fast:generateContent", "/v1/embeddings"}
	f.Add(uint8(0), []byte(`{"model":"fast","messages":[{"role":"user","content":"hi"}]}`))
	f.Add(uint8(1), []byte(`{"model":"status-429","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`))
	f.Add(uint8(4), []byte(`{"contents":[]}`))
	f.Add(uint8(5), []byte(`{"model":"fast","input":"x","dimensions":3}`))
	profiles := map[string]Profile{
		"fast":       {TextMs: Ms(0), VisibleTokens: 3, TPS: 1e6},
		"status-429": {Fault: "status:429"},
	}
	s := New(Options{Profiles: profiles})
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := paths[int(which)%len(paths)]
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code < 200 || rec.Code > 599 {
			t.Fatalf("status %d", rec.Code)
		}
		if rec.Code >= 400 && !strings.HasPrefix(rec.Body.String(), "{") {
			t.Fatalf("error without a JSON body: %d %q", rec.Code, rec.Body.String())
		}
	})
}

// FuzzParseRecording parses arbitrary replay files: no panic, every byte
// that is not a timing directive is kept, in order.
func FuzzParseRecording(f *testing.F) {
	for _, name := range []string{"../../testdata/sim/timed.sse", "../../testdata/fixtures/anthropic__messages__text-with-ping.sse"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(": t=1\r\ndata: x\r\n\r\n: t=nope\n\ndata: y"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := parseRecording(data)
		if err != nil {
			return
		}
		var got []byte
		for _, fr := range rec.frames {
			got = append(got, fr.data...)
		}
		if len(got) > len(data) {
			t.Fatalf("replay has more bytes (%d) than the file (%d)", len(got), len(data))
		}
		_, times := rec.schedule(Profile{HeadersMs: 5})
		for i := 1; i < len(times); i++ {
			if times[i] < times[i-1] {
				t.Fatalf("times go back: %v", times)
			}
		}
	})
}

// FuzzJSONString checks appendJSONString against encoding/json.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "\n\r\t\b\f\x00\x1f\x7f", "<&>", "\u2028\u2029", "\xff\xfe", "é“”😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendJSONString(nil, s)), string(marshal(s)); got != want {
			t.Fatalf("appendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}
