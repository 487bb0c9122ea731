package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// threeRuns makes two runs of identical conditions and one at concurrency 2
// against the simulator, in parallel.
func threeRuns(t *testing.T) (a, b, c *Result) {
	t.Helper()
	srv := simServer(t, nil)
	var wg sync.WaitGroup
	out := make([]*Result, 3)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts(srv.URL, "fast", 2)
			o.Labels = map[string]string{"region": "local", "path": "loopback"}
			if i == 2 {
				o.Concurrency = 2
			}
			out[i] = run(t, o)
		}()
	}
	wg.Wait()
	return out[0], out[1], out[2]
}

func TestCompare(t *testing.T) {
	a, b, c := threeRuns(t)

	same := Compare([]string{"a.json", "b.json"}, []*Result{a, b})
	if !same.Comparable() {
		t.Fatalf("identical conditions not comparable: %+v", same.Differences)
	}
	var buf bytes.Buffer
	if err := same.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "NOT COMPARABLE") || !strings.Contains(out, "b.json/a.json") || !strings.Contains(out, "first_text_delta_ms") {
		t.Errorf("table:\n%s", out)
	}

	diff := Compare([]string{"a.json", "c.json"}, []*Result{a, c})
	if diff.Comparable() {
		t.Fatal("runs at concurrency 1 and 2 compared as equal")
	}
	bl := Blocking(diff.Differences[1])
	if len(bl) != 1 || bl[0].Field != "load.concurrency" || bl[0].A != "1" || bl[0].B != "2" {
		t.Errorf("blocking differences %+v, want only load.concurrency 1 → 2", bl)
	}
	buf.Reset()
	diff.WriteDifferences(&buf)
	if !strings.Contains(buf.String(), "load.concurrency") {
		t.Errorf("differences do not name the concurrency:\n%s", buf.String())
	}
	// Runs that differ only in concurrency are a load series, labelled
	// by it, in the order given; no ratios rank one load over another.
	if f, name, unit, ok := diff.SeriesAxis(); !ok || f != "load.concurrency" || name != "concurrency" || unit != "workers" {
		t.Fatalf("series axis %q %q %q %v", f, name, unit, ok)
	}
	rev := Compare([]string{"c.json", "a.json"}, []*Result{c, a})
	buf.Reset()
	rev.WriteTable(&buf)
	if !strings.HasPrefix(buf.String(), "load series over concurrency (workers): 2, 1") ||
		!strings.Contains(buf.String(), "concurrency=2 (c.json)  concurrency=1 (a.json)") || strings.Contains(buf.String(), "/c.json") {
		t.Errorf("series table:\n%s", buf.String())
	}

	// A difference beside the load is no series: the forced table says
	// NOT COMPARABLE.
	c2 := *c
	c2.Conditions.Labels = map[string]string{"region": "elsewhere", "path": "loopback"}
	mixed := Compare([]string{"a.json", "c.json"}, []*Result{a, &c2})
	if _, _, _, ok := mixed.SeriesAxis(); ok || mixed.Comparable() {
		t.Fatal("runs differing in load and region taken as a series")
	}
	buf.Reset()
	mixed.WriteTable(&buf) // --force
	if !strings.HasPrefix(buf.String(), "NOT COMPARABLE") {
		t.Errorf("forced table not marked:\n%s", buf.String())
	}
}

