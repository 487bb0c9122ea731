// The gateway's own overhead (SPEC.md §11, issue 4): one simulator over
// real loopback HTTP, reached three ways side by side in the same run —
// directly, through the ttfx gateway (relay.New, as gateway() builds it),
// and through a bare httputil.ReverseProxy with FlushInterval -1 — so the
// gateway's figures read against both the floor (no hop at all) and the
// price of any Go HTTP hop.
//
// Reproduce (the machine is shared: note the load, run each benchmark a few
// times and take the medians):
//
//	uptime
//	go test ./internal/relay -run '^$' -bench 'Overhead(Latency|Saturation|Memory)' -benchtime 1x -count 3 -timeout 30m
//
// (about 4 minutes) or one part at a time: -bench OverheadLatency, -bench
// OverheadSaturation (sub-benchmarks c64, c256, short), -bench
// OverheadMemory. Each iteration is a whole measurement of the three paths
// (latency: 220 interleaved rounds; saturation: two 1 s windows per path;
// memory: 256 streams per path), so -benchtime 1x is enough; a larger
// count of iterations pools more samples. BenchmarkOverheadInProcess
// (overhead_inproc_test.go) isolates the relay's own CPU and allocations
// per event from the network and runs with the default -benchtime:
//
//	go test ./internal/relay -run '^$' -bench OverheadInProcess -count 3
//
// Client, simulator and relay share this process and its cores, so CPU and
// allocations per event are process-wide figures; a hop's cost is its
// path's figure minus the direct path's (reported as *_added_*). Events per
// second at saturation are the whole process's throughput with the hop in
// it, not the gateway's alone; 1e9 / gateway_added_cpu_ns/event is what one
// core could relay.

package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/sse"
)

// ohPath is one way to reach the simulator.
type ohPath struct {
	name string // direct, gateway, proxy: the metric prefix
	tag  string // one letter opening the model name, so the simulator's Info names the path
	base string
	key  string
}

// ohRig is the simulator with the gateway and the reverse proxy in front of
// it, and one client for all three.
type ohRig struct {
	paths    []ohPath
	client   *http.Client
	clientTr *http.Transport
	gwTr     *http.Transport
	proxyTr  *http.Transport
	gw       *relay.Gateway
	recs     ohRecords

	simLive   atomic.Int64 // requests the simulator is serving now
	proxyLive atomic.Int64 // requests the reverse proxy is serving now
	simConns  atomic.Int64 // connections the simulator accepted
	hopConns  atomic.Int64 // connections the gateway and the proxy accepted
	sent      sync.Map     // model name → ohSent, when timed
}

// ohSent is what the simulator did for one request: its own record, and
// the moment of each flush (the first is the headers', then one per step
// of the schedule), taken just before the bytes went to the socket.
type ohSent struct {
	info    sim.Info
	flushes []time.Time
}

// flushClock notes the time of each flush of the simulator's response.
type flushClock struct {
	http.ResponseWriter
	at []time.Time
}

// FlushError is what http.ResponseController calls; the time is taken
// before the flush, so a client can never read the bytes before it.
func (f *flushClock) FlushError() error {
	f.at = append(f.at, time.Now())
	return http.NewResponseController(f.ResponseWriter).Flush()
}

