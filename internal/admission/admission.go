// Package admission decides, before a request is routed, whether it may
// start now, wait a bounded time, or is refused (SPEC.md §5, "Admission";
// docs/admission.md). Limits are configured per client key, per group and
// per model pattern, on requests per minute, tokens per minute and
// concurrent streams.
//
// Rates are kept with GCRA (the generic cell rate algorithm): one
// "theoretical arrival time" per limit, advanced by cost × period on each
// admission, so that a limit of N a minute admits a burst of N and then one
// every 60s/N, never more than N in any minute beyond the burst it had
// saved. Tokens are charged the prompt's estimate at admission and corrected
// by the answer's usage when it ends (Ticket.Done). Alone, a gateway keeps
// this state in memory; with a Shared backend (redis.go) every replica
// reads and advances the same state in one atomic script.
package admission

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Scope is what a rule's counter is kept for.
type Scope uint8

// Scopes of a rule.
const (
	ScopeKey   Scope = iota // one client key (by its configured name)
	ScopeGroup              // one group of keys
	ScopeModel              // the models a pattern matches, together
)

func (s Scope) String() string {
	switch s {
	case ScopeKey:
		return "key"
	case ScopeGroup:
		return "group"
	}
	return "model"
}

// Kinds of limit: the name each is configured and reported under.
const (
	KindRequests   = "requests_per_minute"
	KindTokens     = "tokens_per_minute"
	KindConcurrent = "concurrent"
)

// Window is the span a per-minute limit is counted over.
const Window = time.Minute

// Rule is one configured limit. Zero limits are not enforced.
type Rule struct {
	Scope Scope
	// Match is the key or group name, or a model glob (path.Match). For
	// keys and groups "*" gives every key (group) a counter of its own;
	// a model pattern is one counter for all the models it matches.
	Match             string
	RequestsPerMinute int
	TokensPerMinute   int
	Concurrent        int
	// Queue is how long a request over this limit may wait for it; 0
	// refuses it at once.
	Queue time.Duration
}

// Validate reports a rule that cannot work.
func (r Rule) Validate() error {
	if r.Match == "" {
		return errors.New("names no key, group or model")
	}
	if r.Scope == ScopeModel {
		if _, err := path.Match(r.Match, ""); err != nil {
			return fmt.Errorf("model pattern %q: %w", r.Match, err)
		}
	}
	if r.RequestsPerMinute < 0 || r.TokensPerMinute < 0 || r.Concurrent < 0 || r.Queue < 0 {
		return errors.New("limits and queue must not be negative")
	}
	if r.RequestsPerMinute == 0 && r.TokensPerMinute == 0 && r.Concurrent == 0 {
		return errors.New("sets no limit (requests_per_minute, tokens_per_minute or concurrent)")
	}
	return nil
}

// Request is what admission knows of a request.
type Request struct {
	Key, Group, Model string
	// Tokens is the prompt's estimated tokens; 0 when no token limit
	// applies (see Limiter.NeedsTokens).
	Tokens int
}

// Denial says why a request was refused.
type Denial struct {
	Limit      string        // the rule's subject, e.g. "key:alice", "group:team-a", "model:gpt-4o*"
	Kind       string        // KindRequests, KindTokens or KindConcurrent
	Max        int           // the limit's value
	RetryAfter time.Duration // when it may pass again; a guess (1s) for concurrency
	Waited     time.Duration // how long the request queued before it was refused
	// Cancelled is set when the client left while the request queued.
	Cancelled bool
}

// Message is the text the client reads: the limit named and when to retry.
func (d *Denial) Message() string {
	if d.Cancelled {
		return "the client left while the request waited for admission (" + d.Limit + " " + d.Kind + ")"
	}
	unit := " a minute"
	if d.Kind == KindConcurrent {
		unit = " at once"
	}
	what := "requests"
	if d.Kind == KindTokens {
		what = "tokens"
	} else if d.Kind == KindConcurrent {
		what = "streams"
	}
	return "rate limit reached: " + d.Limit + " " + d.Kind + " allows " + strconv.Itoa(d.Max) + " " + what + unit +
		"; retry in " + strconv.Itoa(RetrySeconds(d.RetryAfter)) + " s"
}

// RetrySeconds is a Retry-After value: whole seconds, rounded up, at least 1.
func RetrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Options configure a Limiter.
type Options struct {
	// Now is the clock of the rates; nil means time.Now. Queued requests
	// wait on real timers.
	Now func() time.Time
}

