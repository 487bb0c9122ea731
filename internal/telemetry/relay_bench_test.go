//go:build unix

package telemetry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// BenchmarkRelayTelemetry relays simulator streams of 100 and 1000 text
// events through the gateway over loopback HTTP, with the telemetry off,
// with the Prometheus metrics and the request log (what setupTelemetry
// always wires), and with the OTLP export to an in-process receiver as
// well. Observation happens once per request after the response ended, so
// the per-event figures of the three should not differ beyond noise, and
// the per-request difference should not grow with the events: it is one
// BenchmarkMetricsRecord (about a microsecond), not a per-event cost.
//
// Besides wall time it reports the process's CPU time (user + system) per
// request and per event: client, simulator and gateway share the process,
// so the modes differ only by what the telemetry costs, and CPU time is far
// less disturbed than wall time by other work on a shared machine.
func BenchmarkRelayTelemetry(b *testing.B) {
	for _, events := range []int{100, 1000} {
		// A profile whose every event is due at once: the benchmark
		// measures the relay's work, not the simulator's schedule.
		up := httptest.NewServer(sim.New(sim.Options{Profiles: map[string]sim.Profile{
			"burst": {HeadersMs: 0, TextMs: ptr(0), VisibleTokens: events, TPS: 1e9},
		}}))
		u, _ := url.Parse(up.URL)
		for _, mode := range []string{"off", "metrics+log", "metrics+log+otlp"} {
			b.Run(fmt.Sprintf("events=%d/telemetry=%s", events, mode), func(b *testing.B) {
				ch := &route.Channel{Name: "sim-openai", Protocol: "openai", BaseURL: u, Key: "k", Weight: 1, Provider: "sim",
					Timeouts: route.Timeouts{Headers: 10 * time.Second, FirstOutput: 10 * time.Second, Idle: 10 * time.Second, Total: time.Minute}}
				var recs relay.Recorders
				var stop []func()
				if mode != "off" {
					next := []telemetry.Recorder{telemetry.NewRequestLog(slog.New(slog.NewJSONHandler(io.Discard, nil)))}
					if strings.HasSuffix(mode, "otlp") {
						rcv := newOTLPReceiver(b)
						rcv.discard = true
						o, err := telemetry.NewOTel(context.Background(), telemetry.OTelOptions{Endpoint: rcv.URL, Interval: time.Second})
						if err != nil {
							b.Fatal(err)
						}
						stop = append(stop, func() { o.Shutdown(context.Background()) })
						next = append(next, o)
					}
					q := telemetry.NewQueue(0, next...)
					stop = append([]func(){func() { q.Close(context.Background()) }}, stop...)
					recs = relay.Recorders{telemetry.NewMetrics(telemetry.MetricsOptions{}), q}
				}
				keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey("bench-key")}})
				gw := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{ch}, 1), Keys: keys, Recorder: recs, UserHashKey: []byte("0123456789abcdef")})
				mux := http.NewServeMux()
				gw.Register(mux)
				srv := httptest.NewServer(mux)
				defer srv.Close()
				body := `{"model":"burst","stream":true,"messages":[{"role":"user","content":"x"}]}`
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer bench-key")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
				cpu := float64(processCPU()-cpu0) / float64(b.N)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
				b.ReportMetric(cpu, "cpu-ns/op")
				b.ReportMetric(cpu/float64(events), "cpu-ns/event")
				for _, f := range stop {
					f()
				}
			})
		}
		up.Close()
	}
}

// processCPU is the CPU time the whole benchmark process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
