package relay_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/sim"
)

// post sends body to path with the given header and returns the response
// and its whole body.
func post(t *testing.T, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestClientStringsBounded: a client's model name reaches no error, log or
// record unbounded: an absurd one is refused with a short 400 in the
// protocol's format (a 20 MiB name once came back as a 20 MiB error body).
func TestClientStringsBounded(t *testing.T) {
	gw, recs, _, _ := allProtocols(t, nil)
	huge := strings.Repeat("m", 4<<20)
	tests := []struct {
		name, path, body, want string
		header                 []string
	}{
		{"chat 4 MiB model", "/v1/chat/completions", `{"model":"` + huge + `","messages":[]}`, `"type":"invalid_request_error"`, []string{"Authorization", "Bearer " + clientKey}},
		{"chat 257 bytes", "/v1/chat/completions", `{"model":"` + strings.Repeat("x", relay.MaxModelBytes+1) + `"}`, `at most 256`, []string{"Authorization", "Bearer " + clientKey}},
		{"chat control characters", "/v1/chat/completions", `{"model":"gpt\nINFO forged=1"}`, `control characters`, []string{"Authorization", "Bearer " + clientKey}},
		// An invalid byte, and a lone surrogate escape: a decoder makes
		// U+FFFD of each; the name is refused rather than rewritten.
		{"chat invalid UTF-8", "/v1/chat/completions", "{\"model\":\"fa\xffst\",\"messages\":[]}", `not valid UTF-8`, []string{"Authorization", "Bearer " + clientKey}},
		{"anthropic lone surrogate", "/v1/messages", `{"model":"fa\udc00st","max_tokens":1,"messages":[]}`, `not valid UTF-8`, []string{"X-Api-Key", clientKey}},
		{"gemini invalid UTF-8 path", "/v1beta/models/fa%FFst:generateContent", `{"contents":[]}`, `not valid UTF-8`, []string{"X-Goog-Api-Key", clientKey}},
		{"anthropic", "/v1/messages", `{"model":"` + huge + `","max_tokens":1}`, `{"type":"error","error":{"type":"invalid_request_error"`, []string{"X-Api-Key", clientKey}},
		{"gemini path", "/v1beta/models/" + strings.Repeat("g", 300) + ":generateContent", `{"contents":[]}`, `"status":"INVALID_ARGUMENT"`, []string{"X-Goog-Api-Key", clientKey}},
		{"gemini method", "/v1beta/models/fast:" + strings.Repeat("q", 100<<10), `{"contents":[]}`, `"status":"NOT_FOUND"`, []string{"X-Goog-Api-Key", clientKey}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, gw.URL+tt.path, tt.body, tt.header...)
			if resp.StatusCode/100 != 4 || !bytes.Contains(b, []byte(tt.want)) {
				t.Fatalf("%d %.300s, want a 4xx with %s", resp.StatusCode, b, tt.want)
			}
			if len(b) > 1024 {
				t.Fatalf("error body of %d bytes: it echoes the client's input", len(b))
			}
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != record.StatusBadRequest || len(rec.Model) > relay.MaxModelBytes || len(rec.Error) > 1024 {
				t.Fatalf("record status %s, model of %d bytes, error of %d", rec.Status, len(rec.Model), len(rec.Error))
			}
		})
	}
	// A long name within the bound is still served.
	resp, _ := do(t, gw.URL, clientKey, call{"chat", "fast", true})
	if resp.StatusCode != 200 {
		t.Fatalf("a normal model answered %d", resp.StatusCode)
	}
}

// TestDuplicateReadKeys: the gateway routes on the members it reads; a body
// that repeats one (exactly, or up to case, which encoding/json folds) could
// route on one value while the upstream acts on the other, so it is refused.
func TestDuplicateReadKeys(t *testing.T) {
	gw, recs, _, infos := allProtocols(t, nil)
	auth := []string{"Authorization", "Bearer " + clientKey}
	for _, body := range []string{
		`{"model":"fast","model":"trace-a","messages":[]}`,
		`{"model":"fast","Model":"trace-a","messages":[]}`,
		`{"model":"fast","stream":false,"stream":true}`,
		`{"model":"fast","stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`,
		`{"model":"fast","metadata":{"user_id":"a","USER_ID":"b"}}`,
		`{"model":"fast","user":"a","user":"b"}`,
		`{"\u006dodel":"fast","model":"trace-a"}`,
	} {
		before := len(infos.all())
		resp, b := post(t, gw.URL+"/v1/chat/completions", body, auth...)
		if resp.StatusCode != 400 || !bytes.Contains(b, []byte("more than once")) {
			t.Errorf("%s: %d %s, want 400 naming the repeated member", body, resp.StatusCode, b)
			continue
		}
		if rec := recs.get(t, resp.Header.Get("X-Request-Id")); rec.Status != record.StatusBadRequest {
			t.Errorf("%s: record status %s", body, rec.Status)
		}
		if len(infos.all()) != before {
			t.Errorf("%s: relayed upstream", body)
		}
	}
	// Members the gateway does not read may repeat (it is the upstream's
	// business), and nested "model" keys are not the request's.
	for _, body := range []string{
		`{"model":"fast","stream":true,"messages":[{"role":"user","content":"a","model":"x"}],"temperature":1,"temperature":0}`,
	} {
		resp, b := post(t, gw.URL+"/v1/chat/completions", body, auth...)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %.200s, want 200", body, resp.StatusCode, b)
		}
	}
}

