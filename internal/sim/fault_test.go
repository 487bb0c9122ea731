package sim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/tokens"
)

// faultBase streams 30 visible tokens from 20 ms at 500 t/s, 1 per event.
var faultBase = Profile{HeadersMs: 10, TextMs: Ms(20), VisibleTokens: 30, TPS: 500}

func withFault(f string) Profile { p := faultBase; p.Fault = f; return p }

func TestFaults(t *testing.T) {
	profiles := map[string]Profile{
		"status-503":  withFault("status:503"),
		"status-429":  withFault("status:429"),
		"reset":       withFault("reset_after:12"),
		"reset-0":     withFault("reset_after:0"),
		"stall":       withFault("stall_after:10:150"),
		"truncate":    withFault("truncate"),
		"error-event": withFault("error_event_after:5"),
	}
	infos := make(chan Info, 100)
	srv := testServer(t, Options{Profiles: profiles, OnRequest: func(in Info) { infos <- in }})
	lastInfo := func(t *testing.T) Info {
		t.Helper()
		select {
		case in := <-infos:
			return in
		case <-time.After(2 * time.Second):
			t.Fatal("no OnRequest")
		}
		return Info{}
	}
	ctx := context.Background()

	t.Run("status", func(t *testing.T) {
		for _, api := range allAPIs {
			for _, code := range []int{503, 429} {
				o := do(t, requestFor(ctx, srv.URL, api, "status-"+itoa(code), true, nil), api)
				if o.status != code || len(o.events) > 0 {
					t.Fatalf("%s: status %d, %d events", api, o.status, len(o.events))
				}
				near(t, "error time", o.headers, 10*time.Millisecond, early, late)
				checkErrorFormat(t, api, o.body, code)
				if o.header.Get("Retry-After") == "" {
					t.Errorf("%s %d: no Retry-After", api, code)
				}
				if in := lastInfo(t); in.Fault != "status" || in.Status != code {
					t.Errorf("info %+v", in)
				}
			}
		}
	})

	t.Run("reset", func(t *testing.T) {
		for _, api := range allAPIs {
			for _, tc := range []struct {
				model string
				n     int
			}{{"reset", 12}, {"reset-0", 0}} {
				o := do(t, requestFor(ctx, srv.URL, api, tc.model, true, nil), api)
				if o.status != 200 {
					t.Fatalf("%s: status %d", api, o.status)
				}
				// A cut connection, not a clean end of the body.
				if !errors.Is(o.readErr, io.ErrUnexpectedEOF) {
					t.Errorf("%s %s: read error %v, want unexpected EOF", api, tc.model, o.readErr)
				}
				if o.terminal {
					t.Errorf("%s: a terminal marker before the reset", api)
				}
				if got := tokens.Count(o.text.String()); got != tc.n {
					t.Errorf("%s %s: %d visible tokens before the reset, want %d", api, tc.model, got, tc.n)
				}
				// The cut comes when token N would have been sent.
				near(t, "cut", o.closed, 20*time.Millisecond+time.Duration(tc.n)*2*time.Millisecond, early, late)
				if in := lastInfo(t); in.Fault != "reset" || in.VisibleSent != tc.n {
					t.Errorf("info %+v", in)
				}
			}
		}
		// Non-streaming: the connection closes without a response.
		_, err := http.DefaultTransport.RoundTrip(requestFor(ctx, srv.URL, APIChat, "reset", false, nil))
		if err == nil {
			t.Error("non-streaming reset: got a response")
		}
		lastInfo(t)
	})

	t.Run("stall", func(t *testing.T) {
		for _, api := range allAPIs {
			o := do(t, requestFor(ctx, srv.URL, api, "stall", true, nil), api)
			if o.readErr != nil || !o.terminal {
				t.Fatalf("%s: err %v terminal %v", api, o.readErr, o.terminal)
			}
			if tokens.Count(o.text.String()) != 30 {
				t.Errorf("%s: stalled stream lost tokens", api)
			}
			// The event carrying visible token 11 (due at 20+10×2 ms) comes
			// 150 ms late, and nothing comes in between. It is found by its
			// text, not by the gap: late events before the stall shorten
			// the gap the client sees.
			resumed, gap := absent, absent
			for i := 1; i < len(o.events); i++ {
				if tokens.Count(o.text.String()[:o.events[i].textLen]) > 10 {
					resumed, gap = o.events[i].at, o.events[i].at-o.events[i-1].at
					break
				}
			}
			// Late events before or after the stall shorten or stretch
			// it by what the timers were seen to slip; every other event
			// is due 2 ms after the one before it, so no other gap is
			// longer than the timers slipped.
			slip := 2 * testenv.Slip(o.end+time.Second)
			if gap < 150*time.Millisecond-late/2-slip || gap > 150*time.Millisecond+late+slip {
				t.Errorf("%s: gap before token 11 %v, want 150 ms (timers ran up to %v late meanwhile)", api, gap, slip/2)
			}
			for i := 1; i < len(o.events); i++ {
				if g := o.events[i].at - o.events[i-1].at; o.events[i].at != resumed && g > late+slip {
					t.Errorf("%s: a gap of %v at %v besides the stall (timers ran up to %v late meanwhile)", api, g, o.events[i].at, slip/2)
				}
			}
			near(t, "resumed", resumed, 40*time.Millisecond+150*time.Millisecond, early, late)
			near(t, "end", o.end, 20*time.Millisecond+60*time.Millisecond+150*time.Millisecond, early, late)
			if in := lastInfo(t); in.Fault != "stall" {
				t.Errorf("info %+v", in)
			}
		}
	})

	t.Run("truncate", func(t *testing.T) {
		for _, api := range allAPIs {
			o := do(t, requestFor(ctx, srv.URL, api, "truncate", true, map[string]any{"stream_options": map[string]any{"include_usage": true}}), api)
			if o.readErr != nil {
				t.Errorf("%s: truncate must close cleanly, got %v", api, o.readErr)
			}
			if o.terminal || o.streamError {
				t.Errorf("%s: truncated stream has a terminal marker or error", api)
			}
			raw := string(o.raw)
			for _, marker := range []string{"[DONE]", "message_stop", "message_delta", "response.completed", "finishReason", "finish_reason\":\"stop"} {
				if strings.Contains(raw, marker) {
					t.Errorf("%s: truncated stream contains %s", api, marker)
				}
			}
			if tokens.Count(o.text.String()) != 30 {
				t.Errorf("%s: truncated stream should still carry all its text", api)
			}
			if in := lastInfo(t); in.Fault != "truncate" {
				t.Errorf("info %+v", in)
			}
		}
		o := do(t, requestFor(ctx, srv.URL, APIAnthropic, "truncate", false, nil), APIAnthropic)
		var v any
		if o.readErr != nil || o.status != 200 || json.Unmarshal(o.body, &v) == nil {
			t.Errorf("non-streaming truncate: status %d err %v, body parses: %s", o.status, o.readErr, o.body)
		}
		lastInfo(t)
	})

	t.Run("error_event", func(t *testing.T) {
		for _, api := range allAPIs {
			o := do(t, requestFor(ctx, srv.URL, api, "error-event", true, nil), api)
			if o.readErr != nil || o.terminal || !o.streamError {
				t.Fatalf("%s: err %v terminal %v error %v", api, o.readErr, o.terminal, o.streamError)
			}
			last := o.events[len(o.events)-1]
			switch api {
			case APIAnthropic:
				if last.typ != "error" || !strings.Contains(last.data, `{"type":"error","error":{"type":"overloaded_error"`) {
					t.Errorf("anthropic error event: %s %s", last.typ, last.data)
				}
			case APIResponses:
				if last.typ != "error" || !strings.Contains(last.data, `"code":"server_error"`) {
					t.Errorf("responses error event: %s %s", last.typ, last.data)
				}
			case APIGemini:
				if !strings.HasPrefix(last.data, `{"error":{"code":503,`) || !strings.Contains(last.data, `"status":"UNAVAILABLE"`) {
					t.Errorf("gemini error event: %s", last.data)
				}
			default:
				if !strings.HasPrefix(last.data, `{"error":{"message":`) {
					t.Errorf("openai error event: %s", last.data)
				}
			}
			if got := tokens.Count(o.text.String()); got != 5 {
				t.Errorf("%s: %d tokens before the error, want 5", api, got)
			}
			if in := lastInfo(t); in.Fault != "error_event" {
				t.Errorf("info %+v", in)
			}
		}
		o := do(t, requestFor(ctx, srv.URL, APIGemini, "error-event", false, nil), APIGemini)
		if o.status != 500 {
			t.Errorf("non-streaming error_event: status %d", o.status)
		}
		checkErrorFormat(t, APIGemini, o.body, 500)
		lastInfo(t)
	})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// checkErrorFormat checks that body is api's error JSON with code.
func checkErrorFormat(t *testing.T, api API, body []byte, code int) {
	t.Helper()
	switch api {
	case APIAnthropic:
		var e struct {
			Type  string
			Error struct{ Type, Message string }
		}
		if json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
			t.Errorf("%s: not an Anthropic error: %s", api, body)
		}
	case APIGemini:
		var e struct {
			Error struct {
				Code            int
				Message, Status string
			}
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Code != code || e.Error.Message == "" || e.Error.Status == "" {
			t.Errorf("%s: not a Gemini error with code %d: %s", api, code, body)
		}
	default:
		var e struct {
			Error *struct {
				Message string
				Type    string
				Code    *string
			}
		}
		if json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%s: not an OpenAI error: %s", api, body)
		}
	}
}

