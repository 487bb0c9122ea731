package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ttfx/ttfx/internal/route"
)

// Route is one entry of the routes list: how the channels serving the
// models it matches are ordered, ejected and hedged (docs/SPEC.md,
// "Routing"). The first route whose patterns match a model applies; models
// no route matches keep the priority order without ejection or hedging.
type Route struct {
	Models   []string `yaml:"models"`   // exact names or globs, as a channel's models
	Strategy string   `yaml:"strategy"` // priority (default) | weighted | latency
	Latency  *Latency `yaml:"latency"`  // strategy latency only
	Eject    *Eject   `yaml:"eject"`    // nil: no outlier ejection
	Hedge    *Hedge   `yaml:"hedge"`    // nil: no hedged first output
}

// Latency configures the latency strategy.
type Latency struct {
	// Definition is the milestone channels are ranked by: first_response
	// (t4, the default) or first_text (t5).
	Definition string `yaml:"definition"`
	// Percentile in (0,1); 0 means 0.5.
	Percentile float64 `yaml:"percentile"`
	// Explore is the share of requests in [0,0.5] that put another channel
	// first, so that a recovered channel is noticed; nil means 0.05.
	Explore *float64 `yaml:"explore"`
}

// Eject configures outlier ejection.
type Eject struct {
	// ConsecutiveFailures ejects a channel after that many connect errors,
	// 5xx, header or first-output timeouts in a row; 0 means 5.
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// Base is the first ejection's length; each ejection in a row adds
	// another Base, up to Max. 0 means 30s and 5m.
	Base Duration `yaml:"base"`
	Max  Duration `yaml:"max"`
}

// Hedge configures hedged first output.
type Hedge struct {
	// After is when a second attempt starts if the first has no output
	// yet: a duration ("800ms") or a percentile of the first channel's
	// recent first response ("p50", "p95", "p99").
	After HedgeAfter `yaml:"after"`
	// Floor is the shortest delay a percentile may give; 0 means 100ms.
	Floor Duration `yaml:"floor"`
	// MaxShare bounds hedges to that share of the route's requests (and
	// of its requests in flight), in (0,1]; 0 means 0.1.
	MaxShare float64 `yaml:"max_share"`
}

// HedgeAfter is a fixed delay or a percentile in (0,1).
type HedgeAfter struct {
	Delay      time.Duration // fixed delay when Percentile is 0
	Percentile float64       // of the channel's first_response, in (0,1)
	set        bool
}

// UnmarshalYAML reads "800ms" or "p95".
func (h *HedgeAfter) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: hedge.after: want a duration like 800ms or a percentile like p95", n.Line)
	}
	v, err := ParseHedgeAfter(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*h = v
	return nil
}

// ParseHedgeAfter reads a hedge delay: a Go duration or pNN (p50, p95,
// p99, p99.9).
func ParseHedgeAfter(s string) (HedgeAfter, error) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "p"); ok {
		v, err := strconv.ParseFloat(rest, 64)
		if err != nil || v <= 0 || v >= 100 {
			return HedgeAfter{}, fmt.Errorf("hedge.after %q: a percentile must be p1…p99.9", s)
		}
		return HedgeAfter{Percentile: v / 100, set: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return HedgeAfter{}, fmt.Errorf("hedge.after %q: want a positive duration like 800ms or a percentile like p95", s)
	}
	return HedgeAfter{Delay: d, set: true}, nil
}

// Defaults of a route's policies.
const (
	DefaultExplore             = 0.05
	DefaultConsecutiveFailures = 5
	DefaultEjectBase           = 30 * time.Second
	DefaultEjectMax            = 5 * time.Minute
	DefaultHedgeFloor          = 100 * time.Millisecond
	DefaultHedgeShare          = 0.1
)

