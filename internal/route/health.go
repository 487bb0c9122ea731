package route

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Live channel health (issue 13): per channel and model, the recent
// attempts' upstream_headers_ms, first response and first text, their
// error and timeout rates, inflight, and the outlier-ejection state.
//
// The hot path writes a finished attempt into fixed rings with atomic
// stores: no lock is shared between streams and nothing is done per event.
// Percentiles are computed from the rings by whoever reads them (the
// latency strategy, the hedge delay, the admin API), at most once per
// snapshotEvery per channel and model; readers between two computations
// share the last snapshot.

// ringSize is the number of recent samples kept per field and of recent
// attempts kept per channel and model.
const ringSize = 128

// window is how old a sample may be and still count: health describes the
// last few minutes, not the day.
const window = 5 * time.Minute

// snapshotEvery bounds how often a channel's percentiles are recomputed.
const snapshotEvery = 100 * time.Millisecond

// Field names a latency field of the health.
type Field uint8

// The latency fields kept per channel and model. Each is measured from the
// attempt's own upstream start (t1): a fallback channel is not charged with
// the time an earlier attempt lost.
const (
	FieldHeaders       Field = iota // t2 − t1: upstream_headers_ms
	FieldFirstResponse              // t4 − t1
	FieldFirstText                  // t5 − t1
	numFields
)

// Kind is how an attempt ended, for health.
type Kind uint8

const (
	KindOK           Kind = iota + 1 // an answer (2xx with output or a clean end; 4xx other than 429 also proves the channel alive)
	KindConnect                      // connection failed or the stream broke before output
	KindHTTP5xx                      // 5xx status
	KindHTTP4xx                      // 4xx other than 429: counted as an error, but the channel answered
	KindTimeout                      // header or first-output timeout
	KindRateLimit                    // 429: neither a failure of the channel nor a success
	KindCancelled                    // the client left or the attempt lost a hedge race: says nothing about the channel
	KindOtherTimeout                 // idle or total timeout after output began
	KindStreamError                  // failed after output began (error event, reset, truncation)
)

// ejectable reports whether k counts toward outlier ejection (Envoy's
// consecutive_5xx and gateway failures, plus the two timeouts before output).
func (k Kind) ejectable() bool { return k == KindConnect || k == KindHTTP5xx || k == KindTimeout }

// Result is one finished attempt as health sees it. Durations are from the
// attempt's upstream start; a zero Has* means the mark did not happen.
type Result struct {
	Kind   Kind
	Stream bool // latency samples are taken from streaming requests only

	Headers, FirstResponse, FirstText          time.Duration
	HasHeaders, HasFirstResponse, HasFirstText bool
	// Censored marks a hedge race loser cancelled before its first
	// output: FirstResponse (and FirstText) are then the time it was given,
	// a lower bound. It is kept apart from the samples (FieldStats never
	// shows a lower bound as a percentile) and counted; the ranking still
	// takes it, so that a channel that always loses ranks at least as slow
	// as the races it lost.
	Censored bool
}

// samples is a ring of recent durations: each slot packs the sample's time
// (seconds since the router's base, plus one, so 0 is an empty slot) in its
// high 32 bits and the value in microseconds (clamped) in its low 32 bits.
type samples struct {
	next atomic.Uint64
	ring [ringSize]atomic.Uint64
}

// recent appends the values (ms) of the samples at or after oldest to dst.
func (s *samples) recent(dst []float64, oldest uint32) []float64 {
	for i := range s.ring {
		v := s.ring[i].Load()
		if v == 0 || uint32(v>>32) < oldest {
			continue
		}
		dst = append(dst, float64(uint32(v))/1000)
	}
	return dst
}

func (s *samples) add(at uint32, d time.Duration) {
	s.put(at, uint32(min(max(d.Microseconds(), 0), math.MaxUint32)))
}

func (s *samples) put(at, v uint32) {
	i := s.next.Add(1) - 1
	s.ring[i%ringSize].Store(uint64(at)<<32 | uint64(v))
}

