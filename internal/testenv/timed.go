package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Attempts is how many times Timed runs a measurement before its last
// attempt's failures stand.
const Attempts = 3

// Timed runs attempt, a measurement on the real clock with its checks, up to
// Attempts times, and fails t only if the last attempt fails too.
//
// It is for checks of durations a loaded machine can stretch: a delay the
// simulator was asked for arrives late when the scheduler is busy, never
// early, and a burst of load elsewhere (other packages' tests, a build)
// can outlast one measurement but rarely three in a row. A check that is
// wrong every time still fails: the last attempt runs on t itself. Each
// missed attempt is logged with what it saw, so a test that only passes on
// its second try is visible in -v output.
//
// attempt must set up what it measures afresh each time (its own requests,
// counters and records), use t only through the testing.TB it is given, and
// not call t.Run or t.Parallel.
func Timed(t testing.TB, attempt func(t testing.TB)) {
	t.Helper()
	for i := 1; i < Attempts; i++ {
		try := &tryTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			attempt(try)
		}()
		<-done
		if t.Skipped() || !try.Failed() {
			return
		}
		t.Logf("attempt %d of %d missed, measuring again (timing can slip on a loaded machine):\n%s", i, Attempts, try.report())
	}
	attempt(t)
}

// tryTB is the testing.TB of an attempt that may be retried: it keeps the
// failures to itself instead of failing the test. Everything else (logs,
// cleanups, temporary directories, skips) goes to the test.
type tryTB struct {
	testing.TB
	mu     sync.Mutex // guards failed and msgs: attempts report from their own goroutines
	failed bool
	msgs   []string
}

func (t *tryTB) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
	if msg != "" {
		t.msgs = append(t.msgs, msg)
	}
}

func (t *tryTB) report() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.msgs) == 0 {
		return "\t(failed without a message)"
	}
	return "\t" + strings.Join(t.msgs, "\n\t")
}

func (t *tryTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *tryTB) Fail()                             { t.fail("") }
func (t *tryTB) Error(args ...any)                 { t.fail(fmt.Sprintln(args...)) }
func (t *tryTB) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }
func (t *tryTB) FailNow()                          { t.fail(""); runtime.Goexit() }
func (t *tryTB) Fatal(args ...any)                 { t.fail(fmt.Sprintln(args...)); runtime.Goexit() }
func (t *tryTB) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (t *tryTB) Helper() {}

// WatchTimers starts (once per process) a watch on how late this process's
// timers fire: a goroutine sleeps a short step again and again and keeps
// the longest overshoot of each tenth of a second for the last two
// minutes. A loaded machine delays every timer and wake-up alike (the
// simulator's, the gateway's, the client's), so a check of a duration can
// allow what the same run observed — Slip over the measurement's span — on
// top of its own tolerance, instead of a guess wide enough for any machine.
// Call it before the measurement starts.
func WatchTimers() {
	watch.once.Do(func() { go watch.run() })
}

// Slip is the longest any timer of this process was seen to fire late
// during the last d (and the tenth of a second before it).
func Slip(d time.Duration) time.Duration {
	return watch.slip(d, time.Since(watch.epoch))
}

const (
	// watchStep is how often the watch looks: often enough to see a burst
	// of load that delays a measurement of tens of milliseconds, rarely
	// enough to cost nothing (200 wake-ups a second).
	watchStep   = 5 * time.Millisecond
	watchBucket = 100 * time.Millisecond
)

// timerWatch keeps, for each tenth of a second of the last two minutes,
// the longest a timer of this process fired late.
type timerWatch struct {
	once  sync.Once
	epoch time.Time
	mu    sync.Mutex          // guards at and max
	at    [1200]int64         // the bucket number each slot holds
	max   [1200]time.Duration // the longest overshoot seen in that bucket
}

var watch = &timerWatch{epoch: time.Now()}

func (w *timerWatch) run() {
	tm := time.NewTimer(watchStep)
	for {
		due := time.Now().Add(watchStep)
		tm.Reset(watchStep)
		<-tm.C
		// Lateness of the timer and of this goroutine's wake-up alike.
		over := time.Since(due)
		if over <= 0 {
			continue
		}
		w.record(over, time.Since(w.epoch))
	}
}

// record notes an overshoot seen at (since the epoch).
func (w *timerWatch) record(over, at time.Duration) {
	b := int64(at / watchBucket)
	slot := b % int64(len(w.max))
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at[slot] != b {
		w.at[slot], w.max[slot] = b, 0
	}
	w.max[slot] = max(w.max[slot], over)
}

// slip is the longest overshoot of the buckets from now−d to now.
func (w *timerWatch) slip(d, now time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := int64(now / watchBucket)
	n := min(int64(d/watchBucket)+2, int64(len(w.max)))
	var worst time.Duration
	for b := last; b > last-n && b >= 0; b-- {
		if slot := b % int64(len(w.max)); w.at[slot] == b {
			worst = max(worst, w.max[slot])
		}
	}
	return worst
}
