package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Profile is the timing and content of a simulated model (SPEC.md §6,
// issue 3). All times are milliseconds from the moment the simulator
// receives the request. Pointer fields are optional: nil means the stream
// has no such part. The YAML names are the contract; see LoadProfiles.
type Profile struct {
	// HeadersMs is when the response headers are sent.
	HeadersMs int `yaml:"headers_ms"`
	// FirstEventMs is when the first metadata event is sent (a role
	// chunk, a message start, an empty part: each API's own). Zero or less
	// than HeadersMs means "with the headers".
	FirstEventMs int `yaml:"first_event_ms"`
	// HeartbeatEveryMs sends a keep-alive every that many ms after the
	// headers until the stream ends, as the provider sends it (a ping
	// event where the API has one). An API that documents no keep-alive
	// gets none unless HeartbeatComments asks for one. Zero: none.
	HeartbeatEveryMs int `yaml:"heartbeat_every_ms"`
	// HeartbeatComments sends the keep-alives on the APIs that have none
	// of their own as SSE comments ": ping", as an OpenAI-compatible
	// router does (OpenRouter); an API whose SDKs reject comments never
	// gets them (the unit's encoder decides: Response.KeepAlive).
	HeartbeatComments bool `yaml:"heartbeat_comments"`
	// ReasoningMs is when the first non-empty reasoning delta is sent;
	// nil: no reasoning is streamed.
	ReasoningMs *int `yaml:"reasoning_ms"`
	// ToolMs is when the first non-empty tool-call argument delta is sent;
	// the call's header (id and name) goes out just before it, at the same
	// moment. nil: no tool call.
	ToolMs *int `yaml:"tool_ms"`
	// TextMs is when the first visible text delta is sent; nil: no text.
	TextMs *int `yaml:"text_ms"`
	// EndMs, when set, holds the terminal events back until then; it must
	// not be earlier than the content allows. nil: the stream ends when its
	// last part is done (for text: TextMs + VisibleTokens/TPS).
	EndMs *int `yaml:"end_ms"`
	// VisibleTokens is the number of o200k_base tokens of visible text.
	VisibleTokens int `yaml:"visible_tokens"`
	// ReasoningTokens is the number of reasoning tokens. Without
	// ReasoningMs they are hidden: reported in usage, never streamed (as
	// OpenAI's reasoning models do).
	ReasoningTokens int `yaml:"reasoning_tokens"`
	// TPS is tokens per second after a part starts. For the last part with
	// text it is exactly what a client measures: VisibleTokens /
	// (last byte − first visible text). Earlier parts are sped up when
	// needed so that they finish before the next part starts.
	TPS float64 `yaml:"tps"`
	// TokensPerEvent is how many tokens one delta event carries; 0 means 1.
	TokensPerEvent int `yaml:"tokens_per_event"`
	// JitterMs delays each event by a random 0…JitterMs ms (order kept),
	// different for every request. Zero: exact times.
	JitterMs int `yaml:"jitter_ms"`
	// Seed selects the generated text, ids and jitter. Bodies are the same
	// bytes for the same profile, seed and request.
	Seed int64 `yaml:"seed"`
	// Fault is one of "status:CODE", "reset_after:N", "stall_after:N:MS",
	// "truncate", "error_event_after:N" (N counts visible tokens); see
	// the package documentation. Empty: none.
	Fault string `yaml:"fault"`
	// Replay is an .sse file served instead of generated content (relative
	// to the profiles file when loaded from one); see the package
	// documentation for its timing comments.
	Replay string `yaml:"replay"`
	// ReplayGapMs is the gap between events of a replayed file that
	// carries no timing; 0 means 10.
	ReplayGapMs int `yaml:"replay_gap_ms"`
	// RateLimit, when set, is the profile's own provider limit: rate-limit
	// headers on every answer and 429s past it (ratelimit.go).
	RateLimit *RateLimit `yaml:"rate_limit"`

	recording *recording // the parsed Replay file, when loaded
}

// Ms returns a pointer to n, for the optional fields of a Profile literal.
func Ms(n int) *int { return &n }

// defaultReplayGap is the gap between events of a replay without timing.
const defaultReplayGap = 10 * time.Millisecond

// Builtin returns the built-in profiles (SPEC.md §6). The trace profiles
// reproduce SPEC.md §4's table for a client talking to the simulator
// directly; the rest are small healthy and faulty models for tests, the
// demo and zero-config serving. Each call returns a new map.
func Builtin() map[string]Profile {
	return map[string]Profile{
		// Trace A, waiting for headers: headers 6100, reasoning (first
		// response) 6350, text 6400, end 9200. The window 9200−6400 = 2.8 s
		// at 42 t/s would need 117.6 tokens; 118 tokens over exactly 2.8 s
		// measure 118/2.8 = 42.14 t/s (42 in the table's rounding), and
		// keep the end exact.
		"trace-a": {
			HeadersMs: 6100, FirstEventMs: 6100,
			ReasoningMs: Ms(6350), ReasoningTokens: 8,
			TextMs: Ms(6400), VisibleTokens: 118, TPS: 118 / 2.8,
		},
		// Trace B, action before text: headers 240, a metadata event right
		// after them, heartbeats while nothing happens, tool-call arguments
		// at 2900, text at 8700, end 10200. Window 1.5 s at 55 t/s would
		// need 82.5 tokens; 83 tokens over exactly 1.5 s measure 55.33 t/s.
		"trace-b": {
			HeadersMs: 240, FirstEventMs: 240, HeartbeatEveryMs: 1000,
			HeartbeatComments: true, // an OpenAI-compatible router's keep-alives
			ToolMs:            Ms(2900),
			TextMs:            Ms(8700), VisibleTokens: 83, TPS: 83 / 1.5,
		},
		// Trace C, fast start, slow generation: headers 260, reasoning
		// 420, text 430, end 20430. 196 tokens over exactly 20 s measure
		// 196/20 = 9.8 t/s.
		"trace-c": {
			HeadersMs: 260, FirstEventMs: 260,
			ReasoningMs: Ms(420), ReasoningTokens: 4,
			TextMs: Ms(430), VisibleTokens: 196, TPS: 9.8,
		},
		// A quick healthy chat model: 60 tokens at 200 t/s, done at 420 ms.
		"fast": {
			HeadersMs: 50, FirstEventMs: 50,
			TextMs: Ms(120), VisibleTokens: 60, TPS: 200,
		},
		// A reasoning model: 120 reasoning tokens streamed from 400 ms,
		// then 150 visible tokens at 80 t/s from 2900 ms (end 4775 ms).
		// Its 2.5 s from reasoning to text is clear of the 2 s threshold
		// of response_to_text_gap, so every API gets that verdict (at
		// 2400 ms it sat on the threshold and one API's did, another's not).
		"reasoning": {
			HeadersMs: 200, FirstEventMs: 200,
			ReasoningMs: Ms(400), ReasoningTokens: 120,
			TextMs: Ms(2900), VisibleTokens: 150, TPS: 80,
		},
		// A tool call and no text: arguments from 600 ms at 60 t/s.
		"tool-call": {
			HeadersMs: 150, FirstEventMs: 150,
			ToolMs: Ms(600), TPS: 60,
		},
		// Metadata only, with heartbeats: no effective output at all.
		"metadata-only": {
			HeadersMs: 100, FirstEventMs: 100, HeartbeatEveryMs: 100,
			HeartbeatComments: true,
			EndMs:             Ms(500),
		},
		// Fault examples. "flaky" is SPEC.md §6's example.
		"flaky": {
			HeadersMs: 50, TextMs: Ms(80), VisibleTokens: 100, TPS: 100,
			Fault: "reset_after:40",
		},
		// Stalls 6.5 s after 20 tokens: past the 5 s threshold of
		// generation_stalled, so the demo shows that verdict.
		"stall": {
			HeadersMs: 50, TextMs: Ms(80), VisibleTokens: 100, TPS: 100,
			Fault: "stall_after:20:6500",
		},
		"truncate": {
			HeadersMs: 50, TextMs: Ms(80), VisibleTokens: 100, TPS: 100,
			Fault: "truncate",
		},
		"error-event": {
			HeadersMs: 50, TextMs: Ms(80), VisibleTokens: 100, TPS: 100,
			Fault: "error_event_after:20",
		},
		"status-503": {HeadersMs: 50, TextMs: Ms(80), VisibleTokens: 20, TPS: 100, Fault: "status:503"},
		"status-429": {HeadersMs: 20, TextMs: Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:429"},
	}
}

// profilesFile is the YAML document LoadProfiles reads.
type profilesFile struct {
	Profiles map[string]Profile `yaml:"profiles"`
}

// LoadProfiles reads a YAML profiles file (SPEC.md §6):
//
//	profiles:
//	  slow-reasoner:       # the model name that selects it
//	    headers_ms: 300
//	    ...
//
// Unknown fields are errors that name the field. Every profile is
// validated, and replay files are read (relative to the file's directory).
// The result holds only the file's profiles; merge it over Builtin to keep
// the built-ins.
func LoadProfiles(path string) (map[string]Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load profiles: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f profilesFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("load profiles %s: empty file", path)
		}
		return nil, fmt.Errorf("load profiles %s: %w", path, err)
	}
	if len(f.Profiles) == 0 {
		return nil, fmt.Errorf("load profiles %s: no profiles", path)
	}
	dir := filepath.Dir(path)
	for name, p := range f.Profiles {
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("load profiles %s: a profile has an empty name", path)
		}
		if p.Replay != "" {
			if !filepath.IsAbs(p.Replay) {
				p.Replay = filepath.Join(dir, p.Replay)
			}
			rec, err := loadRecording(p.Replay)
			if err != nil {
				return nil, fmt.Errorf("load profiles %s: profile %q: %w", path, name, err)
			}
			p.recording = rec
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("load profiles %s: profile %q: %w", path, name, err)
		}
		f.Profiles[name] = p
	}
	return f.Profiles, nil
}

