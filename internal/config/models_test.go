package config

import (
	"strings"
	"testing"
)

func channelWithModels(models string) string {
	return "channels:\n  - name: az\n    protocol: openai\n    base_url: http://127.0.0.1:9\n    models: " + models + "\n"
}

// TestModelsShapes: a list, a map and a list with one-entry maps read to
// the same patterns in the file's order, with the provider's names of the
// aliased ones only.
func TestModelsShapes(t *testing.T) {
	for _, tt := range []struct {
		yaml     string
		patterns []string
		upstream map[string]string
	}{
		{`["gpt-4o", "claude-*"]`, []string{"gpt-4o", "claude-*"}, nil},
		{"\n      gpt-4o: prod-gpt4o\n      gpt-4o-mini: \"\"\n      same: same\n      \"claude-*\": \"eu.anthropic.claude-*\"\n      open:",
			[]string{"gpt-4o", "gpt-4o-mini", "same", "claude-*", "open"},
			map[string]string{"gpt-4o": "prod-gpt4o", "claude-*": "eu.anthropic.claude-*"}},
		{`[gpt-4o-mini, {gpt-4o: prod-gpt4o}, "*"]`, []string{"gpt-4o-mini", "gpt-4o", "*"}, map[string]string{"gpt-4o": "prod-gpt4o"}},
		{`[]`, nil, nil},
	} {
		c, err := Parse([]byte(channelWithModels(tt.yaml)), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.yaml, err)
		}
		got := c.Channels[0].Models
		if want := (Models{Patterns: tt.patterns, Upstream: tt.upstream}); !got.Equal(want) {
			t.Errorf("%s: %+v, want %+v", tt.yaml, got, want)
		}
	}
	if !ModelList("a").Equal(Models{Patterns: []string{"a"}}) || ModelList("a").Equal(Models{Patterns: []string{"a"}, Upstream: map[string]string{"a": "b"}}) {
		t.Error("Equal")
	}
}

// TestModelsErrors: each bad shape or name is refused with the line or the
// channel and the entry, and what to write instead.
func TestModelsErrors(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{`gpt-4o`, `line 5: models: want a list of names`},
		{`[gpt-4o, gpt-4o]`, `line 5: models: "gpt-4o" is listed twice`},
		{"\n      a: x\n      a: y", `line 7: models: "a" is listed twice`},
		{`[{a: x, b: y}]`, `must hold one name`},
		{`{a: [x]}`, `"a" must map to the provider's model name (a string), not a list`},
		{`[[a]]`, `want a model name or glob, not a list`},
		{`{a: "x*"}`, `"a" maps to "x*": a * in the provider's name needs exactly one *`},
		{`{"a-*-*": "x-*"}`, `needs exactly one * (and no ?)`},
		{`{"a-*": "x-*-*"}`, `at most one *`},
		{`{"a-*": "x?"}`, `takes no glob characters`},
		{`{"a": " x"}`, `has spaces around it`},
		{`["", b]`, `channel "az": empty model pattern`},
	} {
		_, err := Parse([]byte(channelWithModels(tt.yaml)), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.yaml, err, tt.want)
		}
	}
}
