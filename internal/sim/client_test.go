package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/testenv"
)

// This file is the tests' client: it sends a request the way an SDK would
// and reads the answer with the project's sse.Reader, noting when each
// milestone arrived. Its classifier is a small one of its own, for the
// simulator's own output (the real one lives in internal/protocol).

var allAPIs = []API{APIChat, APICompletions, APIResponses, APIAnthropic, APIGemini}

// absent marks a milestone that did not arrive.
const absent = time.Duration(-1)

// observed is what a client saw of one response.
type observed struct {
	status                                    int
	header                                    http.Header
	headers                                   time.Duration
	firstEvent, firstResponse, firstText, end time.Duration
	closed                                    time.Duration // when the body ended (EOF or error)
	raw                                       []byte
	events                                    []observedEvent
	text, reasoning, toolArgs                 strings.Builder
	usageIn, usageOut, usageReasoning         int
	hasUsage                                  bool
	terminal, streamError                     bool
	readErr                                   error // what ended the body other than io.EOF
	body                                      []byte
}

type observedEvent struct {
	at   time.Duration
	typ  string
	data string
	// textLen is the length of the visible text received up to and
	// including this event.
	textLen int
}

// testServer starts a simulator with profiles over real loopback HTTP.
func testServer(t testing.TB, opts Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(opts))
	t.Cleanup(srv.Close)
	return srv
}

// requestFor builds a minimal valid request of api for model.
func requestFor(ctx context.Context, base string, api API, model string, stream bool, extra map[string]any) *http.Request {
	body := map[string]any{}
	path := ""
	switch api {
	case APIChat:
		path = "/v1/chat/completions"
		body["messages"] = []any{map[string]any{"role": "user", "content": "Say hello."}}
	case APICompletions:
		path = "/v1/completions"
		body["prompt"] = "Say hello."
	case APIResponses:
		path = "/v1/responses"
		body["input"] = "Say hello."
	case APIAnthropic:
		path = "/v1/messages"
		body["max_tokens"] = 1024
		body["messages"] = []any{map[string]any{"role": "user", "content": "Say hello."}}
	case APIGemini:
		path = "/v1beta/models/" + model + ":generateContent"
		if stream {
			path = "/v1beta/models/" + model + ":streamGenerateContent?alt=sse"
		}
		body["contents"] = []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "Say hello."}}}}
	case APIEmbeddings:
		path = "/v1/embeddings"
		body["input"] = "Say hello."
	}
	if api != APIGemini {
		body["model"] = model
		if stream {
			body["stream"] = true
		}
	}
	for k, v := range extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if api == APIAnthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	return req
}

