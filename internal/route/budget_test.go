package route

import (
	"slices"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// TestBudgetSkips: a channel whose provider budget is below a request's
// need is passed over until its reset, with the figures; the fallback is
// planned first instead.
func TestBudgetSkips(t *testing.T) {
	now := time.Unix(1000, 0)
	chans := []*Channel{
		{Name: "a", Protocol: "openai", Priority: 0, Weight: 1},
		{Name: "b", Protocol: "openai", Priority: 1, Weight: 1},
	}
	r := New(chans, Options{Seed: 1, Now: func() time.Time { return now }})
	a := r.Health(r.Channel("a"), "m")
	counted := 0
	need := func(tokens int64) *Need {
		return &Need{Bound: 4 * tokens, Tokens: func() int64 { counted++; return tokens }}
	}
	plan := func(n *Need) Plan { return r.PlanFor("openai", "m", "", n) }

	if p := plan(need(500)); !slices.Equal(names(p.Channels), []string{"a", "b"}) || len(p.RateLimited) != 0 {
		t.Fatalf("no budget told: %v %v", names(p.Channels), p.RateLimited)
	}
	a.SeeRateLimits(wire.RateLimits{Tokens: wire.Budget{Known: true, Remaining: 300, Limit: 10000, Reset: 2 * time.Second},
		Requests: wire.Budget{Known: true, Remaining: 10, Reset: time.Second}})

	p := plan(need(500))
	if !slices.Equal(names(p.Channels), []string{"b"}) {
		t.Fatalf("500 tokens over a budget of 300: planned %v", names(p.Channels))
	}
	want := Skip{Channel: "a", Limit: "tokens", Remaining: 300, Need: 500, Reset: 2 * time.Second}
	if len(p.RateLimited) != 1 || p.RateLimited[0] != want {
		t.Fatalf("skips %+v, want %+v", p.RateLimited, want)
	}
	// Far below the budget, the prompt is not counted at all.
	counted = 0
	if p := plan(need(50)); names(p.Channels)[0] != "a" || counted != 0 {
		t.Fatalf("50 tokens: planned %v, counted %d times", names(p.Channels), counted)
	}
	// Near it, it is counted, once.
	if p := plan(need(200)); names(p.Channels)[0] != "a" || counted != 1 {
		t.Fatalf("200 tokens: planned %v, counted %d times", names(p.Channels), counted)
	}
	// Past the reset the budget is whole again.
	now = now.Add(2 * time.Second)
	if p := plan(need(500)); names(p.Channels)[0] != "a" || len(p.RateLimited) != 0 {
		t.Fatalf("after the reset: planned %v, skips %v", names(p.Channels), p.RateLimited)
	}

	// Requests: the last one is spent by the attempt that takes it.
	a.SeeRateLimits(wire.RateLimits{Requests: wire.Budget{Known: true, Remaining: 1, Reset: 5 * time.Second}})
	if p := plan(nil); names(p.Channels)[0] != "a" {
		t.Fatalf("one request left: planned %v", names(p.Channels))
	}
	a.Spend(0)
	if p := plan(nil); names(p.Channels)[0] != "b" || p.RateLimited[0].Limit != "requests" || p.RateLimited[0].Remaining != 0 {
		t.Fatalf("spent: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}

	// A 429 holds the channel out for its Retry-After.
	now = now.Add(5 * time.Second)
	a.SeeRateLimits(wire.RateLimits{RetryAfter: 3 * time.Second})
	if p := plan(nil); names(p.Channels)[0] != "b" || p.RateLimited[0].Reset != 3*time.Second {
		t.Fatalf("after a 429: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}
	if v := a.budgetView(r.since()); v == nil || *v.RemainingRequests != 0 || *v.RequestsResetMs != 3000 || v.RemainingTokens != nil {
		t.Fatalf("view %+v", v)
	}

	// Both out of budget: the one whole first is still tried.
	r.Health(r.Channel("b"), "m").SeeRateLimits(wire.RateLimits{RetryAfter: time.Second})
	if p := plan(nil); !slices.Equal(names(p.Channels), []string{"b"}) || len(p.RateLimited) != 1 || p.RateLimited[0].Channel != "a" {
		t.Fatalf("all out of budget: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}
	// The budget is kept on the channel's health, keyed by its configured
	// model pattern: another model of the same pattern shares it.
	if p := r.PlanFor("openai", "other", "", nil); names(p.Channels)[0] != "b" {
		t.Fatalf("other model of the pattern: planned %v", names(p.Channels))
	}
}

// BenchmarkPlanBudget: the budget check costs a plan nothing measurable
// while no answer told a budget, and a lock when one did.
func BenchmarkPlanBudget(b *testing.B) {
	chans := []*Channel{{Name: "a", Protocol: "openai", Weight: 1}, {Name: "b", Protocol: "openai", Priority: 1, Weight: 1}}
	r := New(chans, Options{Seed: 1})
	n := &Need{Bound: 4000, Tokens: func() int64 { return 1000 }}
	b.Run("untold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.PlanFor("openai", "m", "", n)
		}
	})
	r.Health(r.Channel("a"), "m").SeeRateLimits(wire.RateLimits{Tokens: wire.Budget{Known: true, Remaining: 1 << 40, Reset: time.Hour}})
	b.Run("told", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.PlanFor("openai", "m", "", n)
		}
	})
}
