package route

import (
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// clock is a clock tests step by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Unix(1_000_000, 0)} }

func TestHealthPercentilesAndWindow(t *testing.T) {
	c := newClock()
	ch := &Channel{Name: "a", Protocol: "openai", Weight: 1}
	r := New([]*Channel{ch}, Options{Now: c.now})
	h := r.Health(ch, "m")
	for i := 1; i <= 100; i++ {
		h.Observe(Result{Kind: KindOK, Stream: true, FirstResponse: time.Duration(i) * time.Millisecond, HasFirstResponse: true})
	}
	// Non-streaming and failed attempts give no latency sample.
	h.Observe(Result{Kind: KindOK, FirstResponse: time.Hour, HasFirstResponse: true})
	h.Observe(Result{Kind: KindHTTP5xx, Stream: true, FirstResponse: time.Hour, HasFirstResponse: true})
	c.add(time.Second)
	rep := r.Report()
	v := rep.Channels[0]
	// R-7 over 1…100 ms: p50 = 50.5, p95 = 95.05, p99 = 99.01.
	if v.FirstResponse.Count != 100 || math.Abs(v.FirstResponse.P50-50.5) > 1e-9 || math.Abs(v.FirstResponse.P95-95.05) > 1e-9 || math.Abs(v.FirstResponse.P99-99.01) > 1e-9 {
		t.Errorf("first response = %+v", v.FirstResponse)
	}
	if v.Counts.Attempts != 102 || v.Counts.Errors != 1 || *v.ErrorRate != 1.0/102 {
		t.Errorf("counts %+v error rate %v", v.Counts, *v.ErrorRate)
	}
	// The ring keeps the last ringSize samples.
	for range ringSize {
		h.Observe(Result{Kind: KindOK, Stream: true, FirstResponse: 7 * time.Millisecond, HasFirstResponse: true})
	}
	c.add(time.Second)
	if d, ok := h.Latency(FieldFirstResponse, 0.99, 1); !ok || d != 7*time.Millisecond {
		t.Errorf("after %d new samples p99 = %v %v, want 7ms", ringSize, d, ok)
	}
	// Samples older than the window no longer count.
	c.add(window + 2*time.Second)
	if _, ok := h.Latency(FieldFirstResponse, 0.5, 1); ok {
		t.Error("samples older than the window still count")
	}
}

func TestEjectionBackoff(t *testing.T) {
	c := newClock()
	a := &Channel{Name: "a", Protocol: "openai", Weight: 1}
	b := &Channel{Name: "b", Protocol: "openai", Weight: 1, Priority: 1}
	rt := &Route{Models: []string{"m"}, Strategy: StrategyPriority, Eject: &EjectPolicy{ConsecutiveFailures: 2, Base: 10 * time.Second, Max: 25 * time.Second}}
	r := New([]*Channel{a, b}, Options{Routes: []*Route{rt}, Now: c.now})
	order := func() ([]string, []string, bool) {
		p := r.Plan("openai", "m", "")
		return names(p.Channels), p.Skipped, p.Probe
	}
	ha := r.Health(a, "m")
	fail := func() { ha.Observe(Result{Kind: KindConnect}) }
	fail()
	ha.Observe(Result{Kind: KindHTTP4xx}) // the channel answered: the streak ends
	fail()
	if got, sk, _ := order(); !slices.Equal(got, []string{"a", "b"}) || len(sk) != 0 {
		t.Fatalf("after non-consecutive failures: %v skipped %v", got, sk)
	}
	fail() // two in a row
	for i, step := range []struct {
		wait time.Duration
		want []string
		skip []string
	}{
		{0, []string{"b"}, []string{"a"}},
		{10*time.Second - time.Millisecond, []string{"b"}, []string{"a"}},
	} {
		c.add(step.wait)
		if got, sk, _ := order(); !slices.Equal(got, step.want) || !slices.Equal(sk, step.skip) {
			t.Fatalf("step %d: %v skipped %v", i, got, sk)
		}
	}
	c.add(time.Millisecond)
	if got, _, probe := order(); !slices.Equal(got, []string{"a", "b"}) || !probe {
		t.Fatalf("at the end of the back-off: %v probe %v, want a probed first", got, probe)
	}
	// While the probe runs, others skip a.
	if got, sk, _ := order(); !slices.Equal(got, []string{"b"}) || !slices.Equal(sk, []string{"a"}) {
		t.Fatalf("during the probe: %v skipped %v", got, sk)
	}
	fail() // the probe fails: 2 × base
	c.add(20*time.Second - time.Millisecond)
	if got, _, _ := order(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("second back-off ended early: %v", got)
	}
	c.add(time.Millisecond)
	if _, _, probe := order(); !probe {
		t.Fatal("no probe after the second back-off")
	}
	fail() // 3 × base = 30s, capped at max 25s
	c.add(25 * time.Second)
	if _, _, probe := order(); !probe {
		t.Fatal("the back-off is not capped at max")
	}
	ha.Observe(Result{Kind: KindOK})
	if got, sk, probe := order(); !slices.Equal(got, []string{"a", "b"}) || len(sk) != 0 || probe || ha.Ejected() {
		t.Fatalf("after a good probe: %v skipped %v probe %v", got, sk, probe)
	}
	if e := ha.ejection(r.since()); e.Ejections != 3 || e.InARow != 3 {
		t.Errorf("ejection %+v, want 3 ejections, 3 in a row", e)
	}
}

func TestLatencyOrderAndExplore(t *testing.T) {
	c := newClock()
	chans := []*Channel{
		{Name: "slow", Protocol: "openai", Weight: 1},
		{Name: "fast", Protocol: "openai", Weight: 1, Priority: 2},
		{Name: "new", Protocol: "openai", Weight: 1, Priority: 1},
	}
	rt := &Route{Models: []string{"m"}, Strategy: StrategyLatency, Latency: LatencyPolicy{Definition: DefFirstText, Percentile: 0.5, Explore: 0.1}}
	r := New(chans, Options{Routes: []*Route{rt}, Now: c.now, Seed: 3})
	for _, s := range []struct {
		ch *Channel
		d  time.Duration
	}{{chans[0], 400 * time.Millisecond}, {chans[1], 100 * time.Millisecond}} {
		for range minLatencySamples {
			r.Health(s.ch, "m").Observe(Result{Kind: KindOK, Stream: true, FirstText: s.d, HasFirstText: true, FirstResponse: time.Millisecond, HasFirstResponse: true})
		}
	}
	first := map[string]int{}
	const n = 2000
	for range n {
		p := r.Plan("openai", "m", "")
		if !p.Explored && !slices.Equal(names(p.Channels), []string{"new", "fast", "slow"}) {
			t.Fatalf("order %v: the channel without samples first, then by first text", names(p.Channels))
		}
		first[p.Channels[0].Name]++
	}
	// Explore 10 %: another channel first about 10 % of the time.
	if other := n - first["new"]; other < n*6/100 || other > n*14/100 {
		t.Errorf("explored %d of %d, want about 10 %% (%v)", other, n, first)
	}
}

func TestHedgeBudget(t *testing.T) {
	chans := []*Channel{{Name: "a", Protocol: "openai", Weight: 1}, {Name: "b", Protocol: "openai", Weight: 1}}
	rt := &Route{Models: []string{"m"}, Hedge: &HedgePolicy{After: time.Second, MaxShare: 0.25}}
	r := New(chans, Options{Routes: []*Route{rt}})
	// 100 requests in flight at once, each wanting a hedge: the budget
	// earned is 25, the in-flight bound ⌈0.25 × 100⌉ = 25, the bank 10.
	var plans []Plan
	for range 100 {
		p := r.Plan("openai", "m", "")
		p.Begin()
		plans = append(plans, p)
	}
	got := 0
	var granted []int
	for i := range plans {
		if plans[i].TryHedge() {
			got++
			granted = append(granted, i)
		}
	}
	if got != hedgeBurst {
		t.Errorf("hedges allowed %d, want the bank of %d", got, hedgeBurst)
	}
	for _, i := range granted {
		plans[i].HedgeDone(true)
	}
	for i := range plans {
		plans[i].End()
	}
	if s, w, l := r.Hedges(); s != hedgeBurst || w != hedgeBurst || l != 0 {
		t.Errorf("hedges %d/%d/%d", s, w, l)
	}
	// One request in flight at a time: ⌈0.25⌉ = 1 hedge at once, and one
	// hedge per four requests once the bank is spent.
	rt = &Route{Models: []string{"m"}, Hedge: &HedgePolicy{After: time.Second, MaxShare: 0.25}}
	r = New(chans, Options{Routes: []*Route{rt}})
	hedges := 0
	for range 40 {
		p := r.Plan("openai", "m", "")
		p.Begin()
		if p.TryHedge() {
			hedges++
			if p.TryHedge() {
				t.Fatal("two hedges in flight for one request in flight")
			}
			p.HedgeDone(false)
		}
		p.End()
	}
	if hedges != 10 {
		t.Errorf("sequential hedges %d of 40, want 10", hedges)
	}
}

// BenchmarkPlan is the routing work of one request: candidates, route,
// strategy and the health and ejection checks.
func BenchmarkPlan(b *testing.B) {
	chans := []*Channel{{Name: "a", Protocol: "openai", Weight: 1}, {Name: "b", Protocol: "openai", Weight: 1, Priority: 1}, {Name: "c", Protocol: "anthropic"}}
	for _, s := range []Strategy{StrategyPriority, StrategyLatency} {
		rt := &Route{Models: []string{"gpt-*"}, Strategy: s, Latency: LatencyPolicy{Definition: DefFirstResponse, Percentile: 0.5, Explore: 0.05},
			Eject: &EjectPolicy{ConsecutiveFailures: 5, Base: time.Second, Max: time.Minute}}
		r := New(chans, Options{Routes: []*Route{rt}})
		for _, c := range chans[:2] {
			for range 50 {
				r.Health(c, "gpt-4o").Observe(Result{Kind: KindOK, Stream: true, FirstResponse: time.Millisecond, HasFirstResponse: true})
			}
		}
		b.Run(string(s), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p := r.Plan("openai", "gpt-4o", "")
				p.Health[0].Observe(Result{Kind: KindOK, Stream: true, FirstResponse: time.Millisecond, HasFirstResponse: true})
			}
		})
	}
}

