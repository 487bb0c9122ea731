package api

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

var statsRecords = flag.Int("stats.records", 1_000_000, "records BenchmarkStats stores on each engine before measuring")

// benchRecord is the i-th of n plausible requests: 8 models, 4 channels,
// 5 groups, spread over the day before now in the order they are written
// (as a gateway writes them, give or take a second); heavy-tailed stage
// times; 10% without visible text, 5% failed upstream, 15% with diagnosis
// labels.
func benchRecord(rng *rand.Rand, i, n int) record.Record {
	at := now.Add(-24*time.Hour + time.Duration(i)*(24*time.Hour/time.Duration(n)) - time.Duration(rng.Int64N(int64(time.Second))))
	r := record.Record{
		RequestID: fmt.Sprintf("bench-%08d", i), Timestamp: at,
		API: "openai.chat", Route: "POST /v1/chat/completions",
		Model: fmt.Sprintf("model-%d", rng.IntN(8)), Channel: fmt.Sprintf("channel-%d", rng.IntN(4)),
		Group: fmt.Sprintf("team-%d", rng.IntN(5)), KeyName: "app", Provider: "sim", Region: "eu",
		Status: record.StatusOK, HTTPStatus: 200, Stream: true, Terminal: "done", FinishReason: "stop",
		Attempts: []record.Attempt{{Channel: "channel-0", Status: record.StatusOK, HTTPStatus: 200}},
	}
	d := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
	f := &r.Fields
	f.AuthMs = timeline.SpanOf(d(0.05 + rng.Float64()*0.2))
	f.DistributionMs = timeline.SpanOf(d(0.01 + rng.Float64()*0.05))
	f.BodyReadMs = timeline.SpanOf(d(0.1 + rng.ExpFloat64()*0.5))
	start := 0.5 + rng.Float64()
	headers := 150 + rng.ExpFloat64()*250
	f.UpstreamStartMs = timeline.At(d(start))
	f.UpstreamHeadersMs = timeline.SpanOf(d(headers))
	f.UpstreamHeadersAtMs = timeline.At(d(start + headers))
	if rng.IntN(20) == 0 {
		r.Status, r.HTTPStatus, r.Terminal, r.FinishReason = record.StatusUpstreamHTTPError, 502, "", ""
		f.UpstreamDoneMs = timeline.At(d(start + headers + 1))
		f.TotalHandlerMs = timeline.At(d(start + headers + 2))
		r.Diagnosis = []string{"upstream_http_error"}
		return r
	}
	event := start + headers + 5 + rng.ExpFloat64()*20
	resp := event + rng.ExpFloat64()*400
	f.FirstSSEEventMs = timeline.At(d(event))
	f.FirstResponseMs = timeline.At(d(resp))
	done := resp + 500 + rng.ExpFloat64()*3000
	if rng.IntN(10) != 0 {
		text := resp + rng.ExpFloat64()*200
		f.FirstTextDeltaMs = timeline.At(d(text))
		f.FirstTextSentMs = timeline.At(d(text + 0.05))
		tokens := 20 + rng.IntN(600)
		r.Tokens = record.Tokens{Output: record.Int(tokens), Visible: record.Int(tokens), Source: record.TokensUsage}
		r.VisibleOutputTPS, r.InterTokenLatencyMs = timeline.Speed(f.FirstTextDeltaMs, timeline.At(d(done)), tokens)
	}
	f.UpstreamDoneMs = timeline.At(d(done))
	f.TotalHandlerMs = timeline.At(d(done + 0.3))
	if rng.IntN(7) == 0 {
		r.Diagnosis = []string{[]string{"upstream_headers_slow", "first_response_slow", "generation_slow"}[rng.IntN(3)]}
	}
	return r
}

func populate(b *testing.B, s store.Store, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	batch := make([]record.Record, 0, 5000)
	for i := range n {
		batch = append(batch, benchRecord(rng, i, n))
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.Insert(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.Logf("%s: stored %d records in %v (%.0f records/s)", s.Engine(), n, time.Since(start).Round(time.Millisecond),
		float64(n)/time.Since(start).Seconds())
}

// BenchmarkStats measures GET /api/stats, handler and JSON included, over
// -stats.records records (default a million) on each engine.
func BenchmarkStats(b *testing.B) {
	type engine struct {
		name string
		open func(b *testing.B) store.Store
	}
	for _, e := range []engine{
		{"sqlite", func(b *testing.B) store.Store { return openSQLite(b) }},
		{"postgres", func(b *testing.B) store.Store {
			s, err := store.Open(context.Background(), postgresDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
	} {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			populate(b, s, *statsRecords)
			h := New(Options{Store: s, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }, Timeout: 10 * time.Minute})
			day := url.Values{"from": {now.Add(-25 * time.Hour).Format(time.RFC3339)}, "to": {now.Add(time.Hour).Format(time.RFC3339)}}
			for _, c := range []struct {
				name  string
				query url.Values
			}{
				{"day_by_model", url.Values{"group_by": {"model"}}},
				{"day_by_model_channel_hourly", url.Values{"group_by": {"model,channel"}, "bucket": {"1h"}}},
				{"day_one_field_by_channel", url.Values{"group_by": {"channel"}, "fields": {"first_text_delta_ms"}}},
				{"hour_one_model_channel_field", url.Values{"model": {"model-3"}, "channel": {"channel-1"},
					"fields": {"first_text_delta_ms"}, "from": {now.Add(-90 * time.Minute).Format(time.RFC3339)},
					"to": {now.Add(-30 * time.Minute).Format(time.RFC3339)}}},
			} {
				q := url.Values{}
				for k, v := range day {
					q[k] = v
				}
				for k, v := range c.query {
					q[k] = v
				}
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					var count int
					for b.Loop() {
						req := httptest.NewRequest("GET", "/api/stats?"+q.Encode(), nil)
						req.Header.Set("Authorization", "Bearer "+keyAdmin)
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						if w.Code != http.StatusOK {
							b.Fatalf("%d %s", w.Code, w.Body)
						}
						count = w.Body.Len()
					}
					b.ReportMetric(math.Round(float64(count)/1024), "KB/answer")
				})
			}
		})
	}
}