func (f *flushClock) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// newOverheadRig serves p for every model name. With timed, the
// simulator's Info and flush times of every request are kept by model
// name (which costs the simulator a body read and a small JSON decode, so
// the saturation and memory benchmarks leave it off).
func newOverheadRig(tb testing.TB, p sim.Profile, timed bool) *ohRig {
	tb.Helper()
	r := &ohRig{}
	var infos sync.Map // model → sim.Info, until the handler ends
	s := sim.New(sim.Options{
		Profiles: map[string]sim.Profile{"bench": p},
		Default:  "bench",
		OnRequest: func(i sim.Info) {
			if timed {
				infos.Store(i.Model, i)
			}
		},
	})
	simSrv := startServer(tb, &r.simConns, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.simLive.Add(1)
		defer r.simLive.Add(-1)
		if !timed {
			s.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		var m struct{ Model string }
		json.Unmarshal(body, &m)
		req.Body = io.NopCloser(bytes.NewReader(body))
		fc := &flushClock{ResponseWriter: w}
		s.ServeHTTP(fc, req)
		if v, ok := infos.LoadAndDelete(m.Model); ok {
			r.sent.Store(m.Model, ohSent{info: v.(sim.Info), flushes: fc.at})
		}
	}))

	// The gateway as gateway() builds it, with its transport kept (to
	// drop idle connections between phases) and a recorder that only
	// counts, so that records do not pile up in the heap being measured.
	r.gwTr = relay.NewTransport()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	r.gw = relay.New(relay.Options{
		Router:      route.NewRouter([]*route.Channel{channel("sim-openai", "openai", simSrv.URL, fastTimeouts)}, 1),
		Keys:        keys,
		Recorder:    &r.recs,
		Transport:   r.gwTr,
		UserHashKey: []byte("0123456789abcdef"),
	})
	mux := http.NewServeMux()
	r.gw.Register(mux)
	gwSrv := startServer(tb, &r.hopConns, mux)

	// The bare proxy gets the same upstream transport settings as the
	// gateway, so the two differ only in what they do per request and
	// per event.
	target, _ := url.Parse(simSrv.URL)
	r.proxyTr = relay.NewTransport()
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     r.proxyTr,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // cancelled streams are expected
	}
	proxySrv := startServer(tb, &r.hopConns, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.proxyLive.Add(1)
		defer r.proxyLive.Add(-1)
		rp.ServeHTTP(w, req)
	}))

	r.clientTr = &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true, IdleConnTimeout: 90 * time.Second}
	r.client = &http.Client{Transport: r.clientTr}
	tb.Cleanup(func() {
		r.clientTr.CloseIdleConnections()
		r.gwTr.CloseIdleConnections()
		r.proxyTr.CloseIdleConnections()
	})
	r.paths = []ohPath{
		{name: "direct", tag: "d", base: simSrv.URL, key: "any"},
		{name: "gateway", tag: "g", base: gwSrv.URL, key: clientKey},
		{name: "proxy", tag: "p", base: proxySrv.URL, key: "any"},
	}
	return r
}

// startServer serves h over loopback until the test ends, counting the
// connections it accepts in conns.
func startServer(tb testing.TB, conns *atomic.Int64, h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv
}

// stream sends one streaming chat request along p and reads the response
// to its end, handing each event (numbered from 0) to onEvent the moment
// the reader yields it. It returns when the request was sent. A stream
// that does not end with [DONE] is an error.
func (r *ohRig) stream(ctx context.Context, p ohPath, model string, onEvent func(n int, pc *sse.Piece)) (time.Time, error) {
	req := call{"chat", model, true}.request(ctx, p.base, p.key)
	sent := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return sent, fmt.Errorf("%s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return sent, fmt.Errorf("%s: HTTP %d: %s", p.name, resp.StatusCode, b)
	}
	rd := sse.NewReader(resp.Body, 0)
	done := false
	for n := 0; ; {
		pc, err := rd.Next()
		if err == io.EOF && done {
			return sent, nil
		}
		if err == io.EOF {
			return sent, fmt.Errorf("%s: the stream ended after %d events without [DONE]", p.name, n)
		}
		if err != nil {
			return sent, fmt.Errorf("%s: after %d events: %w", p.name, n, err)
		}
		if pc.Kind != sse.PieceEvent {
			continue
		}
		done = string(pc.Event.Data) == "[DONE]"
		if onEvent != nil {
			onEvent(n, pc)
		}
		n++
	}
}

// sentFor waits for what the simulator did for the request for model.
func (r *ohRig) sentFor(tb testing.TB, model string) ohSent {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, ok := r.sent.LoadAndDelete(model); ok {
			return v.(ohSent)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the simulator never reported the request for %s", model)
		}
		time.Sleep(time.Millisecond)
	}
}

// quiesce waits until no request is left in the simulator, the gateway or
// the proxy, so that one phase's tail does not run into the next one's
// measurement.
func (r *ohRig) quiesce(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for r.simLive.Load() != 0 || r.proxyLive.Load() != 0 || r.gw.Inflight() != 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("requests still running: simulator %d, gateway %d, proxy %d", r.simLive.Load(), r.gw.Inflight(), r.proxyLive.Load())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *ohRig) closeIdle() {
	r.clientTr.CloseIdleConnections()
	r.gwTr.CloseIdleConnections()
	r.proxyTr.CloseIdleConnections()
}

