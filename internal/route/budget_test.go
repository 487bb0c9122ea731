package route

import (
	"fmt"
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
	a := r.Budget(r.Channel("a"), "m")
	counted := 0
	need := func(tokens int64) *Need {
		return &Need{Bound: 4 * tokens, Tokens: CountFunc(func() int64 { counted++; return tokens })}
	}
	plan := func(n *Need) Plan { return r.PlanFor("openai", "m", "", n) }

	if p := plan(need(500)); !slices.Equal(names(p.Channels), []string{"a", "b"}) || len(p.RateLimited) != 0 {
		t.Fatalf("no budget told: %v %v", names(p.Channels), p.RateLimited)
	}
	a.See(wire.RateLimits{Tokens: wire.Budget{Known: true, Remaining: 300, Limit: 10000, Reset: 2 * time.Second},
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
	a.See(wire.RateLimits{Requests: wire.Budget{Known: true, Remaining: 1, Reset: 5 * time.Second}})
	if p := plan(nil); names(p.Channels)[0] != "a" {
		t.Fatalf("one request left: planned %v", names(p.Channels))
	}
	a.Spend(0)
	if p := plan(nil); names(p.Channels)[0] != "b" || p.RateLimited[0].Limit != "requests" || p.RateLimited[0].Remaining != 0 {
		t.Fatalf("spent: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}

	// A 429 holds the channel out for its Retry-After.
	now = now.Add(5 * time.Second)
	a.See(wire.RateLimits{RetryAfter: 3 * time.Second})
	if p := plan(nil); names(p.Channels)[0] != "b" || p.RateLimited[0].Reset != 3*time.Second {
		t.Fatalf("after a 429: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}
	if v := a.view(r.since()); v == nil || *v.RemainingRequests != 0 || *v.RequestsResetMs != 3000 || v.RemainingTokens != nil {
		t.Fatalf("view %+v", v)
	}

	// Both out of budget: the one whole first is still tried.
	r.Budget(r.Channel("b"), "m").See(wire.RateLimits{RetryAfter: time.Second})
	if p := plan(nil); !slices.Equal(names(p.Channels), []string{"b"}) || len(p.RateLimited) != 1 || p.RateLimited[0].Channel != "a" {
		t.Fatalf("all out of budget: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}
	// A channel that lists no models keeps one budget: another model
	// shares it.
	if p := r.PlanFor("openai", "other", "", nil); names(p.Channels)[0] != "b" {
		t.Fatalf("other model of the pattern: planned %v", names(p.Channels))
	}
	// Counted for ttfx_route_skipped_total: the five plans that passed
	// over a; b, tried though out of budget, was never passed over.
	want5 := []Skips{{"a", "rate_limited", 5}, {"a", "ejected", 0}, {"b", "rate_limited", 0}, {"b", "ejected", 0}}
	if got := r.Skips(); !slices.Equal(got, want5) {
		t.Errorf("skips %+v, want %+v", got, want5)
	}
}

// TestBudgetKeys: a budget is the channel's for an upstream model, whoever
// sends: two client groups spend one budget (their health stays apart);
// two exact entries aliased to one upstream name share it; every model a
// glob matches shares the glob's; a model name no entry names exactly
// never makes a budget of its own.
func TestBudgetKeys(t *testing.T) {
	now := time.Unix(1000, 0)
	chans := []*Channel{
		{Name: "a", Protocol: "openai", Priority: 0, Weight: 1,
			Models:   []string{"gpt-4o", "four", "mini", "claude-*", "gpt-*"},
			Upstream: map[string]string{"four": "gpt-4o", "mini": "gpt-4o-mini", "claude-*": "eu.claude-*"}},
		{Name: "b", Protocol: "openai", Priority: 1, Weight: 1},
	}
	r := New(chans, Options{Seed: 1, Now: func() time.Time { return now }})
	a := r.Channel("a")
	for _, tc := range []struct{ model, key string }{
		{"gpt-4o", "gpt-4o"}, {"four", "gpt-4o"}, {"mini", "gpt-4o-mini"},
		{"claude-3", "eu.claude-*"}, {"claude-x", "eu.claude-*"}, {"gpt-4.1", "gpt-*"}, {"gpt-*", "gpt-*"},
	} {
		if got := r.Budget(a, tc.model).Model; got != tc.key {
			t.Errorf("budget of %q kept under %q, want %q", tc.model, got, tc.key)
		}
	}

	// One group spends the budget's last request: the other group skips
	// the channel too, though its own health has seen nothing.
	r.Budget(a, "gpt-4o").See(wire.RateLimits{Requests: wire.Budget{Known: true, Remaining: 1, Limit: 3, Reset: 20 * time.Second}})
	if p := r.PlanFor("openai", "four", "team-1", nil); names(p.Channels)[0] != "a" {
		t.Fatalf("one request left: planned %v", names(p.Channels))
	}
	r.Budget(a, "four").Spend(0)
	for _, g := range []string{"team-1", "team-2"} {
		for _, m := range []string{"gpt-4o", "four"} {
			p := r.PlanFor("openai", m, g, nil)
			if names(p.Channels)[0] != "b" || len(p.RateLimited) != 1 || p.RateLimited[0].Limit != "requests" {
				t.Errorf("%s for %s after the last request: planned %v, skips %+v", m, g, names(p.Channels), p.RateLimited)
			}
		}
	}
	if r.HealthFor(a, "gpt-4o", "team-1") == r.HealthFor(a, "gpt-4o", "team-2") {
		t.Error("two groups share one health")
	}
	// Another upstream model of the channel keeps its own budget.
	if p := r.PlanFor("openai", "mini", "team-2", nil); names(p.Channels)[0] != "a" {
		t.Errorf("mini: planned %v, skips %+v", names(p.Channels), p.RateLimited)
	}
	// The live rows of both groups show the one budget.
	n := 0
	for _, cl := range r.Live() {
		for _, m := range cl.Models {
			if cl.Name == "a" && m.Model == "gpt-4o" {
				n++
				if m.RateLimit == nil || m.RateLimit.UpstreamModel != "gpt-4o" || *m.RateLimit.RemainingRequests != 0 {
					t.Errorf("live row of %s: %+v", m.Group, m.RateLimit)
				}
			}
		}
	}
	if n != 2 {
		t.Errorf("%d live rows of gpt-4o, want one per group", n)
	}

	// Invented names: no state beyond the configured keys.
	for i := range 500 {
		r.PlanFor("openai", fmt.Sprintf("gpt-%d", i), fmt.Sprint("g", i%3), nil)
		r.Budget(a, fmt.Sprintf("claude-%d", i)).Spend(1)
	}
	keys := 0
	a.budgets.Range(func(k, _ any) bool { keys++; return true })
	if keys != 4 { // gpt-4o, gpt-4o-mini, eu.claude-*, gpt-*
		t.Errorf("%d budgets after 1000 invented names, want 4", keys)
	}
}

// BenchmarkPlanBudget: the budget check costs a plan nothing measurable
// while no answer told a budget, and a lock when one did.
func BenchmarkPlanBudget(b *testing.B) {
	chans := []*Channel{{Name: "a", Protocol: "openai", Weight: 1}, {Name: "b", Protocol: "openai", Priority: 1, Weight: 1}}
	r := New(chans, Options{Seed: 1})
	n := &Need{Bound: 4000, Tokens: CountFunc(func() int64 { return 1000 })}
	b.Run("untold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.PlanFor("openai", "m", "", n)
		}
	})
	r.Budget(r.Channel("a"), "m").See(wire.RateLimits{Tokens: wire.Budget{Known: true, Remaining: 1 << 40, Reset: time.Hour}})
	b.Run("told", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.PlanFor("openai", "m", "", n)
		}
	})
}
