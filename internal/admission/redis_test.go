package admission

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttfx/ttfx/internal/testenv"
)

// sharedLimiter is a shared limiter whose requests wait up to 10 s for
// Redis: the tests count what Redis admitted, and on a loaded machine a
// script run can pass the default 250 ms, after which the replica's
// fallback share decides beside it (by design, as when Redis is down; a
// stopped Redis refuses connections at once, so TestSharedRedisDown still
// sees its fallback without waiting).
func sharedLimiter(t *testing.T, r *testenv.Redis, replica string, rules ...Rule) *Limiter {
	t.Helper()
	l, err := NewShared(rules, SharedOptions{URL: r.URL(), Replica: replica, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// noFallback fails the test if a limiter let its fallback decide: the
// counts the test checks are then not what Redis admitted.
func noFallback(t *testing.T, ls ...*Limiter) {
	t.Helper()
	for i, l := range ls {
		if st, ok := l.Shared(); !ok || st.Fallbacks != 0 {
			t.Errorf("replica %d: %+v, want Redis to decide every request", i, st)
		}
	}
}

// burst sends n requests at once spread over ls and returns how many were
// admitted.
func burst(ls []*Limiter, q Request, n int) int {
	var ok atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if t, d := ls[i%len(ls)].Admit(context.Background(), q); d == nil {
				ok.Add(1)
				t.Done(-1)
			}
		})
	}
	wg.Wait()
	return int(ok.Load())
}

// TestSharedReplicas: two replicas sharing one Redis admit together what
// the limit says (within one request: GCRA lets one more through each
// period that passes during the burst), and a third joining mid-window
// adds nothing to it.
func TestSharedReplicas(t *testing.T) {
	r := testenv.StartRedis(t)
	rule := Rule{Scope: ScopeKey, Match: "k", RequestsPerMinute: 20}
	a, b := sharedLimiter(t, r, "a", rule), sharedLimiter(t, r, "b", rule)
	q := Request{Key: "k"}
	start := time.Now()
	got := burst([]*Limiter{a, b}, q, 60)
	regen := int(time.Since(start) / (3 * time.Second)) // one per 3 s
	if got < 20 || got > 20+regen+1 {
		t.Errorf("two replicas admitted %d of 60, want the limit 20 (+%d regenerated, +1)", got, regen)
	}
	c := sharedLimiter(t, r, "c", rule)
	more := burst([]*Limiter{a, b, c}, q, 30)
	regen = int(time.Since(start) / (3 * time.Second))
	if got+more > 20+regen+1 {
		t.Errorf("with a third replica %d more admitted; %d in all, want at most 20 (+%d regenerated, +1)", more, got+more, regen)
	}
	if st, ok := c.Shared(); !ok || !st.Up || st.Replicas != 3 {
		t.Errorf("third replica's status %+v", st)
	}
	noFallback(t, a, b, c)
}

// TestSharedLeases: far from a limit, a replica admits from a lease it
// paid for in Redis, without a round trip; near it, every admission asks
// Redis; two replicas, then a third, still admit together no more than the
// limit plus what regenerated (within one), and no less than the limit
// minus the leases (a 1/16 of it).
func TestSharedLeases(t *testing.T) {
	r := testenv.StartRedis(t)
	const limit = 1200 // a unit every 50 ms; leases of 1200 / (16 × 2) = 37
	rule := Rule{Scope: ScopeKey, Match: "k", RequestsPerMinute: limit}
	a, b := sharedLimiter(t, r, "a", rule), sharedLimiter(t, r, "b", rule)
	ha, hb := &scriptHook{}, &scriptHook{}
	a.back.(*shared).rdb.AddHook(ha)
	b.back.(*shared).rdb.AddHook(hb)
	q := Request{Key: "k"}
	start := time.Now()
	admitted := 0
	admit := func(ls []*Limiter, n int) {
		for i := range n {
			if tk, d := ls[i%len(ls)].Admit(context.Background(), q); d == nil {
				admitted++
				tk.Done(-1)
			}
		}
	}

	// A quarter of the limit: about one script run per lease.
	admit([]*Limiter{a, b}, limit/4)
	takes := ha.take.Load() + hb.take.Load()
	if admitted != limit/4 || takes > limit/4/10 {
		t.Fatalf("far from the limit: %d of %d admitted with %d script runs, want all with at most %d", admitted, limit/4, takes, limit/4/10)
	}
	// A lease spent locally sends nothing.
	ha.take.Store(0)
	for {
		l := a.back.(*shared)
		l.leaseMu.Lock()
		ls := l.leases[a.charges(q)[0].id]
		units := int64(0)
		if ls != nil && time.Now().Before(ls.until) {
			units = ls.units
		}
		l.leaseMu.Unlock()
		if units >= 5 {
			admit([]*Limiter{a}, 5)
			if n := ha.take.Load(); n != 0 {
				t.Fatalf("5 admissions covered by a lease of %d sent %d script runs", units, n)
			}
			break
		}
		admit([]*Limiter{a}, 1) // a fresh lease
		ha.take.Store(0)
	}

	// Past the limit: every replica is refused but for what regenerates.
	admit([]*Limiter{a, b}, 2*limit)
	regen := int(time.Since(start) / (time.Minute / limit))
	if admitted > limit+regen+1 || admitted < limit-limit/16 {
		t.Errorf("two replicas admitted %d, want the limit %d (+%d regenerated, +1; −%d leases)", admitted, limit, regen, limit/16)
	}
	c := sharedLimiter(t, r, "c", rule)
	admit([]*Limiter{a, b, c}, limit/2)
	regen = int(time.Since(start) / (time.Minute / limit))
	if admitted > limit+regen+1 {
		t.Errorf("with a third replica %d admitted in all, want at most %d (+%d regenerated, +1)", admitted, limit, regen)
	}
	noFallback(t, a, b, c)
	t.Logf("admitted %d of a limit of %d (+%d regenerated in %v); script runs: a %d, b %d",
		admitted, limit, regen, time.Since(start).Round(time.Millisecond), ha.take.Load(), hb.take.Load())
}