// warm opens a kept-alive connection along every path.
func (r *ohRig) warm(tb testing.TB, model string) {
	tb.Helper()
	for _, p := range r.paths {
		if _, err := r.stream(context.Background(), p, p.tag+model, nil); err != nil {
			tb.Fatal(err)
		}
	}
}

// ohRecords counts the gateway's records by outcome.
type ohRecords struct {
	ok, cancelled, other atomic.Int64
	mu                   sync.Mutex
	lastOther            string
}

func (r *ohRecords) Record(rec *record.Record) {
	switch rec.Status {
	case record.StatusOK:
		r.ok.Add(1)
	case record.StatusClientCancelled:
		r.cancelled.Add(1)
	default:
		r.other.Add(1)
		r.mu.Lock()
		r.lastOther = rec.Status + ": " + rec.Error
		r.mu.Unlock()
	}
}

// check fails when the gateway recorded anything but success or a client
// that went away.
func (r *ohRecords) check(tb testing.TB) {
	tb.Helper()
	if n := r.other.Load(); n > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		tb.Fatalf("the gateway recorded %d failed requests, the last %s", n, r.lastOther)
	}
}

// quantile is the nearest-rank q-quantile of sorted d.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(d)))) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func usOf(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkOverheadLatency measures what each hop adds to the time to
// first visible text and to every event, with profiles whose small real
// delays make the simulator wait between events, so that each event
// crosses the hop on its own, as a model's do: headers and the role chunk
// at 5 ms, text from 10 ms at 1000 t/s, one token per event; 20 rounds
// of 200 tokens, which give most of the per-event samples, and 200 rounds
// of 5 tokens, so that the time to first text has 220 samples per path
// and its p99 is not just the maximum.
//
// A round sends one request along each path, one after the other, in an
// order that rotates from round to round, so that all three see the same
// conditions. The simulator's flushes are timed (flushClock). Metrics per
// path:
//
//   - ttft_p50_ms / ttft_p99_ms: request sent → first text event read by
//     the client, as a user sees it. *_ttft_added_* compares the paths'
//     quantiles after taking out of each request the simulator's own
//     lateness on that event (its flush − its due time), which is the
//     same for every path but random between requests (Go timers wake up
//     to a millisecond late); what is left is the request's way in (auth,
//     body, routing, the upstream request) and the first event's way out.
//   - event_p50_us / event_p99_us: each event's arrival at the client minus
//     the simulator's flush of it: the per-event latency of the path, a
//     loopback hop and the client's read for the direct path, plus the
//     relay's read, parse, write and flush and a second hop through a
//     gateway or proxy. *_event_added_* subtracts the direct quantile.
//   - gap_p50_us / gap_p99_us: inter-arrival gaps between text events at
//     the client (nominally 1000 µs, plus the simulator's timer jitter); a
//     hop that batched or stalled events would show here.
func BenchmarkOverheadLatency(b *testing.B) {
	long := sim.Profile{HeadersMs: 5, FirstEventMs: 5, TextMs: sim.Ms(10), VisibleTokens: 200, TPS: 1000}
	short := long
	short.VisibleTokens = 5
	phases := []*ohLatency{newOhLatency(b, long, 20), newOhLatency(b, short, 200)}

	s := make([]ohSamples, 3)
	for b.Loop() {
		for _, ph := range phases {
			ph.run(b, s)
		}
	}
	requests := 0
	for _, ph := range phases {
		ph.rig.recs.check(b)
		if ok := ph.rig.recs.ok.Load(); ok != int64(ph.round+1) {
			b.Fatalf("the gateway recorded %d successful requests, want %d", ok, ph.round+1)
		}
		requests += ph.round
	}

	type figs struct{ ttft50, ttft99, net50, net99, ev50, ev99, gap50, gap99 time.Duration }
	f := make([]figs, len(s))
	for i := range s {
		for _, d := range [][]time.Duration{s[i].ttft, s[i].ttftNet, s[i].event, s[i].gap} {
			slices.Sort(d)
		}
		f[i] = figs{
			quantile(s[i].ttft, .5), quantile(s[i].ttft, .99),
			quantile(s[i].ttftNet, .5), quantile(s[i].ttftNet, .99),
			quantile(s[i].event, .5), quantile(s[i].event, .99),
			quantile(s[i].gap, .5), quantile(s[i].gap, .99),
		}
	}
	for i, p := range phases[0].rig.paths {
		b.ReportMetric(msOf(f[i].ttft50), p.name+"_ttft_p50_ms")
		b.ReportMetric(msOf(f[i].ttft99), p.name+"_ttft_p99_ms")
		b.ReportMetric(usOf(f[i].ev50), p.name+"_event_p50_us")
		b.ReportMetric(usOf(f[i].ev99), p.name+"_event_p99_us")
		b.ReportMetric(usOf(f[i].gap50), p.name+"_gap_p50_us")
		b.ReportMetric(usOf(f[i].gap99), p.name+"_gap_p99_us")
		if i == 0 {
			continue
		}
		b.ReportMetric(msOf(f[i].net50-f[0].net50), p.name+"_ttft_added_p50_ms")
		b.ReportMetric(msOf(f[i].net99-f[0].net99), p.name+"_ttft_added_p99_ms")
		b.ReportMetric(usOf(f[i].ev50-f[0].ev50), p.name+"_event_added_p50_us")
		b.ReportMetric(usOf(f[i].ev99-f[0].ev99), p.name+"_event_added_p99_us")
	}
	b.ReportMetric(float64(requests), "requests/path")
}