func TestHedgeDelay(t *testing.T) {
	c := newClock()
	chans := []*Channel{{Name: "a", Protocol: "openai", Weight: 1}, {Name: "b", Protocol: "openai", Weight: 1, Priority: 1}}
	rt := &Route{Models: []string{"m"}, Hedge: &HedgePolicy{Percentile: 0.95, Floor: 50 * time.Millisecond, MaxShare: 0.1}}
	r := New(chans, Options{Routes: []*Route{rt}, Now: c.now})
	p := r.Plan("openai", "m", "")
	if d, ok := p.HedgeDelay(0); !ok || d != 50*time.Millisecond {
		t.Errorf("without samples: %v %v, want the floor", d, ok)
	}
	h := r.Health(chans[0], "m")
	for i := 1; i <= 20; i++ { // 10…200 ms: R-7 p95 = 190.5 ms
		h.Observe(Result{Kind: KindOK, Stream: true, FirstResponse: time.Duration(i) * 10 * time.Millisecond, HasFirstResponse: true})
	}
	c.add(time.Second)
	if d, ok := p.HedgeDelay(0); !ok || d != 190500*time.Microsecond {
		t.Errorf("p95 delay %v %v, want 190.5ms", d, ok)
	}
	rt.Hedge.Floor = time.Second
	if d, _ := p.HedgeDelay(0); d != time.Second {
		t.Errorf("delay %v under the floor", d)
	}
}