// ReplayProfile returns a profile that serves the recorded stream in path
// (see the package documentation), for `ttfx sim --replay`.
func ReplayProfile(path string) (Profile, error) {
	rec, err := loadRecording(path)
	if err != nil {
		return Profile{}, err
	}
	return Profile{Replay: path, recording: rec}, nil
}

// Names returns the names of profiles, sorted.
func Names(profiles map[string]Profile) []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Scale returns a copy of p with every time multiplied by f and TPS
// divided by it, so that the whole schedule runs f times as long (f < 1:
// faster). Times are rounded to whole milliseconds.
func (p Profile) Scale(f float64) Profile {
	sc := func(ms int) int { return int(math.Round(float64(ms) * f)) }
	scp := func(ms *int) *int {
		if ms == nil {
			return nil
		}
		return Ms(sc(*ms))
	}
	q := p
	q.HeadersMs, q.FirstEventMs, q.HeartbeatEveryMs = sc(p.HeadersMs), sc(p.FirstEventMs), sc(p.HeartbeatEveryMs)
	q.ReasoningMs, q.ToolMs, q.TextMs, q.EndMs = scp(p.ReasoningMs), scp(p.ToolMs), scp(p.TextMs), scp(p.EndMs)
	q.JitterMs, q.ReplayGapMs = sc(p.JitterMs), sc(p.ReplayGapMs)
	if f > 0 {
		q.TPS = p.TPS / f
	}
	if ft, err := parseFault(p.Fault); err == nil && ft.kind == faultStall {
		q.Fault = "stall_after:" + strconv.Itoa(ft.after) + ":" + strconv.Itoa(sc(int(ft.stall/time.Millisecond)))
	}
	return q
}

