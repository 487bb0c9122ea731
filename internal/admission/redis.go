package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The shared backend keeps every counter in Redis, so that the replicas
// naming one Redis admit together what one limit says. A request's
// admission is at most one script run (EVALSHA; none when leases of its
// rates cover it, see lease): it reads and advances all of the
// request's counters atomically, on Redis's clock (TIME), so replicas'
// clocks need not agree. Its end (a stream released, tokens corrected) is
// a second script run, in the background after the response ended.
//
// Every key carries the hash tag {ttfx-admission} so that a Redis Cluster
// keeps them in one slot, as a script's keys must be.
//
// When Redis cannot be reached, each replica falls back to its memory with
// every limit divided by the replicas last seen alive (each replica
// refreshes its heartbeat every HeartbeatEvery): no request fails, and the
// replicas together still admit about what the limit says. The fallback is
// logged and counted (SharedStatus); a heartbeat that reaches Redis again
// ends it, and the replica writes back the streams it holds.

// takeScript: KEYS = the counters, then the replicas' heartbeat set; ARGV =
// replica id, heartbeat lifetime (µs), waited (µs), then per counter: kind
// (c, r), limit, cost, queue (µs), lease wanted (units). Returns
// {admitted, deny index (0-based; -1), wait or retry (µs), full, replicas
// alive, then the lease granted per counter}: every request learns the
// replicas a fallback would divide by. A rate admitted is advanced by its
// cost and, when the lease wanted still leaves at least half of the
// window's budget, by the lease too: the replica has paid for those units
// and may admit them without asking (see lease).
var takeScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local replica = ARGV[1]
local alive = now - tonumber(ARGV[2])
local waited = tonumber(ARGV[3])
local n = #KEYS - 1
local hb = KEYS[#KEYS]
local W = 60000000
local S = 5
for i = 1, n do
  local a = 4 + (i - 1) * S
  if ARGV[a] == 'c' then
    local held = redis.call('HGETALL', KEYS[i])
    local total = 0
    for j = 1, #held, 2 do
      local seen = redis.call('ZSCORE', hb, held[j])
      if held[j] == replica or (seen and tonumber(seen) >= alive) then
        total = total + tonumber(held[j + 1])
      else
        redis.call('HDEL', KEYS[i], held[j])
      end
    end
    if total >= tonumber(ARGV[a + 1]) then
      return {0, i - 1, 0, 1, redis.call('ZCOUNT', hb, alive, '+inf')}
    end
  end
end
local wait = 0
local next = {}
for i = 1, n do
  local a = 4 + (i - 1) * S
  if ARGV[a] == 'r' then
    local limit = tonumber(ARGV[a + 1])
    local cost = tonumber(ARGV[a + 2])
    local period = math.max(math.floor(W / limit), 1)
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    if tat < now then tat = now end
    local w = tat + math.min(cost, limit) * period - W - now
    if w < 0 then w = 0 end
    if w > tonumber(ARGV[a + 3]) - waited then
      return {0, i - 1, w, 0, redis.call('ZCOUNT', hb, alive, '+inf')}
    end
    if w > wait then wait = w end
    next[i] = tat + cost * period
  end
end
local out = {1, -1, wait, 0, redis.call('ZCOUNT', hb, alive, '+inf')}
for i = 1, n do
  local a = 4 + (i - 1) * S
  local granted = 0
  if ARGV[a] == 'c' then
    redis.call('HINCRBY', KEYS[i], replica, 1)
    redis.call('PEXPIRE', KEYS[i], 86400000)
  else
    local lease = tonumber(ARGV[a + 4])
    if lease > 0 then
      local period = math.max(math.floor(W / tonumber(ARGV[a + 1])), 1)
      local after = next[i] + lease * period
      if after - now <= W / 2 then
        next[i] = after
        granted = lease
      end
    end
    redis.call('SET', KEYS[i], string.format('%.0f', next[i]), 'PX', math.floor((next[i] - now) / 1000) + 1000)
  end
  out[5 + i] = granted
end
return out
`)

// endScript: KEYS = the counters; ARGV = replica id, then per counter:
// kind (c, t), limit, token delta. A stream is released; a token rate moves
// by delta × period, never to more than a full budget.
var endScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W = 60000000
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 3
  if ARGV[a] == 'c' then
    if redis.call('HINCRBY', KEYS[i], ARGV[1], -1) <= 0 then
      redis.call('HDEL', KEYS[i], ARGV[1])
    end
  else
    local period = math.max(math.floor(W / tonumber(ARGV[a + 1])), 1)
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0') + tonumber(ARGV[a + 2]) * period
    if tat < now - W then tat = now - W end
    if tat > now then
      redis.call('SET', KEYS[i], string.format('%.0f', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
    else
      redis.call('DEL', KEYS[i])
    end
  end
end
return 1
`)

