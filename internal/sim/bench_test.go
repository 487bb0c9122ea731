package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/sse"
)

// BenchmarkSchedule1000Streams measures the simulator's own schedule error
// (the time a flush returned − the time the event was due, from the
// request's receipt) with 1,000 concurrent streams over loopback, and the
// same error as the client sees it (arrival − request sent − due). Each
// stream sends 60 text tokens at 20 t/s, one token per event, so with all
// streams open the server writes 20,000 events per second; the streams
// start spread over one second, as independent clients arrive, and all
// 1,000 are open from 1 s to 3 s. Run it with
//
//	go test ./internal/sim -run '^$' -bench Schedule1000 -benchtime 1x
//
// Reported metrics are µs: server p50/p99/max and client p50/p99.
func BenchmarkSchedule1000Streams(b *testing.B) {
	const (
		streams = 1000
		tokens  = 60
		tps     = 20.0
		spread  = time.Second // the streams start over this time
	)
	p := Profile{HeadersMs: 10, TextMs: Ms(20), VisibleTokens: tokens, TPS: tps}
	sched, err := p.Schedule()
	if err != nil {
		b.Fatal(err)
	}
	var due []time.Duration // due time of each event, in stream order
	for _, st := range sched.Steps {
		if st.Kind != "cut" && st.Kind != "close" && st.Kind != "heartbeat" {
			due = append(due, st.At)
		}
	}
	s := New(Options{Profiles: map[string]Profile{"load": p}})
	var (
		serverLate = make([]time.Duration, streams*(len(due)+2))
		serverN    atomic.Int64
	)
	var t0 time.Time
	byPhase := make([][]time.Duration, 5)
	var phaseMu sync.Mutex
	s.onSend = func(due, sent time.Time) {
		if i := serverN.Add(1) - 1; int(i) < len(serverLate) {
			serverLate[i] = sent.Sub(due)
		}
		ph := min(int(sent.Sub(t0)/(500*time.Millisecond)), 4)
		phaseMu.Lock()
		byPhase[ph] = append(byPhase[ph], sent.Sub(due))
		phaseMu.Unlock()
	}
	srv := testServer(b, Options{})
	srv.Config.Handler = s
	tr := &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	// Open the 1,000 connections first: the benchmark measures streaming,
	// not TCP setup (which would also shift the client's origin).
	var warm sync.WaitGroup
	for range streams {
		warm.Add(1)
		go func() {
			defer warm.Done()
			resp, err := client.Get(srv.URL + "/healthz")
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	warm.Wait()

	b.ReportAllocs()
	var clientLate []time.Duration
	var failures atomic.Int64
	for b.Loop() {
		serverN.Store(0)
		t0 = time.Now()
		var mu sync.Mutex
		clientLate = clientLate[:0]
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * spread / streams)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				req := requestFor(ctx, srv.URL, APIChat, "load", true, nil)
				start := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failures.Add(1)
					return
				}
				defer resp.Body.Close()
				rd := sse.NewReader(resp.Body, 0)
				local := make([]time.Duration, 0, len(due))
				n := 0
				for {
					piece, err := rd.Next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							failures.Add(1)
						}
						break
					}
					if piece.Kind != sse.PieceEvent {
						continue
					}
					// Events of one step arrive in one write; the finish step
					// writes the finish chunk and [DONE] together.
					if n < len(due) {
						local = append(local, time.Since(start)-due[n])
					}
					n++
				}
				mu.Lock()
				clientLate = append(clientLate, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d streams failed", f)
	}
	sl := serverLate[:min(int(serverN.Load()), len(serverLate))]
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		q := func(f float64) float64 { return float64(d[int(f*float64(len(d)-1))]) / 1e3 }
		b.ReportMetric(q(0.50), name+"-p50-µs")
		b.ReportMetric(q(0.99), name+"-p99-µs")
		if name == "server" {
			b.ReportMetric(q(1), name+"-max-µs")
			b.ReportMetric(float64(len(d)), "events")
		}
	}
	if len(sl) == 0 || len(clientLate) == 0 {
		b.Fatal("no events measured")
	}
	for i, d := range byPhase {
		if len(d) > 0 {
			slices.Sort(d)
			b.Logf("phase %d: n %d p50 %v p99 %v", i, len(d), d[len(d)/2], d[len(d)*99/100])
		}
	}
	report("server", sl)
	report("client", clientLate)
	b.Logf("server p50 %.0f µs p99 %.0f µs over %d events; %s", float64(sl[len(sl)/2])/1e3, float64(sl[len(sl)*99/100])/1e3, len(sl), fmt.Sprint(streams, " streams"))
}

// BenchmarkFrame measures the CPU cost of writing one text delta in each
// protocol (JSON encoding and SSE framing): the simulator's per-event work.
func BenchmarkFrame(b *testing.B) {
	p := mixed
	c := generate(p)
	pl := buildPlan(p, fault{}, c)
	r := newResponse("mixed", "mixed", p, c, pl, 10, true)
	st := Step{Kind: StepText, Text: " token", Tokens: 1}
	for _, api := range []API{APIChat, APIResponses, APIAnthropic, APIGemini} {
		b.Run(string(api), func(b *testing.B) {
			enc := units[api].NewEncoder(r)
			enc.Frame(nil, Step{Kind: StepStart})
			enc.Frame(nil, Step{Kind: StepText, Text: "x", Tokens: 1})
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			for b.Loop() {
				buf = enc.Frame(buf[:0], st)
			}
		})
	}
}

// BenchmarkTimerFloor1000 is the floor under BenchmarkSchedule1000Streams
// on the same machine: 1,000 goroutines that do nothing but wait for
// absolute due times 50 ms apart with the runtime's timers, and report how
// late they woke. The simulator cannot be more punctual than this; on a
// shared or virtual machine, noise from neighbours shows here first.
func BenchmarkTimerFloor1000(b *testing.B) {
	const (
		goroutines = 1000
		ticks      = 60
		every      = 50 * time.Millisecond
	)
	late := make([]time.Duration, goroutines*ticks)
	for b.Loop() {
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now().Add(time.Duration(g) * every / goroutines)
				timer := time.NewTimer(0)
				<-timer.C
				for j := range ticks {
					due := t0.Add(time.Duration(j+1) * every)
					timer.Reset(time.Until(due))
					<-timer.C
					late[g*ticks+j] = time.Since(due)
				}
			}()
		}
		wg.Wait()
	}
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2])/1e3, "p50-µs")
	b.ReportMetric(float64(late[len(late)*99/100])/1e3, "p99-µs")
	b.ReportMetric(float64(late[len(late)-1])/1e3, "max-µs")
}
