package config

import (
	"testing"
	"time"
)

// TestRoutesDefaults: the routes of docs/configuration.md parse, and omitted fields take
// their defaults.
func TestRoutesDefaults(t *testing.T) {
	y := `
channels:
  - {name: a, protocol: openai, base_url: "http://127.0.0.1:1"}
  - {name: b, protocol: openai, base_url: "http://127.0.0.1:2", models: ["gpt-*"]}
routes:
  - models: ["gpt-*"]
    strategy: latency
    latency: {definition: first_response, percentile: 0.5, explore: 0.05}
    eject: {consecutive_failures: 5, base: 30s, max: 5m}
    hedge: {after: p95, floor: 500ms, max_share: 0.1}
  - models: ["chat-*"]
    strategy: latency
    latency: {definition: first_text, percentile: 0.9}
  - models: ["claude-*"]
    strategy: weighted
    eject: {consecutive_failures: 3}
  - models: ["gpt-o3*"]
    eject: {}
    hedge: {after: 800ms}
`
	c, err := Parse([]byte(y), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Routes
	if h := r[0].Hedge; h.After.Percentile != 0.95 || h.After.Delay != 0 || h.Floor.D() != 500*time.Millisecond || h.MaxShare != 0.1 {
		t.Errorf("route 0 hedge %+v", h)
	}
	if l := r[1].Latency; l.Definition != "first_text" || l.Percentile != 0.9 || *l.Explore != DefaultExplore {
		t.Errorf("route 1 latency %+v", l)
	}
	if e := r[2].Eject; r[2].Strategy != "weighted" || e.ConsecutiveFailures != 3 || e.Base.D() != DefaultEjectBase || e.Max.D() != DefaultEjectMax {
		t.Errorf("route 2 %+v eject %+v", r[2], e)
	}
	if r[3].Strategy != "priority" || r[3].Eject == nil || r[3].Eject.ConsecutiveFailures != DefaultConsecutiveFailures ||
		r[3].Hedge.After.Delay != 800*time.Millisecond || r[3].Hedge.Floor.D() != DefaultHedgeFloor || r[3].Hedge.MaxShare != DefaultHedgeShare {
		t.Errorf("route 3 %+v eject %+v hedge %+v", r[3], r[3].Eject, r[3].Hedge)
	}
}
