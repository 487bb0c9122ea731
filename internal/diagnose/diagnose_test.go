package diagnose

import (
	"slices"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

func at(ms float64) timeline.Offset {
	return timeline.At(time.Duration(ms * float64(time.Millisecond)))
}
func span(ms float64) timeline.Span {
	return timeline.SpanOf(time.Duration(ms * float64(time.Millisecond)))
}

// rec builds a record from marks (ms from t0; negative = absent).
func rec(t1, t2, t3, t4, t5, t6, t7 float64, tps float64, visible int) record.Record {
	o := func(v float64) timeline.Offset {
		if v < 0 {
			return timeline.Offset{}
		}
		return at(v)
	}
	r := record.Record{Status: record.StatusOK, Model: "m", Channel: "c", Stream: true}
	r.UpstreamStartMs, r.UpstreamHeadersAtMs = o(t1), o(t2)
	r.UpstreamHeadersMs = o(t2).Sub(o(t1))
	r.FirstSSEEventMs, r.FirstResponseMs, r.FirstTextDeltaMs = o(t3), o(t4), o(t5)
	r.UpstreamDoneMs, r.TotalHandlerMs = o(t6), o(t7)
	r.AuthMs, r.DistributionMs, r.BodyReadMs = span(0.1), span(0.1), span(0.1)
	if tps >= 0 {
		r.VisibleOutputTPS = timeline.RateOf(tps)
	}
	if visible >= 0 {
		r.Tokens.Visible = record.Int(visible)
	}
	return r
}

func labels(r *Rules, rc record.Record) []string {
	r.Diagnose(&rc)
	return rc.Diagnosis
}

func TestSeedTraces(t *testing.T) {
	r := New(config.Diagnosis{})
	tests := []struct {
		name string
		rec  record.Record
		want []string
	}{
		{"trace a", rec(1, 6101, 6120, 6350, 6400, 9199, 9200, 42, 118), []string{UpstreamHeadersSlow}},
		{"trace b", rec(1, 241, 250, 2900, 8700, 10199, 10200, 55, 83), []string{ResponseToTextGap}},
		{"trace c", rec(1, 261, 270, 420, 430, 20429, 20430, 9.8, 196), []string{GenerationSlow}},
		{"fast", rec(1, 100, 110, 200, 200, 1000, 1001, 80, 64), nil},
	}
	for _, tt := range tests {
		if got := labels(r, tt.rec); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestThresholdEdges(t *testing.T) {
	r := New(config.Diagnosis{})
	tests := []struct {
		name string
		rec  record.Record
		want []string
	}{
		{"headers at threshold", rec(0, 2000, 2001, 2002, 2003, 2100, 2100, -1, -1), nil},
		{"headers just over", rec(0, 2000.001, 2001, 2002, 2003, 2100, 2100, -1, -1), []string{UpstreamHeadersSlow}},
		{"headers absent", rec(0, -1, -1, -1, -1, 50, 50, -1, -1), nil},
		{"first response at threshold", rec(0, 100, 5000, 3100, 3100, 3200, 3200, -1, -1), nil},
		{"first response over", rec(0, 100, 100, 3100.5, 3100.5, 3200, 3200, -1, -1), []string{FirstResponseSlow, EventToResponseGap}},
		{"event to response over only", rec(0, 100, 101, 3102, 3102, 3200, 3200, -1, -1), []string{FirstResponseSlow, EventToResponseGap}},
		{"event gap without first response", rec(0, 100, 101, -1, -1, 9000, 9000, -1, -1), nil},
		{"text gap at threshold", rec(0, 100, 101, 200, 2200, 2300, 2300, -1, -1), nil},
		{"text gap over", rec(0, 100, 101, 200, 2200.1, 2300, 2300, -1, -1), []string{ResponseToTextGap}},
		{"tool only: no text, no gap", rec(0, 100, 101, 200, -1, 9000, 9000, -1, -1), nil},
		{"slow tps with 20 tokens", rec(0, 100, 101, 200, 200, 9000, 9000, 14.9, 20), []string{GenerationSlow}},
		{"slow tps with 19 tokens", rec(0, 100, 101, 200, 200, 9000, 9000, 14.9, 19), nil},
		{"tps at threshold", rec(0, 100, 101, 200, 200, 9000, 9000, 15, 100), nil},
		{"tps absent", rec(0, 100, 101, 200, 200, 9000, 9000, -1, 100), nil},
		{"local tail over", rec(0, 100, 101, 200, 200, 1000, 1100.5, -1, -1), []string{LocalOverhead}},
		{"local tail at threshold", rec(0, 100, 101, 200, 200, 1000, 1100, -1, -1), nil},
	}
	for _, tt := range tests {
		if got := labels(r, tt.rec); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// A stall: the longest gap between two content events.
	for _, tt := range []struct {
		name string
		gap  float64
		tps  float64
		want []string
	}{
		{"gap at threshold", 5000, 50, nil},
		{"gap just over", 5000.5, 50, []string{GenerationStalled}},
		{"gap over and slow: after generation_slow", 6000, 3, []string{GenerationSlow, GenerationStalled}},
	} {
		rc := rec(0, 100, 101, 200, 200, 9000, 9000, tt.tps, 100)
		rc.MaxOutputGapMs, rc.MaxOutputGapAtMs = span(tt.gap), at(7000)
		if got := labels(r, rc); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// Local phases over the threshold.
	rc := rec(0, 100, 101, 200, 200, 1000, 1000, -1, -1)
	rc.BodyReadMs = span(100)
	if got := labels(r, rc); !slices.Equal(got, []string{LocalOverhead}) {
		t.Errorf("slow body read: %v", got)
	}
	// An overloaded gateway: the request waited before t0 (issue 15).
	rc = rec(0, 100, 101, 200, 200, 1000, 1000, -1, -1)
	rc.RequestWaitMs = span(99.8)
	if got := labels(r, rc); !slices.Equal(got, []string{LocalOverhead}) {
		t.Errorf("request wait 99.8 ms + 0.3 ms of phases: %v", got)
	}
	rc.RequestWaitMs = span(99.6)
	if got := labels(r, rc); len(got) != 0 {
		t.Errorf("request wait 99.6 ms + 0.3 ms of phases: %v, want none", got)
	}
}

func TestNonStreamingHeaders(t *testing.T) {
	r := New(config.Diagnosis{})
	rc := rec(0, 9000, -1, 9000, 9000, 9000, 9001, -1, 150)
	rc.Stream = false
	if got := labels(r, rc); len(got) != 0 {
		t.Fatalf("a 9 s non-streaming answer: %v, want no verdict (its headers come with the answer)", got)
	}
}

func TestTerminalStatusFirst(t *testing.T) {
	r := New(config.Diagnosis{})
	rc := rec(0, 6000, -1, -1, -1, 6100, 6100, -1, -1)
	rc.Status = record.StatusTruncated
	if got := labels(r, rc); !slices.Equal(got, []string{record.StatusTruncated, UpstreamHeadersSlow}) {
		t.Fatalf("labels = %v", got)
	}
}

func TestOverrides(t *testing.T) {
	v := func(f float64) *float64 { return &f }
	cfg := config.Diagnosis{
		Thresholds: config.Thresholds{UpstreamHeadersSlowMs: v(1000)},
		Models:     map[string]config.Thresholds{"slow-model": {UpstreamHeadersSlowMs: v(8000)}},
		Channels:   map[string]config.Thresholds{"far": {UpstreamHeadersSlowMs: v(500)}},
	}
	r := New(cfg)
	base := rec(0, 1500, 1501, 1600, 1600, 2000, 2000, -1, -1)
	if got := labels(r, base); !slices.Equal(got, []string{UpstreamHeadersSlow}) {
		t.Errorf("global override: %v", got)
	}
	m := base
	m.Model = "slow-model"
	if got := labels(r, m); len(got) != 0 {
		t.Errorf("model override: %v", got)
	}
	c := m
	c.Channel = "far"
	if got := labels(r, c); !slices.Equal(got, []string{UpstreamHeadersSlow}) {
		t.Errorf("channel over model: %v", got)
	}
	if th := r.For("slow-model", "x"); th.FirstResponseSlowMs != 3000 || th.GenerationStalledMs != 5000 {
		t.Errorf("untouched defaults = %v, %v", th.FirstResponseSlowMs, th.GenerationStalledMs)
	}
	r = New(config.Diagnosis{Models: map[string]config.Thresholds{"bursty": {GenerationStalledMs: v(8000)}}})
	stall := rec(0, 100, 101, 200, 200, 9000, 9000, 50, 100)
	stall.MaxOutputGapMs = span(6000)
	if got := labels(r, stall); !slices.Equal(got, []string{GenerationStalled}) {
		t.Errorf("6 s gap, default threshold: %v", got)
	}
	stall.Model = "bursty"
	if got := labels(r, stall); len(got) != 0 {
		t.Errorf("6 s gap, model threshold 8 s: %v", got)
	}
}

func TestAdviceForEveryLabel(t *testing.T) {
	for _, l := range append(slices.Clone(RuleLabels), record.Statuses[1:]...) {
		if a := Advise(l); a.Check == "" || a.Symptom == "" {
			t.Errorf("%s has no advice", l)
		}
	}
	for _, l := range RuleLabels {
		if Definitions()[l] == "" {
			t.Errorf("%s has no definition", l)
		}
	}
}