// heartbeatScript: KEYS = the heartbeat set; ARGV = replica id, lifetime
// (µs). Notes the replica alive, forgets those not seen within the
// lifetime, and returns how many are alive.
var heartbeatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], 86400000)
return redis.call('ZCARD', KEYS[1])
`)

const keyPrefix = "ttfx:{ttfx-admission}:"

// HeartbeatEvery is how often a replica tells Redis it is alive; one not
// heard from for three of them is no longer counted (its streams are
// forgotten and it is not among the replicas a fallback divides by).
const HeartbeatEvery = time.Second

// requestTimeout bounds a script run on a request's path by default: past
// it the request is admitted by the fallback rather than held.
const requestTimeout = 250 * time.Millisecond

// SharedOptions configure a shared limiter.
type SharedOptions struct {
	Options
	// URL is redis://[user:password@]host:port[/db] or rediss://….
	URL string
	// Password, if set, overrides the URL's.
	Password string
	// Replica names this gateway among the replicas; empty: a random id.
	Replica string
	Log     *slog.Logger
	// Timeout bounds what a request waits for Redis before the fallback
	// decides for it (and the replica uses the fallback until the
	// heartbeat finds Redis again); 0: 250 ms.
	Timeout time.Duration
}

// SharedStatus says how the shared backend fares.
type SharedStatus struct {
	Up        bool   // Redis answers; false: the fallback is in use
	Replicas  int    // replicas alive at the last heartbeat (at least 1)
	Fallbacks uint64 // requests decided by the fallback since the start
	Failures  uint64 // script runs that failed
}

// shared is the Redis backend.
type shared struct {
	rdb      *redis.Client
	timeout  time.Duration // a request's wait for Redis (SharedOptions.Timeout)
	replica  string
	log      *slog.Logger
	fallback *memory // used while Redis is down, limits divided by replicas

	down      atomic.Bool
	replicas  atomic.Int64
	fallbacks atomic.Uint64
	failures  atomic.Uint64

	// mu guards held: the streams this replica holds, by counter id, so
	// that it can write them back when Redis returns.
	mu   sync.Mutex
	held map[string]int

	// leaseMu guards leases: the rate units this replica has paid for in
	// Redis and not yet admitted, by counter id.
	leaseMu sync.Mutex
	leases  map[string]*lease

	ends sync.WaitGroup // background end runs
	stop context.CancelFunc
	done chan struct{}
}

// NewShared returns a limiter whose counters live in Redis at opts.URL.
// It does not wait for Redis: until it answers, the fallback decides.
// Close stops its heartbeat.
func NewShared(rules []Rule, opts SharedOptions) (*Limiter, error) {
	l, err := New(rules, opts.Options)
	if err != nil {
		return nil, err
	}
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("limits.shared: %w", err)
	}
	if opts.Password != "" {
		ro.Password = opts.Password
	}
	// Short timeouts and no retries: a Redis that is slow or gone must
	// cost a request at most its timeout, after which the fallback
	// decides for it until the heartbeat finds Redis again.
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = requestTimeout
	}
	ioTimeout := timeout * 4 / 5
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = ioTimeout, ioTimeout, ioTimeout
	ro.MaxRetries = -1
	ro.PoolTimeout = timeout
	s := &shared{rdb: redis.NewClient(ro), replica: opts.Replica, log: opts.Log, timeout: timeout, held: map[string]int{}, leases: map[string]*lease{},
		done: make(chan struct{})}
	if s.replica == "" {
		s.replica = randomID()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.replicas.Store(1)
	s.fallback = newMemory()
	s.fallback.share = func() int { return int(s.replicas.Load()) }
	s.fallback.count = func(id string) int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.held[id]
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.heartbeat(ctx) // the first, now: the replicas are known before any request
	go s.beat(ctx)
	l.back = s
	l.closer = s.close
	l.status = s.status
	return l, nil
}

func randomID() string {
	return strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatUint(uint64(time.Now().UnixNano()*2654435761)%1e6, 36)
}

func (s *shared) status() SharedStatus {
	return SharedStatus{Up: !s.down.Load(), Replicas: int(s.replicas.Load()), Fallbacks: s.fallbacks.Load(), Failures: s.failures.Load()}
}

// beat refreshes the heartbeat until ctx ends.
func (s *shared) beat(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.heartbeat(ctx)
		}
	}
}

func (s *shared) heartbeat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	n, err := heartbeatScript.Run(ctx, s.rdb, []string{keyPrefix + "replicas"}, s.replica, int64(3*HeartbeatEvery/time.Microsecond)).Int64()
	if err != nil {
		s.failed(err)
		return
	}
	s.replicas.Store(max(n, 1))
	if s.down.Load() {
		s.recover(ctx)
	}
}

// failed switches to the fallback, saying so once. The leases are
// dropped: their units stay paid in Redis, unused (never more admitted).
func (s *shared) failed(err error) {
	s.failures.Add(1)
	s.leaseMu.Lock()
	clear(s.leases)
	s.leaseMu.Unlock()
	if !s.down.Swap(true) {
		s.log.Warn("admission: Redis (limits.shared) cannot be reached; each limit is divided among the replicas last seen until it answers again",
			"replicas", s.replicas.Load(), "err", err)
	}
}

// recover writes the streams this replica holds back to Redis (its own
// field of each counter), then leaves the fallback.
func (s *shared) recover(ctx context.Context) {
	s.mu.Lock()
	held := make(map[string]int, len(s.held))
	for id, n := range s.held {
		held[id] = n
	}
	s.mu.Unlock()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, n := range held {
			p.HSet(ctx, keyPrefix+id, s.replica, n)
		}
		return nil
	})
	if err != nil {
		s.failures.Add(1)
		return
	}
	s.down.Store(false)
	s.log.Info("admission: Redis (limits.shared) answers again; limits are shared", "replicas", s.replicas.Load())
}

func (s *shared) close() {
	s.stop()
	<-s.done
	s.ends.Wait()
	s.rdb.Close()
}

func (s *shared) hold(cs []charge, d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range cs {
		if cs[i].kind == KindConcurrent {
			if n := s.held[cs[i].id] + d; n > 0 {
				s.held[cs[i].id] = n
			} else {
				delete(s.held, cs[i].id)
			}
		}
	}
}

func (s *shared) take(ctx context.Context, now time.Time, cs []charge, waited time.Duration) (time.Duration, int, time.Duration, bool, <-chan struct{}) {
	began := time.Now()
	if !s.down.Load() {
		if s.takeLeased(now, cs) {
			return 0, -1, 0, false, nil
		}
		keys := make([]string, 0, len(cs)+1)
		args := make([]any, 0, 3+5*len(cs))
		args = append(args, s.replica, int64(3*HeartbeatEvery/time.Microsecond), int64(waited/time.Microsecond))
		want := s.leaseAsk(now, cs)
		for i := range cs {
			c := &cs[i]
			keys = append(keys, keyPrefix+c.id)
			kind := "r"
			if c.kind == KindConcurrent {
				kind = "c"
			}
			args = append(args, kind, c.limit, c.cost, int64(c.queue/time.Microsecond), want[i])
		}
		keys = append(keys, keyPrefix+"replicas")
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		r, err := takeScript.Run(rctx, s.rdb, keys, args...).Int64Slice()
		cancel()
		if err == nil && len(r) >= 5 {
			s.replicas.Store(max(r[4], 1))
			wait := time.Duration(r[2]) * time.Microsecond
			if r[0] == 1 {
				s.hold(cs, 1)
				if len(r) == 5+len(cs) {
					s.leaseGot(now, cs, r[5:])
				}
				return wait, -1, 0, false, nil
			}
			// A queued request polls a shared concurrency limit
			// (another replica's release is not signalled here).
			return 0, int(r[1]), wait, r[3] == 1, nil
		}
		if ctx.Err() != nil {
			// The client left: not Redis's fault.
			return 0, 0, 0, false, nil
		}
		if err == nil {
			err = errors.New("unexpected script reply")
		}
		s.failed(err)
	}
	s.fallbacks.Add(1)
	// now moved on while Redis was tried: a stale now, behind the rate's
	// time that requests decided since have advanced, would refuse what
	// the limit allows.
	now = now.Add(time.Since(began))
	wait, deny, retry, full, wake := s.fallback.take(ctx, now, cs, waited)
	if deny < 0 {
		s.hold(cs, 1)
	}
	return wait, deny, retry, full, wake
}

func (s *shared) end(now time.Time, cs []charge, delta int) {
	s.hold(cs, -1)
	// The fallback's token rates follow the correction too (its streams
	// are s.held), and a request queued on it is woken.
	s.fallback.end(now, cs, delta)
	if s.down.Load() {
		return
	}
	local := make([]bool, len(cs))
	if delta > 0 {
		local = s.leaseCorrect(now, cs, delta)
	}
	keys := make([]string, 0, len(cs))
	args := []any{s.replica}
	for i := range cs {
		c := &cs[i]
		switch {
		case c.kind == KindConcurrent:
			keys = append(keys, keyPrefix+c.id)
			args = append(args, "c", c.limit, 0)
		case c.kind == KindTokens && delta != 0 && !local[i]:
			keys = append(keys, keyPrefix+c.id)
			args = append(args, "t", c.limit, delta)
		}
	}
	if len(keys) == 0 {
		return
	}
	s.ends.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := endScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
			s.failed(err)
		}
	})
}

// Leases: a local share of a rate paid in advance, so that a replica far
// from a limit admits without a round trip. When a request goes to Redis,
// each of its rates may also take a lease of leaseUnits (a 1/leaseShare of
// the limit divided by the replicas alive), granted by the script only
// while at least half of the window's budget is left after it. The replica
// then admits, from memory, requests whose every limit is a rate covered by
// a live lease, spending it.
//
// Redis counts a leased unit as admitted when it is paid, as if its request
// had come then; the request comes later, within leaseFor. So from any
// moment, the replicas together never admit more by a time than the units
// paid by then, which the rate allows: the limit plus what regenerated
// (TestSharedLeases). A window starting mid-way may see up to leaseFor's
// worth of the rate paid before it (a 1/60 of the limit). Units a lease
// leaves unused expire with it and are never given back (a give-back could
// credit the rate more than was paid, after an idle spell): the replicas
// admit less by at most the leases held, a 1/leaseShare of the limit. A
// request held to a concurrency limit always asks Redis (its stream is
// counted there), and a fallback drops the leases.

// lease is a rate's units paid in Redis and not yet admitted.
type lease struct {
	units int64
	until time.Time
}

const (
	leaseShare = 16
	leaseFor   = time.Second
)

// leaseUnits is the lease a rate asks for, 0 when the limit is too small
// for one to be worth it.
func (s *shared) leaseUnits(c *charge) int64 {
	share := leaseShare * max(s.replicas.Load(), 1)
	// The script's period is whole µs, at least 1: past 60 million a
	// minute a unit weighs more than its share of the window, and the
	// lease is bounded by its share of the window instead.
	window := int64(Window / time.Microsecond)
	period := max(window/int64(max(c.limit, 1)), 1)
	n := min(int64(c.limit)/share, window/share/period)
	if n < 2 {
		return 0
	}
	return n
}

// takeLeased admits cs from the replica's leases, and reports whether it
// did: every charge must be a rate with a live lease that holds its cost.
func (s *shared) takeLeased(now time.Time, cs []charge) bool {
	for i := range cs {
		if cs[i].kind == KindConcurrent {
			return false
		}
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	for i := range cs {
		l := s.leases[cs[i].id]
		if l == nil || !now.Before(l.until) || l.units < int64(cs[i].cost) {
			return false
		}
	}
	for i := range cs {
		s.leases[cs[i].id].units -= int64(cs[i].cost)
	}
	return true
}

// leaseAsk returns, per charge, the lease to ask for: none while a live
// one holds half a lease. An expired lease is forgotten.
func (s *shared) leaseAsk(now time.Time, cs []charge) []int64 {
	want := make([]int64, len(cs))
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	for i := range cs {
		c := &cs[i]
		if c.kind == KindConcurrent {
			continue
		}
		n := s.leaseUnits(c)
		l := s.leases[c.id]
		if l != nil && !now.Before(l.until) {
			delete(s.leases, c.id)
			l = nil
		}
		if n > 0 && (l == nil || l.units < n/2) {
			want[i] = n
		}
	}
	return want
}

// leaseGot keeps the leases the script granted (now is before they were
// paid).
func (s *shared) leaseGot(now time.Time, cs []charge, granted []int64) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	for i, g := range granted {
		if g <= 0 {
			continue
		}
		l := s.leases[cs[i].id]
		if l == nil || !now.Before(l.until) {
			s.leases[cs[i].id] = &lease{units: g, until: now.Add(leaseFor)}
			continue
		}
		// Added to a live lease, the new units expire with it: no unit
		// outlives leaseFor from its payment.
		l.units += g
	}
}

// leaseCorrect takes the tokens an answer used beyond its estimate (delta
// > 0) from the live leases of cs's token rates that hold them (paid
// already), and reports which. The others, and every refund, are corrected
// in Redis: a refund put into a lease could credit a rate that is already
// whole, which Redis's correction never does.
func (s *shared) leaseCorrect(now time.Time, cs []charge, delta int) []bool {
	local := make([]bool, len(cs))
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	for i := range cs {
		if cs[i].kind != KindTokens {
			continue
		}
		l := s.leases[cs[i].id]
		if l == nil || !now.Before(l.until) || l.units < int64(delta) {
			continue
		}
		l.units -= int64(delta)
		local[i] = true
	}
	return local
}