// Limiter admits requests against the configured rules. It is safe for
// concurrent use.
type Limiter struct {
	rules   []Rule
	byKey   map[string][]int // rule indices by exact key name
	byGroup map[string][]int
	anyKey  []int // rules with Match "*"
	anyGrp  []int
	models  []int
	tokens  bool // some rule limits tokens
	now     func() time.Time
	back    backend
	closer  func()              // stops a shared backend; nil in memory
	status  func() SharedStatus // a shared backend's state; nil in memory

	cache  sync.Map // subject → []charge, the charge lists already built
	cached atomic.Int64

	// mu guards stats.
	mu    sync.Mutex
	stats map[statKey]*counts
}

// backend keeps the limits' state: in memory, or shared through Redis.
type backend interface {
	// take admits cs at now if every limit allows it within the wait
	// each may queue (charge.queue − waited), and commits the charges
	// then; it returns how long the request must still wait for its
	// rates. A refusal names the charge at fault (deny ≥ 0), and full is
	// set when it is a concurrency limit that a release may lift: wake is
	// then closed at the next release, or nil when the backend cannot
	// tell (the caller polls).
	take(ctx context.Context, now time.Time, cs []charge, waited time.Duration) (wait time.Duration, deny int, retry time.Duration, full bool, wake <-chan struct{})
	// end ends a request's hold: one stream of each concurrency charge
	// in cs is released, and delta tokens are added to each token rate
	// (negative: a refund). It must not block on I/O: a shared backend
	// does it in the background.
	end(now time.Time, cs []charge, delta int)
}

// charge is one limit a request is counted against.
type charge struct {
	rule  int
	id    string // the counter's identity: scope, subject and kind
	kind  string
	limit int
	cost  int // 1 request, the tokens, or 1 stream
	queue time.Duration
	name  string // the rule's subject as the client reads it
	stat  *counts
}

// New returns a limiter for rules, kept in memory.
func New(rules []Rule, opts Options) (*Limiter, error) {
	l := &Limiter{rules: rules, byKey: map[string][]int{}, byGroup: map[string][]int{}, now: opts.Now, stats: map[statKey]*counts{}}
	if l.now == nil {
		l.now = time.Now
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("limit %d (%s %s): %w", i+1, r.Scope, r.Match, err)
		}
		if r.TokensPerMinute > 0 {
			l.tokens = true
		}
		switch {
		case r.Scope == ScopeModel:
			l.models = append(l.models, i)
		case r.Scope == ScopeKey && r.Match == "*":
			l.anyKey = append(l.anyKey, i)
		case r.Scope == ScopeKey:
			l.byKey[r.Match] = append(l.byKey[r.Match], i)
		case r.Match == "*":
			l.anyGrp = append(l.anyGrp, i)
		default:
			l.byGroup[r.Match] = append(l.byGroup[r.Match], i)
		}
	}
	l.back = newMemory()
	return l, nil
}

// Close stops a shared limiter's heartbeat and waits for its background
// work; a limiter in memory has none.
func (l *Limiter) Close() {
	if l != nil && l.closer != nil {
		l.closer()
	}
}

// Shared returns the state of a shared limiter's Redis, and false for a
// limiter in memory.
func (l *Limiter) Shared() (SharedStatus, bool) {
	if l == nil || l.status == nil {
		return SharedStatus{}, false
	}
	return l.status(), true
}

// Rules returns the limiter's rules.
func (l *Limiter) Rules() []Rule { return l.rules }

// NeedsTokens reports whether a request of key, group and model is
// counted in tokens, so that the caller estimates its prompt only then.
func (l *Limiter) NeedsTokens(key, group, model string) bool {
	if l == nil || !l.tokens {
		return false
	}
	need := false
	l.each(key, group, model, func(i int, _ string) {
		if l.rules[i].TokensPerMinute > 0 {
			need = true
		}
	})
	return need
}

// each calls fn for every rule that applies, with the subject its counter
// is kept for.
func (l *Limiter) each(key, group, model string, fn func(rule int, subject string)) {
	for _, i := range l.byKey[key] {
		fn(i, key)
	}
	if key != "" {
		for _, i := range l.anyKey {
			fn(i, key)
		}
	}
	if group != "" {
		for _, i := range l.byGroup[group] {
			fn(i, group)
		}
		for _, i := range l.anyGrp {
			fn(i, group)
		}
	}
	if model != "" {
		for _, i := range l.models {
			if ok, _ := path.Match(l.rules[i].Match, model); ok {
				fn(i, l.rules[i].Match)
			}
		}
	}
}

// charges lists the limits q is counted against: a copy of the cached
// list for its key, group and model, with its tokens as the token limits'
// cost. BenchmarkAdmitMemory: building the counters' names and finding
// their counts for each request took most of the 11 µs an admission cost;
// the cached lists bring it to a few.
func (l *Limiter) charges(q Request) []charge {
	k := subject{q.Key, q.Group, q.Model}
	var tpl []charge
	if v, ok := l.cache.Load(k); ok {
		tpl = v.([]charge)
	} else {
		tpl = l.build(q)
		if l.cached.Add(1) <= maxCached {
			l.cache.Store(k, tpl)
		}
	}
	if len(tpl) == 0 {
		return nil
	}
	cs := append([]charge(nil), tpl...)
	for i := range cs {
		if cs[i].kind == KindTokens {
			cs[i].cost = max(q.Tokens, 0)
		}
	}
	return cs
}

