package bedrock

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

func TestDefaultBaseURLAndRegion(t *testing.T) {
	if got := defaultBaseURL("eu-west-3", nil); got != "https://bedrock-runtime.eu-west-3.amazonaws.com" {
		t.Errorf("defaultBaseURL: %q", got)
	}
	if got := defaultBaseURL("", nil); got != "" {
		t.Errorf("no region: %q", got)
	}
	for base, want := range map[string]string{
		"https://bedrock-runtime.us-west-2.amazonaws.com":      "us-west-2",
		"https://bedrock-runtime-fips.us-east-1.amazonaws.com": "us-east-1",
		"http://127.0.0.1:8080":                                "",
		"https://bedrock-runtime.Bad_Region.amazonaws.com":     "",
	} {
		u, _ := url.Parse(base)
		if got := regionOf(u); got != want {
			t.Errorf("regionOf(%s) = %q, want %q", base, got, want)
		}
	}
}

// open refuses what cannot work, with the reason, before any request.
func TestOpenRefuses(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	base, _ := url.Parse("http://127.0.0.1:1")
	for _, tc := range []struct {
		c    wire.ChannelConfig
		want string
	}{
		{wire.ChannelConfig{Name: "a", Base: base, Key: "k", Settings: map[string]string{"profile": "p"}}, "not both"},
		{wire.ChannelConfig{Name: "b", Base: base, Region: "us east"}, "not an AWS region"},
		{wire.ChannelConfig{Name: "c", Base: base}, "no region"},
		{wire.ChannelConfig{Name: "d", Base: base, Region: "us-east-1", Settings: map[string]string{"profile": "missing"}}, "missing"},
	} {
		if _, err := open(tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.c.Name, err, tc.want)
		}
	}
	// A key needs nothing of AWS's chain: its Upstream has no signer.
	if up, err := open(wire.ChannelConfig{Name: "e", Base: base, Key: "k"}); err != nil || up.Credentials != nil {
		t.Errorf("a Bedrock API key: %+v %v", up, err)
	}
}
