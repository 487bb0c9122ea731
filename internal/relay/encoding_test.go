package relay_test

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/record"
)

// TestUnaskedCompressionDecoded: the gateway asks upstreams for no
// content coding; an upstream that gzips its answer anyway does not pass
// the gzip on to a client that said Accept-Encoding: identity (issue 50).
// The gateway decodes it (gzip and deflate: what the standard library
// reads) and relays it plain; a coding it cannot read (br) is a failed
// attempt, answered 502, never relayed as it came.
func TestUnaskedCompressionDecoded(t *testing.T) {
	t.Parallel()
	const answer = `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	const events = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"}}]}\n\n" +
		"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ae := r.Header.Get("Accept-Encoding"); ae != "" {
			t.Errorf("the gateway asked the upstream for %q", ae)
		}
		stream := strings.Contains(readAll(r), `"stream":true`)
		switch {
		case strings.Contains(r.Header.Get("User-Agent"), "brotli"):
			w.Header().Set("Content-Encoding", "br")
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("\x1b\x00 not really brotli"))
		case stream:
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(gz(events))
		default:
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "application/json")
			w.Write(gz(answer))
		}
	}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, channel("gz", "openai", up.URL, fastTimeouts))
	auth := []string{"Authorization", "Bearer " + clientKey, "Accept-Encoding", "identity"}

	resp, body := post(t, gw.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, auth...)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || string(body) != answer {
		t.Fatalf("non-streaming: %d, Content-Encoding %q, body %.80q", resp.StatusCode, resp.Header.Get("Content-Encoding"), body)
	}
	if rec := recs.get(t, resp.Header.Get("X-Request-Id")); rec.Status != record.StatusOK || rec.Tokens.Output == nil || *rec.Tokens.Output != 2 {
		t.Errorf("non-streaming record: %s, output tokens %+v", rec.Status, rec.Tokens.Output)
	}

	resp, body = post(t, gw.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, auth...)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("stream: %d, Content-Encoding %q, body %.80q", resp.StatusCode, resp.Header.Get("Content-Encoding"), body)
	}
	if rec := recs.get(t, resp.Header.Get("X-Request-Id")); rec.Status != record.StatusOK || !rec.Fields.FirstTextDeltaMs.Valid() {
		t.Errorf("stream record: %s, first text %v", rec.Status, rec.Fields.FirstTextDeltaMs)
	}

	resp, body = post(t, gw.URL+"/v1/chat/completions", `{"model":"m","messages":[]}`, append(auth, "User-Agent", "brotli")...)
	if resp.StatusCode != 502 || resp.Header.Get("Content-Encoding") != "" || !strings.Contains(string(body), "content coding") {
		t.Fatalf("br: %d, Content-Encoding %q, body %.200s", resp.StatusCode, resp.Header.Get("Content-Encoding"), body)
	}
	if rec := recs.get(t, resp.Header.Get("X-Request-Id")); rec.Status != record.StatusUpstreamStreamError || rec.Attempts[0].Error == "" {
		t.Errorf("br record: %s, attempts %+v", rec.Status, rec.Attempts)
	}
}

func readAll(r *http.Request) string {
	var b bytes.Buffer
	b.ReadFrom(r.Body)
	return b.String()
}
