package web

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/seed"
	"github.com/ttfx/ttfx/internal/store"
)

var (
	seededStore   = flag.String("seeded.store", "", "BenchmarkSeeded: a store `ttfx seed` filled (default: -seeded.records seeded into a temporary SQLite store)")
	seededRecords = flag.Int("seeded.records", 100_000, "BenchmarkSeeded: records to seed over 7 days when -seeded.store is not given")
)

// BenchmarkSeeded measures, over a week of seeded traffic, what the scale
// issue sets targets for: /api/stats for 24 h and 7 d grouped by model
// (all fields), the overview and channels views for 24 h and 7 d, and a
// request's detail with its diagnosis context — each through the HTTP
// handler, JSON or HTML included. Run it over stores of 100 k and 10 M
// records to compare:
//
//	ttfx seed --store sqlite:/tmp/s10m.db --records 10000000 --days 7
//	go test ./internal/web -run '^$' -bench Seeded -seeded.store sqlite:/tmp/s10m.db
func BenchmarkSeeded(b *testing.B) {
	dsn := *seededStore
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(b.TempDir(), "seeded.db")
	}
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if *seededStore == "" {
		if _, err := seed.Run(context.Background(), s, seed.New(seed.Options{Records: *seededRecords, Seed: 1}), 5000, nil); err != nil {
			b.Fatal(err)
		}
	}
	// A running gateway compacts its rollups at start and every minute;
	// a store seeded or migrated by an older version may have units to
	// catch up on first (0006_projections.sql marks every compacted unit).
	if c, ok := s.(store.Compactor); ok {
		began, units := time.Now(), 0
		for {
			n, err := c.Compact(context.Background(), time.Now())
			if err != nil {
				b.Fatal(err)
			}
			if units += n; n == 0 {
				break
			}
		}
		if units > 0 {
			b.Logf("compacted %d rollup units in %v first", units, time.Since(began).Round(time.Millisecond))
		}
	}
	// The store's "now" is just after its newest record; the detail is of
	// a streamed record half a day before that.
	newest, err := s.List(context.Background(), store.Filter{Limit: 1})
	if err != nil || len(newest.Records) == 0 {
		b.Fatalf("an empty store: %v", err)
	}
	at := newest.Records[0].Timestamp.Add(time.Minute)
	yes := true
	detail, err := s.List(context.Background(), store.Filter{To: at.Add(-12 * time.Hour), Stream: &yes, Channel: "seed-anthropic-main", Limit: 1})
	if err != nil || len(detail.Records) == 0 {
		b.Fatalf("no record for the detail: %v", err)
	}
	fx := fixtureOver(b, s, func() time.Time { return at }, nil)
	for _, c := range []struct{ name, path string }{
		{"api-stats-24h-by-model", "/api/stats?since=24h&group_by=model"},
		{"api-stats-7d-by-model", "/api/stats?since=7d&group_by=model"},
		{"overview-24h", "/ui/view/overview?since=24h"},
		{"overview-7d", "/ui/view/overview?since=7d"},
		{"channels-24h", "/ui/view/channels?since=24h"},
		{"channels-7d", "/ui/view/channels?since=7d"},
		{"request-detail-with-context", "/ui/view/request/" + detail.Records[0].RequestID},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", c.path, nil)
				req.Header.Set("Authorization", "Bearer "+keyAdmin)
				w := httptest.NewRecorder()
				fx.mux.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}
