package timeline

import (
	"encoding/json"
	"testing"
	"time"
)

// stepClock is a clock that a test moves by hand.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time       { return c.t }
func (c *stepClock) step(d time.Duration) { c.t = c.t.Add(d) }
func newStepClock() *stepClock            { return &stepClock{t: time.Unix(1_700_000_000, 0)} }
func ms(f float64) time.Duration          { return time.Duration(f * float64(time.Millisecond)) }
func wantMs(t *testing.T, name string, got interface{ Ms() (float64, bool) }, want float64) {
	t.Helper()
	v, ok := got.Ms()
	if !ok || v != want {
		t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
	}
}

func TestFieldsFromMarks(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	c.step(ms(0.25))
	tl.SetPhase(PhaseAuth, ms(0.25))
	start := c.now()
	c.step(ms(1))
	tl.PhaseSince(PhaseBodyRead, start)
	tl.SetPhase(PhaseDistribution, ms(0.5))

	// A failed first attempt: 503 after 100 ms.
	a0 := tl.BeginAttempt()
	c.step(ms(100))
	tl.GotHeaders(a0)
	// The relayed attempt.
	c.step(ms(10))
	a1 := tl.BeginAttempt()
	c.step(ms(240))
	tl.GotHeaders(a1)
	tl.Relay(a1)
	c.step(ms(20))
	tl.Mark(T3)
	c.step(ms(2640))
	tl.Mark(T4)
	c.step(ms(5800))
	tl.Mark(T5)
	c.step(ms(0.125))
	tl.MarkTextSent()
	c.step(ms(1500))
	tl.Mark(T6)
	c.step(ms(1))
	tl.Mark(T7)

	f := tl.Fields()
	wantMs(t, "auth_ms", f.AuthMs, 0.25)
	wantMs(t, "body_read_ms", f.BodyReadMs, 1)
	wantMs(t, "distribution_ms", f.DistributionMs, 0.5)
	wantMs(t, "upstream_headers_ms", f.UpstreamHeadersMs, 240) // t2 − t1, not from t0
	wantMs(t, "upstream_start_ms", f.UpstreamStartMs, 111.25)
	wantMs(t, "upstream_headers_at_ms", f.UpstreamHeadersAtMs, 351.25)
	wantMs(t, "first_sse_event_ms", f.FirstSSEEventMs, 371.25)
	wantMs(t, "first_response_ms", f.FirstResponseMs, 3011.25)
	wantMs(t, "first_text_delta_ms", f.FirstTextDeltaMs, 8811.25)
	wantMs(t, "first_text_sent_ms", f.FirstTextSentMs, 8811.375)
	wantMs(t, "upstream_done_ms", f.UpstreamDoneMs, 10311.375)
	wantMs(t, "total_handler_ms", f.TotalHandlerMs, 10312.375)
	wantMs(t, "relay lag", f.RelayLag(), 0.125)
	wantMs(t, "local", f.LocalMs(), 1.75)

	at := tl.AttemptTiming(a0)
	wantMs(t, "attempt 0 upstream_start_ms", at.UpstreamStartMs, 1.25)
	wantMs(t, "attempt 0 upstream_headers_ms", at.UpstreamHeadersMs, 100)
}

func TestAbsentIsNotZero(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	tl.Mark(T3) // at t0 exactly: present and 0
	c.step(ms(5))
	tl.Mark(T6)
	f := tl.Fields()
	if v, ok := f.FirstSSEEventMs.Ms(); !ok || v != 0 {
		t.Fatalf("first_sse_event_ms = %v %v, want present 0", v, ok)
	}
	for name, o := range map[string]Offset{"first_response_ms": f.FirstResponseMs, "first_text_delta_ms": f.FirstTextDeltaMs, "total_handler_ms": f.TotalHandlerMs, "upstream_start_ms": f.UpstreamStartMs} {
		if o.Valid() {
			t.Errorf("%s present, want absent", name)
		}
	}
	if f.UpstreamHeadersMs.Valid() || f.AuthMs.Valid() || f.LocalMs().Valid() || f.RelayLag().Valid() {
		t.Errorf("spans present without marks: %+v", f)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["first_response_ms"] != nil || m["first_sse_event_ms"] != 0.0 {
		t.Fatalf("json = %s", b)
	}
	if _, ok := m["first_response_ms"]; !ok {
		t.Fatalf("absent field missing from json, want null: %s", b)
	}
}

func TestMarksKeepFirstOccurrence(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	c.step(ms(3))
	if !tl.Mark(T4) {
		t.Fatal("first Mark(T4) not recorded")
	}
	c.step(ms(3))
	if tl.Mark(T4) {
		t.Fatal("second Mark(T4) recorded")
	}
	wantMs(t, "t4", tl.Since(T4), 3)
	if tl.Mark(T1) || tl.Mark(T2) {
		t.Fatal("t1/t2 must come from attempts")
	}
}

func TestJSONAndSQLRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, 1234567, 6100 * time.Millisecond, 37 * time.Hour} {
		o := At(d)
		b, _ := json.Marshal(o)
		var back Offset
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != o {
			t.Errorf("json %v -> %s -> %v", d, b, back)
		}
		v, _ := o.Value()
		var s Offset
		if err := s.Scan(v); err != nil || s != o {
			t.Errorf("sql %v -> %v -> %v %v", d, v, s, err)
		}
	}
	var s Span
	if err := json.Unmarshal([]byte("null"), &s); err != nil || s.Valid() {
		t.Fatalf("null -> %v %v", s, err)
	}
	if err := s.Scan(nil); err != nil || s.Valid() {
		t.Fatalf("NULL -> %v %v", s, err)
	}
	if err := s.Scan("nan"); err == nil {
		t.Fatal("scan of NaN accepted")
	}
	b, _ := json.Marshal(At(ms(0.0005)))
	if string(b) != "0.0005" {
		t.Fatalf("sub-millisecond precision lost: %s", b)
	}
}

