package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
)

// BenchmarkRelayBesideReads measures relayed throughput (non-streaming
// chat through the gateway to a simulator that answers at once, 8 clients
// in a loop) alone, then beside four loops of cheap rollup reads, as
// issue 50's probe did (1,999 → 1,208 requests/s, −40 %, before reads
// rested). It reports both rates and the loss, for read_cpu_share 0.1 (the
// default) and 1 (reads unrested, as before); issue 50's target is a loss
// of at most 10 % with the default. Alone and beside alternate in eight
// pairs of 1-second turns (the rates are their means), so that the rest of
// a shared machine's load falls on both. The claim "reads cost the relay
// at most ~10 %" is measured here, not in a unit test
// (TestRelayBesideHeavyReads): on a loaded machine a timed check says as
// much about the machine as about the reads.
//
//	go test -run XXX -bench RelayBesideReads -benchtime 1x ./internal/server
func BenchmarkRelayBesideReads(b *testing.B) {
	for _, share := range []float64{1, 0.1} {
		b.Run(fmt.Sprintf("read_cpu_share=%g", share), func(b *testing.B) {
			profiles := map[string]sim.Profile{"instant": {HeadersMs: 0, FirstEventMs: 0, TextMs: sim.Ms(0), VisibleTokens: 5, TPS: 100000}}
			up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles}))
			b.Cleanup(up.Close)
			y := fmt.Sprintf(`
store: %q
read_cpu_share: %g
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: team-a, role: client, group: team-a, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UPSTREAM}
`, "sqlite:"+filepath.Join(b.TempDir(), "ttfx.db"), share, up.URL)
			env := map[string]string{"ADMIN": "admin-key-0123456789", "CLIENT": "client-key-0123456789", "UPSTREAM": "u"}
			cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
			if err != nil {
				b.Fatal(err)
			}
			srv := start(b, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			relay := func(d time.Duration) float64 {
				var n atomic.Int64
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				var wg sync.WaitGroup
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/v1/chat/completions",
								strings.NewReader(`{"model":"instant","messages":[{"role":"user","content":"hi"}]}`))
							req.Header.Set("Authorization", "Bearer "+env["CLIENT"])
							resp, err := client.Do(req)
							if err != nil {
								continue
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if resp.StatusCode == 200 {
								n.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				return float64(n.Load()) / d.Seconds()
			}
			relay(time.Second) // warm up, and records to read
			// Alone and beside the reads in pairs of turns, so that a burst
			// of load elsewhere on the machine falls on both sides alike.
			const pairs, d = 8, time.Second
			for b.Loop() {
				var alone, beside, reads float64
				for range pairs {
					alone += relay(d) / pairs
					ctx, cancel := context.WithCancel(context.Background())
					var n atomic.Int64
					var wg sync.WaitGroup
					for range 4 {
						wg.Go(func() {
							for ctx.Err() == nil {
								req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL()+"/api/stats?since=1h&group_by=model", nil)
								req.Header.Set("Authorization", "Bearer "+env["ADMIN"])
								resp, err := client.Do(req)
								if err != nil {
									continue
								}
								io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
								if resp.StatusCode == 200 {
									n.Add(1)
								}
							}
						})
					}
					beside += relay(d) / pairs
					cancel()
					wg.Wait()
					reads += float64(n.Load()) / d.Seconds() / pairs
				}
				b.ReportMetric(alone, "relay-req/s-alone")
				b.ReportMetric(beside, "relay-req/s-beside-reads")
				b.ReportMetric(100*(1-beside/alone), "loss-%")
				b.ReportMetric(reads, "reads/s")
			}
		})
	}
}