// Health is the live health of one channel for one of its model patterns
// (and route) and one client group (see Router.health). It is created by
// the router on first use and lives as long as the router.
type Health struct {
	Channel *Channel
	Model   string // the channel's configured pattern, not a client's name
	Group   string // the clients' group ("" for keys without one)
	// routeName names the route its requests took when it was made; a
	// reload points route at the route of that name (or at none).
	routeName string

	r        *Router
	route    atomic.Pointer[Route] // the route of Model in the current table; nil: the default (no ejection)
	inflight atomic.Int64
	lat      [numFields]samples
	cens     [numFields]samples // censored lower bounds (Result.Censored)
	// attempts packs each finished attempt: time as in samples, Kind in
	// the low byte.
	attempts samples

	// Ejection: ejected and untilA are the lock-free fast paths of admit
	// (ejected is false for nearly every request; untilA skips an ejected
	// channel until its back-off ends); mu guards the rest and is taken
	// only when an attempt fails, when a success follows failures, and
	// while the channel is due for or under a probe.
	ejected    atomic.Bool
	failStreak atomic.Int32 // consecutive ejectable failures, mirrored for the success path
	ejections  atomic.Uint64
	untilA     atomic.Int64 // until, for the lock-free check of admit

	mu          sync.Mutex
	state       ejectState
	until       time.Duration // ejection ends (since the router's base)
	multiplier  int           // ejections in a row: the next back-off is multiplier × base
	lastHealthy time.Duration // when the channel was last readmitted or healthy
	probeSince  time.Duration // when the current probe was handed out
	reason      string        // why the last ejection happened

	snapMu sync.Mutex // held only by the goroutine computing a snapshot
	snap   atomic.Pointer[healthSnap]
}

type ejectState uint8

const (
	stateHealthy ejectState = iota
	stateEjected            // skipped until `until`
	stateProbing            // one request is trying it
)

func (s ejectState) String() string {
	return [...]string{"healthy", "ejected", "probing"}[s]
}

// healthSnap is the computed percentiles of one Health.
type healthSnap struct {
	at     time.Duration // when computed
	seq    uint64        // attempts.next at the time
	fields [numFields]FieldStats
	counts Counts
}

// FieldStats are the recent percentiles of one latency field, in
// milliseconds; Count 0 means no sample (and the percentiles are 0).
type FieldStats struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	// Censored counts the hedge race losers cancelled before the mark:
	// their times are lower bounds, left out of Count and the percentiles.
	Censored int `json:"censored"`

	sorted []float64 // the samples, sorted, for other percentiles
	ranked []float64 // the samples and the lower bounds, sorted: what the ranking reads
}

// Quantile returns the q-quantile of the samples in ms, and whether
// there were any.
func (f FieldStats) Quantile(q float64) (float64, bool) {
	if len(f.sorted) == 0 {
		return 0, false
	}
	return quantile(f.sorted, q), true
}

// Counts are the recent attempts by how they ended.
type Counts struct {
	Attempts  int `json:"attempts"`  // finished attempts in the window, cancelled ones included
	Errors    int `json:"errors"`    // any failure: connect, 5xx, timeouts, 429, stream errors
	Timeouts  int `json:"timeouts"`  // header, first-output, idle and total timeouts
	Cancelled int `json:"cancelled"` // client gone or hedge race lost
}

// Acquire counts an attempt on the channel for this model (and on the
// channel itself) and returns the channel's new count.
func (h *Health) Acquire() int64 {
	h.inflight.Add(1)
	return h.Channel.Acquire()
}

// Release ends what Acquire counted.
func (h *Health) Release() {
	h.inflight.Add(-1)
	h.Channel.Release()
}

// Inflight returns the attempts on the channel for this model now.
func (h *Health) Inflight() int64 { return h.inflight.Load() }

