package web

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// records100k spreads n records over the day before now: four channels,
// six models, two groups, a few percent failures, some without text.
func records100k(n int) []record.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	models := []string{"fast", "reasoning", "tool-call", "trace-a", "trace-b", "trace-c"}
	channels := []string{"sim-openai", "sim-anthropic", "sim-gemini", "eu-openai"}
	out := make([]record.Record, 0, n)
	for i := range n {
		ts := now.Add(-time.Duration(rng.Int64N(int64(24 * time.Hour))))
		r := fast(fmt.Sprintf("req-%06d", i), []string{"team-a", "team-b"}[i%2], ts, i%11 == 0)
		r.Model, r.Channel = models[i%len(models)], channels[i%len(channels)]
		h := 40 + rng.Float64()*400
		r.UpstreamHeadersMs, r.UpstreamHeadersAtMs = span(h), at(h+0.1)
		r.FirstSSEEventMs = at(h + 1)
		if r.FirstResponseMs.Valid() {
			r.FirstResponseMs = at(h + 50 + rng.Float64()*3000)
			t5, _ := r.FirstResponseMs.Ms()
			r.FirstTextDeltaMs, r.FirstTextSentMs = at(t5+rng.Float64()*4000), at(t5+0.05)
			r.VisibleOutputTPS = timeline.RateOf(10 + rng.Float64()*150)
		}
		if i%37 == 0 {
			r.Status, r.Diagnosis = record.StatusUpstreamHTTPError, []string{record.StatusUpstreamHTTPError}
		} else if i%5 == 0 {
			r.Diagnosis = []string{diagnose.ResponseToTextGap}
		}
		out = append(out, r)
	}
	return out
}

// BenchmarkViews100k measures each view over 100,000 records in SQLite
// (the embedded default), through HTTP as the browser calls them. The
// overview and channels summarise the whole day (the widest default
// window); the list reads one page; the detail one record and its context.
func BenchmarkViews100k(b *testing.B) {
	fx := newFixture(b, records100k(100_000), nil)
	for _, v := range []struct{ name, path string }{
		{"overview-1h", "/ui/view/overview?since=1h"},
		{"overview-24h", "/ui/view/overview?since=24h"},
		{"overview-24h-channel", "/ui/view/overview?since=24h&channel=sim-anthropic"},
		{"requests", "/ui/view/requests?since=24h"},
		{"requests-filtered", "/ui/view/requests?since=24h&channel=sim-gemini&label=response_to_text_gap"},
		{"channels-24h", "/ui/view/channels?since=24h"},
		{"request", "/ui/view/request/req-050000"},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", v.path, nil)
				req.Header.Set("Authorization", "Bearer "+keyAdmin)
				w := httptest.NewRecorder()
				fx.mux.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", v.path, w.Code, w.Body)
				}
			}
		})
	}
}
