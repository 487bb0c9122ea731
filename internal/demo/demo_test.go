package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the whole demo, as `ttfx demo` does, and checks that the
// seed's three traces come out with SPEC §4's verdicts.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes about 21 s of real time")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	if err := Run(ctx, Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", Out: &out}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if d := time.Since(start); d > 45*time.Second {
		t.Errorf("demo took %v, want well under a minute", d)
	}
	s := out.String()
	for _, want := range []string{
		"trace-a", "upstream_headers_slow", "trace-b", "response_to_text_gap", "trace-c", "generation_slow",
		"mixed load: 21 requests", "truncated", "ttfx diagnose --url", "/ui/",
		// Whoever makes keys prints them all, as shell lines (issue 14).
		"\nexport TTFX_ADMIN_KEY=ttfx-admin-", "\nexport TTFX_CLIENT_KEY=ttfx-client-", "\nexport TTFX_VIEWER_KEY=ttfx-viewer-",
		"\nexport TTFX_DEMO_KEY=ttfx-demo-", "\nexport TTFX_DEMO_CLIENT_KEY=ttfx-demo-client-",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(s)
	}
}