// Observe records a finished attempt: a few atomic stores, and the
// ejection lock only on failures (or the first success after them).
func (h *Health) Observe(res Result) {
	now := h.r.since()
	at := uint32(now/time.Second) + 1
	h.attempts.put(at, uint32(res.Kind))
	if res.Stream && (res.Kind == KindOK || res.Censored) {
		if res.HasHeaders {
			h.lat[FieldHeaders].add(at, res.Headers) // headers came: a real sample
		}
		lat := &h.lat
		if res.Censored {
			lat = &h.cens
		}
		if res.HasFirstResponse {
			lat[FieldFirstResponse].add(at, res.FirstResponse)
		}
		if res.HasFirstText {
			lat[FieldFirstText].add(at, res.FirstText)
		}
	}
	switch {
	case res.Kind.ejectable():
		h.failure(now, res.Kind)
	case res.Kind == KindCancelled:
		h.neutral()
	default:
		if h.failStreak.Load() != 0 || h.ejected.Load() {
			h.success(now)
		}
	}
}

// Output records an attempt's first output as it happens (res.Kind is
// KindOK): its headers and first-response samples, and a success for
// ejection. Observe at the end of the attempt then counts it and adds its
// first text; it must not repeat the samples given here.
func (h *Health) Output(res Result) {
	now := h.r.since()
	at := uint32(now/time.Second) + 1
	if res.Stream {
		if res.HasHeaders {
			h.lat[FieldHeaders].add(at, res.Headers)
		}
		if res.HasFirstResponse {
			h.lat[FieldFirstResponse].add(at, res.FirstResponse)
		}
	}
	if h.failStreak.Load() != 0 || h.ejected.Load() {
		h.success(now)
	}
}

// snapshot returns the recent stats, recomputing them when they are older
// than snapshotEvery (or when wait is set and new attempts came in). One
// caller computes; others meanwhile get the previous snapshot.
func (h *Health) snapshot(fresh bool) *healthSnap {
	now := h.r.since()
	s := h.snap.Load()
	if s != nil && (now-s.at < snapshotEvery || !fresh && s.seq == h.attempts.next.Load() && now-s.at < time.Second) {
		return s
	}
	if !h.snapMu.TryLock() {
		if s != nil {
			return s
		}
		h.snapMu.Lock()
	}
	defer h.snapMu.Unlock()
	if s2 := h.snap.Load(); s2 != s && s2 != nil {
		return s2
	}
	n := &healthSnap{at: now, seq: h.attempts.next.Load()}
	oldest := uint32(0)
	if now > window {
		oldest = uint32((now-window)/time.Second) + 1
	}
	var buf [2 * ringSize]float64
	for f := range numFields {
		vals := h.lat[f].recent(buf[:0], oldest)
		slices.Sort(vals)
		fs := FieldStats{Count: len(vals), sorted: slices.Clone(vals)}
		if len(vals) > 0 {
			fs.P50, fs.P95, fs.P99 = quantile(vals, 0.5), quantile(vals, 0.95), quantile(vals, 0.99)
		}
		fs.ranked = fs.sorted
		if all := h.cens[f].recent(vals, oldest); len(all) > len(vals) {
			fs.Censored = len(all) - len(vals)
			slices.Sort(all)
			fs.ranked = slices.Clone(all)
		}
		n.fields[f] = fs
	}
	for i := range h.attempts.ring {
		v := h.attempts.ring[i].Load()
		if v == 0 || uint32(v>>32) < oldest {
			continue
		}
		n.counts.Attempts++
		switch Kind(uint32(v)) {
		case KindCancelled:
			n.counts.Cancelled++
		case KindTimeout, KindOtherTimeout:
			n.counts.Timeouts++
			n.counts.Errors++
		case KindConnect, KindHTTP5xx, KindHTTP4xx, KindRateLimit, KindStreamError:
			n.counts.Errors++
		}
	}
	h.snap.Store(n)
	return n
}

// quantile is the R-7 quantile of sorted values.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	frac := pos - float64(lo)
	return sorted[lo] + frac*(sorted[lo+1]-sorted[lo])
}

// Latency returns the recent q-quantile of field f for ranking, and
// whether there are at least minSamples samples. Hedge losers' lower bounds
// count here (a channel that always loses ranks at least as slow as the
// races it lost), unlike in FieldStats' percentiles.
func (h *Health) Latency(f Field, q float64, minSamples int) (time.Duration, bool) {
	fs := h.snapshot(false).fields[f]
	if len(fs.ranked) < max(minSamples, 1) {
		return 0, false
	}
	v := quantile(fs.ranked, q)
	return time.Duration(v * float64(time.Millisecond)), true
}
