package relay

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http/httptest"
	"reflect"
	"testing"
)

// FuzzParseRequest feeds client request bodies (network bytes) to the
// parser of every endpoint: it must never panic, and a body it accepts
// must still be valid JSON after the gateway's rewrite.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true,"messages":[]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"m","stream":true,"stream_options":null,"user":"u"}`,
		`{"model":"m","stream":"yes"}`,
		`{"model":"m","metadata":{"user_id":"x"}}`,
		`{"contents":[]}`, `[]`, `{`, ``, `{"model":1}`,
		`{"model":"a","Model":"b"}`, `{"stream_options":{"include_usage":true,"INCLUDE_USAGE":false},"model":"m"}`,
		`{"model":"\u0000"}`, `{"metadata":{"user_id":"a","user_id":"b"},"model":"m"}`,
		`{"model":"m","stream":true,"stream_options":{}}`,
		`{"model":"m","stream":true,"stream_options":{"x":1} , "n":2 }`,
		`{"model":"m\u00e9","stream":true,"stream_options":{"include_usage":null,"y":[1]}}`,
		`{"model":"m","stream":true,"stream_options":{},"stream_options":null}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		eps := endpoints()
		ep := eps[int(which)%len(eps)]
		path := "/v1/x"
		if ep.api == apiGemini {
			path = "/v1beta/models/m:streamGenerateContent?alt=sse"
		}
		r := httptest.NewRequest("POST", path, bytes.NewReader(body))
		if ep.api == apiGemini {
			r.SetPathValue("target", "m:streamGenerateContent")
		}
		cr, herr := parseRequest(ep, r, body)
		if herr != nil {
			if herr.Code < 400 || herr.Code > 499 || herr.Msg == "" {
				t.Fatalf("bad input answered %d %q", herr.Code, herr.Msg)
			}
			return
		}
		if ep.api == apiModels {
			return
		}
		// What the one-pass scanner accepts, encoding/json reads the same.
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body encoding/json rejects (%v): %q", err, body)
		}
		if ep.api != apiGemini {
			var model string
			json.Unmarshal(top["model"], &model)
			if cr.model == "" || cr.model != model {
				t.Fatalf("model %q, encoding/json reads %q: %q", cr.model, model, body)
			}
		}
		usageBody := cr.usageBody()
		if usageBody == nil {
			return
		}
		// The rewrite adds stream_options.include_usage = true and changes
		// nothing else.
		var before, after map[string]any
		if err := json.Unmarshal(usageBody, &after); err != nil {
			t.Fatalf("rewritten body is not JSON (%v): %q", err, usageBody)
		}
		json.Unmarshal(body, &before)
		opts, _ := before["stream_options"].(map[string]any)
		if opts == nil {
			opts = map[string]any{}
		}
		opts["include_usage"] = true
		before["stream_options"] = opts
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("rewrite of %q gave %q", body, usageBody)
		}
	})
}

// FuzzStripUsageNull: the rewrite either leaves an event alone or removes
// exactly the trailing `,"usage":null` member.
func FuzzStripUsageNull(f *testing.F) {
	f.Add([]byte("data: {\"a\":1,\"usage\":null}\n\n"))
	f.Add([]byte("data: {\"a\":1,\"usage\":null}\r\n\r\n"))
	f.Add([]byte("data: {\"usage\":null}\n\n"))
	f.Add([]byte("data: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		x := &exchange{}
		in := bytes.Clone(raw)
		out := x.stripUsageNull(raw)
		if !bytes.Equal(raw, in) {
			t.Fatal("input modified")
		}
		if bytes.Equal(out, raw) {
			return
		}
		if len(out) != len(raw)-len(`,"usage":null`) {
			t.Fatalf("removed %d bytes", len(raw)-len(out))
		}
		i := bytes.LastIndex(raw, []byte(`,"usage":null}`))
		want := append(bytes.Clone(raw[:i]), raw[i+len(`,"usage":null`):]...)
		if !bytes.Equal(out, want) {
			t.Fatalf("strip(%q) = %q, want %q", raw, out, want)
		}
	})
}

func TestJoinPath(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"", "/v1/chat/completions", "/v1/chat/completions"},
		{"/", "/v1/chat/completions", "/v1/chat/completions"},
		{"/v1", "/v1/chat/completions", "/v1/chat/completions"},
		{"/v1/", "/v1/messages", "/v1/messages"},
		{"/openai/v1", "/v1/responses", "/openai/v1/responses"},
		{"/proxy", "/v1/chat/completions", "/proxy/v1/chat/completions"},
		{"/v1beta", "/v1beta/models/m:generateContent", "/v1beta/models/m:generateContent"},
		{"/v1", "/v1beta/models/m:generateContent", "/v1/v1beta/models/m:generateContent"},
	}
	for _, tt := range tests {
		if got := joinPath(tt.base, tt.path); got != tt.want {
			t.Errorf("joinPath(%q, %q) = %q, want %q", tt.base, tt.path, got, tt.want)
		}
	}
}

// FuzzIsEventStream: the relay's check of an upstream Content-Type agrees
// with mime.ParseMediaType on every header value that parses.
func FuzzIsEventStream(f *testing.F) {
	for _, s := range []string{"text/event-stream", "text/event-stream; charset=utf-8", "Text/Event-Stream",
		" text/event-stream ;x=1", "application/json", "text/event-streamx", "", ";", "text/event-stream; charset"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil && err != mime.ErrInvalidMediaParameter {
			return // the relay treats a header mime rejects by its media type alone
		}
		if got, want := isEventStream(ct), mt == "text/event-stream"; got != want {
			t.Fatalf("isEventStream(%q) = %v, mime says %q", ct, got, mt)
		}
	})
}
