package route

import (
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func chanAt(name, base, key string) *Channel {
	u, _ := url.Parse(base)
	return &Channel{Name: name, Protocol: "openai", BaseURL: u, Key: key, Weight: 1}
}

// A swap keeps the health of a channel whose identity is unchanged (a new
// key), starts afresh for one whose base URL changed, and re-points carried
// health to the new routes' ejection policy.
func TestSwapCarriesHealthByIdentity(t *testing.T) {
	c := newClock()
	a, b := chanAt("a", "http://a.example", "k1"), chanAt("b", "http://b.example", "k1")
	b.Priority = 1
	eject := &EjectPolicy{ConsecutiveFailures: 2, Base: time.Minute, Max: time.Hour}
	r := New([]*Channel{a, b}, Options{Now: c.now, Routes: []*Route{{Models: []string{"m"}, Strategy: StrategyPriority, Eject: eject}}})
	for range 2 {
		r.Plan("openai", "m", "").Health[0].Observe(Result{Kind: KindHTTP5xx, Stream: true})
	}
	if p := r.Plan("openai", "m", ""); p.Channels[0].Name != "b" || !slices.Equal(p.Skipped, []string{"a"}) {
		t.Fatalf("before the swap: %v skipped %v, want a ejected", p.Channels[0].Name, p.Skipped)
	}
	held := r.Plan("openai", "m", "") // a request in flight across the swap
	a2, b2 := chanAt("a", "http://a.example", "k2"), chanAt("b", "http://b2.example", "k1")
	b2.Priority = 1
	r.Swap([]*Channel{a2, b2}, []*Route{{Models: []string{"m"}, Strategy: StrategyPriority, Eject: &EjectPolicy{ConsecutiveFailures: 1, Base: time.Minute, Max: time.Hour}}})
	p := r.Plan("openai", "m", "")
	if p.Channels[0] != b2 || !slices.Equal(p.Skipped, []string{"a"}) {
		t.Fatalf("after the swap: first %s (%p), skipped %v; want the new b, a still ejected", p.Channels[0].Name, p.Channels[0], p.Skipped)
	}
	if held.Channels[0] != b || held.Channels[0].BaseURL.Host != "b.example" {
		t.Errorf("the in-flight plan's channel changed under it")
	}
	// b's identity changed: fresh health; the new route ejects after one.
	live := r.Live()
	if len(live) != 2 || len(live[1].Models) != 1 || live[1].Models[0].Ejections != 0 {
		t.Errorf("b's health after a base URL change: %+v", live[1])
	}
	if live[0].Models[0].State != "ejected" || !strings.Contains(live[0].Models[0].Reason, "2 consecutive failures, the last a 5xx") || live[0].Models[0].EjectedUntil == nil {
		t.Errorf("a's carried ejection: %+v", live[0].Models[0])
	}
	p.Health[0].Observe(Result{Kind: KindConnect, Stream: true})
	if p := r.Plan("openai", "m", ""); p.Channels[0] != a2 || len(p.Skipped) != 1 {
		t.Errorf("the new route's policy (eject after 1) did not apply to b: %s skipped %v", p.Channels[0].Name, p.Skipped)
	}
}

// The operator's drain holds a channel out of new plans, survives a swap,
// and enable puts it back; uneject readmits an ejected channel at once.
func TestOperatorStateAndUneject(t *testing.T) {
	c := newClock()
	a, b := chanAt("a", "http://a.example", ""), chanAt("b", "http://b.example", "")
	b.Priority = 1
	r := New([]*Channel{a, b}, Options{Now: c.now, Routes: []*Route{{Models: []string{"*"}, Strategy: StrategyPriority,
		Eject: &EjectPolicy{ConsecutiveFailures: 1, Base: time.Minute, Max: time.Hour}}}})
	r.SetOp("a", OpRecord{State: OpDrained, By: "ops"})
	if p := r.Plan("openai", "m", ""); len(p.Channels) != 1 || p.Channels[0] != b || !slices.Equal(p.Held, []string{"a"}) {
		t.Fatalf("drained a still planned: %v held %v", p.Channels, p.Held)
	}
	a2 := chanAt("a", "http://a.example", "")
	r.Swap([]*Channel{a2, b}, r.Routes())
	if p := r.Plan("openai", "m", ""); len(p.Channels) != 1 || p.Channels[0] != b {
		t.Fatalf("the drain did not survive the swap")
	}
	if got := r.Op("a"); got.State != OpDrained || got.By != "ops" {
		t.Errorf("op %+v", got)
	}
	r.SetOp("b", OpRecord{State: OpDisabled, By: "ops"})
	if p := r.Plan("openai", "m", ""); len(p.Channels) != 0 || len(p.Held) != 2 {
		t.Fatalf("all held: %v %v", p.Channels, p.Held)
	}
	r.SetOp("a", OpRecord{State: OpServing, By: "ops"})
	r.SetOp("b", OpRecord{State: OpServing, By: "ops"})
	p := r.Plan("openai", "m", "")
	if len(p.Channels) != 2 || p.Channels[0] != a2 {
		t.Fatalf("enabled: %v", p.Channels)
	}
	p.Health[0].Observe(Result{Kind: KindHTTP5xx, Stream: true})
	if p := r.Plan("openai", "m", ""); p.Channels[0] != b {
		t.Fatalf("a not ejected")
	}
	// Health is kept per configured pattern ("*": a lists no models),
	// not per client model name (issue 50).
	if got := r.Uneject("a"); !slices.Equal(got, []string{"*"}) {
		t.Errorf("uneject: %v", got)
	}
	if p := r.Plan("openai", "m", ""); p.Channels[0] != a2 || len(p.Skipped) != 0 {
		t.Errorf("after uneject: %s skipped %v", p.Channels[0].Name, p.Skipped)
	}
	if got := r.Uneject("a"); len(got) != 0 {
		t.Errorf("a second uneject found %v", got)
	}
}

// Plans and swaps run at once without a race (go test -race) and every plan
// sees one whole table.
func TestSwapConcurrentWithPlans(t *testing.T) {
	r := New([]*Channel{chanAt("a0", "http://a.example", "0")}, Options{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				p := r.Plan("openai", "m", "")
				if len(p.Channels) != 1 || p.Channels[0].Key != p.Channels[0].Name[1:] {
					t.Errorf("a plan mixed two tables: %s %s", p.Channels[0].Name, p.Channels[0].Key)
					return
				}
				p.Health[0].Acquire()
				p.Health[0].Observe(Result{Kind: KindOK, Stream: true, FirstResponse: time.Millisecond, HasFirstResponse: true})
				p.Health[0].Release()
			}
		})
	}
	for i := range 200 {
		k := string(rune('0' + i%10))
		r.Swap([]*Channel{chanAt("a"+k, "http://a.example", k)}, nil)
	}
	close(stop)
	wg.Wait()
}

// BenchmarkPlanAfterSwap is BenchmarkPlan's priority case on a router that
// has been reloaded: the table is one atomic load either way.
func BenchmarkPlanAfterSwap(b *testing.B) {
	mk := func() []*Channel {
		return []*Channel{{Name: "a", Protocol: "openai", Weight: 1}, {Name: "b", Protocol: "openai", Weight: 1, Priority: 1}, {Name: "c", Protocol: "anthropic"}}
	}
	rt := func() []*Route {
		return []*Route{{Models: []string{"gpt-*"}, Strategy: StrategyPriority, Eject: &EjectPolicy{ConsecutiveFailures: 5, Base: time.Second, Max: time.Minute}}}
	}
	r := New(mk(), Options{Routes: rt()})
	for range 10 {
		r.Swap(mk(), rt())
	}
	b.ReportAllocs()
	for b.Loop() {
		p := r.Plan("openai", "gpt-4o", "")
		p.Health[0].Observe(Result{Kind: KindOK, Stream: true, FirstResponse: time.Millisecond, HasFirstResponse: true})
	}
}
