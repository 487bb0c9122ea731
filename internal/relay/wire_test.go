package relay_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/sse"
)

// TestNonStreamingFaults: a non-streaming answer is recorded for what it
// was, not for how its connection ended (issue 14). A body cut mid-JSON
// behind a 200 and a clean close is truncated; an upstream that took the
// request and closed without answering was reached, so it is not a
// connect error; a connection refused still is.
func TestNonStreamingFaults(t *testing.T) {
	t.Parallel()
	gw, recs, _, _ := allProtocols(t, nil)
	tests := []struct {
		api, model, status string
		http               int
	}{
		{"chat", "truncate", record.StatusTruncated, 200},
		{"responses", "truncate", record.StatusTruncated, 200},
		{"anthropic", "truncate", record.StatusTruncated, 200},
		{"gemini", "truncate", record.StatusTruncated, 200},
		{"chat", "flaky", record.StatusUpstreamStreamError, 502},
		{"anthropic", "flaky", record.StatusUpstreamStreamError, 502},
		{"gemini", "flaky", record.StatusUpstreamStreamError, 502},
		{"chat", "fast", record.StatusOK, 200},
		{"gemini", "fast", record.StatusOK, 200},
	}
	for _, tt := range tests {
		t.Run(tt.api+"/"+tt.model, func(t *testing.T) {
			t.Parallel()
			resp, body := do(t, gw.URL, clientKey, call{tt.api, tt.model, false})
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != tt.status || resp.StatusCode != tt.http || rec.Attempts[0].Status != tt.status {
				t.Fatalf("status %s (attempt %s, http %d), want %s (%d); error %q; body %.100s",
					rec.Status, rec.Attempts[0].Status, resp.StatusCode, tt.status, tt.http, rec.Error, body)
			}
			if tt.status != record.StatusOK && (rec.Attempts[0].Error == "" || rec.Attempts[0].Error != rec.Error) {
				t.Errorf("failed attempt's error %q, want the record's %q", rec.Attempts[0].Error, rec.Error)
			}
			if tt.model == "flaky" && (strings.Contains(rec.Error, "cannot reach") || !strings.Contains(rec.Error, "request was sent")) {
				t.Errorf("an upstream that took the request: error %q", rec.Error)
			}
		})
	}

	// A 200 whose body is not JSON at all, and one that is JSON of another
	// shape: a broken upstream.
	for _, body := range []string{"<html>bad gateway</html>", `{"hello":"world"}`} {
		junk := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		defer junk.Close()
		jgw, jrecs := gateway(t, channel("junk", "anthropic", junk.URL, fastTimeouts))
		resp, _ := do(t, jgw.URL, clientKey, call{"anthropic", "any", false})
		if rec := jrecs.get(t, resp.Header.Get("X-Request-Id")); rec.Status != record.StatusUpstreamStreamError || rec.Attempts[0].Error == "" {
			t.Errorf("200 with body %q: status %s (%q), attempt's error %q", body, rec.Status, rec.Error, rec.Attempts[0].Error)
		}
	}

	// Nobody listening: a connect error, as before.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	dgw, drecs := gateway(t, channel("dead", "openai", dead, fastTimeouts))
	resp, _ := do(t, dgw.URL, clientKey, call{"chat", "fast", false})
	if rec := drecs.get(t, resp.Header.Get("X-Request-Id")); rec.Status != record.StatusUpstreamConnectError || resp.StatusCode != 502 {
		t.Errorf("connection refused: status %s (%d)", rec.Status, resp.StatusCode)
	}
}