// Validate reports the first problem that makes p unusable.
func (p Profile) Validate() error {
	if err := p.RateLimit.validate(); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"headers_ms", p.HeadersMs}, {"first_event_ms", p.FirstEventMs},
		{"heartbeat_every_ms", p.HeartbeatEveryMs}, {"visible_tokens", p.VisibleTokens},
		{"reasoning_tokens", p.ReasoningTokens}, {"tokens_per_event", p.TokensPerEvent},
		{"jitter_ms", p.JitterMs}, {"replay_gap_ms", p.ReplayGapMs},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s is negative (%d)", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"reasoning_ms", p.ReasoningMs}, {"tool_ms", p.ToolMs}, {"text_ms", p.TextMs}, {"end_ms", p.EndMs}} {
		if f.v != nil && *f.v < 0 {
			return fmt.Errorf("%s is negative (%d)", f.name, *f.v)
		}
	}
	if math.IsNaN(p.TPS) || math.IsInf(p.TPS, 0) || p.TPS < 0 {
		return fmt.Errorf("tps must be a positive number (%v)", p.TPS)
	}
	ft, err := parseFault(p.Fault)
	if err != nil {
		return err
	}
	if p.Replay != "" || p.recording != nil {
		if ft.kind != faultNone && ft.kind != faultStatus {
			return fmt.Errorf("fault %q cannot apply to a replay (only status:CODE can)", p.Fault)
		}
		if p.ReasoningMs != nil || p.ToolMs != nil || p.TextMs != nil || p.VisibleTokens > 0 {
			return errors.New("a replay profile takes its content from the file: leave reasoning_ms, tool_ms, text_ms and visible_tokens out")
		}
		return nil
	}
	if p.TextMs != nil && p.VisibleTokens == 0 {
		return errors.New("text_ms is set but visible_tokens is 0")
	}
	if p.TextMs == nil && p.VisibleTokens > 0 {
		return errors.New("visible_tokens is set but text_ms is not: when does the text start?")
	}
	if p.ReasoningMs != nil && p.ReasoningTokens == 0 {
		return errors.New("reasoning_ms is set but reasoning_tokens is 0")
	}
	if (p.ReasoningMs != nil || p.ToolMs != nil || p.TextMs != nil) && p.TPS <= 0 {
		return errors.New("tps must be positive when the stream has content")
	}
	first := p.firstEventMs()
	for _, f := range []struct {
		name string
		v    *int
	}{{"reasoning_ms", p.ReasoningMs}, {"tool_ms", p.ToolMs}, {"text_ms", p.TextMs}} {
		if f.v != nil && *f.v < first {
			return fmt.Errorf("%s (%d) is before the first event (%d): the first event is the first thing the stream sends", f.name, *f.v, first)
		}
	}
	switch ft.kind {
	case faultReset, faultStall, faultErrorEvent:
		if ft.after > p.VisibleTokens {
			return fmt.Errorf("fault %q never fires: the profile sends only %d visible tokens", p.Fault, p.VisibleTokens)
		}
	}
	pl := buildPlan(p, ft, generate(p))
	if p.EndMs != nil && time.Duration(*p.EndMs)*time.Millisecond < pl.contentEnd {
		return fmt.Errorf("end_ms (%d) is before the content can end (%.1f ms)", *p.EndMs, ms(pl.contentEnd))
	}
	return nil
}