// ohSamples are one path's latency samples.
type ohSamples struct{ ttft, ttftNet, event, gap []time.Duration }

// ohLatency is one latency phase: a rig serving one profile, and where in
// the client's stream each scheduled event lands.
type ohLatency struct {
	rig                 *ohRig
	rounds, round       int
	due                 []time.Duration // due time of each event the client reads, in order
	firstText, lastText int
	at                  []time.Time
}

func newOhLatency(tb testing.TB, p sim.Profile, rounds int) *ohLatency {
	tb.Helper()
	sched, err := p.Schedule()
	if err != nil {
		tb.Fatal(err)
	}
	l := &ohLatency{rounds: rounds, firstText: -1}
	// One flush per step; the finish step writes the finish chunk and
	// [DONE] at once, so the last event has no step of its own.
	for _, st := range sched.Steps {
		switch st.Kind {
		case "heartbeat", "cut", "close":
			continue
		case "text":
			if l.firstText < 0 {
				l.firstText = len(l.due)
			}
			l.lastText = len(l.due)
		}
		l.due = append(l.due, st.At)
	}
	if l.firstText < 0 || l.lastText-l.firstText+1 != p.VisibleTokens {
		tb.Fatalf("unexpected schedule %+v", sched.Steps)
	}
	l.at = make([]time.Time, 0, len(l.due)+1)
	l.rig = newOverheadRig(tb, p, true)
	l.rig.warm(tb, "-warm")
	for _, p := range l.rig.paths {
		l.rig.sentFor(tb, p.tag+"-warm")
	}
	return l
}

