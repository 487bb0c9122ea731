package demo

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	_ "github.com/ttfx/ttfx/internal/store/sqlstore"
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
	dir := t.TempDir()
	if err := Run(ctx, Options{Dir: dir, Listen: "127.0.0.1:0", Out: &out}); err != nil {
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
	// Every API's row of verdicts says what SPEC §4 says (Run checked the
	// records; this is what the reader sees), Bedrock's Converse among
	// them, through the zero-config channel of its kind.
	for _, api := range []string{"openai.chat", "openai.responses", "anthropic", "gemini", "bedrock.converse"} {
		row := regexp.MustCompile(`\n` + regexp.QuoteMeta(api) + ` +sim-[a-z]+ +upstream_headers_slow +response_to_text_gap +generation_slow *\n`)
		if !row.MatchString(s) {
			t.Errorf("no row of %s's verdicts", api)
		}
	}
	if !regexp.MustCompile(`\nbedrock\.converse +sim-bedrock `).MatchString(s) {
		t.Error("bedrock.converse's traces did not go through sim-bedrock")
	}
	// The stored records: each trace in each API with its verdict, and
	// the mixed load's Converse requests relayed by sim-bedrock.
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "ttfx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.List(ctx, store.Filter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]string{} // api/trace → primary verdict
	converseOK := 0
	for _, r := range page.Records {
		if strings.HasPrefix(r.Model, "trace-") && len(r.Diagnosis) > 0 {
			verdicts[r.API+"/"+r.Model] = r.Diagnosis[0]
		}
		if r.API == "bedrock.converse" && r.Status == record.StatusOK {
			if r.Channel != "sim-bedrock" || !r.UpstreamHeadersMs.Valid() {
				t.Errorf("converse %s: channel %s headers %v", r.Model, r.Channel, r.UpstreamHeadersMs)
			}
			converseOK++
		}
		if r.API == "anthropic" && r.Channel != "sim-anthropic" {
			t.Errorf("anthropic %s through %s, want sim-anthropic only (the zero-config bedrock channel serves Converse)", r.Model, r.Channel)
		}
	}
	for _, tr := range Traces {
		if v := verdicts["bedrock.converse/"+tr.Model]; v != tr.Verdict {
			t.Errorf("stored bedrock.converse %s: verdict %q, want %s", tr.Model, v, tr.Verdict)
		}
	}
	if converseOK < 4 {
		t.Errorf("%d Converse records ok, want the three traces and the mixed load's", converseOK)
	}
	if t.Failed() {
		t.Log(s)
	}
}