// firstEventMs is FirstEventMs with "0 or before the headers" meaning "with
// the headers".
func (p Profile) firstEventMs() int {
	if p.FirstEventMs < p.HeadersMs {
		return p.HeadersMs
	}
	return p.FirstEventMs
}

func (p Profile) tokensPerEvent() int {
	if p.TokensPerEvent <= 0 {
		return 1
	}
	return p.TokensPerEvent
}

// faultKind names what a fault does.
type faultKind uint8

const (
	faultNone       faultKind = iota
	faultStatus               // status:CODE — an error response instead of a stream
	faultReset                // reset_after:N — the connection is cut
	faultStall                // stall_after:N:MS — everything after N waits MS longer
	faultTruncate             // truncate — no terminal marker, clean close
	faultErrorEvent           // error_event_after:N — an in-stream error event, then the end
)

var faultNames = [...]string{"", "status", "reset", "stall", "truncate", "error_event"}

func (k faultKind) String() string { return faultNames[k] }

// fault is a parsed Profile.Fault.
type fault struct {
	kind  faultKind
	code  int           // status
	after int           // visible tokens sent before it fires
	stall time.Duration // stall
}

func parseFault(s string) (fault, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return fault{}, nil
	}
	name, rest, _ := strings.Cut(s, ":")
	num := func(v, what string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("fault %q: %s must be a whole number ≥ 0", s, what)
		}
		return n, nil
	}
	switch name {
	case "status":
		code, err := num(rest, "CODE")
		if err != nil || code < 400 || code > 599 {
			return fault{}, fmt.Errorf("fault %q: CODE must be an HTTP error status 400…599", s)
		}
		return fault{kind: faultStatus, code: code}, nil
	case "reset_after", "error_event_after":
		n, err := num(rest, "N")
		if err != nil {
			return fault{}, err
		}
		k := faultReset
		if name == "error_event_after" {
			k = faultErrorEvent
		}
		return fault{kind: k, after: n}, nil
	case "stall_after":
		a, b, ok := strings.Cut(rest, ":")
		if !ok {
			return fault{}, fmt.Errorf("fault %q: want stall_after:N:MS", s)
		}
		n, err := num(a, "N")
		if err != nil {
			return fault{}, err
		}
		d, err := num(b, "MS")
		if err != nil {
			return fault{}, err
		}
		return fault{kind: faultStall, after: n, stall: time.Duration(d) * time.Millisecond}, nil
	case "truncate":
		if rest != "" {
			return fault{}, fmt.Errorf("fault %q: truncate takes no argument", s)
		}
		return fault{kind: faultTruncate}, nil
	}
	return fault{}, fmt.Errorf("unknown fault %q (want status:CODE, reset_after:N, stall_after:N:MS, truncate or error_event_after:N)", s)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
