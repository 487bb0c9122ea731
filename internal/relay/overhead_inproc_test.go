package relay_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
)

// BenchmarkOverheadInProcess isolates a hop's own work from the network,
// the simulator and the client, which the loopback benchmarks can only
// subtract: the handler (the gateway's mux, or the bare ReverseProxy) is
// called directly with a response writer that discards, and its upstream
// transport answers at once with a stream the simulator sent earlier,
// handed over one event per Read, as events arrive when a model streams
// (so the relay's read, classification, write and flush run once per
// event, as they do in production). An op is one request; ns/event and
// allocs/event divide by the events relayed (cpu_ns/event is the
// process's CPU time, robust to a shared machine's load), so the "t1000" cases are the
// per-event cost and the "t10" cases show the per-request one (auth, body,
// routing, the upstream request, the record). The gateway-azure cases
// relay the same stream through a channel of kind azure, and through one
// that also maps the model to a deployment's name: a request through Azure
// should cost the gateway no more than one through OpenAI (issue 44).
//
//	go test ./internal/relay -run '^$' -bench OverheadInProcess -count 3
func BenchmarkOverheadInProcess(b *testing.B) {
	for _, tokens := range []int{10, 1000} {
		prof := sim.Profile{TextMs: sim.Ms(0), VisibleTokens: tokens, TPS: 1e9}
		upstreamBody, direct := captureStreams(b, prof)
		events := bytes.Count(direct, []byte("\n\n"))
		tr := &replayTransport{body: upstreamBody}

		keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
		var recs ohRecords
		gatewayOver := func(ch *route.Channel) *http.ServeMux {
			gw := relay.New(relay.Options{
				Router:      route.NewRouter([]*route.Channel{ch}, 1),
				Keys:        keys,
				Recorder:    &recs,
				Transport:   tr,
				UserHashKey: []byte("0123456789abcdef"),
			})
			mux := http.NewServeMux()
			gw.Register(mux)
			return mux
		}
		mux := gatewayOver(channel("sim-openai", "openai", "http://sim.invalid", fastTimeouts))
		// The same stream through a channel of kind azure (deployment
		// URL, api-version, api-key), and through one that also maps the
		// model to a deployment's name (an alias: the body's model is
		// replaced on the way): what a kind and an alias cost the gateway.
		azureMux := gatewayOver(channel("az", "azure", "http://sim.invalid?api-version=2024-10-21", fastTimeouts))
		aliased := channel("az-alias", "azure", "http://sim.invalid?api-version=2024-10-21", fastTimeouts)
		aliased.Models, aliased.Upstream = []string{"bench"}, map[string]string{"bench": "prod-bench-deployment"}
		aliasMux := gatewayOver(aliased)

		target, _ := url.Parse("http://sim.invalid")
		proxyTr := &replayTransport{body: direct} // the proxy's client did not ask for usage
		rp := &httputil.ReverseProxy{
			Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
			Transport:     proxyTr,
			FlushInterval: -1,
			ErrorLog:      log.New(io.Discard, "", 0),
		}

		for _, h := range []struct {
			name string
			h    http.Handler
			key  string
		}{{"gateway", mux, clientKey}, {"gateway-azure", azureMux, clientKey}, {"gateway-azure-alias", aliasMux, clientKey}, {"proxy", rp, "any"}} {
			b.Run(h.name+"/t"+strconv.Itoa(tokens), func(b *testing.B) {
				// What the client gets must be the direct stream, byte for
				// byte, or the figures are of some other work.
				w := &discardWriter{keep: true}
				h.h.ServeHTTP(w, call{"chat", "bench", true}.request(context.Background(), "http://gw", h.key))
				if w.code != http.StatusOK || !bytes.Equal(w.kept.Bytes(), direct) {
					b.Fatalf("%s relayed %d (%d bytes), want the %d bytes of the direct stream:\n%.300q", h.name, w.code, w.kept.Len(), len(direct), w.kept.Bytes())
				}
				if w.flushes < events {
					b.Logf("%s flushed %d times for %d events", h.name, w.flushes, events)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu0, haveCPU := processCPU()
				b.ReportAllocs()
				for b.Loop() {
					w.reset()
					h.h.ServeHTTP(w, call{"chat", "bench", true}.request(context.Background(), "http://gw", h.key))
					if w.n != len(direct) {
						b.Fatalf("%s relayed %d bytes, want %d", h.name, w.n, len(direct))
					}
				}
				cpu1, _ := processCPU()
				runtime.ReadMemStats(&after)
				n := float64(b.N) * float64(events)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
				if haveCPU {
					// CPU time, unlike ns/event, does not count the time
					// the process waited for a core others were using.
					b.ReportMetric(float64(cpu1-cpu0)/n, "cpu_ns/event")
				}
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/event")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/event")
				b.ReportMetric(float64(w.flushes)/float64(events), "flushes/event")
			})
		}
		recs.check(b)
	}
}

// captureStreams gets from the simulator, over loopback, the stream the
// gateway's upstream request receives (with the usage option the gateway
// adds to OpenAI chat requests) and the one a client asking directly does.
func captureStreams(tb testing.TB, p sim.Profile) (upstream, direct []byte) {
	tb.Helper()
	srv := httptest.NewServer(sim.New(sim.Options{Profiles: map[string]sim.Profile{"bench": p}}))
	defer srv.Close()
	get := func(body string) []byte {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			tb.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			tb.Fatalf("simulator: %d %v", resp.StatusCode, err)
		}
		return b
	}
	const msgs = `"messages":[{"role":"user","content":"Say hello."}]`
	upstream = get(`{"model":"bench","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`)
	direct = get(`{"model":"bench","stream":true,` + msgs + `}`)
	return upstream, direct
}

// replayTransport answers every request with body, as an event stream.
type replayTransport struct{ body []byte }

func (t *replayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	h := make(http.Header, 2)
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &eventReader{rest: t.body}, ContentLength: -1, Request: req,
	}, nil
}

// eventReader hands out a stream at most one event per Read, as a network
// connection does when a model's events arrive apart.
type eventReader struct{ rest []byte }

func (r *eventReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	end := len(r.rest)
	if i := bytes.Index(r.rest, []byte("\n\n")); i >= 0 {
		end = i + 2
	}
	n := copy(p, r.rest[:end])
	r.rest = r.rest[n:]
	return n, nil
}

func (r *eventReader) Close() error { return nil }

// discardWriter is a ResponseWriter that counts what it is given.
type discardWriter struct {
	h       http.Header
	code    int
	n       int
	flushes int
	keep    bool
	kept    bytes.Buffer
}

func (w *discardWriter) Header() http.Header {
	if w.h == nil {
		w.h = make(http.Header)
	}
	return w.h
}

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.n += len(p)
	if w.keep {
		w.kept.Write(p)
	}
	return len(p), nil
}

func (w *discardWriter) Flush() { w.flushes++ }

// reset readies w for the next request; the header map is dropped, as each
// request gets a new one from net/http.
func (w *discardWriter) reset() {
	w.h, w.code, w.n, w.flushes, w.keep = nil, 0, 0, 0, false
}