// do sends req and reads the whole answer.
func do(t testing.TB, req *http.Request, api API) *observed {
	t.Helper()
	o := &observed{firstEvent: absent, firstResponse: absent, firstText: absent, end: absent}
	start := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		o.readErr = err
		return o
	}
	defer resp.Body.Close()
	o.status, o.header, o.headers = resp.StatusCode, resp.Header, time.Since(start)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		o.body, o.readErr = io.ReadAll(resp.Body)
		o.end = time.Since(start)
		return o
	}
	rd := sse.NewReader(io.TeeReader(resp.Body, writerFunc(func(p []byte) { o.raw = append(o.raw, p...) })), 0)
	for {
		p, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				o.readErr = err
			}
			o.closed = time.Since(start)
			break
		}
		at := time.Since(start)
		o.end = at
		if p.Kind != sse.PieceEvent {
			continue
		}
		ev := observedEvent{at: at, typ: string(p.Event.Type), data: string(p.Event.Data)}
		o.classify(api, ev)
		ev.textLen = o.text.Len()
		o.events = append(o.events, ev)
	}
	return o
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// classify notes the milestones and usage of one event.
func (o *observed) classify(api API, ev observedEvent) {
	if o.firstEvent == absent && !(api == APIAnthropic && ev.typ == "ping") {
		o.firstEvent = ev.at
	}
	var reasoning, tool, text string
	if ev.data == "[DONE]" {
		o.terminal = true
		return
	}
	var m map[string]any
	if json.Unmarshal([]byte(ev.data), &m) != nil {
		return
	}
	get := func(v any, path ...any) any {
		for _, p := range path {
			switch k := p.(type) {
			case string:
				mm, _ := v.(map[string]any)
				v = mm[k]
			case int:
				a, _ := v.([]any)
				if k >= len(a) {
					return nil
				}
				v = a[k]
			}
		}
		return v
	}
	str := func(v any) string { s, _ := v.(string); return s }
	num := func(v any) int { f, _ := v.(float64); return int(f) }
	if _, ok := m["error"]; ok && api != APIAnthropic {
		o.streamError = true
	}
	switch api {
	case APIChat, APICompletions:
		d := get(m, "choices", 0, "delta")
		text = str(get(d, "content")) + str(get(m, "choices", 0, "text"))
		reasoning = str(get(d, "reasoning_content"))
		tool = str(get(d, "tool_calls", 0, "function", "arguments"))
		if u := get(m, "usage"); u != nil {
			o.hasUsage = true
			o.usageIn, o.usageOut = num(get(u, "prompt_tokens")), num(get(u, "completion_tokens"))
			o.usageReasoning = num(get(u, "completion_tokens_details", "reasoning_tokens"))
		}
	case APIResponses:
		switch ev.typ {
		case "response.output_text.delta":
			text = str(m["delta"])
		case "response.reasoning_summary_text.delta":
			reasoning = str(m["delta"])
		case "response.function_call_arguments.delta":
			tool = str(m["delta"])
		case "response.completed":
			o.terminal, o.hasUsage = true, true
			u := get(m, "response", "usage")
			o.usageIn, o.usageOut = num(get(u, "input_tokens")), num(get(u, "output_tokens"))
			o.usageReasoning = num(get(u, "output_tokens_details", "reasoning_tokens"))
		case "error":
			o.streamError = true
		}
	case APIAnthropic:
		switch ev.typ {
		case "content_block_delta":
			switch str(get(m, "delta", "type")) {
			case "text_delta":
				text = str(get(m, "delta", "text"))
			case "thinking_delta":
				reasoning = str(get(m, "delta", "thinking"))
			case "input_json_delta":
				tool = str(get(m, "delta", "partial_json"))
			}
		case "message_start":
			o.usageIn = num(get(m, "message", "usage", "input_tokens"))
		case "message_delta":
			o.hasUsage = true
			o.usageOut = num(get(m, "usage", "output_tokens"))
		case "message_stop":
			o.terminal = true
		case "error":
			o.streamError = true
		}
	case APIGemini:
		for _, p := range func() []any { a, _ := get(m, "candidates", 0, "content", "parts").([]any); return a }() {
			if get(p, "thought") == true {
				reasoning += str(get(p, "text"))
			} else if fc := get(p, "functionCall"); fc != nil {
				b, _ := json.Marshal(get(fc, "args"))
				tool += string(b)
			} else {
				text += str(get(p, "text"))
			}
		}
		if u := get(m, "usageMetadata"); u != nil {
			o.hasUsage = true
			o.usageIn = num(get(u, "promptTokenCount"))
			o.usageOut = num(get(u, "candidatesTokenCount")) + num(get(u, "thoughtsTokenCount"))
			o.usageReasoning = num(get(u, "thoughtsTokenCount"))
		}
		if str(get(m, "candidates", 0, "finishReason")) != "" {
			o.terminal = true
		}
	}
	o.text.WriteString(text)
	o.reasoning.WriteString(reasoning)
	o.toolArgs.WriteString(tool)
	if o.firstResponse == absent && strings.TrimSpace(text+reasoning+tool) != "" {
		o.firstResponse = ev.at
	}
	if o.firstText == absent && strings.TrimSpace(text) != "" {
		o.firstText = ev.at
	}
}

// near fails unless got is within [want−early, want+late], late by more
// only as far as this process's timers were seen to fire late during the
// measurement, twice over (the simulator's wait and the client's read each
// wait for their turn on a loaded machine). Nothing may come early.
func near(t testing.TB, what string, got, want, early, late time.Duration) {
	t.Helper()
	if want == absent || got == absent {
		if got != want {
			t.Errorf("%s = %v, want %v (-1ns: absent)", what, got, want)
		}
		return
	}
	slip := testenv.Slip(got + time.Second)
	if got < want-early || got > want+late+2*slip {
		t.Errorf("%s = %.1f ms, want %.1f ms (−%v/+%v, timers ran up to %v late meanwhile)", what, ms(got), ms(want), early, late+2*slip, slip.Round(time.Millisecond))
	}
}

func offset(o interface{ Get() (time.Duration, bool) }) time.Duration {
	d, ok := o.Get()
	if !ok {
		return absent
	}
	return d
}
