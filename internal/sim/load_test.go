package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadProfiles(t *testing.T) {
	ps, err := LoadProfiles("../../testdata/sim/profiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sr := ps["slow-reasoner"]
	if sr.HeadersMs != 300 || sr.FirstEventMs != 320 || *sr.ReasoningMs != 900 || *sr.TextMs != 4000 ||
		sr.VisibleTokens != 300 || sr.ReasoningTokens != 500 || sr.TPS != 60 || sr.ToolMs != nil {
		t.Errorf("slow-reasoner = %+v", sr)
	}
	if ps["flaky"].Fault != "reset_after:40" {
		t.Errorf("flaky = %+v", ps["flaky"])
	}
	if ps["recorded-deepseek"].recording == nil {
		t.Error("replay file was not loaded")
	}
	s, err := sr.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.End.Get(); d != 9*time.Second {
		t.Errorf("slow-reasoner ends at %v, want 4 s + 300/60 s", d)
	}
}

func TestLoadProfilesErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "profiles:\n  x:\n    headers_ms: 1\n    header_ms: 2\n", "header_ms"},
		{"unknown top-level", "profile:\n  x: {}\n", "profile"},
		{"wrong type", "profiles:\n  x:\n    headers_ms: soon\n", "line 3"},
		{"empty", "", "empty"},
		{"no profiles", "profiles: {}\n", "no profiles"},
		{"text without tokens", "profiles:\n  x:\n    text_ms: 10\n    tps: 5\n", "visible_tokens"},
		{"tokens without text", "profiles:\n  x:\n    visible_tokens: 10\n    tps: 5\n", "text_ms"},
		{"no tps", "profiles:\n  x:\n    text_ms: 10\n    visible_tokens: 5\n", "tps"},
		{"bad fault", "profiles:\n  x:\n    fault: explode\n", "unknown fault"},
		{"bad status", "profiles:\n  x:\n    fault: status:200\n", "400"},
		{"fault never fires", "profiles:\n  x:\n    text_ms: 1\n    visible_tokens: 5\n    tps: 5\n    fault: reset_after:6\n", "never fires"},
		{"content before first event", "profiles:\n  x:\n    first_event_ms: 50\n    text_ms: 10\n    visible_tokens: 5\n    tps: 5\n", "before the first event"},
		{"end too early", "profiles:\n  x:\n    text_ms: 10\n    visible_tokens: 5\n    tps: 5\n    end_ms: 20\n", "end_ms"},
		{"negative", "profiles:\n  x:\n    headers_ms: -1\n", "negative"},
		{"missing replay", "profiles:\n  x:\n    replay: nope.sse\n", "nope.sse"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
		os.WriteFile(path, []byte(tc.yaml), 0o644)
		_, err := LoadProfiles(path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

func TestBuiltinsAreValid(t *testing.T) {
	for name, p := range Builtin() {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := p.Schedule(); err != nil {
			t.Errorf("%s: schedule: %v", name, err)
		}
	}
	for _, name := range []string{"trace-a", "trace-b", "trace-c", "fast", "reasoning", "tool-call"} {
		if _, ok := Builtin()[name]; !ok {
			t.Errorf("built-in %s missing", name)
		}
	}
}

func TestReplayTimed(t *testing.T) {
	p, err := ReplayProfile("../../testdata/sim/timed.sse")
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer(t, Options{Profiles: map[string]Profile{"replay": p}, Default: "replay"})
	o := do(t, requestFor(context.Background(), srv.URL, APIChat, "anything", true, nil), APIChat)
	if o.status != 200 || o.readErr != nil {
		t.Fatalf("status %d err %v", o.status, o.readErr)
	}
	// The bytes are the file's without the directive lines.
	file, _ := os.ReadFile("../../testdata/sim/timed.sse")
	var want strings.Builder
	for _, line := range strings.SplitAfter(string(file), "\n") {
		if strings.HasPrefix(line, ": t=") || strings.HasPrefix(line, ": headers=") {
			continue
		}
		want.WriteString(line)
	}
	if string(o.raw) != want.String() {
		t.Errorf("replayed bytes differ:\n%q\nwant\n%q", o.raw, want.String())
	}
	near(t, "headers", o.headers, 30*time.Millisecond, early, late)
	near(t, "first event", o.events[0].at, 40*time.Millisecond, early, late)
	near(t, "first text", o.firstText, 90*time.Millisecond, early, late)
	near(t, "second text (with the one before)", o.events[2].at, 90*time.Millisecond, early, late)
	near(t, "finish", o.events[3].at, 140500*time.Microsecond, early, late)
	if !o.terminal || o.text.String() != "Hello world" {
		t.Errorf("terminal %v text %q", o.terminal, o.text.String())
	}
	// A replay is a stream: a non-streaming request is refused clearly.
	o = do(t, requestFor(context.Background(), srv.URL, APIChat, "anything", false, nil), APIChat)
	if o.status != 400 || !strings.Contains(string(o.body), "streaming") {
		t.Errorf("non-streaming replay: %d %s", o.status, o.body)
	}
}

func TestReplayUntimedFixture(t *testing.T) {
	ps, err := LoadProfiles("../../testdata/sim/profiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer(t, Options{Profiles: ps})
	o := do(t, requestFor(context.Background(), srv.URL, APIChat, "recorded-deepseek", true, nil), APIChat)
	file, _ := os.ReadFile("../../testdata/fixtures/deepseek__chat__reasoning-content-then-text.sse")
	if string(o.raw) != string(file) {
		t.Fatalf("replay is not byte-exact (%d bytes, file %d)", len(o.raw), len(file))
	}
	// 107 events, 5 ms apart from the headers at 120 ms.
	n := len(o.events)
	near(t, "headers", o.headers, 120*time.Millisecond, early, late)
	near(t, "first event", o.events[0].at, 120*time.Millisecond, early, late)
	near(t, "last event", o.events[n-1].at, 120*time.Millisecond+time.Duration(n-1)*5*time.Millisecond, early, late)
}

func TestParseRecording(t *testing.T) {
	rec, err := parseRecording([]byte(": t=5\r\ndata: a\r\n\r\n: keep\n\ndata: b\n\n: t=2\ndata: c"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.frames) != 4 || !rec.timed {
		t.Fatalf("frames %d timed %v", len(rec.frames), rec.timed)
	}
	_, times := rec.schedule(Profile{HeadersMs: 50})
	// b goes with the comment before it; c's t=2 goes back in time and is
	// sent in file order.
	want := []time.Duration{5, 5, 5, 5}
	for i := range want {
		if times[i] != want[i]*time.Millisecond {
			t.Errorf("frame %d at %v, want %v ms", i, times[i], want[i])
		}
	}
	if string(rec.frames[3].data) != "data: c" {
		t.Errorf("last frame %q", rec.frames[3].data)
	}
	if _, err := parseRecording([]byte(": t=5\n\n")); err == nil {
		t.Error("a file of directives only should not parse")
	}
}

// TestReplayLateEnd: a t= line after the last event is when the connection
// closes; the events keep their own times.
func TestReplayLateEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "late.sse")
	body := ": t=20\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n: t=300\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := ReplayProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer(t, Options{Profiles: map[string]Profile{"late": p}})
	o := do(t, requestFor(context.Background(), srv.URL, APIChat, "late", true, nil), APIChat)
	if o.status != 200 || o.readErr != nil || !o.terminal {
		t.Fatalf("status %d err %v terminal %v", o.status, o.readErr, o.terminal)
	}
	near(t, "[DONE]", o.events[len(o.events)-1].at, 20*time.Millisecond, early, late)
	near(t, "end of stream", o.closed, 300*time.Millisecond, early, late)
	if strings.Contains(string(o.raw), "t=300") {
		t.Errorf("the end directive was sent: %q", o.raw)
	}
}
