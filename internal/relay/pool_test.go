package relay_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestUpstreamIdleTimeout: an idle upstream connection is kept for
// UpstreamIdleTimeout and reused by the next request within it; past it,
// the next request opens a new one. Go's transport default (90 s) made a
// burst after a quiet spell open every connection again (issue 15).
func TestUpstreamIdleTimeout(t *testing.T) {
	const pause = 400 * time.Millisecond
	for _, tc := range []struct {
		name  string
		idle  time.Duration
		conns int64
	}{
		{"kept within the timeout", 20 * pause, 1},
		{"closed past it", pause / 4, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opened atomic.Int64
			up := httptest.NewUnstartedServer(sim.New(sim.Options{Profiles: sim.Builtin()}))
			up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					opened.Add(1)
				}
			}
			up.Start()
			t.Cleanup(up.Close)
			keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
			g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("c", "openai", up.URL, fastTimeouts)}, 1),
				Keys: keys, Recorder: newRecords(), UpstreamIdleTimeout: tc.idle})
			mux := http.NewServeMux()
			g.Register(mux)
			gw := httptest.NewServer(mux)
			t.Cleanup(gw.Close)

			c := call{api: "chat", model: "fast", stream: true}
			for i := range 2 {
				if i > 0 {
					time.Sleep(pause)
				}
				if resp, _ := do(t, gw.URL, clientKey, c); resp.StatusCode != 200 {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
			}
			if got := opened.Load(); got != tc.conns {
				t.Fatalf("upstream connections opened: %d, want %d (idle timeout %v, %v between requests)", got, tc.conns, tc.idle, pause)
			}
		})
	}
}
