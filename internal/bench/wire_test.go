package bench

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

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
		{apiChat, "low", true, "https://api.example.com/v1/chat/completions",
			`{"max_completion_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"m","reasoning_effort":"low","seed":9,"stream":true,"stream_options":{"include_usage":true},"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"Authorization", "Bearer sk"}},
		{apiResponses, "high", false, "https://api.example.com/v1/responses",
			`{"input":"hi","max_output_tokens":64,"model":"m","reasoning":{"effort":"high"},"stream":true,"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"Authorization", "Bearer sk"}},
		{apiMessages, "2048", false, "https://api.example.com/v1/messages",
			`{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"temperature":0.5,"thinking":{"budget_tokens":2048,"type":"enabled"},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"X-Api-Key", "sk"}},
		{apiMessages, "medium", false, "https://api.example.com/v1/messages",
			`{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"m","output_config":{"effort":"medium"},"stream":true,"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"top_p":0.9}`,
			[2]string{"X-Api-Key", "sk"}},
		{apiGenerate, "1024", true, "https://api.example.com/v1beta/models/m:streamGenerateContent?alt=sse",
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
		{"https://openrouter.ai/api/v1", apiChat, "POST /api/v1/chat/completions"},
		{"http://127.0.0.1:8080/", apiMessages, "POST /v1/messages"},
		{"https://generativelanguage.googleapis.com/v1beta", apiGenerate, "POST /v1beta/models/gemini-2.5-flash:generateContent"},
	} {
		u, _ := url.Parse(c.base)
		w := &Wire{API: c.api, Base: u, Model: "models/gemini-2.5-flash"}
		if c.api != apiGenerate {
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
		{API: apiChat, Base: base},                                                    // no model
		{API: apiMessages, Base: base, Model: "m"},                                    // no max_tokens
		{API: apiResponses, Base: base, Model: "m", Sampling: Sampling{Seed: i64(1)}}, // no seed in Responses
		{API: apiChat, Base: &url.URL{Scheme: "ftp", Host: "x"}, Model: "m"},
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

func TestWireKeepsBaseQuery(t *testing.T) {
	u, _ := url.Parse("https://x.example.com/openai/v1?api-version=preview")
	w := &Wire{API: apiChat, Base: u, Model: "m"}
	req, _ := w.NewRequest(context.Background(), []byte(`{}`))
	if req.URL.String() != "https://x.example.com/openai/v1/chat/completions?api-version=preview" {
		t.Errorf("url %s", req.URL)
	}
	if w.Route() != "POST /openai/v1/chat/completions" {
		t.Errorf("route %q", w.Route())
	}
}

func TestSetupErrors(t *testing.T) {
	good := Options{URL: "http://127.0.0.1:1", API: "openai.chat", Model: "m", Concurrency: 1, Requests: 1, InputTokensMean: 10}
	if _, c, err := Setup(good); err != nil || c.Load.Mode != ModeConcurrency || c.Machines != 1 || c.Labels == nil {
		t.Fatalf("good options: %v %+v", err, c)
	}
	cases := map[string]func(o *Options){
		"no api":               func(o *Options) { o.API = "openai" },
		"key in url":           func(o *Options) { o.URL = "http://127.0.0.1:1/?key=secret" },
		"credentials in url":   func(o *Options) { o.URL = "http://u:p@127.0.0.1:1" },
		"both loads":           func(o *Options) { o.Rate = 5 },
		"no load":              func(o *Options) { o.Concurrency = 0 },
		"both samples":         func(o *Options) { o.Duration = time.Second },
		"no sample":            func(o *Options) { o.Requests = 0 },
		"bad arrival":          func(o *Options) { o.Concurrency, o.Rate, o.Arrival = 0, 5, "bursty" },
		"arrival without rate": func(o *Options) { o.Arrival = "poisson" },
		"retries without on":   func(o *Options) { o.Retry.Max = 2 },
		"unknown retry-on":     func(o *Options) { o.Retry = Retry{Max: 1, On: []string{"everything"}} },
		"bad top_p":            func(o *Options) { v := 1.5; o.Sampling.TopP = &v },
		"no prompt":            func(o *Options) { o.InputTokensMean = 0 },
		"bad tools":            func(o *Options) { o.ToolsFile, o.ToolsJSON = "t.json", []byte(`{}`) },
	}
	for name, change := range cases {
		o := good
		change(&o)
		if _, _, err := Setup(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A constant schedule's seed is not a condition; a Poisson one's is.
	o := good
	o.Concurrency, o.Rate, o.ArrivalSeed = 0, 5, 9
	if _, c, _ := Setup(o); c.Load.ArrivalSeed != 0 || c.Load.Arrival != ArrivalConstant {
		t.Errorf("constant load %+v", c.Load)
	}
	o.Arrival = ArrivalPoisson
	if _, c, _ := Setup(o); c.Load.ArrivalSeed != 9 {
		t.Errorf("poisson load %+v", c.Load)
	}
}
