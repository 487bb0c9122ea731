package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const fixtureDir = "../../testdata/fixtures"

// indexRow is one row of the fixtures' INDEX.md table.
type indexRow struct {
	file, api                            string
	firstEvent, firstResponse, firstText *int
	terminal                             string
}

// readIndex parses INDEX.md's table, so that the test checks what INDEX.md
// itself predicts.
func readIndex(t *testing.T) []indexRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "INDEX.md"))
	if err != nil {
		t.Fatal(err)
	}
	idx := func(s string) *int {
		s = strings.TrimSpace(s)
		if s == "—" || s == "-" {
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("INDEX.md: bad index %q", s)
		}
		return &n
	}
	var rows []indexRow
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 8 {
			t.Fatalf("INDEX.md: short row %q", line)
		}
		rows = append(rows, indexRow{
			file:          strings.Trim(strings.TrimSpace(cols[1]), "`"),
			api:           strings.TrimSpace(cols[2]),
			firstEvent:    idx(cols[3]),
			firstResponse: idx(cols[4]),
			firstText:     idx(cols[5]),
			terminal:      strings.TrimSpace(cols[6]),
		})
	}
	if len(rows) == 0 {
		t.Fatal("INDEX.md: no rows")
	}
	return rows
}

// fixtureUsage is the usage each recorded stream reports, read from the
// files (INDEX.md does not list it).
var fixtureUsage = map[string]string{
	"anthropic__messages__text-with-ping.sse":                                          `{"input":12,"output":30,"reasoning":null}`,
	"anthropic__messages__tool-use-input-json-delta.sse":                               `{"input":849,"output":47,"reasoning":null}`,
	"anthropic__messages__extended-thinking-signature-delta.sse":                       `{"input":69,"output":53,"reasoning":null}`,
	"anthropic__messages__text-basic-sdk-fixture.sse":                                  `{"input":11,"output":6,"reasoning":null}`,
	"anthropic__messages__text-then-tool-use-sdk-fixture.sse":                          `{"input":377,"output":65,"reasoning":null}`,
	"openai__responses__function-call-arguments-delta.sse":                             `{"input":45,"output":25,"reasoning":0}`,
	"openai__responses__encrypted-reasoning-then-output-text.sse":                      `{"input":19,"output":21,"reasoning":11}`,
	"openai__chat__text-then-tool-call-include-usage.sse":                              `{"input":58,"output":12,"reasoning":0}`,
	"openai__chat__text-include-usage.sse":                                             `{"input":86,"output":2,"reasoning":0}`,
	"anthropic__openai-compat-chat__text-then-tool-call.sse":                           `{"input":null,"output":null,"reasoning":null}`,
	"deepseek__chat__reasoning-content-then-text.sse":                                  `{"input":97,"output":106,"reasoning":88}`,
	"groq__chat__tool-call-x-groq-usage.sse":                                           `{"input":210,"output":15,"reasoning":null}`,
	"groq__chat__reasoning-field-head-excerpt.sse":                                     `{"input":null,"output":null,"reasoning":null}`,
	"mistral__chat__tool-call-single-chunk.sse":                                        `{"input":124,"output":22,"reasoning":null}`,
	"google__gemini-streamGenerateContent__text-then-empty-part-thought-signature.sse": `{"input":9,"output":208,"reasoning":185}`,
	"google__gemini-streamGenerateContent__thought-parts-then-text.sse":                `{"input":2,"output":351,"reasoning":344}`,
	"google__gemini-streamGenerateContent__thought-then-function-call.sse":             `{"input":52,"output":73,"reasoning":56}`,
	"google__gemini-streamGenerateContent__malformed-function-call-terminal-crlf.sse":  `{"input":61,"output":0,"reasoning":0}`,
	"ollama__openai-chat__text.sse":                                                    `{"input":null,"output":null,"reasoning":null}`,
	"ollama__openai-chat__parallel-tool-calls.sse":                                     `{"input":null,"output":null,"reasoning":null}`,
	"llamacpp__openai-chat__tool-call-timings-verbose.sse":                             `{"input":null,"output":null,"reasoning":null}`,
	"openrouter__chat__nemotron-text-then-usage-chunk.sse":                             `{"input":18,"output":47,"reasoning":null}`,
}

type summaryLine struct {
	Summary struct {
		API           string          `json:"api"`
		FirstEvent    *int            `json:"first_event"`
		FirstResponse *int            `json:"first_response"`
		FirstText     *int            `json:"first_text"`
		Terminal      string          `json:"terminal"`
		FinishReason  *string         `json:"finish_reason"`
		ErrorCode     string          `json:"error_code"`
		ReadError     string          `json:"read_error"`
		Usage         json.RawMessage `json:"usage"`
		Events        map[string]int  `json:"events"`
		Tokens        struct {
			Visible *int   `json:"visible"`
			Source  string `json:"source"`
		} `json:"tokens"`
	} `json:"summary"`
}

