package route

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Reloading (issue 48). The router's channels and routes are one table
// behind an atomic pointer. Swap builds the next table and publishes it in
// one store: a request plans on the table it loaded, so it runs to its end
// on the channels (keys, timeouts, base URL) it started with, and every plan
// made after the store uses the new table. What a channel has learnt — its
// health per model, ejections, inflight counts — belongs to its identity
// (name, protocol, base URL) and carries over when that is unchanged; the
// operator's state (drained, disabled) belongs to its name and survives
// every reload.

// table is one configuration of the router.
type table struct {
	channels []*Channel
	routes   []*Route
}

// Identity is what a channel's learnt health belongs to: a channel whose
// name, protocol and base URL are unchanged is the same upstream, even with
// a new key, models or timeouts.
func Identity(c *Channel) string {
	u := ""
	if c.BaseURL != nil {
		u = c.BaseURL.String()
	}
	return c.Name + "\x00" + c.Protocol + "\x00" + u
}

// Swap replaces the router's channels and routes. Channels and routes may
// be new values: each takes the state of the previous table's channel of
// the same identity (route of the same models), so health and hedge budgets
// carry over. In-flight requests keep the Channels they hold.
func (r *Router) Swap(channels []*Channel, routes []*Route) {
	r.swapMu.Lock()
	defer r.swapMu.Unlock()
	prevCh := map[string]*channelState{}
	prevRt := map[string]*routeState{}
	if old := r.table.Load(); old != nil {
		for _, c := range old.channels {
			prevCh[c.identity] = c.channelState
		}
		for _, rt := range old.routes {
			prevRt[rt.Name()] = rt.routeState
		}
	}
	for _, c := range channels {
		if c.channelState == nil {
			id := Identity(c)
			if st, ok := prevCh[id]; ok {
				c.channelState = st
			} else {
				c.channelState = &channelState{identity: id}
			}
		}
		c.op.Store(int32(r.ops[c.Name].State))
	}
	for _, rt := range routes {
		if rt.routeState == nil {
			if st, ok := prevRt[rt.Name()]; ok {
				rt.routeState = st
			} else {
				rt.routeState = &routeState{}
			}
		}
	}
	t := &table{channels: channels, routes: routes}
	byName := map[string]*Route{}
	for _, rt := range routes {
		byName[rt.Name()] = rt
	}
	// Carried health follows its model's route in the new table (its
	// ejection policy, its view).
	for _, c := range channels {
		c.health.Range(func(_, v any) bool {
			h := v.(*Health)
			h.route.Store(byName[h.routeName]) // nil when the route is gone
			return true
		})
	}
	r.table.Store(t)
}

// OpState is the operator's state of a channel.
type OpState int32

const (
	OpServing  OpState = iota // in rotation (the default)
	OpDrained                 // no new requests; in-flight ones finish
	OpDisabled                // out of rotation until enabled
)

func (s OpState) String() string {
	switch s {
	case OpDrained:
		return "drained"
	case OpDisabled:
		return "disabled"
	}
	return "serving"
}

// ParseOpState reads serving, drained or disabled.
func ParseOpState(s string) (OpState, error) {
	switch s {
	case "serving", "enabled", "":
		return OpServing, nil
	case "drained":
		return OpDrained, nil
	case "disabled":
		return OpDisabled, nil
	}
	return 0, fmt.Errorf("channel state %q is not serving, drained or disabled", s)
}

// OpRecord is an operator's state of a channel and who set it.
type OpRecord struct {
	State OpState
	By    string    // the key name that set it
	At    time.Time // when it was set
	// Version orders the changes of one channel across replicas (the
	// store's; 0 for a change not from the store).
	Version int64
}

// SetOp sets the operator's state of the channel name, effective for every
// plan made after it returns. It holds for a channel of that name in every
// later configuration; the name need not be configured now.
func (r *Router) SetOp(name string, rec OpRecord) {
	r.swapMu.Lock()
	defer r.swapMu.Unlock()
	if rec.State == OpServing && rec.By == "" {
		delete(r.ops, name)
	} else {
		r.ops[name] = rec
	}
	for _, c := range r.table.Load().channels {
		if c.Name == name {
			c.op.Store(int32(rec.State))
		}
	}
}

