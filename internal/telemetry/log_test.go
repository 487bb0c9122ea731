package telemetry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

func TestRequestLogLine(t *testing.T) {
	var buf bytes.Buffer
	l, err := NewLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	NewRequestLog(l).Record(new(traceB()))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	for k, want := range map[string]any{
		"msg": "request", "level": "INFO", "request_id": "req_b", "status": "ok", "http_status": 200.0,
		"api": "openai.chat", "model": "trace-b", "channel": "sim-openai", "group": "default", "key_name": "client",
		"upstream_headers_ms": 240.0, "first_response_ms": 2900.0, "first_text_delta_ms": 8700.0,
		"total_handler_ms": 10200.3, "verdict": "response_to_text_gap", "visible_tokens": 83.0, "attempts": 1.0,
	} {
		if line[k] != want {
			t.Errorf("%s = %#v, want %#v", k, line[k], want)
		}
	}
	if _, ok := line["error"]; ok {
		t.Errorf("error logged for an ok request")
	}
}

// TestRequestLogLeavesAbsentOut: a request without marks has no such
// fields in its line, rather than zeros; a failure logs at WARN.
func TestRequestLogLeavesAbsentOut(t *testing.T) {
	var buf bytes.Buffer
	l, _ := NewLogger(&buf, "json", "")
	rec := record.Record{RequestID: "req_x", API: "openai.chat", Status: record.StatusAuthFailed, HTTPStatus: 401,
		Error: "invalid API key", Diagnosis: []string{record.StatusAuthFailed}}
	rec.AuthMs = timeline.SpanOf(ms(0.01))
	rec.TotalHandlerMs = timeline.At(ms(0.2))
	NewRequestLog(l).Record(&rec)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["level"] != "WARN" || line["verdict"] != "auth_failed" || line["error"] != "invalid API key" {
		t.Errorf("line %v", line)
	}
	for _, k := range []string{"upstream_headers_ms", "first_sse_event_ms", "first_response_ms", "first_text_delta_ms", "upstream_done_ms", "visible_output_tps", "visible_tokens"} {
		if v, ok := line[k]; ok {
			t.Errorf("absent %s logged as %v", k, v)
		}
	}
}

func TestRequestLogLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	l, _ := NewLogger(&buf, "text", "warn")
	rl := NewRequestLog(l)
	rl.Record(new(traceB()))
	if buf.Len() != 0 {
		t.Fatalf("ok request logged at level warn: %q", buf.String())
	}
	rec := traceB()
	rec.Status = record.StatusTruncated
	rl.Record(&rec)
	if !strings.Contains(buf.String(), "status=truncated") || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("text line %q", buf.String())
	}
}

func TestNewLoggerRejectsTypos(t *testing.T) {
	for _, c := range [][2]string{{"jsno", "info"}, {"text", "verbose"}} {
		if _, err := NewLogger(&bytes.Buffer{}, c[0], c[1]); err == nil {
			t.Errorf("NewLogger(%q, %q) accepted", c[0], c[1])
		}
	}
	if _, err := NewLogger(&bytes.Buffer{}, "", ""); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}

func TestClip(t *testing.T) {
	if got := clip("héllo", 2); got != "h…" {
		t.Errorf("clip on a rune boundary = %q", got)
	}
	if got := clip("abc", 3); got != "abc" {
		t.Errorf("clip = %q", got)
	}
}
