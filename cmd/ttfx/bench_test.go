package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sim"
)

// TestBenchCommand runs `ttfx bench` as a user does, against the simulator,
// then report, compare (refusing runs of another concurrency) and merge.
func TestBenchCommand(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := benchMain(context.Background(), args, &out, &errb)
		return out.String() + errb.String(), err
	}
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	common := []string{"--url", up.URL, "--api", "openai.chat", "--model", "fast", "--key", "k", "--requests", "4", "--label", "region=local"}
	if out, err := run(append(common, "--concurrency", "2", "--out", a)...); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if out, err := run(append(common, "--concurrency", "2", "--out", b)...); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	if out, err := run(append(common, "--concurrency", "4", "--out", c)...); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var res struct {
		Conditions map[string]any             `json:"conditions"`
		Requests   []map[string]any           `json:"requests"`
		Summary    map[string]json.RawMessage `json:"summary"`
	}
	raw, _ := os.ReadFile(a)
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != 4 || len(res.Conditions) == 0 {
		t.Fatalf("result: %d requests, conditions %v", len(res.Requests), res.Conditions)
	}
	for _, k := range []string{"percentile_method", "time_to_headers_ms", "first_sse_event_ms", "first_response_ms", "first_text_delta_ms", "end_to_end_ms", "visible_output_tps", "inter_token_latency_ms"} {
		if _, ok := res.Summary[k]; !ok {
			t.Errorf("summary lacks %s", k)
		}
	}
	if out, err := run("report", a); err != nil || !strings.Contains(out, "first_text_delta_ms") {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if out, err := run("compare", a, b); err != nil {
		t.Fatalf("compare of identical conditions: %v\n%s", err, out)
	}
	// Runs that differ only in load are a series along that condition,
	// in the order given.
	out, err := run("compare", c, a)
	if err != nil || !strings.Contains(out, "load series over concurrency (workers): 4, 2") ||
		!regexp.MustCompile(`metric\s+stat\s+concurrency=4 \(c\.json\)\s+concurrency=2 \(a\.json\)`).MatchString(out) {
		t.Fatalf("compare of a concurrency sweep: %v\n%s", err, out)
	}
	// Anything else is refused as a ranking; the refusal names --force,
	// which shows the table anyway and is no failure.
	d := filepath.Join(dir, "d.json")
	if out, err := run(append(common[:len(common)-1:len(common)-1], "region=elsewhere", "--concurrency", "2", "--out", d)...); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	out, err = run("compare", a, d)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitNotComparable || !strings.Contains(err.Error(), "labels.region") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("compare of different regions: %v\n%s", err, out)
	}
	out, err = run("compare", a, d, c, "--force")
	if err != nil || !strings.Contains(out, "NOT COMPARABLE") {
		t.Fatalf("compare --force: %v\n%s", err, out)
	}
	m := filepath.Join(dir, "m.json")
	if out, err := run("merge", a, b, "--out", m); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	raw, _ = os.ReadFile(m)
	res.Requests = nil
	json.Unmarshal(raw, &res)
	if len(res.Requests) != 8 {
		t.Fatalf("merged %d requests, want 8", len(res.Requests))
	}
}

// TestBenchNamesFailures: a run without a key warns that none was given,
// and its summary names the failures by HTTP status and error code.
func TestBenchNamesFailures(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{APIKey: "upstream-key"}))
	defer up.Close()
	var out, errb bytes.Buffer
	err := benchMain(context.Background(), []string{"--url", up.URL, "--model", "fast", "--requests", "2"}, &out, &errb)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitAllFailed {
		t.Fatalf("a run of 401s: %v\n%s", err, out.String())
	}
	if !strings.Contains(errb.String(), "warning: no key given") {
		t.Errorf("no warning about the missing key:\n%s", errb.String())
	}
	if !regexp.MustCompile(`(?m)^  failures: 401 \S+ × 2$`).MatchString(out.String()) {
		t.Errorf("the summary does not name the failures:\n%s", out.String())
	}
}