// run sends l.rounds rounds and adds their samples to s.
func (l *ohLatency) run(b *testing.B, s []ohSamples) {
	paths := l.rig.paths
	for range l.rounds {
		for k := range paths {
			pi := (l.round + k) % len(paths)
			p := paths[pi]
			model := fmt.Sprintf("%s-%06d", p.tag, l.round)
			l.at = l.at[:0]
			var notText bool
			sent, err := l.rig.stream(context.Background(), p, model, func(n int, pc *sse.Piece) {
				l.at = append(l.at, time.Now())
				if n == l.firstText && !bytes.Contains(pc.Event.Data, []byte(`"content":"`)) {
					notText = true
				}
			})
			if err != nil {
				b.Fatal(err)
			}
			if notText || len(l.at) != len(l.due)+1 {
				b.Fatalf("%s: %d events (want %d), event %d text: %v", p.name, len(l.at), len(l.due)+1, l.firstText, !notText)
			}
			sd := l.rig.sentFor(b, model)
			if len(sd.flushes) != len(l.due)+1 {
				b.Fatalf("%s: the simulator flushed %d times, want headers + %d steps", p.name, len(sd.flushes), len(l.due))
			}
			flushed := sd.flushes[1:]
			for n := range l.due {
				d := l.at[n].Sub(flushed[n])
				if d <= 0 {
					b.Fatalf("%s: event %d read %v before the simulator flushed it", p.name, n, -d)
				}
				s[pi].event = append(s[pi].event, d)
			}
			for n := l.firstText + 1; n <= l.lastText; n++ {
				s[pi].gap = append(s[pi].gap, l.at[n].Sub(l.at[n-1]))
			}
			ttft := l.at[l.firstText].Sub(sent)
			simLate := flushed[l.firstText].Sub(sd.info.Received.Add(l.due[l.firstText]))
			if simLate < 0 {
				b.Fatalf("%s: the simulator flushed the first text %v before it was due", p.name, -simLate)
			}
			s[pi].ttft = append(s[pi].ttft, ttft)
			s[pi].ttftNet = append(s[pi].ttftNet, ttft-simLate)
		}
		l.round++
	}
}

// ohCounter is one worker's counts, on its own cache line so that workers
// do not contend on the counting.
type ohCounter struct {
	events, requests atomic.Int64
	_                [48]byte
}

// ohSnap is the process's state at one moment of a saturation window.
type ohSnap struct {
	at                 time.Time
	simConns, hopConns int64
	events, requests   int64
	cpu                time.Duration
	mallocs, bytes     uint64
}

func (r *ohRig) snapshot(counters []ohCounter) ohSnap {
	s := ohSnap{simConns: r.simConns.Load(), hopConns: r.hopConns.Load()}
	for i := range counters {
		s.events += counters[i].events.Load()
		s.requests += counters[i].requests.Load()
	}
	s.cpu, _ = processCPU()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.mallocs, s.bytes = ms.Mallocs, ms.TotalAlloc
	s.at = time.Now()
	return s
}

// BenchmarkOverheadSaturation drives each path as hard as the process can:
// a profile with no delays (headers, first event and text at 0 ms, tokens
// due a nanosecond apart, one token per event), many streams at once in
// closed loop (each worker starts its next request when the last ends).
// After a GC and a 300 ms ramp, a 1 s window per path (twice per
// iteration, forward and in reverse order) counts the events the
// client read, the process's CPU time and its allocations, so:
//
//   - <path>_events/s: relayed events per second at the client;
//   - <path>_cpu_ns/event, <path>_allocs/event, <path>_B/event: the whole
//     process (client + simulator [+ hop]) per event; *_added_* subtracts
//     the direct path's, leaving the hop's own cost (and what it changes
//     for the client and the simulator, such as how many events one read
//     gets);
//   - <path>_cores: CPU seconds per second of the window, how much of the
//     shared machine the process got (events/s follow it, CPU per event
//     does not);
//   - the "short" case streams 10 tokens, so per-request costs (auth,
//     parsing, routing, the upstream request, the record) dominate, and
//     also reports <path>_requests/s and *_added_cpu_us/request.
func BenchmarkOverheadSaturation(b *testing.B) {
	for _, c := range []struct {
		name         string
		streams, tok int
	}{
		{"c64", 64, 1000},
		{"c256", 256, 1000},
		{"short", 64, 10},
	} {
		b.Run(c.name, func(b *testing.B) { saturate(b, c.streams, c.tok) })
	}
}

