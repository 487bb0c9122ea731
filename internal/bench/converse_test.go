package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ttfx/ttfx/internal/sim"
)

// TestConverseToolsAndReasoning: the benchmark client's Converse requests
// carry --tools in toolConfig.tools and --reasoning-effort in
// additionalModelRequestFields (a number as Claude's thinking budget, a
// word as reasoningConfig), and their streams' tool input and reasoning
// are read as such (the simulator's tool-call and reasoning profiles); a
// model id that is an ARN is escaped into one path segment.
func TestConverseToolsAndReasoning(t *testing.T) {
	const arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x1"
	profiles := sim.Builtin()
	profiles[arn] = profiles["fast"]
	s := sim.New(sim.Options{Profiles: profiles})
	var mu sync.Mutex
	var bodies []map[string]any
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tools := `[{"toolSpec":{"name":"get_weather","description":"Weather of a city","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}}]`
	last := func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return bodies[len(bodies)-1]
	}

	o := opts(srv.URL, "tool-call", 2)
	o.API, o.Key = "bedrock.converse", "bench-key"
	o.ToolsFile, o.ToolsJSON = "tools.json", []byte(tools)
	res := run(t, o)
	for _, r := range res.Requests {
		if r.Status != StatusOK || r.FinishReason != "tool_use" || r.Events.Tool == 0 || !r.FirstResponseMs.Valid() {
			t.Errorf("tool-call row: %s finish %q events %+v first response %v", r.Status, r.FinishReason, r.Events, r.FirstResponseMs)
		}
	}
	b := last()
	tc, _ := b["toolConfig"].(map[string]any)
	if _, top := b["tools"]; top || tc == nil {
		t.Fatalf("body %v: want toolConfig.tools and no top-level tools", b)
	}
	var want any
	json.Unmarshal([]byte(tools), &want)
	if got, w := must(json.Marshal(tc["tools"])), must(json.Marshal(want)); string(got) != string(w) {
		t.Errorf("toolConfig.tools %s, want %s", got, w)
	}

	for _, tc := range []struct{ model, effort, want string }{
		{"reasoning", "2048", `{"thinking":{"budget_tokens":2048,"type":"enabled"}}`},
		{"reasoning", "high", `{"reasoningConfig":{"maxReasoningEffort":"high","type":"enabled"}}`},
	} {
		o := opts(srv.URL, tc.model, 1)
		o.API, o.Key, o.ReasoningEffort = "bedrock.converse", "bench-key", tc.effort
		res := run(t, o)
		if r := res.Requests[0]; r.Status != StatusOK || r.Events.Reasoning == 0 || !r.FirstResponseMs.Valid() || !r.FirstTextDeltaMs.Valid() || mustMs(r.FirstResponseMs) > mustMs(r.FirstTextDeltaMs) {
			t.Errorf("reasoning %s row: %s events %+v first response %v first text %v", tc.effort, r.Status, r.Events, r.FirstResponseMs, r.FirstTextDeltaMs)
		}
		if got, _ := json.Marshal(last()["additionalModelRequestFields"]); string(got) != tc.want {
			t.Errorf("reasoning %s: additionalModelRequestFields %s, want %s", tc.effort, got, tc.want)
		}
	}

	// A model id that is an ARN is one path segment, escaped as the AWS
	// SDKs escape it.
	o = opts(srv.URL, arn, 1)
	o.API, o.Key = "bedrock.converse", "bench-key"
	if r := run(t, o).Requests[0]; r.Status != StatusOK || r.Tokens.Visible == nil || *r.Tokens.Visible != 60 {
		t.Errorf("ARN row: %s (%s)", r.Status, r.Error)
	}
	mu.Lock()
	got := paths[len(paths)-1]
	mu.Unlock()
	if want := "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fx1/converse-stream"; got != want {
		t.Errorf("ARN path %q, want %q", got, want)
	}

	// A word of effort for a Claude model is refused before the run: Claude
	// takes a budget.
	o = opts(srv.URL, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", 1)
	o.API, o.Key, o.ReasoningEffort = "bedrock.converse", "bench-key", "high"
	if _, err := Bench(t.Context(), o); err == nil || !strings.Contains(err.Error(), "thinking budget") {
		t.Errorf("a word of effort for Claude: %v", err)
	}
}

func must(b []byte, _ error) []byte { return b }

func mustMs(o interface{ Ms() (float64, bool) }) float64 { v, _ := o.Ms(); return v }
