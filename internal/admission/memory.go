package admission

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// memory keeps the limits of one gateway in its own memory.
type memory struct {
	mu    sync.Mutex       // guards the fields below
	tat   map[string]int64 // a rate's theoretical arrival time, Unix ns, by counter id
	conc  map[string]int   // streams held, by counter id
	wake  chan struct{}    // closed at the next release
	share func() int       // divides every limit (the fallback of a shared backend); nil: 1
	// count, if set, gives the streams held of a counter instead of conc
	// (the fallback of a shared backend counts those its replica holds,
	// whichever backend admitted them); conc is then unused.
	count func(id string) int
}

func newMemory() *memory {
	return &memory{tat: map[string]int64{}, conc: map[string]int{}, wake: make(chan struct{})}
}

// period is one unit's share of the window for a limit: GCRA's emission
// interval, in ns.
func period(limit int) int64 { return max(int64(Window)/int64(max(limit, 1)), 1) }

// gcra checks one rate at n (Unix ns): how long a charge of cost on a
// theoretical arrival time tat must wait, and the tat it leaves when taken.
// A charge larger than the whole limit is checked as the whole limit (it
// passes when the budget is full, and its debt delays the next ones),
// so that no request is refused for ever.
func gcra(tat, n int64, limit, cost int) (wait, next int64) {
	p := period(limit)
	tat = max(tat, n)
	allowAt := tat + int64(min(cost, limit))*p - int64(Window)
	return max(allowAt-n, 0), tat + int64(cost)*p
}

func (m *memory) held(id string) int {
	if m.count != nil {
		return m.count(id)
	}
	return m.conc[id]
}

func (m *memory) limit(c *charge) int {
	if m.share == nil {
		return c.limit
	}
	return max(c.limit/max(m.share(), 1), 1)
}

func (m *memory) take(_ context.Context, now time.Time, cs []charge, waited time.Duration) (time.Duration, int, time.Duration, bool, <-chan struct{}) {
	n := now.UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range cs {
		if c := &cs[i]; c.kind == KindConcurrent && m.held(c.id) >= m.limit(c) {
			return 0, i, 0, true, m.wake
		}
	}
	var wait int64
	for i := range cs {
		c := &cs[i]
		if c.kind == KindConcurrent {
			continue
		}
		w, _ := gcra(m.tat[c.id], n, m.limit(c), c.cost)
		if time.Duration(w) > c.queue-waited {
			return 0, i, time.Duration(w), false, nil
		}
		wait = max(wait, w)
	}
	for i := range cs {
		c := &cs[i]
		if c.kind == KindConcurrent {
			if m.count == nil {
				m.conc[c.id]++
			}
			continue
		}
		_, m.tat[c.id] = gcra(m.tat[c.id], n, m.limit(c), c.cost)
	}
	return time.Duration(wait), -1, 0, false, nil
}

func (m *memory) end(now time.Time, cs []charge, delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	released := false
	for i := range cs {
		c := &cs[i]
		switch {
		case c.kind == KindConcurrent:
			released = true
			if m.count != nil {
				continue
			}
			if m.conc[c.id] <= 1 {
				delete(m.conc, c.id)
			} else {
				m.conc[c.id]--
			}
		case c.kind == KindTokens && delta != 0:
			tat := m.tat[c.id] + int64(delta)*period(m.limit(c))
			// A refund never leaves more than a full budget.
			m.tat[c.id] = max(tat, now.UnixNano()-int64(Window))
		}
	}
	if released {
		close(m.wake)
		m.wake = make(chan struct{})
	}
}

// Outcomes of admission, counted per limit.
const (
	outcomeAdmitted = iota // at once
	outcomeQueued          // after a wait
	outcomeRejected        // refused (or the client left while queued)
)

type statKey struct{ limit, kind string }

// counts are one limit's decisions, counted atomically on the request path.
type counts struct {
	limit, kind                string
	admitted, queued, rejected atomic.Uint64
}

// stat returns the counts of a limit, made on first use.
func (l *Limiter) stat(limit, kind string) *counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := statKey{limit, kind}
	c := l.stats[k]
	if c == nil {
		c = &counts{limit: limit, kind: kind}
		l.stats[k] = c
	}
	return c
}

// Stat counts one limit's decisions since the gateway started.
type Stat struct {
	Limit    string // e.g. "key:alice"
	Kind     string // KindRequests, KindTokens or KindConcurrent
	Admitted uint64 // requests it counted that went at once
	Queued   uint64 // requests it counted that went after waiting
	Rejected uint64 // requests it refused
}

// count notes a decision: for a refusal, against the limit at fault
// (deny); otherwise against every limit the request was counted on.
func (l *Limiter) count(cs []charge, deny, outcome int) {
	for i := range cs {
		if deny >= 0 && i != deny {
			continue
		}
		switch outcome {
		case outcomeAdmitted:
			cs[i].stat.admitted.Add(1)
		case outcomeQueued:
			cs[i].stat.queued.Add(1)
		default:
			cs[i].stat.rejected.Add(1)
		}
	}
}

// Stats returns every limit's counts, ordered by limit and kind.
func (l *Limiter) Stats() []Stat {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	out := make([]Stat, 0, len(l.stats))
	for _, c := range l.stats {
		out = append(out, Stat{Limit: c.limit, Kind: c.kind, Admitted: c.admitted.Load(), Queued: c.queued.Load(), Rejected: c.rejected.Load()})
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Limit != out[j].Limit {
			return out[i].Limit < out[j].Limit
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}
