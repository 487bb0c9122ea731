package route

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestHealthKeyedByConfiguration: a client cannot poison another group's
// routing with invented model names (issue 50). Team B sends 140 names
// that the "*" channel answers 503; the channel is ejected for team B,
// and team A's requests for a real model still go to it. Health stays
// keyed by the configured patterns (and groups), not by the names sent,
// and so do the ejection metrics' label sets. When the channel really
// fails team A's own requests, it is ejected for team A too.
func TestHealthKeyedByConfiguration(t *testing.T) {
	c := newClock()
	a := &Channel{Name: "ch-a", Protocol: "openai", Weight: 1, Models: []string{"gpt-4o", "*"}}
	b := &Channel{Name: "ch-b", Protocol: "openai", Weight: 1, Priority: 1}
	rt := &Route{Models: []string{"*"}, Strategy: StrategyPriority, Eject: &EjectPolicy{ConsecutiveFailures: 3, Base: 30 * time.Second, Max: time.Minute}}
	r := New([]*Channel{a, b}, Options{Routes: []*Route{rt}, Now: c.now})

	for i := range 140 {
		p := r.Plan("openai", fmt.Sprintf("invented-%d", i), "team-b")
		for _, h := range p.Health {
			if h.Channel == a {
				h.Observe(Result{Kind: KindHTTP5xx})
			}
		}
	}
	if p := r.Plan("openai", "invented-0", "team-b"); !slices.Contains(p.Skipped, "ch-a") {
		t.Errorf("team B's own failures did not eject ch-a for team B: %v skipped %v", names(p.Channels), p.Skipped)
	}
	for _, model := range []string{"gpt-4o", "gpt-4o-mini"} {
		p := r.Plan("openai", model, "team-a")
		if len(p.Skipped) != 0 || p.Channels[0] != a {
			t.Errorf("team A's %s: %v skipped %v, want ch-a first", model, names(p.Channels), p.Skipped)
		}
	}
	rep := r.Report()
	if n := len(rep.Channels); n > 6 { // ch-a: 2 patterns × 2 groups; ch-b: 1 × 2
		t.Errorf("%d health entries after 140 invented names, want at most the configured patterns × groups", n)
	}
	for _, hv := range rep.Channels {
		if hv.Model != "*" && hv.Model != "gpt-4o" {
			t.Errorf("health keyed by a client's name %q", hv.Model)
		}
	}
	for _, e := range r.Ejections() {
		if e.Model != "*" && e.Model != "gpt-4o" {
			t.Errorf("ejection metric labelled by a client's name %q", e.Model)
		}
		if e.Channel == "ch-a" && e.Model == "*" && !e.Ejected {
			t.Error("ch-a's * pattern is not reported ejected (for team B)")
		}
	}

	// ch-a really fails team A's requests: it is ejected for them.
	for range 3 {
		p := r.Plan("openai", "gpt-4o-mini", "team-a")
		p.Health[0].Observe(Result{Kind: KindConnect})
	}
	if p := r.Plan("openai", "gpt-4o-mini", "team-a"); !slices.Contains(p.Skipped, "ch-a") {
		t.Errorf("ch-a failing team A is not ejected for team A: %v skipped %v", names(p.Channels), p.Skipped)
	}
}