// maxCached bounds the cached charge lists: models are the client's to
// name, and past it lists are built per request.
const maxCached = 4096

type subject struct{ key, group, model string }

// build makes the charge list of q's key, group and model.
func (l *Limiter) build(q Request) []charge {
	cs := []charge{}
	l.each(q.Key, q.Group, q.Model, func(i int, subject string) {
		r := l.rules[i]
		name := r.Scope.String() + ":" + subject
		add := func(kind string, limit, cost int) {
			// The limit's value is part of the counter's identity: replicas
			// configured alike share it, and a changed limit starts afresh.
			cs = append(cs, charge{rule: i, id: name + "/" + kind + "/" + strconv.Itoa(limit), kind: kind, limit: limit,
				cost: cost, queue: r.Queue, name: name, stat: l.stat(name, kind)})
		}
		if r.Concurrent > 0 {
			add(KindConcurrent, r.Concurrent, 1)
		}
		if r.RequestsPerMinute > 0 {
			add(KindRequests, r.RequestsPerMinute, 1)
		}
		if r.TokensPerMinute > 0 {
			add(KindTokens, r.TokensPerMinute, 0)
		}
	})
	return cs
}

// Ticket is an admitted request's hold on its limits: Done ends it.
type Ticket struct {
	l       *Limiter
	cs      []charge
	tokens  int  // the estimate charged at admission
	done    bool // Done was called
	Waited  time.Duration
	Limited bool // some limit applied to the request
}

// Admit decides on q: a ticket when it may go (after waiting Ticket.Waited,
// already spent), or the denial. A request no rule applies to gets a ticket
// at once, without any lock taken.
func (l *Limiter) Admit(ctx context.Context, q Request) (*Ticket, *Denial) {
	if l == nil {
		return &Ticket{}, nil
	}
	cs := l.charges(q)
	if len(cs) == 0 {
		return &Ticket{}, nil
	}
	start := l.now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	sleep := func(d time.Duration, wake <-chan struct{}) bool {
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		}
		return true
	}
	for queued := false; ; queued = true {
		now := l.now()
		var waited time.Duration
		if queued {
			waited = max(now.Sub(start), 0)
		}
		wait, deny, retry, full, wake := l.back.take(ctx, now, cs, waited)
		if deny < 0 {
			t := &Ticket{l: l, cs: cs, tokens: q.Tokens, Waited: waited + wait, Limited: true}
			if wait > 0 {
				if !sleep(wait, nil) {
					t.Done(0)
					l.count(cs, -1, outcomeRejected)
					return nil, &Denial{Limit: cs[0].name, Kind: cs[0].kind, Max: cs[0].limit, Waited: l.now().Sub(start), Cancelled: true}
				}
			}
			outcome := outcomeAdmitted
			if t.Waited > 0 {
				outcome = outcomeQueued
			}
			l.count(cs, -1, outcome)
			return t, nil
		}
		c := cs[deny]
		if full {
			if left := c.queue - waited; left > 0 {
				// Wait for a stream to end (or, with a backend that
				// cannot say, poll), for at most what is left.
				d := left
				if wake == nil {
					d = min(left, pollConcurrent)
				}
				if !sleep(d, wake) {
					l.count(cs, deny, outcomeRejected)
					return nil, &Denial{Limit: c.name, Kind: c.kind, Max: c.limit, Waited: l.now().Sub(start), Cancelled: true}
				}
				continue
			}
			retry = time.Second
		}
		l.count(cs, deny, outcomeRejected)
		return nil, &Denial{Limit: c.name, Kind: c.kind, Max: c.limit, RetryAfter: retry, Waited: waited, Cancelled: ctx.Err() != nil}
	}
}

// pollConcurrent is how often a request queued on a shared concurrency
// limit looks again (another replica's release is not signalled here).
const pollConcurrent = 50 * time.Millisecond

// Done ends the ticket: its streams are released and its token charge is
// corrected to tokens, the input and output the answer reported (or was
// estimated at); tokens < 0 keeps the estimate. It may be called once; a
// nil ticket is fine.
func (t *Ticket) Done(tokens int) {
	if t == nil || t.done || t.l == nil {
		return
	}
	t.done = true
	delta := 0
	if tokens >= 0 {
		delta = tokens - t.tokens
	}
	t.l.back.end(t.l.now(), t.cs, delta)
}
