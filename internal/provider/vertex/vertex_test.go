package vertex

import (
	"net/url"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

func TestURL(t *testing.T) {
	v := &vertex{google: "/v1/projects/p-1/locations/us-east5/publishers/google/models/", anthropic: "/v1/projects/p-1/locations/us-east5/publishers/anthropic/models/"}
	for _, tt := range []struct {
		base, family, model, query string
		stream                     bool
		want                       string
	}{
		{"https://us-east5-aiplatform.googleapis.com", "gemini", "gemini-2.5-flash", "alt=sse", true,
			"https://us-east5-aiplatform.googleapis.com/v1/projects/p-1/locations/us-east5/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		// A stream the client asked for without alt=sse still is SSE.
		{"https://h.example", "gemini", "g", "", true,
			"https://h.example/v1/projects/p-1/locations/us-east5/publishers/google/models/g:streamGenerateContent?alt=sse"},
		{"https://h.example/", "gemini", "g", "", false,
			"https://h.example/v1/projects/p-1/locations/us-east5/publishers/google/models/g:generateContent"},
		{"https://h.example/proxy", "anthropic", "claude-sonnet-4@20250514", "beta=true", true,
			"https://h.example/proxy/v1/projects/p-1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4@20250514:streamRawPredict"},
		{"https://h.example", "anthropic", "claude-haiku-4-5", "", false,
			"https://h.example/v1/projects/p-1/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5:rawPredict"},
		// A model name cannot leave its segment.
		{"https://h.example", "gemini", "../../x?y#z", "", false,
			"https://h.example/v1/projects/p-1/locations/us-east5/publishers/google/models/..%2F..%2Fx%3Fy%23z:generateContent"},
	} {
		base, _ := url.Parse(tt.base)
		got := v.url(wire.Target{Base: base, Family: tt.family, Model: tt.model, Query: tt.query, Stream: tt.stream, Path: "/ignored"}).String()
		if got != tt.want {
			t.Errorf("%s %s stream=%v:\n got %s\nwant %s", tt.family, tt.model, tt.stream, got, tt.want)
		}
	}
}

func TestDefaultBaseURL(t *testing.T) {
	for loc, want := range map[string]string{
		"us-east5": "https://us-east5-aiplatform.googleapis.com",
		"global":   "https://aiplatform.googleapis.com",
	} {
		if got := defaultBaseURL("", map[string]string{"location": loc}); got != want {
			t.Errorf("%s: %s, want %s", loc, got, want)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	base, _ := url.Parse("https://h.example")
	for name, s := range map[string]map[string]string{
		"project with a slash": {"project": "a/b", "location": "us-east5", "credentials_file": "/nonexistent"},
		"no location":          {"project": "p", "credentials_file": "/nonexistent"},
		"both credentials":     {"project": "p", "location": "l", "credentials_file": "/x", "credentials_env": "V"},
		"missing key file":     {"project": "p", "location": "l", "credentials_file": "/nonexistent/key.json"},
	} {
		if _, err := open(wire.ChannelConfig{Name: "c", Base: base, Settings: s, Env: map[string]string{"credentials_env": "/y"}}); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}