func TestBadRequests(t *testing.T) {
	srv := testServer(t, Options{})
	paths := map[API]string{
		APIChat: "/v1/chat/completions", APICompletions: "/v1/completions", APIResponses: "/v1/responses",
		APIAnthropic: "/v1/messages", APIGemini: "/v1beta/models/fast:streamGenerateContent?alt=sse",
		APIEmbeddings: "/v1/embeddings",
	}
	send := func(method, path, body string) (int, []byte) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	for api, path := range paths {
		for _, tc := range []struct {
			name, method, body string
			code               int
		}{
			{"invalid JSON", "POST", `{"model": "fast",`, 400},
			{"not an object", "POST", `[1,2]`, 400},
			{"empty", "POST", ``, 400},
			{"wrong method", "GET", ``, 405},
			{"wrong type", "POST", `{"model": 5, "stream": "yes"}`, 400},
		} {
			code, body := send(tc.method, path, tc.body)
			if code != tc.code {
				t.Errorf("%s %s: status %d, want %d: %s", api, tc.name, code, tc.code, body)
			}
			checkErrorFormat(t, api, body, tc.code)
		}
		if api == APIGemini {
			continue
		}
		o := do(t, requestFor(context.Background(), srv.URL, api, "no-such-model", true, nil), api)
		if o.status != 404 {
			t.Errorf("%s unknown model: status %d", api, o.status)
		}
		checkErrorFormat(t, api, o.body, 404)
	}
	o := do(t, requestFor(context.Background(), srv.URL, APIGemini, "no-such-model", true, nil), APIGemini)
	if o.status != 404 {
		t.Errorf("gemini unknown model: %d", o.status)
	}
	checkErrorFormat(t, APIGemini, o.body, 404)

	for _, tc := range []struct {
		api  API
		path string
		body string
		want string
	}{
		{APIChat, "/v1/chat/completions", `{"model":"fast"}`, "messages"},
		{APIChat, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, "model"},
		{APIAnthropic, "/v1/messages", `{"model":"fast","messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{APIResponses, "/v1/responses", `{"model":"fast"}`, "input"},
		{APIGemini, "/v1beta/models/fast:generateContent", `{}`, "contents"},
		{APIGemini, "/v1beta/models/fast:streamGenerateContent", `{"contents":[{"parts":[{"text":"x"}]}]}`, "alt=sse"},
		{APIEmbeddings, "/v1/embeddings", `{"model":"fast","input":{}}`, "input"},
	} {
		code, body := send("POST", tc.path, tc.body)
		if code != 400 || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s %s: %d %s, want 400 naming %s", tc.api, tc.body, code, body, tc.want)
		}
		checkErrorFormat(t, tc.api, body, 400)
	}
	if code, body := send("POST", "/v1/nothing", `{}`); code != 404 {
		t.Errorf("unknown path: %d %s", code, body)
	}
	big := `{"model":"fast","messages":[{"role":"user","content":"` + strings.Repeat("x", 300) + `"}]}`
	small := testServer(t, Options{MaxBodyBytes: 100})
	req, _ := http.NewRequest("POST", small.URL+"/v1/messages", strings.NewReader(big))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("oversized body: %d", resp.StatusCode)
	}
	checkErrorFormat(t, APIAnthropic, b, 413)
}

func TestDefaultProfile(t *testing.T) {
	srv := testServer(t, Options{Default: "fast"})
	o := do(t, requestFor(context.Background(), srv.URL, APIChat, "gpt-4o", true, nil), APIChat)
	if o.status != 200 || !o.terminal || !strings.Contains(string(o.raw), `"model":"gpt-4o"`) {
		t.Errorf("default profile: %d terminal %v", o.status, o.terminal)
	}
}

func TestInvalidProfileAnswers500(t *testing.T) {
	srv := testServer(t, Options{Profiles: map[string]Profile{"bad": {TextMs: Ms(10)}}})
	o := do(t, requestFor(context.Background(), srv.URL, APIAnthropic, "bad", true, nil), APIAnthropic)
	if o.status != 500 || !strings.Contains(string(o.body), "visible_tokens") {
		t.Errorf("invalid profile: %d %s", o.status, o.body)
	}
	checkErrorFormat(t, APIAnthropic, o.body, 500)
}
