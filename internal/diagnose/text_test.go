package diagnose

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
)

func TestWriteText(t *testing.T) {
	r := New(config.Diagnosis{})
	rc := rec(1, 241, 250, 2900, 8700, 10199, 10200, 55, 83)
	rc.RequestID, rc.API, rc.Model, rc.Channel = "req_b", "openai.chat", "trace-b", "sim-openai"
	rc.Attempts = []record.Attempt{{Channel: "sim-openai", UpstreamStartMs: rc.UpstreamStartMs, UpstreamHeadersMs: rc.UpstreamHeadersMs, UpstreamHeadersAtMs: rc.UpstreamHeadersAtMs, Status: "ok", HTTPStatus: 200}}
	r.Diagnose(&rc)
	rep := Report{RequestID: rc.RequestID}
	for i, l := range rc.Diagnosis {
		rep.Verdicts = append(rep.Verdicts, Verdict{Label: l, Primary: i == 0, Advice: Advise(l)})
	}
	var b bytes.Buffer
	if err := WriteText(&b, rc, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"attempt 1 sim-openai", "→ first text (t5)", "1. response_to_text_gap  (primary)",
		"raising the header timeout", "t5 first visible text         8700.0", "visible output 55.0 tokens/s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A non-streaming request shows rule 1 as not applicable, and a stall
	// is drawn where it happened.
	rc.Stream = false
	rc.MaxOutputGapMs, rc.MaxOutputGapAtMs = span(3500), at(6000)
	rep.Rules = []Rule{{Order: 1, Label: UpstreamHeadersSlow, NotApplicable: NotStreaming}, {Order: 6, Label: GenerationStalled}}
	b.Reset()
	WriteText(&b, rc, rep)
	for _, want := range []string{"[-] 1 upstream_headers_slow: not applicable (non-streaming)", "[ ] 6 generation_stalled",
		"no content between", "non-streaming requests only"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	rc.Stream = true
	// An absent mark prints as absent, never as 0.
	rc.FirstTextDeltaMs = rc.FirstTextSentMs
	b.Reset()
	WriteText(&b, rc, rep)
	if !strings.Contains(b.String(), "t5 first visible text         -") {
		t.Errorf("absent t5 not shown as absent:\n%s", b.String())
	}
	// The upstream credentials' wait and the provider's own latency are
	// printed when the record has them, and only then.
	if strings.Contains(b.String(), "upstream_auth_ms") || strings.Contains(b.String(), "provider_latency_ms") {
		t.Errorf("absent upstream_auth_ms or provider_latency_ms printed:\n%s", b.String())
	}
	rc.UpstreamAuthMs, rc.ProviderLatencyMs = span(403.7), span(9874)
	b.Reset()
	WriteText(&b, rc, rep)
	for _, want := range []string{"\n  upstream_auth_ms 403.7 (waiting", "\n  provider_latency_ms 9874.0 (the provider's own figure"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWriteTextRouting: a hedge race and the channels skipped as ejected
// are printed with each attempt's role and outcome.
func TestWriteTextRouting(t *testing.T) {
	rc := rec(1, 241, 250, 2900, 8700, 10199, 10200, 55, 83)
	rc.RequestID, rc.Channel = "req_h", "fast"
	rc.SkippedEjected = []string{"dead"}
	rc.Attempts = []record.Attempt{
		{Channel: "fast", Role: record.RoleHedge, Outcome: record.OutcomeWon, Status: "ok", FirstResponseAtMs: rc.FirstResponseMs},
		{Channel: "slow", Role: record.RolePrimary, Outcome: record.OutcomeCancelled, Status: record.StatusClientCancelled},
	}
	var b bytes.Buffer
	WriteText(&b, rc, Report{RequestID: rc.RequestID})
	want := "  routing: attempts 1 fast hedge won (first response at 2900.0 ms); 2 slow primary cancelled; skipped as ejected: dead\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
}