// TestKeyInURL: ?key= is Gemini's (its SDKs send it); on other routes it is
// refused with a message naming the header to use, even when it is valid.
func TestKeyInURL(t *testing.T) {
	gw, recs, _, _ := allProtocols(t, nil)
	tests := []struct {
		path, body, header string
		code               int
	}{
		{"/v1/chat/completions?key=" + clientKey, `{"model":"fast","messages":[]}`, "Authorization: Bearer", 400},
		{"/v1/responses?key=" + clientKey, `{"model":"fast","input":"x"}`, "Authorization: Bearer", 400},
		{"/v1/messages?key=" + clientKey, `{"model":"fast","max_tokens":5,"messages":[]}`, "x-api-key", 400},
		{"/v1beta/models/fast:generateContent?key=" + clientKey, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, "", 200},
	}
	for _, tt := range tests {
		resp, b := post(t, gw.URL+tt.path, tt.body)
		if resp.StatusCode != tt.code || (tt.header != "" && !bytes.Contains(b, []byte(tt.header))) {
			t.Errorf("%s: %d %s, want %d naming %q", tt.path, resp.StatusCode, b, tt.code, tt.header)
			continue
		}
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if tt.code == 400 && (rec.Status != record.StatusBadRequest || rec.KeyName != "") {
			t.Errorf("%s: record status %s key %q, want bad_request before authentication", tt.path, rec.Status, rec.KeyName)
		}
	}
	// GET /v1/models too.
	req, _ := http.NewRequest("GET", gw.URL+"/v1/models?key="+clientKey, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("GET /v1/models?key= answered %d", resp.StatusCode)
	}
}