func saturate(b *testing.B, streams, tokens int) {
	const (
		ramp   = 300 * time.Millisecond
		window = time.Second
	)
	if _, ok := processCPU(); !ok {
		b.Log("no process CPU time on this platform: CPU metrics are left out")
	}
	prof := sim.Profile{TextMs: sim.Ms(0), VisibleTokens: tokens, TPS: 1e9}
	rig := newOverheadRig(b, prof, false)
	rig.warm(b, "-warm")
	rig.quiesce(b)

	type total struct {
		events, requests int64
		dur, cpu         time.Duration
		mallocs, bytes   uint64
	}
	tot := make([]total, len(rig.paths))
	counters := make([]ohCounter, streams)
	// Each iteration measures every path twice, forward and then in
	// reverse order, so that no path always follows the same one (a
	// window inherits the machine's state, and GC debt, from the last).
	order := []int{0, 1, 2, 2, 1, 0}
	for b.Loop() {
		for _, pi := range order {
			p := rig.paths[pi]
			for i := range counters {
				counters[i].events.Store(0)
				counters[i].requests.Store(0)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var failures atomic.Int64
			var lastErr atomic.Value
			for w := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctr := &counters[w]
					count := func(int, *sse.Piece) { ctr.events.Add(1) }
					for ctx.Err() == nil {
						_, err := rig.stream(ctx, p, "sat", count)
						switch {
						case err == nil:
							ctr.requests.Add(1)
						case ctx.Err() == nil:
							failures.Add(1)
							lastErr.Store(err)
						}
					}
				}()
			}
			runtime.GC()
			time.Sleep(ramp)
			start := rig.snapshot(counters)
			time.Sleep(window)
			end := rig.snapshot(counters)
			if sc, hc := end.simConns-start.simConns, end.hopConns-start.hopConns; sc+hc > 0 {
				// Keep-alive should carry every request of the window:
				// new connections are set-up work the figures include.
				b.Logf("%s: %d new connections to the simulator and %d to the hop during the window (%d requests done)", p.name, sc, hc, end.requests-start.requests)
			}
			cancel()
			wg.Wait()
			rig.quiesce(b)
			rig.closeIdle()
			if n := failures.Load(); n > 0 {
				b.Fatalf("%s: %d streams failed, the last: %v", p.name, n, lastErr.Load())
			}
			t := &tot[pi]
			t.events += end.events - start.events
			t.requests += end.requests - start.requests
			t.dur += end.at.Sub(start.at)
			t.cpu += end.cpu - start.cpu
			t.mallocs += end.mallocs - start.mallocs
			t.bytes += end.bytes - start.bytes
		}
	}
	rig.recs.check(b)
	_, haveCPU := processCPU()
	perEvent := func(t total) (cpu, allocs, bytes float64) {
		n := float64(t.events)
		return float64(t.cpu) / n, float64(t.mallocs) / n, float64(t.bytes) / n
	}
	for i, p := range rig.paths {
		t := tot[i]
		if t.events == 0 {
			b.Fatalf("%s: no events in the window", p.name)
		}
		cpu, allocs, bytes := perEvent(t)
		b.ReportMetric(float64(t.events)/t.dur.Seconds(), p.name+"_events/s")
		b.ReportMetric(allocs, p.name+"_allocs/event")
		b.ReportMetric(bytes, p.name+"_B/event")
		if haveCPU {
			b.ReportMetric(cpu, p.name+"_cpu_ns/event")
			// How much of the machine the process got: on a shared
			// machine events/s follow it, CPU per event does not.
			b.ReportMetric(t.cpu.Seconds()/t.dur.Seconds(), p.name+"_cores")
		}
		short := tokens < 100
		if short {
			b.ReportMetric(float64(t.requests)/t.dur.Seconds(), p.name+"_requests/s")
		}
		if i == 0 {
			continue
		}
		dcpu, dallocs, dbytes := perEvent(tot[0])
		b.ReportMetric(allocs-dallocs, p.name+"_added_allocs/event")
		b.ReportMetric(bytes-dbytes, p.name+"_added_B/event")
		if haveCPU {
			b.ReportMetric(cpu-dcpu, p.name+"_added_cpu_ns/event")
			if short && t.requests > 0 && tot[0].requests > 0 {
				added := float64(t.cpu)/float64(t.requests) - float64(tot[0].cpu)/float64(tot[0].requests)
				b.ReportMetric(added/1e3, p.name+"_added_cpu_us/request")
			}
		}
	}
}

// ohMem is the live heap, goroutine stacks and goroutines after a GC.
type ohMem struct {
	heap, stack uint64
	goroutines  int
}