// TestCensoredKeptApart: a hedge loser's first response is a lower bound.
// It is counted apart and never shown as a percentile; the ranking still
// takes it, so a channel that always loses ranks at least as slow as the
// races it lost (issue 43: a 900 ms channel showed a p50 of 641 ms).
func TestCensoredKeptApart(t *testing.T) {
	c := newClock()
	ch := &Channel{Name: "a", Protocol: "openai", Weight: 1}
	r := New([]*Channel{ch}, Options{Now: c.now})
	h := r.Health(ch, "m")
	for range 10 {
		h.Observe(Result{Kind: KindOK, Stream: true, Headers: 100 * time.Millisecond, HasHeaders: true, FirstResponse: 900 * time.Millisecond, HasFirstResponse: true})
		h.Observe(Result{Kind: KindCancelled, Stream: true, Censored: true, Headers: 100 * time.Millisecond, HasHeaders: true, FirstResponse: 300 * time.Millisecond, HasFirstResponse: true})
	}
	c.add(time.Second)
	v := r.Report().Channels[0]
	if v.FirstResponse.Count != 10 || v.FirstResponse.P50 != 900 || v.FirstResponse.P95 != 900 || v.FirstResponse.Censored != 10 {
		t.Errorf("first response %+v: want 10 samples at 900 ms and 10 lower bounds apart", v.FirstResponse)
	}
	if v.UpstreamHeaders.Count != 20 || v.UpstreamHeaders.Censored != 0 {
		t.Errorf("headers %+v: a loser's headers came, a real sample", v.UpstreamHeaders)
	}
	// Ranking: R-7 median over 10 × 300 and 10 × 900 ms.
	if d, ok := h.Latency(FieldFirstResponse, 0.5, 1); !ok || d != 600*time.Millisecond {
		t.Errorf("ranked p50 %v %v, want 600 ms with the lower bounds", d, ok)
	}
	// A channel that only lost races has lower bounds and no percentile.
	h2 := r.Health(ch, "m2")
	h2.Observe(Result{Kind: KindCancelled, Stream: true, Censored: true, FirstResponse: 300 * time.Millisecond, HasFirstResponse: true})
	c.add(time.Second)
	for _, v := range r.Report().Channels {
		if v.Model == "m2" && (v.FirstResponse.Count != 0 || v.FirstResponse.P50 != 0 || v.FirstResponse.Censored != 1) {
			t.Errorf("m2 %+v", v.FirstResponse)
		}
	}
	if d, ok := h2.Latency(FieldFirstResponse, 0.5, 1); !ok || d != 300*time.Millisecond {
		t.Errorf("m2 ranked %v %v", d, ok)
	}
}
