package relay

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/anthropic"
	"github.com/ttfx/ttfx/internal/provider/gemini"
	"github.com/ttfx/ttfx/internal/provider/openai"
	"github.com/ttfx/ttfx/internal/record"
)

var completeBodies = map[protocol.API]string{
	openai.Chat:      `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	openai.Responses: `{"id":"r","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hello there"}]}],"usage":{"input_tokens":3,"output_tokens":2}}`,
	anthropic.API:    `{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"Hello there"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`,
	gemini.API:       `{"candidates":[{"content":{"parts":[{"text":"Hello there"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2}}`,
}

// TestBodyOutcome: a body cut anywhere is truncated, garbage or the wrong
// shape is a stream error, a complete answer is left alone; a non-SSE
// stream (a Gemini JSON array) is judged by completeness only.
func TestBodyOutcome(t *testing.T) {
	for api, body := range completeBodies {
		if _, err := protocol.ParseResponse(api, []byte(body)); err != nil {
			t.Fatalf("%s: the complete body does not parse: %v", api, err)
		}
		for _, cut := range []int{0, 1, len(body) / 3, len(body) / 2, len(body) - 1} {
			if st, _ := bodyOutcome(api, []byte(body[:cut]), false); st != record.StatusTruncated {
				t.Errorf("%s cut at %d: %q, want truncated", api, cut, st)
			}
		}
		for _, junk := range []string{"<html>502</html>", `{"a":1}{"b":2}`, `{"unrelated":true}`, `[1,2]`} {
			if st, _ := bodyOutcome(api, []byte(junk), false); st != record.StatusUpstreamStreamError {
				t.Errorf("%s body %q: %q, want upstream_stream_error", api, junk, st)
			}
		}
	}
	array := `[` + completeBodies[gemini.API] + `,` + completeBodies[gemini.API] + `]`
	if st, _ := bodyOutcome(gemini.API, []byte(array), true); st != "" {
		t.Errorf("a complete Gemini JSON array: %q", st)
	}
	if st, _ := bodyOutcome(gemini.API, []byte(array[:len(array)-10]), true); st != record.StatusTruncated {
		t.Errorf("a cut Gemini JSON array: %q", st)
	}
}

// FuzzBodyOutcome: upstream body bytes never crash the classifier, and
// whatever it says, a body that parses as the API's response is never
// called broken.
func FuzzBodyOutcome(f *testing.F) {
	for _, b := range completeBodies {
		f.Add([]byte(b), uint8(0), false)
		f.Add([]byte(b[:len(b)/2]), uint8(1), false)
	}
	f.Add([]byte(`[{"candidates":[]}`), uint8(3), true)
	f.Add([]byte("\xff{"), uint8(2), false)
	apis := []protocol.API{openai.Chat, openai.Responses, anthropic.API, gemini.API}
	f.Fuzz(func(t *testing.T, body []byte, which uint8, streamed bool) {
		api := apis[int(which)%len(apis)]
		st, msg := bodyOutcome(api, body, streamed)
		if (st == "") != (msg == "") {
			t.Fatalf("status %q with message %q", st, msg)
		}
		if streamed && st == record.StatusUpstreamStreamError && json.Valid(body) {
			t.Fatalf("a complete JSON stream called broken: %q", body)
		}
		if st == record.StatusTruncated && json.Valid(body) {
			t.Fatalf("valid JSON called truncated: %q", body)
		}
	})
}

// TestStreamErrorEventJSON: every in-band error event is one SSE event of
// valid JSON, whatever the message holds.
func TestStreamErrorEventJSON(t *testing.T) {
	for _, api := range []string{apiChat, apiResponses, apiAnthropic, apiGemini} {
		for _, e := range []*HTTPError{
			{Code: http.StatusBadGateway, Msg: "upstream stream failed: \"quoted\"\n<b>", Status: record.StatusUpstreamStreamError},
			{Code: http.StatusGatewayTimeout, Msg: "idle", Status: record.StatusIdleTimeout},
		} {
			ev := streamErrorEvent(api, e, 7)
			data := ev[len(ev)-2:]
			if string(data) != "\n\n" {
				t.Fatalf("%s: event does not end with a blank line: %q", api, ev)
			}
			i := len("data: ")
			if api == apiAnthropic || api == apiResponses {
				i = len("event: error\ndata: ")
			}
			if !json.Valid(ev[i : len(ev)-2]) {
				t.Errorf("%s: data is not JSON: %q", api, ev)
			}
		}
	}
}
