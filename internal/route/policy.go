package route

import (
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Strategy orders a route's channels.
type Strategy string

// The strategies of docs/SPEC.md "Routing".
const (
	// StrategyPriority: lower priority first; within one priority a
	// weighted random order (the default, and the order of models that
	// no route matches).
	StrategyPriority Strategy = "priority"
	// StrategyWeighted: a weighted random order over all the channels,
	// priorities ignored.
	StrategyWeighted Strategy = "weighted"
	// StrategyLatency: the channel with the lowest recent percentile of
	// the chosen milestone first; channels without enough samples first
	// of all (so that they get some), ties by priority.
	StrategyLatency Strategy = "latency"
)

// strategies are the strategies in a fixed order, for counters.
var strategies = [...]Strategy{StrategyPriority, StrategyWeighted, StrategyLatency}

func strategyIndex(s Strategy) int {
	for i, x := range strategies {
		if x == s {
			return i
		}
	}
	return 0
}

// Definition is the milestone the latency strategy ranks by.
type Definition string

// Latency definitions.
const (
	DefFirstResponse Definition = "first_response" // t4: first text, reasoning or tool arguments
	DefFirstText     Definition = "first_text"     // t5: first visible text
)

func (d Definition) field() Field {
	if d == DefFirstText {
		return FieldFirstText
	}
	return FieldFirstResponse
}

// Route is the policy of the models it matches. Its fields are fixed once
// the router is made.
type Route struct {
	Models   []string // exact names or globs (Match)
	Strategy Strategy
	Latency  LatencyPolicy
	Eject    *EjectPolicy // nil: no ejection
	Hedge    *HedgePolicy // nil: no hedging

	*routeState // set by New or Swap; shared by the routes of one Name across reloads
}

// routeState is a route's hedge budget (see HedgePolicy.MaxShare) and its
// counters for views, kept across a reload for a route of the same models.
type routeState struct {
	credit         atomic.Int64 // milli-hedges available
	requests       atomic.Int64 // the route's requests in flight
	hedgesInflight atomic.Int64
	hedgesStarted  atomic.Uint64
	hedgesWon      atomic.Uint64
	hedgesLost     atomic.Uint64
	hedgesDenied   atomic.Uint64
	decisions      atomic.Uint64
	explored       atomic.Uint64
}

// Name is how views name the route: its model patterns.
func (r *Route) Name() string { return strings.Join(r.Models, ",") }

// LatencyPolicy configures StrategyLatency.
type LatencyPolicy struct {
	Definition Definition
	Percentile float64 // in (0,1)
	Explore    float64 // share of requests that put a random other channel first
}

// minLatencySamples is how many samples a channel needs before the latency
// strategy ranks it by them; until then it goes first, to get them.
const minLatencySamples = 5

// EjectPolicy configures outlier ejection.
type EjectPolicy struct {
	ConsecutiveFailures int
	Base, Max           time.Duration
}

// HedgePolicy configures hedged first output.
type HedgePolicy struct {
	// After is a fixed delay, used when Percentile is 0; otherwise the
	// delay is that percentile of the first channel's recent first
	// response (from its upstream start), and never less than Floor. With
	// too few samples for a percentile, Floor is used... unless After is
	// also set, which then serves as the cold-start delay.
	After      time.Duration
	Percentile float64
	Floor      time.Duration
	// MaxShare bounds hedges two ways: over any run of n requests of the
	// route at most MaxShare × n + hedgeBurst start a hedge (the budget
	// starts empty), and at most
	// max(1, ⌈MaxShare × the route's requests in flight⌉) hedges run at
	// once. An outage that makes every request want one therefore adds
	// MaxShare of the load, not 100 % (gRPC throttles hedges with a token
	// bucket for the same reason).
	MaxShare float64
}

// hedgeBurst is how many hedges a quiet route banks (gRPC's retry
// throttling keeps max_tokens 10 the same way): enough for a burst of
// slow first outputs after a calm spell, while the in-flight bound keeps
// the burst to a share of the traffic.
const hedgeBurst = 10

// Plan is the order of the channels for one request.
type Plan struct {
	Channels []*Channel
	// Health holds the health of Channels[i] for the request's model.
	Health []*Health
	// Skipped names the channels passed over as ejected, in order.
	Skipped []string
	// RateLimited are the channels passed over because their provider
	// budget was below the request's need (budget.go), in order.
	RateLimited []Skip
	// Held names the channels serving the request that an operator holds
	// out of rotation (drained or disabled); they are not in Channels.
	Held []string
	// Route is the matched route; nil means the default priority order.
	Route *Route
	// Strategy is the strategy that ordered the channels.
	Strategy Strategy
	// Explored is set when the first channel was put first to explore.
	Explored bool
	// Probe is set when Channels[0] is being probed after an ejection.
	Probe bool
}

// Begin counts the request on its route (for the hedge budget); End must
// follow.
func (p *Plan) Begin() {
	if p.Route != nil && p.Route.Hedge != nil {
		rt := p.Route
		rt.requests.Add(1)
		// One request earns MaxShare of a hedge, up to the burst.
		earn := int64(rt.Hedge.MaxShare * 1000)
		for {
			c := rt.credit.Load()
			n := min(c+earn, hedgeBurst*1000)
			if n == c || rt.credit.CompareAndSwap(c, n) {
				break
			}
		}
	}
}

// End ends what Begin counted.
func (p *Plan) End() {
	if p.Route != nil && p.Route.Hedge != nil {
		p.Route.requests.Add(-1)
	}
}

// HedgeDelay returns how long the first attempt, on Channels[i], may go
// without output before a hedge starts, and whether the route hedges.
func (p *Plan) HedgeDelay(i int) (time.Duration, bool) {
	if p.Route == nil || p.Route.Hedge == nil || i >= len(p.Channels) {
		return 0, false
	}
	hp := p.Route.Hedge
	if hp.Percentile == 0 {
		return hp.After, true
	}
	if d, ok := p.Health[i].Latency(FieldFirstResponse, hp.Percentile, minLatencySamples); ok {
		return max(d, hp.Floor), true
	}
	return max(hp.After, hp.Floor), true
}

// TryHedge takes a hedge from the route's budget; the caller must call
// HedgeDone when the hedge attempt ends, saying whether it won.
func (p *Plan) TryHedge() bool {
	rt := p.Route
	if rt == nil || rt.Hedge == nil {
		return false
	}
	limit := max(1, int64(math.Ceil(rt.Hedge.MaxShare*float64(rt.requests.Load()))))
	if rt.hedgesInflight.Add(1) > limit {
		rt.hedgesInflight.Add(-1)
		rt.hedgesDenied.Add(1)
		return false
	}
	for {
		c := rt.credit.Load()
		if c < 1000 {
			rt.hedgesInflight.Add(-1)
			rt.hedgesDenied.Add(1)
			return false
		}
		if rt.credit.CompareAndSwap(c, c-1000) {
			break
		}
	}
	rt.hedgesStarted.Add(1)
	return true
}

// HedgeDone ends a hedge TryHedge allowed; won says whether the hedge's
// attempt was the one relayed.
func (p *Plan) HedgeDone(won bool) {
	rt := p.Route
	rt.hedgesInflight.Add(-1)
	if won {
		rt.hedgesWon.Add(1)
	} else {
		rt.hedgesLost.Add(1)
	}
}

// order sorts cs by the route's strategy. The random source is locked only
// for the draws: the latency ranks (which may compute a snapshot) are read
// outside it.
func (r *Router) order(t *table, rt *Route, model, group string, cs []*Channel) (explored bool) {
	strategy := StrategyPriority
	if rt != nil {
		strategy = rt.Strategy
	}
	switch strategy {
	case StrategyWeighted:
		r.shuffleWeighted(cs)
	case StrategyLatency:
		r.byPriority(cs)
		f := rt.Latency.Definition.field()
		type ranked struct {
			c     *Channel
			known bool
			ms    int64 // the percentile rounded to a millisecond: closer is a tie
		}
		rs := make([]ranked, len(cs))
		for i, c := range cs {
			d, ok := t.health(r, c, model, group).Latency(f, rt.Latency.Percentile, minLatencySamples)
			rs[i] = ranked{c, ok, d.Milliseconds()}
		}
		// Stable over the priority order: equal ranks keep it.
		slices.SortStableFunc(rs, func(a, b ranked) int {
			switch {
			case a.known != b.known:
				if !a.known {
					return -1
				}
				return 1
			case a.ms != b.ms:
				if a.ms < b.ms {
					return -1
				}
				return 1
			}
			return 0
		})
		for i := range rs {
			cs[i] = rs[i].c
		}
		k := 0
		if len(cs) > 1 && rt.Latency.Explore > 0 {
			r.mu.Lock()
			if r.rnd.Float64() < rt.Latency.Explore {
				k = 1 + r.rnd.IntN(len(cs)-1)
			}
			r.mu.Unlock()
		}
		if k > 0 {
			c := cs[k]
			copy(cs[1:k+1], cs[:k])
			cs[0] = c
			explored = true
		}
	default:
		r.byPriority(cs)
	}
	return explored
}

// byPriority orders cs by priority, and within one priority by weighted
// random draws.
func (r *Router) byPriority(cs []*Channel) {
	slices.SortStableFunc(cs, func(a, b *Channel) int { return a.Priority - b.Priority })
	for i := 0; i < len(cs); {
		j := i
		for j < len(cs) && cs[j].Priority == cs[i].Priority {
			j++
		}
		r.shuffleWeighted(cs[i:j])
		i = j
	}
}
