package bench

import (
	"bytes"
	"encoding/csv"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/timeline"
)

// mixedResult is a run with successes and mid-stream failures.
func mixedResult(t *testing.T) *Result {
	t.Helper()
	srv := mixer(t, "fast", "flaky")
	o := opts(srv.URL, "fast", 6)
	o.Concurrency = 2
	o.Labels = map[string]string{"region": "local"}
	return run(t, o)
}

func TestReportAndHTML(t *testing.T) {
	res := mixedResult(t)
	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	rep := buf.String()
	for _, want := range []string{"3 ok, 3 failed", "read_error 3", "mid_stream 3", "with failures counted as +Inf",
		"+Inf", "first_text_delta_ms", "region=local", "R-7", "failed requests (3)"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}

	buf.Reset()
	if err := WriteHTML(&buf, res); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, "<svg"); n != 3 {
		t.Errorf("%d charts, want 3 (CDF, histogram, strip)", n)
	}
	// One CDF line per TTFT definition, one timeline line per request.
	if n := strings.Count(page, "<polyline"); n != 4 {
		t.Errorf("%d CDF curves, want 4", n)
	}
	if n := strings.Count(page, `stroke="#d62728"`); n != 3 {
		t.Errorf("%d red (failed) request lines, want 3", n)
	}
	// Self-contained: nothing is loaded from elsewhere.
	for _, bad := range []string{"<script", "<link", " src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	// The CDF of first text tops out at the share that reached it.
	if !strings.Contains(page, "first_text_delta_ms (3/6)") {
		t.Error("CDF legend does not count the failures in the denominator")
	}
	// The simulator's "fast" answers with text at once, so the
	// first_response and first_text curves coincide: each curve must
	// still be told apart by its stroke (width and dash), not only drawn
	// over by the next.
	strokes := map[string]bool{}
	for _, m := range regexp.MustCompile(`<polyline fill="none" stroke="[^"]+" stroke-width="([^"]+)" stroke-dasharray="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		strokes[m[1]+"/"+m[2]] = true
	}
	if len(strokes) != 4 {
		t.Errorf("CDF curves share strokes: %v", strokes)
	}
	// Every axis of every chart says what it measures and in which unit.
	for i, svg := range strings.Split(page, "<svg")[1:] {
		for _, axis := range []string{"axis-x", "axis-y"} {
			m := regexp.MustCompile(`class="` + axis + `"[^>]*>([^<]*)<`).FindStringSubmatch(svg)
			if m == nil || !regexp.MustCompile(`\((ms|tokens/s|count|% of measured|one row each, in start order)\)$`).MatchString(m[1]) {
				t.Errorf("chart %d: %s title %v lacks a unit", i, axis, m)
			}
		}
	}
}

func TestCSV(t *testing.T) {
	res := mixedResult(t)
	var buf bytes.Buffer
	if err := WriteCSV(&buf, res.Requests); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 7 || len(recs[0]) != len(csvColumns) {
		t.Fatalf("%d lines, %d columns", len(recs), len(recs[0]))
	}
	for _, rec := range recs[1:] {
		if len(rec) != len(csvColumns) {
			t.Fatalf("ragged row %v", rec)
		}
	}
}

func TestProgressLine(t *testing.T) {
	now := time.Unix(1000, 0)
	p := &Progress{Total: 4, Now: func() time.Time { return now }}
	if got := p.Line(); !strings.Contains(got, "warming up") {
		t.Errorf("before measuring: %q", got)
	}
	p.Measure()
	p.Add(Row{Status: StatusOK, FirstTextDeltaMs: at(100)})
	p.Add(Row{Status: StatusOK, FirstTextDeltaMs: at(300)})
	p.Add(Row{Status: StatusReadError, FirstTextDeltaMs: at(1)})
	got := p.Line()
	for _, want := range []string{"3/4 done", "1 errors", "p50 first text 200.0 ms", " 75%", "##################------"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
	d := &Progress{Duration: 10 * time.Second, Now: func() time.Time { return now }}
	d.Measure()
	now = now.Add(5 * time.Second)
	if got := d.Line(); !strings.Contains(got, " 50%") || !strings.Contains(got, "p50 first text -") {
		t.Errorf("duration line %q", got)
	}
	var out bytes.Buffer
	d.W = &out
	d.draw(false)
	if !strings.HasSuffix(out.String(), "\n") {
		t.Errorf("non-TTY progress is not line by line: %q", out.String())
	}
}

func at(ms float64) timeline.Offset {
	return timeline.At(time.Duration(ms * float64(time.Millisecond)))
}

// TestReportAllOrNoneFailed: when every request failed the report says why
// first and prints no table of successful requests; when none failed it
// has no failure-inclusive table repeating the successful one.
func TestReportAllOrNoneFailed(t *testing.T) {
	srv := simServer(t, nil)
	var buf bytes.Buffer
	if err := WriteReport(&buf, run(t, opts(srv.URL, "status-503", 3))); err != nil {
		t.Fatal(err)
	}
	rep := buf.String()
	if !strings.HasPrefix(rep, "every measured request failed (3 of 3):\n  503 ") {
		t.Errorf("all failed: the report does not start with the reason:\n%s", rep)
	}
	for _, absent := range []string{"successful requests (", "with failures counted", "tokens (successful"} {
		if strings.Contains(rep, absent) {
			t.Errorf("all failed: the report has %q:\n%s", absent, rep)
		}
	}
	if !strings.Contains(rep, "failed requests (3)") {
		t.Errorf("all failed: no table of how far they got:\n%s", rep)
	}

	buf.Reset()
	if err := WriteReport(&buf, run(t, opts(srv.URL, "fast", 2))); err != nil {
		t.Fatal(err)
	}
	rep = buf.String()
	if strings.Contains(rep, "with failures counted") || strings.Contains(rep, "every measured request failed") || !strings.Contains(rep, "successful requests (2)") {
		t.Errorf("none failed:\n%s", rep)
	}
}
