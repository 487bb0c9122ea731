package relay

import (
	"context"
	"net/http"
	"testing"

	"github.com/ttfx/ttfx/internal/route"
)

// TestBudgetPathAllocations: what every request does for the per-channel
// provider budgets (its Need for the plan, the rate-limit headers of the
// answer) and for the body budget (a lease grown, shrunk and released with
// nobody waiting) allocates nothing; an answer that tells its remaining
// budget costs only the two figures its record keeps. Before, these cost a
// plain OpenAI request 4 allocations (a closure, the headers' RateLimits
// moved to the heap by a pointer into it, the lease, a channel per
// release): BenchmarkOverheadInProcess/gateway/t10 went 88 → 93 allocs/op.
func TestBudgetPathAllocations(t *testing.T) {
	ch := &route.Channel{Name: "c", Protocol: "openai"}
	g := New(Options{Router: route.NewRouter([]*route.Channel{ch}, 1)})
	x := &exchange{g: g, ep: endpoint{hasBody: true}, req: &clientRequest{model: "m", body: []byte(`{"model":"m"}`)}}
	a := &attempt{ch: ch}
	plain := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}}
	told := &http.Response{StatusCode: http.StatusOK, Header: http.Header{
		"X-Ratelimit-Limit-Requests": {"500"}, "X-Ratelimit-Remaining-Requests": {"499"}, "X-Ratelimit-Reset-Requests": {"120ms"},
		"X-Ratelimit-Limit-Tokens": {"30000"}, "X-Ratelimit-Remaining-Tokens": {"29000"}, "X-Ratelimit-Reset-Tokens": {"2s"},
	}}
	x.budgetSeen(a, told) // the channel's budget entry, made once
	if a.remReq == nil || *a.remReq != 499 || a.remTok == nil || *a.remTok != 29000 {
		t.Fatalf("remaining figures read %v %v, want 499 and 29000", a.remReq, a.remTok)
	}

	if n := testing.AllocsPerRun(200, func() {
		if x.budgetNeed().Bound == 0 {
			t.Fatal("no bound")
		}
		a.remReq, a.remTok = nil, nil
		x.budgetSeen(a, plain)
	}); n != 0 {
		t.Errorf("need and answer without rate-limit headers: %.1f allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() { x.budgetSeen(a, told) }); n > 2 {
		t.Errorf("answer with rate-limit headers: %.1f allocations, want at most 2 (the figures kept)", n)
	}

	ctx := context.Background()
	if n := testing.AllocsPerRun(200, func() {
		l := g.bodies.lease(&x.bodyLease, "client")
		if err := l.grow(ctx, 4096); err != nil {
			t.Fatal(err)
		}
		l.shrink(1024)
		l.release()
	}); n != 0 {
		t.Errorf("a body's lease with nobody waiting: %.1f allocations, want 0", n)
	}
	if u := g.BodyBudget().InUse; u != 0 {
		t.Errorf("%d bytes still counted after every lease was released", u)
	}
}