func (r *Route) applyDefaults() {
	if r.Strategy == "" {
		r.Strategy = "priority"
	}
	if r.Latency != nil {
		if r.Latency.Definition == "" {
			r.Latency.Definition = "first_response"
		}
		if r.Latency.Percentile == 0 {
			r.Latency.Percentile = 0.5
		}
		if r.Latency.Explore == nil {
			e := DefaultExplore
			r.Latency.Explore = &e
		}
	}
	if r.Strategy == "latency" && r.Latency == nil {
		e := DefaultExplore
		r.Latency = &Latency{Definition: "first_response", Percentile: 0.5, Explore: &e}
	}
	if e := r.Eject; e != nil {
		if e.ConsecutiveFailures == 0 {
			e.ConsecutiveFailures = DefaultConsecutiveFailures
		}
		if e.Base == 0 {
			e.Base = Duration(DefaultEjectBase)
		}
		if e.Max == 0 {
			e.Max = Duration(max(DefaultEjectMax, e.Base.D()))
		}
	}
	if h := r.Hedge; h != nil {
		if h.Floor == 0 {
			h.Floor = Duration(DefaultHedgeFloor)
		}
		if h.MaxShare == 0 {
			h.MaxShare = DefaultHedgeShare
		}
	}
}

// validateRoutes checks the routes against the channels; every message
// names the route (by index and models) and the field.
func (c *Config) validateRoutes() []error {
	var errs []error
	for i, r := range c.Routes {
		name := fmt.Sprintf("routes[%d] (models %v)", i, r.Models)
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf(name+": "+format, a...))
		}
		if len(r.Models) == 0 {
			bad("models: list at least one model or pattern")
		}
		for _, m := range r.Models {
			if strings.TrimSpace(m) == "" {
				bad("models: empty pattern")
			}
		}
		switch r.Strategy {
		case "priority", "weighted", "latency":
		default:
			bad("strategy %q is not priority, weighted or latency", r.Strategy)
		}
		if l := r.Latency; l != nil {
			if r.Strategy != "latency" {
				bad("latency: only the latency strategy reads it (strategy is %s)", r.Strategy)
			}
			if l.Definition != "first_response" && l.Definition != "first_text" {
				bad("latency.definition %q is not first_response or first_text", l.Definition)
			}
			if !(l.Percentile > 0 && l.Percentile < 1) {
				bad("latency.percentile %v is outside (0,1)", l.Percentile)
			}
			if l.Explore != nil && (*l.Explore < 0 || *l.Explore > 0.5) {
				bad("latency.explore %v is outside [0,0.5]", *l.Explore)
			}
		}
		if e := r.Eject; e != nil {
			if e.ConsecutiveFailures < 1 {
				bad("eject.consecutive_failures must be at least 1")
			}
			if e.Base <= 0 {
				bad("eject.base must be positive")
			}
			if e.Max < e.Base {
				bad("eject.max (%s) is shorter than eject.base (%s)", e.Max.D(), e.Base.D())
			}
		}
		if h := r.Hedge; h != nil {
			if !h.After.set {
				bad("hedge.after is required: a duration like 800ms or a percentile like p95")
			}
			if h.Floor < 0 {
				bad("hedge.floor must not be negative")
			}
			if !(h.MaxShare > 0 && h.MaxShare <= 1) {
				bad("hedge.max_share %v is outside (0,1]", h.MaxShare)
			}
			if n := c.channelsMatching(r.Models); n < 2 {
				bad("hedge: needs a second channel to hedge on, but %d channel(s) of one protocol serve these models", n)
			}
		}
	}
	return errs
}

// channelsMatching returns the largest number of channels of one protocol
// that could serve some model the patterns match. Patterns are compared
// loosely: a channel counts when it serves every model ("*" or no list) or
// one of its patterns equals or matches one of the route's.
func (c *Config) channelsMatching(patterns []string) int {
	counts := map[string]int{}
	for _, ch := range c.Channels {
		if channelMayServe(ch.Models.Patterns, patterns) {
			counts[ch.Protocol]++
		}
	}
	best := 0
	for _, n := range counts {
		best = max(best, n)
	}
	return best
}

func channelMayServe(chModels, patterns []string) bool {
	if len(chModels) == 0 {
		return true
	}
	for _, cm := range chModels {
		for _, p := range patterns {
			if cm == "*" || cm == p || route.Match(cm, p) || route.Match(p, cm) {
				return true
			}
		}
	}
	return false
}