// TestNoAnswerFallsBack: an upstream that closes without answering is
// still worth the next channel, since nothing reached the client.
func TestNoAnswerFallsBack(t *testing.T) {
	t.Parallel()
	up, _ := upstream(t, nil)
	hangup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler) // reads the request, closes the connection
	}))
	defer hangup.Close()
	gw, recs := gateway(t, channel("hangup", "openai", hangup.URL, fastTimeouts), channel("sim", "openai", up.URL, fastTimeouts))
	// The router may order equal channels either way; try until the
	// hang-up one came first.
	for i := 0; i < 20; i++ {
		resp, _ := do(t, gw.URL, clientKey, call{"chat", "fast", false})
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if rec.Status != record.StatusOK || resp.StatusCode != 200 {
			t.Fatalf("status %s (%d), attempts %+v", rec.Status, resp.StatusCode, rec.Attempts)
		}
		if len(rec.Attempts) == 2 {
			if a := rec.Attempts[0]; a.Channel != "hangup" || a.Status != record.StatusUpstreamStreamError {
				t.Fatalf("first attempt %+v", a)
			}
			return
		}
	}
	t.Fatal("the hang-up channel was never tried first")
}

// TestStreamErrorEventShapes: the in-band error event the gateway writes
// when a stream fails after bytes were sent has the shape that protocol's
// servers send and its SDKs validate (issue 14): Responses' error event
// carries sequence_number (the next in the stream), code and message
// (@ai-sdk/openai rejects it otherwise and reports a type-validation
// error instead of the failure); Gemini pairs 503 with UNAVAILABLE and 504
// with DEADLINE_EXCEEDED; Anthropic's is `event: error` with a typed error;
// chat's an {"error": {message, type, code}} chunk.
func TestStreamErrorEventShapes(t *testing.T) {
	t.Parallel()
	profiles := sim.Builtin()
	profiles["stall-long"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 50, TPS: 200, Fault: "stall_after:10:5000"}
	up, _ := upstream(t, profiles)
	short := fastTimeouts
	short.Idle = 300 * time.Millisecond
	gw, recs := gateway(t, channel("sim-openai", "openai", up.URL, short), channel("sim-anthropic", "anthropic", up.URL, short),
		channel("sim-gemini", "gemini", up.URL, short))

	type check func(t *testing.T, last sse.Event, before int)
	str := func(m map[string]any, k string) bool { _, ok := m[k].(string); return ok }
	tests := []struct {
		api, model string
		check      check
	}{
		{"responses", "flaky", func(t *testing.T, last sse.Event, before int) {
			var m map[string]any
			json.Unmarshal(last.Data, &m)
			seq, ok := m["sequence_number"].(float64)
			if string(last.Type) != "error" || m["type"] != "error" || !ok || int(seq) != before || !str(m, "message") || !str(m, "code") {
				t.Errorf("responses error event %s %s; want type error, sequence_number %d, code and message", last.Type, last.Data, before)
			}
		}},
		{"gemini", "flaky", geminiError(503, "UNAVAILABLE")},
		{"gemini", "stall-long", geminiError(504, "DEADLINE_EXCEEDED")},
		{"anthropic", "flaky", func(t *testing.T, last sse.Event, before int) {
			var m struct {
				Type  string         `json:"type"`
				Error map[string]any `json:"error"`
			}
			json.Unmarshal(last.Data, &m)
			if string(last.Type) != "error" || m.Type != "error" || !str(m.Error, "type") || !str(m.Error, "message") {
				t.Errorf("anthropic error event %s %s", last.Type, last.Data)
			}
		}},
		{"chat", "flaky", func(t *testing.T, last sse.Event, before int) {
			var m struct {
				Error map[string]any `json:"error"`
			}
			json.Unmarshal(last.Data, &m)
			if !str(m.Error, "message") || !str(m.Error, "type") || !str(m.Error, "code") {
				t.Errorf("chat error chunk %s", last.Data)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.api+"/"+tt.model, func(t *testing.T) {
			t.Parallel()
			resp, body := do(t, gw.URL, clientKey, call{tt.api, tt.model, true})
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status == record.StatusOK || resp.StatusCode != 200 {
				t.Fatalf("status %s (%d)", rec.Status, resp.StatusCode)
			}
			rd := sse.NewReader(bytes.NewReader(body), 0)
			var events []sse.Event
			for {
				p, err := rd.Next()
				if err != nil {
					break
				}
				if p.Kind == sse.PieceEvent {
					ev := p.Event
					ev.Data, ev.Type = bytes.Clone(ev.Data), bytes.Clone(ev.Type)
					events = append(events, ev)
				}
			}
			if len(events) < 2 {
				t.Fatalf("%d events: %s", len(events), body)
			}
			// The upstream's own events number from 0 in order: the
			// gateway's follows the last of them.
			if tt.api == "responses" {
				for i, ev := range events[:len(events)-1] {
					var m struct {
						Seq int `json:"sequence_number"`
					}
					if json.Unmarshal(ev.Data, &m); m.Seq != i {
						t.Fatalf("upstream event %d has sequence_number %d", i, m.Seq)
					}
				}
			}
			tt.check(t, events[len(events)-1], len(events)-1)
		})
	}
}

func geminiError(code int, status string) func(t *testing.T, last sse.Event, before int) {
	return func(t *testing.T, last sse.Event, before int) {
		var m struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		json.Unmarshal(last.Data, &m)
		if m.Error.Code != code || m.Error.Status != status || m.Error.Message == "" {
			t.Errorf("gemini error %s, want code %d with %s", last.Data, code, status)
		}
	}
}

// TestUnknownRoutes: unknown paths and wrong methods under the model APIs
// answer in the protocol's own error format, as its SDKs parse it, and are
// recorded; `Authorization: KEY` without Bearer is told how to send it
// (issue 14).
func TestUnknownRoutes(t *testing.T) {
	t.Parallel()
	gw, recs, _, _ := allProtocols(t, nil)
	tests := []struct {
		name, method, path string
		header             [2]string
		code               int
		allow, want        string
	}{
		{"openai unknown path", "POST", "/v1/chat/complete", [2]string{}, 404, "", `"type":"invalid_request_error"`},
		{"openai wrong method", "GET", "/v1/chat/completions", [2]string{}, 405, "POST", `"message":"method GET is not allowed on /v1/chat/completions (use POST)"`},
		{"models wrong method", "POST", "/v1/models", [2]string{}, 405, "GET", `"code":"method_not_allowed"`},
		{"anthropic wrong method", "GET", "/v1/messages", [2]string{}, 405, "POST", `{"type":"error","error":{"type":"invalid_request_error"`},
		{"anthropic unknown path", "POST", "/v1/messages/count_tokens", [2]string{"Anthropic-Version", "2023-06-01"}, 404, "", `{"type":"error","error":{"type":"not_found_error"`},
		{"gemini unknown path", "POST", "/v1beta/files", [2]string{}, 404, "", `"status":"NOT_FOUND"`},
		{"gemini wrong method", "GET", "/v1beta/models/fast:generateContent", [2]string{}, 405, "POST", `"status":"INVALID_ARGUMENT"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, gw.URL+tt.path, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			if tt.header[0] != "" {
				req.Header.Set(tt.header[0], tt.header[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || resp.Header.Get("Allow") != tt.allow || !bytes.Contains(b, []byte(tt.want)) ||
				resp.Header.Get("Content-Type") != "application/json" || !json.Valid(b) {
				t.Fatalf("%d (Allow %q, %s) %s, want %d with %s", resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"), b, tt.code, tt.want)
			}
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != record.StatusBadRequest || rec.HTTPStatus != tt.code || !rec.TotalHandlerMs.Valid() {
				t.Fatalf("record %s %d", rec.Status, rec.HTTPStatus)
			}
		})
	}

	// The official SDKs read these as API errors with the status.
	ctx := t.Context()
	oc := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	_, err := oc.Batches.Get(ctx, "batch_1")
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 404 || oerr.Type != "invalid_request_error" || !strings.Contains(oerr.Message, "unknown path") {
		t.Errorf("openai-go on an unknown path: %v", err)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0))
	_, err = ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "fast",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 404 || !strings.Contains(aerr.RawJSON(), "not_found_error") {
		t.Errorf("anthropic-sdk-go on an unknown path: %v", err)
	}

	// `Authorization: KEY` without the scheme.
	req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(`{"model":"fast"}`))
	req.Header.Set("Authorization", clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !bytes.Contains(b, []byte("use Authorization: Bearer KEY")) || bytes.Contains(b, []byte(clientKey)) {
		t.Errorf("Authorization without Bearer: %d %s", resp.StatusCode, b)
	}
}
