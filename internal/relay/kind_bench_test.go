package relay_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
)

// BenchmarkKindCPU compares the gateway's own cost of one request through
// a channel of kind vertex, its token cached, with the same request through
// the provider's own kind (anthropic, gemini: a static key) and with an
// OpenAI chat request through an openai channel: the per-request work of
// the vertex kind (its URL, the Anthropic body edit, the cached token) must
// not make a request dearer. As in BenchmarkOverheadInProcess the handler
// is called directly and the upstream answers at once with a stream the
// simulator sent (10 visible tokens, so the per-request work dominates);
// cpu_ns/op is the process's CPU time per request.
//
//	go test ./internal/relay -run '^$' -bench KindCPU -count 5
func BenchmarkKindCPU(b *testing.B) {
	prof := sim.Profile{TextMs: sim.Ms(0), VisibleTokens: 10, TPS: 1e9}
	_, simURL, keyFile, _ := vertexSim(b, 0, map[string]sim.Profile{"bench": prof})
	capture := func(c call) []byte {
		resp, err := http.DefaultClient.Do(c.request(context.Background(), simURL, "any"))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			b.Fatalf("simulator: %d %s", resp.StatusCode, body)
		}
		return body
	}
	chatUp, chatDirect := captureStreams(b, prof)
	anthropicStream := capture(call{"anthropic", "bench", true})
	geminiStream := capture(call{"gemini", "bench", true})
	vx := vertexChannel(b, "vx", simURL, keyFile)
	if _, err := vx.Hooks.Credentials.Authorize(context.Background(), &http.Request{Header: http.Header{}}, nil); err != nil {
		b.Fatal(err) // the token, cached before the clock starts
	}
	for _, c := range []struct {
		name       string
		ch         *route.Channel
		api        string
		up, direct []byte
	}{
		{"openai/openai.chat", channel("oa", "openai", "http://sim.invalid", fastTimeouts), "chat", chatUp, chatDirect},
		{"anthropic/anthropic", channel("an", "anthropic", "http://sim.invalid", fastTimeouts), "anthropic", anthropicStream, anthropicStream},
		{"vertex/anthropic", vx, "anthropic", anthropicStream, anthropicStream},
		{"gemini/gemini", channel("ge", "gemini", "http://sim.invalid", fastTimeouts), "gemini", geminiStream, geminiStream},
		{"vertex/gemini", vx, "gemini", geminiStream, geminiStream},
	} {
		b.Run(c.name, func(b *testing.B) {
			var recs ohRecords
			tr := &checkedTransport{replayTransport: replayTransport{body: c.up}}
			keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
			gw := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{c.ch}, 1), Keys: keys, Recorder: &recs, Transport: tr, UserHashKey: []byte("0123456789abcdef")})
			mux := http.NewServeMux()
			gw.Register(mux)
			req := func() *http.Request {
				return call{c.api, "bench", true}.request(context.Background(), "http://gw", clientKey)
			}
			w := &discardWriter{keep: true}
			mux.ServeHTTP(w, req())
			if w.code != 200 || !bytes.Equal(w.kept.Bytes(), c.direct) {
				b.Fatalf("relayed %d: %.300q", w.code, w.kept.Bytes())
			}
			if c.ch == vx && !strings.Contains(tr.lastURL, "/publishers/") || c.ch == vx && tr.lastAuth == "" {
				b.Fatalf("not a Vertex request: %s", tr.lastURL)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu0, haveCPU := processCPU()
			b.ReportAllocs()
			for b.Loop() {
				w.reset()
				mux.ServeHTTP(w, req())
				if w.n != len(c.direct) {
					b.Fatalf("relayed %d bytes, want %d", w.n, len(c.direct))
				}
			}
			cpu1, _ := processCPU()
			runtime.ReadMemStats(&after)
			if haveCPU {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu_ns/op")
			}
			recs.check(b)
		})
	}
}

// checkedTransport is replayTransport noting the last request's URL and
// whether it carried a bearer token.
type checkedTransport struct {
	replayTransport
	lastURL, lastAuth string
}

func (t *checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.lastURL, t.lastAuth = req.URL.String(), req.Header.Get("Authorization")
	return t.replayTransport.RoundTrip(req)
}