func liveMem() ohMem {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ohMem{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// BenchmarkOverheadMemory measures what an open stream holds: 256 streams
// along one path at a time, each held open at a point of its stream; the
// live heap and goroutine stacks after a GC, minus the same before the
// streams opened (idle connections dropped both times), divided by the
// streams. Every open stream costs the client and the simulator their
// part; *_added_B/stream subtracts the direct path's, leaving the hop's
// own (its server-side connection, its upstream connection and its
// per-request state). Two points of a stream:
//
//   - first-text: text from the start at 2 t/s, measured once each
//     stream's first text event has arrived (a stream that just started);
//   - 1000-tokens: 1000 tokens at once, then nothing until the end is due a
//     minute later, measured once the last token has arrived (a long
//     answer in progress: what the relay keeps of a stream as it grows,
//     such as the visible text it counts tokens over, shows here);
//   - 5000-tokens: the same with 5000 tokens (about 20 KB of text, of
//     which the stream keeps what it has not counted yet).
func BenchmarkOverheadMemory(b *testing.B) {
	b.Run("first-text", func(b *testing.B) {
		holdStreams(b, sim.Profile{TextMs: sim.Ms(0), VisibleTokens: 400, TPS: 2}, 0)
	})
	b.Run("1000-tokens", func(b *testing.B) {
		holdStreams(b, sim.Profile{TextMs: sim.Ms(0), VisibleTokens: 1000, TPS: 1e9, EndMs: sim.Ms(60_000)}, 999)
	})
	b.Run("5000-tokens", func(b *testing.B) {
		holdStreams(b, sim.Profile{TextMs: sim.Ms(0), VisibleTokens: 5000, TPS: 1e9, EndMs: sim.Ms(60_000)}, 4999)
	})
}

// holdStreams measures streams held open once text token readyAt (from 0)
// has arrived.
func holdStreams(b *testing.B, prof sim.Profile, readyAt int) {
	const streams = 256
	sched, err := prof.Schedule()
	if err != nil {
		b.Fatal(err)
	}
	// The client's event number of text token readyAt: one event per step.
	readyEvent, texts := -1, 0
	for i, st := range sched.Steps {
		if st.Kind == "text" {
			if texts == readyAt {
				readyEvent = i
				break
			}
			texts++
		}
	}
	if readyEvent < 0 {
		b.Fatalf("the profile sends no text token %d", readyAt)
	}
	rig := newOverheadRig(b, prof, false)

	type total struct{ heap, stack, goroutines float64 }
	tot := make([]total, len(rig.paths))
	iter := 0
	for b.Loop() {
		for k := range rig.paths {
			pi := (iter + k) % len(rig.paths)
			p := rig.paths[pi]
			rig.closeIdle()
			rig.quiesce(b)
			before := liveMem()

			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan error, 2*streams)
			var wg sync.WaitGroup
			for range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := rig.stream(ctx, p, "idle", func(n int, pc *sse.Piece) {
						if n == readyEvent {
							ready <- nil
						}
					})
					if ctx.Err() == nil {
						ready <- fmt.Errorf("a stream ended before the measurement: %v", err)
					}
				}()
			}
			timeout := time.After(30 * time.Second)
			for range streams {
				select {
				case err := <-ready:
					if err != nil {
						cancel()
						b.Fatalf("%s: %v", p.name, err)
					}
				case <-timeout:
					cancel()
					b.Fatalf("%s: streams not open after 30 s", p.name)
				}
			}
			after := liveMem()
			cancel()
			wg.Wait()
			rig.quiesce(b)

			t := &tot[pi]
			t.heap += (float64(after.heap) - float64(before.heap)) / streams
			t.stack += (float64(after.stack) - float64(before.stack)) / streams
			t.goroutines += float64(after.goroutines-before.goroutines) / streams
		}
		iter++
	}
	rig.recs.check(b)
	for i, p := range rig.paths {
		t := tot[i]
		n := float64(iter)
		b.ReportMetric(t.heap/n, p.name+"_heap_B/stream")
		b.ReportMetric(t.stack/n, p.name+"_stack_B/stream")
		b.ReportMetric(t.goroutines/n, p.name+"_goroutines/stream")
		if i > 0 {
			d := tot[0]
			b.ReportMetric((t.heap+t.stack-d.heap-d.stack)/n, p.name+"_added_B/stream")
		}
	}
}
