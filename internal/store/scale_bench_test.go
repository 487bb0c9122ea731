package store_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// BenchmarkStatsAtScale times /api/stats' store call over a week of
// TTFX_BENCH_RECORDS records (skipped without it) on every engine: the
// records are inserted in time order in batches of 20000, compacted as the
// gateway's compaction would have by the end of the week, and then the
// last 24 hours (day-aligned and ending mid-minute) and the whole week
// are summarised, grouped by model.
func BenchmarkStatsAtScale(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("TTFX_BENCH_RECORDS"))
	if n <= 0 {
		b.Skip("set TTFX_BENCH_RECORDS to the number of records to seed")
	}
	const days = 7
	week := time.Duration(days) * 24 * time.Hour
	for _, e := range storetest.Engines() {
		b.Run(e.Name, func(b *testing.B) {
			s, _ := e.Open(b)
			if dsn := os.Getenv("TTFX_BENCH_CLICKHOUSE_DSN"); dsn != "" && e.Name == "clickhouse" {
				// A database that outlives the run, seeded once, for
				// looking at the queries from clickhouse-client.
				var err error
				if s, err = store.Open(storetest.Ctx(b), dsn); err != nil {
					b.Fatal(err)
				}
				defer s.Close()
			}
			start := time.Now()
			rng := rand.New(rand.NewPCG(1, 2))
			const chunk = 20000
			stored, err := s.List(storetest.Ctx(b), store.Filter{Limit: 1})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n && len(stored.Records) == 0; i += chunk {
				recs := storetest.RandomRecords(rng, min(chunk, n-i), 1, storetest.Distributions[1])
				for j := range recs {
					recs[j].RequestID = "s" + strconv.Itoa(i+j)
					recs[j].Timestamp = storetest.RollupBase.Add(time.Duration(float64(i+j) / float64(n) * float64(week)))
				}
				storetest.Insert(b, s, recs...)
			}
			seeded := time.Since(start)
			storetest.CompactAll(b, s, storetest.RollupBase.Add(week+time.Hour))
			b.Logf("%s: seeded %d records in %v (%.0f records/s), compacted in %v", e.Name, n, seeded.Round(time.Millisecond),
				float64(n)/seeded.Seconds(), (time.Since(start) - seeded).Round(time.Millisecond))
			end := storetest.RollupBase.Add(week)
			// The third window ends mid-minute, as "the last 24 hours"
			// from now does: its ends are read from minutes.
			off := 7*time.Minute + 30*time.Second
			for _, w := range []struct {
				name     string
				from, to time.Time
			}{{"24h", end.Add(-24 * time.Hour), end}, {"7d", storetest.RollupBase, end},
				{"24h-unaligned", end.Add(-24*time.Hour - off), end.Add(-off)}} {
				b.Run(w.name, func(b *testing.B) {
					q := store.StatsQuery{Filter: store.Filter{From: w.from, To: w.to}, GroupBy: []string{"model"}}
					total := 0
					for b.Loop() {
						st, err := s.Stats(storetest.Ctx(b), q)
						if err != nil {
							b.Fatal(err)
						}
						total = 0
						for _, g := range st.Groups {
							total += g.Count
						}
					}
					b.ReportMetric(float64(total), "records")
				})
			}
		})
	}
}
