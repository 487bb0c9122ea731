// Package route chooses the upstream channels for a request: channels of
// the request's protocol whose model patterns match, that the client's group
// may use, ordered by priority and, within one priority, by a weighted
// random draw (SPEC.md §5, §10).
package route

import (
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Timeouts of a channel, all positive.
type Timeouts struct {
	Headers     time.Duration // upstream start to response headers
	FirstOutput time.Duration // upstream start to first effective output (t4)
	Idle        time.Duration // between two stream events
	Total       time.Duration // whole request, from receipt
}

// Channel is one upstream. Its fields are fixed after NewRouter; only the
// inflight count changes.
type Channel struct {
	Name     string
	Protocol string // openai | anthropic | gemini
	BaseURL  *url.URL
	Key      string   // the channel's own upstream key; never the client's
	Models   []string // exact names or globs (see Match); empty matches every model
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

	inflight atomic.Int64
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
	if c.Protocol != protocol {
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

// Router holds the channels. It is safe for concurrent use.
type Router struct {
	channels []*Channel

	mu  sync.Mutex // guards rnd
	rnd *rand.Rand
}

// NewRouter returns a router over channels. seed makes the weighted draws
// repeatable in tests; production passes a random seed.
func NewRouter(channels []*Channel, seed uint64) *Router {
	return &Router{channels: channels, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Channels returns all channels in configuration order.
func (r *Router) Channels() []*Channel { return r.channels }

// Channel returns the channel of that name, or nil.
func (r *Router) Channel(name string) *Channel {
	for _, c := range r.channels {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Candidates returns the channels to try for a request, in order: lower
// priority first; within one priority a weighted random order without
// replacement, so a channel of weight 3 comes first three times as often as
// one of weight 1.
func (r *Router) Candidates(protocol, model, group string) []*Channel {
	var out []*Channel
	for _, c := range r.channels {
		if c.Serves(protocol, model, group) {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *Channel) int { return a.Priority - b.Priority })
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && out[j].Priority == out[i].Priority {
			j++
		}
		r.shuffleWeighted(out[i:j])
		i = j
	}
	return out
}

// shuffleWeighted orders cs by repeated weighted draws.
func (r *Router) shuffleWeighted(cs []*Channel) {
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
