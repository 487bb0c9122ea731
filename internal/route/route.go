// Package route chooses the upstream channels for a request: channels of
// the request's protocol whose model patterns match, that the client's group
// may use, ordered by priority and, within one priority, by a weighted
// random draw (SPEC.md §5, §10).
package route

import (
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// Timeouts of a channel, all positive.
type Timeouts struct {
	Headers     time.Duration // upstream start to response headers
	FirstOutput time.Duration // upstream start to first effective output (t4)
	Idle        time.Duration // between two stream events
	Total       time.Duration // whole request, from receipt
}

// Channel is one upstream. Its fields are fixed after NewRouter; a reload
// (Router.Swap) makes new Channels. What it carries from one configuration
// to the next — inflight counts, health, the operator's state — is in its
// channelState, shared by every Channel of the same identity (Identity).
type Channel struct {
	Name     string
	Protocol string // the provider kind (a registered internal/wire kind)
	// Families are the API families the channel serves, of its kind's;
	// empty: all of them.
	Families []string
	BaseURL  *url.URL
	Key      string   // the channel's own upstream key; never the client's
	Models   []string // exact names or globs (see Match); empty matches every model
	// Upstream maps a pattern of Models to the name the provider knows
	// the models it matches by (aliases; see UpstreamModel); nil when the
	// channel serves every model under the name asked.
	Upstream map[string]string
	Groups   []string // client groups allowed; empty allows all
	Region   string
	Provider string // shown in records: the upstream host, or a label like "sim"
	Priority int    // lower is tried first
	Weight   int    // share among channels of equal priority, ≥ 1
	Timeouts Timeouts
	// NoStreamUsage keeps the gateway from adding
	// stream_options.include_usage to this channel's OpenAI streams (for
	// upstreams that refuse the field); their visible tokens are then
	// estimated unless the client asked for usage itself.
	NoStreamUsage bool
	// Hooks is what the channel's kind built for it (wire.Kind.Open):
	// its URL, body rewrite and credentials; nil for kinds that need
	// only their URL rule and the static Key.
	Hooks *wire.Upstream

	*channelState // set by New or Swap
}

// channelState is what outlives one configuration of a channel.
type channelState struct {
	inflight  atomic.Int64
	health    sync.Map                       // healthKey → *Health
	budgets   sync.Map                       // budgetKey → *Budget (budget.go)
	decisions [len(strategies)]atomic.Uint64 // plans that put it first, by strategy
	skips     [numSkipReasons]atomic.Uint64  // plans that passed over it, by reason
	op        atomic.Int32                   // the operator's OpState, read lock-free by Plan
	identity  string
}

// Inflight returns the requests currently using the channel.
func (c *Channel) Inflight() int64 { return c.inflight.Load() }

// Acquire counts one more request on the channel and returns the new count.
func (c *Channel) Acquire() int64 { return c.inflight.Add(1) }

// Release ends what Acquire counted.
func (c *Channel) Release() { c.inflight.Add(-1) }

// Serves reports whether the channel serves model for a client of group.
// An empty model (GET /v1/models names none) is served by every channel of
// the protocol that the group may use.
func (c *Channel) Serves(protocol, model, group string) bool {
	if !wire.Serves(c.Protocol, protocol) || len(c.Families) > 0 && !slices.Contains(c.Families, protocol) {
		return false
	}
	if len(c.Groups) > 0 && !slices.Contains(c.Groups, group) {
		return false
	}
	if len(c.Models) == 0 || model == "" {
		return true
	}
	for _, p := range c.Models {
		if Match(p, model) {
			return true
		}
	}
	return false
}

// Match reports whether model matches pattern, in which * stands for any
// run of characters, "/" included ("*" matches "meta-llama/Llama-3.1-8B",
// "gpt-*" matches "gpt-4o"), ? for any one character, and everything else
// for itself. Model names are not paths, so path.Match's rule that * stops
// at "/" would miss the vendor-prefixed names routers and vLLM use.
func Match(pattern, model string) bool {
	// Iterative wildcard match with backtracking to the last star.
	p, m := 0, 0
	star, mark := -1, 0
	for m < len(model) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == model[m]):
			p++
			m++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, m
			p++
		case star >= 0:
			p = star + 1
			mark++
			m = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Router holds the channels and the routes. It is safe for concurrent use.
// The channels and routes are one table behind an atomic pointer: a request
// loads it once, so it is planned on one configuration, and Swap replaces
// it without a lock on the request path.
type Router struct {
	table  atomic.Pointer[table]
	swapMu sync.Mutex          // serialises Swap and operator changes
	ops    map[string]OpRecord // the operator's states by channel name; survive Swap
	now    func() time.Time
	base   time.Time // the origin of health times (monotonic)

	ejectionsTotal atomic.Uint64

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand
}

// Options configure a Router.
type Options struct {
	// Routes are matched in order against a request's model; the first
	// match applies. Models no route matches use StrategyPriority without
	// ejection or hedging.
	Routes []*Route
	// Seed makes the random draws repeatable in tests; production passes
	// a random seed.
	Seed uint64
	// Now is the clock of health and ejections; nil means time.Now.
	Now func() time.Time
}

// NewRouter returns a router over channels with no routes: every model
// keeps the priority order.
func NewRouter(channels []*Channel, seed uint64) *Router {
	return New(channels, Options{Seed: seed})
}

// New returns a router over channels.
func New(channels []*Channel, opts Options) *Router {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Router{now: opts.Now, base: opts.Now(), ops: map[string]OpRecord{},
		rnd: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
	r.Swap(channels, opts.Routes)
	return r
}

// since returns the router's clock as a duration from its base.
func (r *Router) since() time.Duration { return r.now().Sub(r.base) }

// Channels returns all channels in configuration order.
func (r *Router) Channels() []*Channel { return r.table.Load().channels }

// Routes returns the configured routes in order.
func (r *Router) Routes() []*Route { return r.table.Load().routes }

// Channel returns the channel of that name, or nil.
func (r *Router) Channel(name string) *Channel {
	for _, c := range r.table.Load().channels {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// RouteFor returns the first route matching model, or nil.
func (r *Router) RouteFor(model string) *Route { return r.table.Load().routeFor(model) }

func (t *table) routeFor(model string) *Route {
	for _, rt := range t.routes {
		for _, p := range rt.Models {
			if Match(p, model) {
				return rt
			}
		}
	}
	return nil
}

// Candidates returns the channels to try for a request, in order: lower
// priority first; within one priority a weighted random order without
// replacement, so a channel of weight 3 comes first three times as often as
// one of weight 1. It ignores routes and health (Plan does not).
func (r *Router) Candidates(protocol, model, group string) []*Channel {
	out, _ := r.table.Load().serving(protocol, model, group)
	r.byPriority(out)
	return out
}

// serving returns the channels serving a request, and names those an
// operator holds out of rotation (drained or disabled).
func (t *table) serving(protocol, model, group string) (out []*Channel, held []string) {
	for _, c := range t.channels {
		if c.Serves(protocol, model, group) {
			if OpState(c.op.Load()) != OpServing {
				held = append(held, c.Name)
				continue
			}
			out = append(out, c)
		}
	}
	return out, held
}

// Plan returns the order in which to try the channels serving a request:
// ordered by its route's strategy, without the channels ejected for its
// model (named in Skipped). A channel whose ejection has run out is put
// first, as the request that probes it. When every channel is ejected, the
// one whose ejection ends first is still tried: a route is never left
// without a channel.
func (r *Router) Plan(protocol, model, group string) Plan {
	return r.PlanFor(protocol, model, group, nil)
}

// PlanFor is Plan for a request that needs need of a channel's provider
// budget: a channel whose last answers left less than that until its
// reset is passed over (named in RateLimited), as an ejected one is. When
// no channel is left, the one whose budget is whole first is still tried.
func (r *Router) PlanFor(protocol, model, group string, need *Need) Plan {
	t := r.table.Load()
	cs, held := t.serving(protocol, model, group)
	rt := t.routeFor(model)
	p := Plan{Route: rt, Strategy: StrategyPriority, Held: held}
	if rt != nil {
		p.Strategy = rt.Strategy
		rt.decisions.Add(1)
	}
	if len(cs) == 0 {
		return p
	}
	p.Explored = r.order(t, rt, model, group, cs)
	if p.Explored {
		rt.explored.Add(1)
	}
	now := r.since()
	p.Channels = make([]*Channel, 0, len(cs))
	p.Health = make([]*Health, 0, len(cs))
	var skipped, limited []*Health
	var skippedCh, limitedCh []*Channel
	for _, c := range cs {
		h := t.health(r, c, model, group)
		ok, probe := h.admit(now)
		var short Skip
		if ok {
			// An ejected channel is named as ejected only.
			short, ok = r.Budget(c, model).admits(c.Name, now, need)
			if !ok {
				limited, limitedCh = append(limited, h), append(limitedCh, c)
				p.RateLimited = append(p.RateLimited, short)
				continue
			}
		}
		switch {
		case !ok:
			skipped, skippedCh = append(skipped, h), append(skippedCh, c)
			p.Skipped = append(p.Skipped, c.Name)
		case probe && !p.Probe:
			p.Channels = slices.Insert(p.Channels, 0, c)
			p.Health = slices.Insert(p.Health, 0, h)
			p.Probe = true
		default:
			p.Channels = append(p.Channels, c)
			p.Health = append(p.Health, h)
		}
	}
	if len(p.Channels) == 0 && len(limited) > 0 {
		// All out of budget (or ejected): the provider is asked anyway
		// on the channel whose budget is whole first; its 429 then tells
		// the client when to come back.
		best := 0
		for i, s := range p.RateLimited {
			if s.Reset < p.RateLimited[best].Reset {
				best = i
			}
		}
		p.Channels = append(p.Channels, limitedCh[best])
		p.Health = append(p.Health, limited[best])
		p.RateLimited = slices.Delete(p.RateLimited, best, best+1)
		limitedCh = slices.Delete(limitedCh, best, best+1)
	}
	if len(p.Channels) == 0 {
		// All ejected: the least bad is the one whose ejection ends first.
		best := 0
		for i, h := range skipped {
			if h.until < skipped[best].until {
				best = i
			}
		}
		p.Channels = append(p.Channels, skippedCh[best])
		p.Health = append(p.Health, skipped[best])
		p.Skipped = slices.Delete(p.Skipped, best, best+1)
		skippedCh = slices.Delete(skippedCh, best, best+1)
	}
	for _, c := range limitedCh {
		c.skips[SkipRateLimited].Add(1)
	}
	for _, c := range skippedCh {
		c.skips[SkipEjected].Add(1)
	}
	p.Channels[0].decisions[strategyIndex(p.Strategy)].Add(1)
	return p
}

// health returns the health of c for a request for model from group,
// creating it on first use.
//
// Health is keyed by what the operator configured, never by the name a
// client sent (issue 50): the channel's model pattern that serves model
// (its first match; "*" for a channel that lists none), the route that
// model takes (by its name, which a reload keeps), and the client's group.
// Keyed by the client's model name (at most 128 a channel, the rest
// sharing one slot, never expired), 140 invented names that a channel
// answered 503 ejected the shared slot, and another team's requests for
// real models skipped that channel. Now the keys of a channel are at most
// its patterns × the routes × the groups (all configured), and one group's
// failures eject a channel for that group only: another group skips it
// only when its own requests fail there.
func (t *table) health(r *Router, c *Channel, model, group string) *Health {
	pattern := c.pattern(model)
	rt := t.routeFor(model)
	var routeName string
	if rt != nil {
		routeName = rt.Name()
	}
	var b strings.Builder
	b.Grow(len(pattern) + len(routeName) + len(group) + 2)
	b.WriteString(pattern)
	b.WriteByte(0)
	b.WriteString(routeName)
	b.WriteByte(0)
	b.WriteString(group)
	key := b.String()
	if v, ok := c.health.Load(key); ok {
		return v.(*Health)
	}
	h := &Health{Channel: c, Model: pattern, Group: group, routeName: routeName, r: r}
	h.route.Store(rt)
	v, _ := c.health.LoadOrStore(key, h)
	return v.(*Health)
}

// pattern returns the first of c's model patterns that matches model, or
// "*" when c lists none (it serves every model).
func (c *Channel) pattern(model string) string {
	for _, p := range c.Models {
		if Match(p, model) {
			return p
		}
	}
	return "*"
}

// Health returns the health of c for model, for clients without a group
// (created on first use).
func (r *Router) Health(c *Channel, model string) *Health {
	return r.table.Load().health(r, c, model, "")
}

// HealthFor returns the health of c for model and a client of group.
func (r *Router) HealthFor(c *Channel, model, group string) *Health {
	return r.table.Load().health(r, c, model, group)
}

// shuffleWeighted orders cs by repeated weighted draws.
func (r *Router) shuffleWeighted(cs []*Channel) {
	if len(cs) < 2 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := 0; k < len(cs)-1; k++ {
		total := 0
		for _, c := range cs[k:] {
			total += max(c.Weight, 1)
		}
		n := r.rnd.IntN(total)
		for m := k; m < len(cs); m++ {
			n -= max(cs[m].Weight, 1)
			if n < 0 {
				cs[k], cs[m] = cs[m], cs[k]
				break
			}
		}
	}
}