func TestSpeed(t *testing.T) {
	tests := []struct {
		name         string
		first, final Offset
		tokens       int
		tps          float64
		itl          time.Duration
		present      bool
	}{
		{"trace c", At(ms(430)), At(ms(20430)), 196, 9.8, ms(20000) / 195, true},
		{"one token", At(ms(430)), At(ms(500)), 1, 0, 0, false},
		{"no text", Offset{}, At(ms(500)), 50, 0, 0, false},
		{"no end", At(ms(430)), Offset{}, 50, 0, 0, false},
		{"empty window", At(ms(430)), At(ms(430)), 50, 0, 0, false},
	}
	for _, tt := range tests {
		tps, itl := Speed(tt.first, tt.final, tt.tokens)
		if tps.Valid() != tt.present || itl.Valid() != tt.present {
			t.Errorf("%s: present %v %v, want %v", tt.name, tps.Valid(), itl.Valid(), tt.present)
			continue
		}
		if v, _ := tps.Get(); tt.present && (v < tt.tps-1e-9 || v > tt.tps+1e-9) {
			t.Errorf("%s: tps %v, want %v", tt.name, v, tt.tps)
		}
		if d, _ := itl.Get(); tt.present && d != tt.itl {
			t.Errorf("%s: itl %v, want %v", tt.name, d, tt.itl)
		}
	}
}

func TestForgetStream(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	c.step(ms(10))
	tl.Mark(T3)
	tl.Mark(T6)
	tl.MarkTextSent()
	tl.ForgetStream()
	if tl.Has(T3) || tl.Has(T6) || tl.Fields().FirstTextSentMs.Valid() {
		t.Fatal("stream marks kept after ForgetStream")
	}
	c.step(ms(5))
	tl.Mark(T3)
	wantMs(t, "t3 of the next attempt", tl.Since(T3), 15)
}

func TestMaxOutputGap(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	f := tl.Fields()
	if f.MaxOutputGapMs.Valid() || f.MaxOutputGapAtMs.Valid() {
		t.Fatalf("gap present before any content: %v at %v", f.MaxOutputGapMs, f.MaxOutputGapAtMs)
	}
	c.step(100 * time.Millisecond)
	tl.Content(tl.Now()) // t4 at 100 ms
	if f := tl.Fields(); f.MaxOutputGapMs.Valid() {
		t.Fatalf("gap present with one content event: %v", f.MaxOutputGapMs)
	}
	for _, d := range []time.Duration{20, 3500, 40, 0, 700} {
		c.step(d * time.Millisecond)
		tl.Content(tl.Now())
	}
	f = tl.Fields()
	gap, _ := f.MaxOutputGapMs.Ms()
	at, _ := f.MaxOutputGapAtMs.Ms()
	if gap != 3500 || at != 3620 {
		t.Errorf("max gap %v ms ending at %v ms, want 3500 at 3620", gap, at)
	}
	// A later gap equal to the longest does not move where it ended.
	c.step(3500 * time.Millisecond)
	tl.Content(tl.Now())
	if at, _ := tl.Fields().MaxOutputGapAtMs.Ms(); at != 3620 {
		t.Errorf("an equal later gap moved the end to %v ms", at)
	}
	tl.ForgetStream()
	if f := tl.Fields(); f.MaxOutputGapMs.Valid() || f.MaxOutputGapAtMs.Valid() {
		t.Errorf("ForgetStream kept the gap %v", f.MaxOutputGapMs)
	}
}

func TestZeroGapIsPresent(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	tl.Content(tl.Now())
	tl.Content(tl.Now()) // two content events in one read: a gap of 0, present
	if ms, ok := tl.Fields().MaxOutputGapMs.Ms(); !ok || ms != 0 {
		t.Errorf("gap = %v, %v; want 0, present", ms, ok)
	}
}

// TestLocalIncludesRequestWait: the wait before t0 is a local phase, so an
// overloaded gateway shows in local_overhead.
func TestLocalIncludesRequestWait(t *testing.T) {
	c := newStepClock()
	tl := New(c.now)
	tl.SetPhase(PhaseRequestWait, ms(120))
	f := tl.Fields()
	wantMs(t, "request_wait_ms", f.RequestWaitMs, 120)
	wantMs(t, "local", f.LocalMs(), 120)
	tl.SetPhase(PhaseAuth, ms(0.5))
	wantMs(t, "local", tl.Fields().LocalMs(), 120.5)
}
