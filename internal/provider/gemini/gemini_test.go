package gemini

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

func TestUpstreamURL(t *testing.T) {
	for _, tt := range []struct{ base, path, want string }{
		{"https://g.example.com", "/v1/models/m:generateContent", "https://g.example.com/v1/models/m:generateContent"},
		{"https://g.example.com", "/v1beta/models/m:generateContent", "https://g.example.com/v1beta/models/m:generateContent"},
		{"https://g.example.com/v1beta", "/v1/models/m:streamGenerateContent", "https://g.example.com/v1beta/models/m:streamGenerateContent"},
		{"https://g.example.com/v1beta/", "/v1beta/models/m:generateContent", "https://g.example.com/v1beta/models/m:generateContent"},
		{"https://g.example.com/v1", "/v1beta/models/m:generateContent", "https://g.example.com/v1/models/m:generateContent"},
		{"https://proxy.example.com/google", "/v1/models/m:generateContent", "https://proxy.example.com/google/v1/models/m:generateContent"},
	} {
		base, _ := url.Parse(tt.base)
		if got := upstreamURL(wire.Target{Base: base, Path: tt.path, Query: "alt=sse", Model: "m"}).String(); got != tt.want+"?alt=sse" {
			t.Errorf("upstreamURL(%s, %s) = %s, want %s?alt=sse", tt.base, tt.path, got, tt.want)
		}
	}
}

func TestTarget(t *testing.T) {
	for in, want := range map[string]struct {
		model  string
		stream bool
		code   int
	}{
		"gemini-2.5-flash:streamGenerateContent": {"gemini-2.5-flash", true, 0},
		"m:generateContent":                      {"m", false, 0},
		"m:countTokens":                          {code: http.StatusNotFound},
		"m":                                      {code: http.StatusBadRequest},
		":generateContent":                       {code: http.StatusBadRequest},
	} {
		model, stream, err := target(in)
		var te *wire.TargetError
		switch {
		case want.code == 0 && (err != nil || model != want.model || stream != want.stream):
			t.Errorf("target(%q) = %q, %v, %v", in, model, stream, err)
		case want.code != 0 && (!errors.As(err, &te) || te.Code != want.code):
			t.Errorf("target(%q) error = %v, want code %d", in, err, want.code)
		}
	}
}

func TestClaim(t *testing.T) {
	a := wire.LookupAPI("gemini")
	for path, want := range map[string]int{
		"/v1beta/anything":             2,
		"/v1/models/m:generateContent": 2,
		"/v1/models":                   0,
		"/v1/models/gpt-4o":            0,
		"/v1/chat/completions":         0,
		"/v1/models/m:countTokens?x=1": 2,
	} {
		if got := a.Claim(httptest.NewRequest("POST", path, nil)); got != want {
			t.Errorf("Claim(%s) = %d, want %d", path, got, want)
		}
	}
}
