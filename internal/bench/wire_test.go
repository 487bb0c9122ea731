package bench

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

func TestWireBodies(t *testing.T) {
	tools := json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{}}}]`)
	base, _ := url.Parse("https://api.example.com")
	cases := []struct {
		api    protocol.API
		effort string
		seed   bool
		url    string
		want   string // the body, canonical JSON
		header [2]string
	}{
		{protocol.OpenAIChat, "low", true, "https://api.example.com/v1/chat/completions",
			`{"max_completion_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"m","reasoning_effort":"low","seed":9,"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"Authorization", "Bearer sk"}},
		{protocol.OpenAIResponses, "high", false, "https://api.example.com/v1/responses",
			`{"input":"hi","max_output_tokens":64,"model":"m","reasoning":{"effort":"high"},"stream":true,"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"Authorization", "Bearer sk"}},
		{protocol.Anthropic, "2048", false, "https://api.example.com/v1/messages",
			`{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"temperature":0.5,"thinking":{"budget_tokens":2048,"type":"enabled"},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"X-Api-Key", "sk"}},
		{protocol.Anthropic, "medium", false, "https://api.example.com/v1/messages",
			`{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"m","output_config":{"effort":"medium"},"stream":true,"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"X-Api-Key", "sk"}},
		{protocol.Gemini, "1024", true, "https://api.example.com/v1beta/models/m:streamGenerateContent?alt=sse",
			`{"contents":[{"parts":[{"text":"hi"}],"role":"user"}],"generationConfig":{"maxOutputTokens":64,"seed":9,"temperature":0.5,"thinkingConfig":{"thinkingBudget":1024},"topP":0.9},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}]}`,
			[2]string{"X-Goog-Api-Key", "sk"}},
	}
	for _, c := range cases {
		w := &Wire{API: c.api, Base: base, Model: "m", Key: "sk", Stream: true, MaxTokens: 64, ReasoningEffort: c.effort,
			Tools: tools, Sampling: Sampling{Temperature: f64(0.5), TopP: f64(0.9)}}
		if c.seed {
			w.Sampling.Seed = i64(9)
		}
		if err := w.Check(); err != nil {
			t.Fatalf("%s: %v", c.api, err)
		}
		b, err := w.Body("hi")
		if err != nil {
			t.Fatal(err)
		}
		if got := canonical(t, b); got != canonical(t, []byte(c.want)) {
			t.Errorf("%s body\n got %s\nwant %s", c.api, got, canonical(t, []byte(c.want)))
		}
		req, err := w.NewRequest(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if req.URL.String() != c.url {
			t.Errorf("%s url %s, want %s", c.api, req.URL, c.url)
		}
		if got := req.Header.Get(c.header[0]); got != c.header[1] {
			t.Errorf("%s %s = %q", c.api, c.header[0], got)
		}
		if !strings.HasPrefix(w.Route(), "POST /v1") {
			t.Errorf("route %q", w.Route())
		}
	}
}

func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func TestWireBaseWithVersion(t *testing.T) {
	for _, c := range []struct {
		base string
		api  protocol.API
		want string
	}{
		{"https://openrouter.ai/api/v1", protocol.OpenAIChat, "POST /api/v1/chat/completions"},
		{"http://127.0.0.1:8080/", protocol.Anthropic, "POST /v1/messages"},
		{"https://generativelanguage.googleapis.com/v1beta", protocol.Gemini, "POST /v1beta/models/gemini-2.5-flash:generateContent"},
	} {
		u, _ := url.Parse(c.base)
		w := &Wire{API: c.api, Base: u, Model: "models/gemini-2.5-flash"}
		if c.api != protocol.Gemini {
			w.Model = "m"
		}
		if got := w.Route(); got != c.want {
			t.Errorf("%s: route %q, want %q", c.base, got, c.want)
		}
	}
}

func TestWireCheck(t *testing.T) {
	base, _ := url.Parse("http://127.0.0.1:1")
	bad := []*Wire{
		{API: protocol.OpenAIChat, Base: base},                                                    // no model
		{API: protocol.Anthropic, Base: base, Model: "m"},                                         // no max_tokens
		{API: protocol.OpenAIResponses, Base: base, Model: "m", Sampling: Sampling{Seed: i64(1)}}, // no seed in Responses
		{API: protocol.OpenAIChat, Base: &url.URL{Scheme: "ftp", Host: "x"}, Model: "m"},
	}
	for i, w := range bad {
		if err := w.Check(); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
}

func TestLoadTools(t *testing.T) {
	raw, info, err := LoadTools("dir/tools.json", []byte(`[ {"type":"function","function":{"name":"a"}},
		{"name":"b","input_schema":{}}, {"functionDeclarations":[{"name":"c"},{"name":"d"}]} ]`))
	if err != nil {
		t.Fatal(err)
	}
	if info.File != "tools.json" || info.Count != 3 || strings.Join(info.Names, ",") != "a,b,c,d" || len(info.SHA256) != 64 {
		t.Errorf("info %+v", info)
	}
	if strings.ContainsAny(string(raw), "\n\t") {
		t.Errorf("not compacted: %s", raw)
	}
	// The same tools written differently hash the same.
	_, info2, _ := LoadTools("x.json", []byte(`[{"type":"function","function":{"name":"a"}},{"name":"b","input_schema":{}},{"functionDeclarations":[{"name":"c"},{"name":"d"}]}]`))
	if info2.SHA256 != info.SHA256 {
		t.Error("whitespace changed the hash")
	}
	for _, bad := range []string{`{}`, `[]`, `[1]`, `not json`} {
		if _, _, err := LoadTools("t.json", []byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