func TestDifferences(t *testing.T) {
	base := Conditions{Model: "m", Load: Load{Mode: ModeConcurrency, Concurrency: 4}, Labels: map[string]string{"region": "eu"},
		Tool: Tool{Version: "1"}, Sample: Sample{Requests: 100, Warmup: 5}, PercentileMethod: PercentileMethod, Machines: 1}
	cases := []struct {
		name     string
		change   func(c *Conditions)
		field    string
		blocking bool
	}{
		{"model", func(c *Conditions) { c.Model = "n" }, "model", true},
		{"url", func(c *Conditions) { c.URL = "http://other" }, "url", true},
		{"rate", func(c *Conditions) { c.Load = Load{Mode: ModeRate, Rate: 4, Arrival: ArrivalPoisson} }, "load.arrival", true},
		{"prompt", func(c *Conditions) { c.Prompt.InputTokensSD = 10 }, "prompt.input_tokens_sd", true},
		{"max tokens", func(c *Conditions) { c.MaxTokens = 10 }, "max_tokens", true},
		{"stream", func(c *Conditions) { c.Stream = true }, "stream", true},
		{"effort", func(c *Conditions) { c.ReasoningEffort = "high" }, "reasoning_effort", true},
		{"tools", func(c *Conditions) { c.Tools = &Tools{SHA256: "x", Count: 1} }, "tools", true},
		{"temperature", func(c *Conditions) { v := 0.1; c.Sampling.Temperature = &v }, "sampling.temperature", true},
		{"region", func(c *Conditions) { c.Labels = map[string]string{"region": "us"} }, "labels.region", true},
		{"network path", func(c *Conditions) { c.Labels = map[string]string{"region": "eu", "path": "vpn"} }, "labels.path", true},
		{"retry", func(c *Conditions) { c.Retry.Max = 2 }, "retry.max", true},
		{"percentile", func(c *Conditions) { c.PercentileMethod = "nearest rank" }, "percentile_method", true},
		{"machines", func(c *Conditions) { c.Machines = 2 }, "machines", true},
		{"version", func(c *Conditions) { c.Tool.Version = "2" }, "tool.version", false},
		{"sample", func(c *Conditions) { c.Sample.Requests = 1000 }, "sample.requests", false},
		{"warmup", func(c *Conditions) { c.Sample.Warmup = 0 }, "sample.warmup", false},
	}
	for _, c := range cases {
		other := base
		other.Labels = map[string]string{"region": "eu"}
		c.change(&other)
		ds := Differences(base, other)
		found := false
		for _, d := range ds {
			if d.Field == c.field {
				found = true
				if d.Blocking != c.blocking {
					t.Errorf("%s: %s blocking = %v, want %v", c.name, d.Field, d.Blocking, c.blocking)
				}
			}
		}
		if !found {
			t.Errorf("%s: no difference at %s in %+v", c.name, c.field, ds)
		}
	}
	if ds := Differences(base, base); len(ds) != 0 {
		t.Errorf("a run differs from itself: %+v", ds)
	}
	// No labels and an empty label set are the same condition.
	x, y := base, base
	x.Labels, y.Labels = nil, map[string]string{}
	if ds := Differences(x, y); len(ds) != 0 {
		t.Errorf("nil vs empty labels: %+v", ds)
	}
}

func TestMerge(t *testing.T) {
	a, b, c := threeRuns(t)
	m, err := Merge([]*Result{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Requests) != 4 || m.Conditions.Machines != 2 || len(m.Run.Sources) != 2 || m.Run.ID == a.Run.ID {
		t.Fatalf("merged %d rows, machines %d, sources %+v", len(m.Requests), m.Conditions.Machines, m.Run.Sources)
	}
	// Exact: the merged percentiles are those of the union of the rows.
	var ends []float64
	for _, r := range append(append([]Row{}, a.Requests...), b.Requests...) {
		v, _ := r.EndToEndMs.Ms()
		ends = append(ends, v)
	}
	want := Describe(ends, 0)
	got := m.Summary.EndToEndMs
	if *got.P50 != *want.P50 || *got.P99 != *want.P99 || got.Count != 4 {
		t.Errorf("merged end_to_end %+v, want %+v", got, want)
	}
	if *m.Summary.Load.RequestedConcurrency != 2 {
		t.Errorf("requested concurrency %d, want 2 machines × 1", *m.Summary.Load.RequestedConcurrency)
	}
	// A merged result merges again, and keeps every source.
	if _, err := Merge([]*Result{m, a}); err == nil || !strings.Contains(err.Error(), "more than one result") {
		t.Errorf("merging a run twice: %v", err)
	}
	// Different conditions are refused, naming the field.
	if _, err := Merge([]*Result{a, c}); err == nil || !strings.Contains(err.Error(), "load.concurrency") {
		t.Errorf("merge across concurrency: %v", err)
	}
	// The merged result is a result file like any other.
	path := filepath.Join(t.TempDir(), "m.json")
	if err := m.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(m)
	b2, _ := json.Marshal(back)
	if !bytes.Equal(b1, b2) {
		t.Error("merged result does not round-trip through its file")
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"other-format.json": `{"format":"something/2"}`,
		"unknown.json":      `{"format":"ttfx-bench/1","extra":1}`,
		"trailing.json":     `{"format":"ttfx-bench/1"} {}`,
		"notjson.json":      `hello`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadFile(p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}