// TestUpstreamHeaderTooLarge: response headers past MaxUpstreamHeaderBytes
// are not relayed (they broke the client): a 502 whose record says why.
func TestUpstreamHeaderTooLarge(t *testing.T) {
	big := strings.Repeat("h", 2<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", big)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
	resp, b := do(t, gw.URL, clientKey, call{"chat", "m", true})
	if resp.StatusCode != http.StatusBadGateway || len(resp.Header.Get("X-Huge")) > 0 {
		t.Fatalf("%d with %d header bytes relayed, want 502", resp.StatusCode, len(resp.Header.Get("X-Huge")))
	}
	if !bytes.Contains(b, []byte("response headers exceed")) {
		t.Errorf("body %s does not say why", b)
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.HTTPStatus != 502 || !strings.Contains(rec.Error, "response headers exceed") ||
		len(rec.Attempts) != 1 || !strings.Contains(rec.Attempts[0].Error, "response headers exceed") {
		t.Fatalf("record %s %d %q, attempts %+v", rec.Status, rec.HTTPStatus, rec.Error, rec.Attempts)
	}
}

// TestLargePiecesThroughSmallBuffers: the upstream connection's buffers
// are 1 KiB (NewTransport), and what does not fit them still arrives
// whole: a 3 KB response header, a 40 KB event, and 300 events written
// in one burst, relayed byte for byte.
func TestLargePiecesThroughSmallBuffers(t *testing.T) {
	long := strings.Repeat("v", 3000)
	var stream strings.Builder
	stream.WriteString(`data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", 40000) + `"}}]}` + "\n\n")
	for i := range 300 {
		fmt.Fprintf(&stream, `data: {"choices":[{"delta":{"content":"%d "}}]}`+"\n\n", i)
	}
	stream.WriteString("data: [DONE]\n\n")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Long", long)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, stream.String())
	}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
	resp, b := do(t, gw.URL, clientKey, call{"chat", "m", true})
	if resp.StatusCode != 200 || resp.Header.Get("X-Long") != long {
		t.Fatalf("status %d, X-Long of %d bytes", resp.StatusCode, len(resp.Header.Get("X-Long")))
	}
	if string(b) != stream.String() {
		t.Fatalf("relayed %d bytes, upstream sent %d", len(b), stream.Len())
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusOK || rec.Events.Text != 301 || rec.Events.Done != 1 {
		t.Errorf("record %s with events %+v, want ok with 301 text and 1 done", rec.Status, rec.Events)
	}
}

// TestNonStreamingBodyCapture: a non-streaming answer is relayed byte for
// byte and its usage read, whether the upstream declared its length or not,
// and one past the capture bound (8 MiB) is relayed whole without it.
func TestNonStreamingBodyCapture(t *testing.T) {
	answer := func(text string) string {
		return `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + text +
			`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}`
	}
	for _, c := range []struct {
		name     string
		body     string
		declared bool
		usage    bool
	}{
		{"small, declared", answer("hi"), true, true},
		{"1 MB, chunked", answer(strings.Repeat("x", 1<<20)), false, true},
		{"1 MB, declared", answer(strings.Repeat("x", 1<<20)), true, true},
		{"9 MB, chunked", answer(strings.Repeat("x", 9<<20)), false, false},
		{"9 MB, declared", answer(strings.Repeat("x", 9<<20)), true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if c.declared {
					w.Header().Set("Content-Length", strconv.Itoa(len(c.body)))
				}
				for b := c.body; b != ""; {
					n := min(len(b), 100_000)
					io.WriteString(w, b[:n])
					w.(http.Flusher).Flush()
					b = b[n:]
				}
			}))
			t.Cleanup(up.Close)
			gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
			resp, b := do(t, gw.URL, clientKey, call{"chat", "m", false})
			if resp.StatusCode != 200 || string(b) != c.body {
				t.Fatalf("status %d, relayed %d bytes of %d", resp.StatusCode, len(b), len(c.body))
			}
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			got := rec.Tokens.Output != nil && *rec.Tokens.Output == 7 && rec.Tokens.Source == record.TokensUsage
			if rec.Status != record.StatusOK || got != c.usage {
				t.Errorf("record %s, output tokens from usage %v, want %v", rec.Status, got, c.usage)
			}
		})
	}
}

// TestFailedAttemptSaysWhy: the relayed attempt of a request that failed
// carries its error, not an empty string.
func TestFailedAttemptSaysWhy(t *testing.T) {
	profiles := sim.Builtin()
	profiles["stall-long"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 50, TPS: 200, Fault: "stall_after:10:5000"}
	up, _ := upstream(t, profiles)
	short := fastTimeouts
	short.Idle = 300 * time.Millisecond
	gw, recs := gateway(t, channel("sim-openai", "openai", up.URL, short))
	for _, model := range []string{"flaky", "truncate", "stall-long"} {
		resp, _ := do(t, gw.URL, clientKey, call{"chat", model, true})
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if rec.Status == record.StatusOK || len(rec.Attempts) == 0 {
			t.Fatalf("%s: status %s, %d attempts", model, rec.Status, len(rec.Attempts))
		}
		at := rec.Attempts[len(rec.Attempts)-1]
		if at.Status != rec.Status || at.Error == "" || at.Error != rec.Error {
			t.Errorf("%s: attempt %s %q, request %s %q", model, at.Status, at.Error, rec.Status, rec.Error)
		}
	}
}

// TestLongAnswerCountedWhole relays a 30,000-token answer (about 120 KB of
// text, twice what a stream kept uncounted before) from an upstream that
// reports no usage, its events 1 ms apart in batches so that the relay
// waits between them. The gateway counts the text as it settles, while it
// waits: the record's visible tokens are exactly the simulator's, where
// counting the first 64 KiB and extrapolating was about 5 % off.
func TestLongAnswerCountedWhole(t *testing.T) {
	up, _ := upstream(t, map[string]sim.Profile{"long": {TextMs: sim.Ms(0), VisibleTokens: 30000, TPS: 30000}})
	ch := channel("sim-openai", "openai", up.URL, fastTimeouts)
	ch.NoStreamUsage = true
	gw, recs := gateway(t, ch)
	resp, body := do(t, gw.URL, clientKey, call{"chat", "long", true})
	if resp.StatusCode != http.StatusOK || len(body) < 100_000 {
		t.Fatalf("status %d, %d bytes", resp.StatusCode, len(body))
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Tokens.Source != record.TokensEstimate || rec.Tokens.Visible == nil || *rec.Tokens.Visible != 30000 {
		t.Errorf("visible tokens %s from %q, want 30000 estimated", fmtInt(rec.Tokens.Visible), rec.Tokens.Source)
	}
}

func fmtInt(p *int) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(*p)
}