// TestSharedConcurrent: a concurrency limit holds across replicas, and a
// stream released on one lets the other admit.
func TestSharedConcurrent(t *testing.T) {
	r := testenv.StartRedis(t)
	rule := Rule{Scope: ScopeModel, Match: "m*", Concurrent: 3}
	a, b := sharedLimiter(t, r, "a", rule), sharedLimiter(t, r, "b", rule)
	q := Request{Model: "m1"}
	var held []*Ticket
	for i := range 3 {
		tk, d := []*Limiter{a, b}[i%2].Admit(context.Background(), q)
		if d != nil {
			t.Fatalf("stream %d of 3: %+v", i+1, d)
		}
		held = append(held, tk)
	}
	if _, d := b.Admit(context.Background(), q); d == nil || d.Kind != KindConcurrent {
		t.Fatalf("a fourth stream on the other replica: %+v", d)
	}
	held[0].Done(-1) // on a
	// The release runs in the background: it lands within a round trip.
	deadline := time.Now().Add(5 * time.Second)
	for {
		tk, d := b.Admit(context.Background(), q)
		if d == nil {
			tk.Done(-1)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a release on one replica never let the other admit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	held[1].Done(-1)
	held[2].Done(-1)
}

// TestSharedRedisDown: Redis stopped mid-traffic fails no request: each
// replica falls back to its share of the limit (limit ÷ the replicas last
// seen), says so in its status, and shares again once Redis is back.
func TestSharedRedisDown(t *testing.T) {
	r := testenv.StartRedis(t)
	rule := Rule{Scope: ScopeKey, Match: "k", RequestsPerMinute: 20}
	a, b := sharedLimiter(t, r, "a", rule), sharedLimiter(t, r, "b", rule)
	q := Request{Key: "k"}
	if got := burst([]*Limiter{a, b}, q, 10); got != 10 {
		t.Fatalf("before the outage %d of 10 admitted", got)
	}
	r.Stop()
	// Each replica alone, with Redis gone: 20 ÷ 2 replicas = 10 each.
	start := time.Now()
	gotA := burst([]*Limiter{a}, q, 30)
	gotB := burst([]*Limiter{b}, q, 30)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("decisions took %v with Redis down", took)
	}
	if gotA < 10 || gotA > 11 || gotB < 10 || gotB > 11 {
		t.Errorf("with Redis down, replicas admitted %d and %d of 30 each; want their share, 10", gotA, gotB)
	}
	st, _ := a.Shared()
	if st.Up || st.Replicas != 2 || st.Fallbacks == 0 || st.Failures == 0 {
		t.Errorf("status during the outage %+v", st)
	}
	r.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sa, _ := a.Shared()
		sb, _ := b.Shared()
		if sa.Up && sb.Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not shared again 10 s after Redis returned: %+v %+v", sa, sb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Redis came back empty: the full limit, shared, once more.
	if got := burst([]*Limiter{a, b}, q, 60); got < 20 || got > 22 {
		t.Errorf("after recovery %d of 60 admitted, want the shared limit 20", got)
	}
}

// BenchmarkAdmitRedis is one request's admission against a local
// redis-server with three limits far from reached, and its end: one
// script run on the request's path, and one in the background after it.
// It reports the commands each sends (take_cmds/op, end_cmds/op; a
// command is a round trip: the client pipelines nothing here).
func BenchmarkAdmitRedis(b *testing.B) {
	r := testenv.StartRedis(b)
	l, err := NewShared([]Rule{
		{Scope: ScopeKey, Match: "*", RequestsPerMinute: 1 << 30},
		{Scope: ScopeGroup, Match: "team", TokensPerMinute: 1 << 30},
		{Scope: ScopeModel, Match: "gpt-*", Concurrent: 1 << 20},
	}, SharedOptions{URL: r.URL(), Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	q := Request{Key: "alice", Group: "team", Model: "gpt-4o", Tokens: 500}
	t, _ := l.Admit(ctx, q) // loads the scripts once
	t.Done(700)
	l.back.(*shared).ends.Wait()
	h := &scriptHook{}
	l.back.(*shared).rdb.AddHook(h)
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		t, d := l.Admit(ctx, q)
		if d != nil {
			b.Fatal(d)
		}
		t.Done(700)
	}
	b.StopTimer()
	l.back.(*shared).ends.Wait()
	reportCPU(b, cpu)
	if st, _ := l.Shared(); !st.Up || st.Fallbacks > 0 {
		b.Fatalf("the benchmark fell back: %+v", st)
	}
	b.ReportMetric(float64(h.take.Load())/float64(b.N), "take_cmds/op")
	b.ReportMetric(float64(h.end.Load())/float64(b.N), "end_cmds/op")
	b.ReportMetric(float64(h.other.Load())/float64(b.N), "other_cmds/op")
}

// BenchmarkAdmitRedisLeased is BenchmarkAdmitRedis with rate limits only
// (a key's requests, a group's tokens), far from reached: the replica
// admits from its leases, and asks Redis about once a lease.
func BenchmarkAdmitRedisLeased(b *testing.B) {
	r := testenv.StartRedis(b)
	// Limits a run of a few seconds stays far from: the script's rates
	// have a whole µs as their least period (60 million a minute).
	l, err := NewShared([]Rule{
		{Scope: ScopeKey, Match: "*", RequestsPerMinute: 1 << 22},
		{Scope: ScopeGroup, Match: "team", TokensPerMinute: 1 << 25},
	}, SharedOptions{URL: r.URL(), Replica: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	q := Request{Key: "alice", Group: "team", Model: "gpt-4o", Tokens: 5}
	t, _ := l.Admit(ctx, q)
	t.Done(7)
	l.back.(*shared).ends.Wait()
	h := &scriptHook{}
	l.back.(*shared).rdb.AddHook(h)
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		t, d := l.Admit(ctx, q)
		if d != nil {
			b.Fatal(d)
		}
		t.Done(7) // 2 more than estimated: taken from the lease
	}
	b.StopTimer()
	l.back.(*shared).ends.Wait()
	reportCPU(b, cpu)
	if st, _ := l.Shared(); !st.Up || st.Fallbacks > 0 {
		b.Fatalf("the benchmark fell back: %+v", st)
	}
	b.ReportMetric(float64(h.take.Load())/float64(b.N), "take_cmds/op")
	b.ReportMetric(float64(h.end.Load())/float64(b.N), "end_cmds/op")
}

// scriptHook counts the commands a client sends by script: the
// admission's take, its end, anything else (heartbeats, script loads).
type scriptHook struct{ take, end, other atomic.Int64 }

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		switch {
		case len(args) > 1 && cmd.Name() == "evalsha" && args[1] == takeScript.Hash():
			h.take.Add(1)
		case len(args) > 1 && cmd.Name() == "evalsha" && args[1] == endScript.Hash():
			h.end.Add(1)
		default:
			h.other.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.other.Add(1)
		return next(ctx, cmds)
	}
}

// countHook counts the commands a client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// TestSharedRoundTrips: an admission against several limits is one round
// trip to Redis (one EVALSHA); its end is one more, after the response.
func TestSharedRoundTrips(t *testing.T) {
	r := testenv.StartRedis(t)
	l := sharedLimiter(t, r, "a",
		Rule{Scope: ScopeKey, Match: "*", RequestsPerMinute: 1000},
		Rule{Scope: ScopeGroup, Match: "g", TokensPerMinute: 100000, Concurrent: 10})
	h := &countHook{}
	l.back.(*shared).rdb.AddHook(h)
	q := Request{Key: "k", Group: "g", Tokens: 100}
	tk, d := l.Admit(context.Background(), q) // loads the script (NOSCRIPT, then EVAL) once
	if d != nil {
		t.Fatal(d)
	}
	tk.Done(150)
	l.back.(*shared).ends.Wait()
	h.n.Store(0)
	for range 10 {
		tk, d := l.Admit(context.Background(), q)
		if d != nil {
			t.Fatal(d)
		}
		if n := h.n.Load(); n != 1 {
			t.Fatalf("%d commands for one admission, want 1", n)
		}
		tk.Done(150)
		l.back.(*shared).ends.Wait()
		if n := h.n.Load(); n != 2 {
			t.Fatalf("%d commands for an admission and its end, want 2", n)
		}
		h.n.Store(0)
	}
}