// Op returns the operator's state of the channel name.
func (r *Router) Op(name string) OpRecord {
	r.swapMu.Lock()
	defer r.swapMu.Unlock()
	return r.ops[name]
}

// Uneject readmits the channel name for every model it is ejected for, at
// once, and returns those models.
func (r *Router) Uneject(name string) []string {
	now := r.since()
	var models []string
	for _, c := range r.table.Load().channels {
		if c.Name != name {
			continue
		}
		c.health.Range(func(_, v any) bool {
			if h := v.(*Health); h.uneject(now) {
				models = append(models, h.Model)
			}
			return true
		})
	}
	slices.Sort(models)
	return slices.Compact(models) // a pattern's health is kept per group
}

// ChannelModel is a channel's state for one model: its ejection and the
// latency its route ranks it by.
type ChannelModel struct {
	Model    string `json:"model"`    // the channel's model pattern
	Group    string `json:"group"`    // the clients' group; health is kept per group
	Route    string `json:"route"`    // the route's model patterns; empty: the default
	Strategy string `json:"strategy"` // of that route
	Inflight int64  `json:"inflight"`
	// Milestone is the latency the route ranks channels by (first_response
	// unless a latency route says first_text); P50 and P95 are its recent
	// percentiles in ms over Samples samples of the health window.
	Milestone string  `json:"milestone"`
	Samples   int     `json:"samples"`
	P50       float64 `json:"p50_ms"`
	P95       float64 `json:"p95_ms"`
	Ejection
	// EjectedUntil is when the ejection ends and a probe may start; nil
	// unless ejected.
	EjectedUntil *time.Time `json:"ejected_until,omitempty"`
	// RateLimit is the provider's budget for this model as the channel's
	// last answers told it; nil when none told one that still holds.
	RateLimit *BudgetView `json:"rate_limit,omitempty"`
}

// ChannelLive is the live state of one configured channel.
type ChannelLive struct {
	Name     string         `json:"name"`
	Inflight int64          `json:"inflight"`
	Op       OpRecord       `json:"-"`
	Ejected  bool           `json:"-"` // for some model now
	Models   []ChannelModel `json:"models"`
}

// Live returns the live state of every configured channel, in
// configuration order, with its models sorted by name.
func (r *Router) Live() []ChannelLive {
	now := r.since()
	wall := r.now()
	r.swapMu.Lock()
	ops := make(map[string]OpRecord, len(r.ops))
	for k, v := range r.ops {
		ops[k] = v
	}
	r.swapMu.Unlock()
	var out []ChannelLive
	for _, c := range r.Channels() {
		cl := ChannelLive{Name: c.Name, Inflight: c.Inflight(), Op: ops[c.Name], Models: []ChannelModel{}}
		c.health.Range(func(_, v any) bool {
			h := v.(*Health)
			m := ChannelModel{Model: h.Model, Group: h.Group, Strategy: string(StrategyPriority), Inflight: h.Inflight(), Milestone: string(DefFirstResponse),
				Ejection: h.ejection(now), RateLimit: h.budgetView(now)}
			rt := h.route.Load()
			if rt != nil {
				m.Route, m.Strategy = rt.Name(), string(rt.Strategy)
				if rt.Strategy == StrategyLatency && rt.Latency.Definition != "" {
					m.Milestone = string(rt.Latency.Definition)
				}
			}
			fs := h.snapshot(true).fields[Definition(m.Milestone).field()]
			m.Samples, m.P50, m.P95 = fs.Count, fs.P50, fs.P95
			if m.State != stateHealthy.String() {
				cl.Ejected = true
				if m.Remaining > 0 {
					t := wall.Add(m.Remaining).UTC()
					m.EjectedUntil = &t
				}
			}
			cl.Models = append(cl.Models, m)
			return true
		})
		slices.SortFunc(cl.Models, func(a, b ChannelModel) int { return strings.Compare(a.Model, b.Model) })
		out = append(out, cl)
	}
	return out
}
