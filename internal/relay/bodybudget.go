package relay

import (
	"context"
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// The request bodies the gateway holds in memory have one budget for the
// whole gateway, and each key a share of it (issue 50: eight concurrent
// 31 MiB bodies from one key took RSS from 32 to 615 MiB, sixteen to
// 1,204 MiB). A body's bytes are counted against the budget before they
// are read, as its buffer grows; the count ends when the prompt is let go
// (at commit, or when the request ends). A request that would pass the
// budget, or its key's share, waits a little for room, and is answered 503
// with Retry-After when none comes: its bytes stay in the kernel's buffers
// (or the client's), not in the gateway's heap.
//
// This is the gateway's own memory, apart from any admission of requests
// by rate or concurrency: a body waits here before anything else is known
// of it.

// DefaultBodyBudget is the budget when neither Options nor a memory limit
// (GOMEMLIMIT) sizes it.
const DefaultBodyBudget = 256 << 20

// DefaultBodyWait is how long a body waits for room in the budget before
// it is answered 503.
const DefaultBodyWait = time.Second

// bodyBudgetFromMemLimit sizes the default budget: a quarter of the Go
// memory limit when one is set (GOMEMLIMIT or debug.SetMemoryLimit), at most
// DefaultBodyBudget, and never under 64 MiB (two bodies of the default
// 32 MiB maximum).
func bodyBudgetFromMemLimit() int64 {
	limit := debug.SetMemoryLimit(-1)
	if limit <= 0 || limit == math.MaxInt64 {
		return DefaultBodyBudget
	}
	return min(max(limit/4, 64<<20), DefaultBodyBudget)
}

// errBodyBudget is the error of a body that found no room in time.
var errBodyBudget = errors.New("request bodies in memory are at the gateway's budget")

// bodyBudget counts the request-body bytes held in memory, in total and
// per key.
type bodyBudget struct {
	total, perKey int64
	wait          time.Duration

	refused atomic.Uint64 // bodies answered 503 for want of room
	peak    atomic.Int64  // the most bytes counted at once

	// freed counts the bytes let go since the last collection the budget
	// asked for; collecting is set while one runs (see reclaim).
	freed      atomic.Int64
	collecting sync.Mutex

	// mu guards used, byKey and changed.
	mu    sync.Mutex
	used  int64
	byKey map[string]int64
	// changed is closed when bytes are let go, if a body waits for room
	// (made by the first that waits, so that a budget nobody waits on
	// costs no allocation per request).
	changed chan struct{}
}

func newBodyBudget(total, perKey int64, wait time.Duration) *bodyBudget {
	if total <= 0 {
		total = bodyBudgetFromMemLimit()
	}
	if perKey <= 0 || perKey > total {
		perKey = total / 2
	}
	if wait <= 0 {
		wait = DefaultBodyWait
	}
	return &bodyBudget{total: total, perKey: perKey, wait: wait, byKey: map[string]int64{}}
}

// lease is one request's part of the budget.
type lease struct {
	b   *bodyBudget
	key string
	n   int64 // bytes counted; guarded by b.mu
	// waitUntil bounds the waiting of the whole body, not of each step:
	// the monotonic time since leaseEpoch (a Duration, not a time.Time:
	// 16 bytes fewer in every request's exchange, which holds its lease).
	waitUntil time.Duration
}

// leaseEpoch is the origin of the leases' waitUntil.
var leaseEpoch = time.Now()

// lease starts l as key's part of b; l is held by the request (no
// allocation of its own).
func (b *bodyBudget) lease(l *lease, key string) *lease {
	*l = lease{b: b, key: key}
	return l
}

// grow counts n more bytes for the lease, waiting while the budget or the
// key's share has no room, until the lease's wait is spent or ctx ends.
func (l *lease) grow(ctx context.Context, n int64) error {
	if l == nil {
		return nil
	}
	b := l.b
	if l.waitUntil == 0 {
		l.waitUntil = time.Since(leaseEpoch) + b.wait
	}
	for {
		b.mu.Lock()
		k := b.byKey[l.key]
		if b.used+n <= b.total && k+n <= b.perKey {
			b.used += n
			b.byKey[l.key] = k + n
			l.n += n
			if b.used > b.peak.Load() {
				b.peak.Store(b.used)
			}
			b.mu.Unlock()
			b.reclaim(n)
			return nil
		}
		if l.n+n > b.perKey && k == l.n || l.n+n > b.total && b.used == l.n {
			// Nothing else to wait for: this body alone is over the
			// key's share or the whole budget; it never fits.
			b.mu.Unlock()
			b.refused.Add(1)
			return errBodyBudget
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		left := l.waitUntil - time.Since(leaseEpoch)
		if left <= 0 {
			b.refused.Add(1)
			return errBodyBudget
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
			t.Stop()
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// shrink stops counting n of the lease's bytes.
func (l *lease) shrink(n int64) {
	if n <= 0 || l == nil {
		return
	}
	b := l.b
	b.mu.Lock()
	n = min(n, l.n)
	l.n -= n
	b.used -= n
	if k := b.byKey[l.key] - n; k > 0 {
		b.byKey[l.key] = k
	} else {
		delete(b.byKey, l.key)
	}
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	b.mu.Unlock()
}

// release stops counting all of the lease's bytes. It may be called more
// than once.
func (l *lease) release() {
	if l == nil {
		return
	}
	l.b.mu.Lock()
	n := l.n
	l.b.mu.Unlock()
	l.shrink(n)
	l.b.collect(n)
}

// collect notes n bytes of bodies let go. The budget counts a body until
// its prompt is let go, but its buffer stays in the heap until the
// collector frees it, and the collector's own pace (GOGC) lets the heap
// grow to twice what is live first: sixteen 31 MiB bodies through a
// 128 MiB budget still took the heap 190 MiB past its start that way,
// and more with a collection asked for on a goroutine of its own (the
// next bodies were made while it ran). So a body about to take a large
// buffer first collects, when bodies of an eighth of the budget (at least
// 8 MiB) were let go since the last collection (reclaim): the heap then
// stays within the budget and that eighth (TestBodyBudgetHoldsMemory). A
// collection of the gateway's heap, whose large part is these buffers
// without pointers, costs a few ms of one core, once per that many
// megabytes of bodies, on the goroutine of a request sending megabytes.
func (b *bodyBudget) collect(n int64) {
	if n > 0 {
		b.freed.Add(n)
	}
}

// reclaimAt is how many bytes let go make reclaim collect.
func (b *bodyBudget) reclaimAt() int64 { return max(b.total/8, 8<<20) }

// reclaim collects before a buffer of n bytes is made, when enough bodies
// were let go since the last collection (see collect). One caller
// collects at a time; the others wait for it, so that none makes its
// buffer beside the garbage the collection is about to free.
func (b *bodyBudget) reclaim(n int64) {
	if n < 1<<20 || b.freed.Load() < b.reclaimAt() {
		return
	}
	b.collecting.Lock()
	defer b.collecting.Unlock()
	if b.freed.Load() < b.reclaimAt() {
		return // collected while this one waited
	}
	b.freed.Store(0)
	runtime.GC()
}

// BodyBudget is the state of the request-body budget, for /metrics and
// /api/health.
type BodyBudget struct {
	Budget  int64  // bytes, in total
	PerKey  int64  // bytes, per key
	InUse   int64  // bytes counted now
	Peak    int64  // the most counted at once since start
	Refused uint64 // requests answered 503 for want of room
}

// BodyBudget returns the request-body budget's state.
func (g *Gateway) BodyBudget() BodyBudget {
	b := g.bodies
	b.mu.Lock()
	used := b.used
	b.mu.Unlock()
	return BodyBudget{Budget: b.total, PerKey: b.perKey, InUse: used, Peak: b.peak.Load(), Refused: b.refused.Load()}
}