type eventLine struct {
	Index *int     `json:"index"`
	Kind  string   `json:"kind"`
	Kinds []string `json:"kinds"`
	Type  string   `json:"type"`
	Bytes int      `json:"bytes"`
}

// runInspectOutput runs inspectMain and splits its output into the event
// lines and the summary.
func runInspectOutput(t *testing.T, args []string, stdin []byte) ([]eventLine, summaryLine) {
	t.Helper()
	var out bytes.Buffer
	if err := inspectMain(args, bytes.NewReader(stdin), &out); err != nil {
		t.Fatalf("inspect %v: %v", args, err)
	}
	var events []eventLine
	var sum summaryLine
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) == 0 {
		t.Fatal("no output")
	}
	for _, l := range lines[:len(lines)-1] {
		var e eventLine
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Index == nil || e.Kind == "" {
			t.Fatalf("bad event line %q: %v", l, err)
		}
		events = append(events, e)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Summary.API == "" {
		t.Fatalf("bad summary line %q: %v", lines[len(lines)-1], err)
	}
	return events, sum
}

func eqIndex(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func show(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}

func TestInspectFixtures(t *testing.T) {
	rows := readIndex(t)
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*.sse"))
	if len(rows) != len(files) {
		t.Errorf("INDEX.md lists %d streams, the directory has %d", len(rows), len(files))
	}
	for _, row := range rows {
		t.Run(row.file, func(t *testing.T) {
			path := filepath.Join(fixtureDir, row.file)
			events, sum := runInspectOutput(t, []string{path}, nil)
			s := sum.Summary
			if s.API != row.api {
				t.Errorf("api %q, want %q", s.API, row.api)
			}
			if !eqIndex(s.FirstEvent, row.firstEvent) || !eqIndex(s.FirstResponse, row.firstResponse) || !eqIndex(s.FirstText, row.firstText) {
				t.Errorf("first event/response/text %s/%s/%s, INDEX.md says %s/%s/%s",
					show(s.FirstEvent), show(s.FirstResponse), show(s.FirstText),
					show(row.firstEvent), show(row.firstResponse), show(row.firstText))
			}
			if s.Terminal != row.terminal {
				t.Errorf("terminal %q, INDEX.md says %q", s.Terminal, row.terminal)
			}
			want, ok := fixtureUsage[row.file]
			if !ok {
				t.Fatalf("no usage expectation for %s", row.file)
			}
			if string(s.Usage) != want {
				t.Errorf("usage %s, want %s", s.Usage, want)
			}
			// One line per dispatched event, indexes 0..n-1, and the
			// per-kind counts add up to them (the fixtures have no comments).
			total := 0
			for i, e := range events {
				if *e.Index != i || len(e.Kinds) == 0 || e.Kinds[0] != e.Kind || e.Bytes <= 0 {
					t.Errorf("line %d: %+v", i, e)
				}
			}
			for _, n := range s.Events {
				total += n
			}
			if total != len(events) {
				t.Errorf("events %v sum to %d, %d lines", s.Events, total, len(events))
			}
			// The same stream on standard input with --api after the
			// file name gives the same summary.
			data, _ := os.ReadFile(path)
			_, again := runInspectOutput(t, []string{"-", "--api", row.api}, data)
			a, _ := json.Marshal(again)
			b, _ := json.Marshal(sum)
			if !bytes.Equal(a, b) {
				t.Errorf("stdin summary %s, file summary %s", a, b)
			}
		})
	}
}

func TestInspectCommentsAreNotEvents(t *testing.T) {
	in := ": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata:\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	events, sum := runInspectOutput(t, []string{"-"}, []byte(in))
	if len(events) != 4 {
		t.Fatalf("%d event lines, want 4 (comments are not events)", len(events))
	}
	s := sum.Summary
	if *s.FirstEvent != 0 || *s.FirstText != 0 || s.Terminal != "done" || *s.FinishReason != "stop" {
		t.Errorf("summary %+v", s)
	}
	if events[1].Kind != "heartbeat" || s.Events["heartbeat"] != 3 {
		t.Errorf("empty data line %+v, heartbeats %d (want 2 comments + 1 empty event)", events[1], s.Events["heartbeat"])
	}
}

func TestInspectErrors(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		stdin string
		code  int
		msg   string
	}{
		{nil, "", 2, "want one FILE"},
		{[]string{"a", "b"}, "", 2, "want one FILE"},
		{[]string{"--api", "openai", "-"}, "", 2, "unknown api"},
		{[]string{"--bogus", "-"}, "", 2, "bogus"},
		{[]string{"-"}, ": only a comment\n\n", 1, "pass --api"},
		{[]string{filepath.Join(t.TempDir(), "missing.sse")}, "", 1, "no such file"},
	} {
		err := inspectMain(tt.args, strings.NewReader(tt.stdin), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.msg)
			continue
		}
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if code != tt.code {
			t.Errorf("%v: exit code %d, want %d", tt.args, code, tt.code)
		}
	}
}
