package testenv

import (
	"strings"
	"testing"
	"time"
)

// TestTimed checks that a measurement which misses now and then passes,
// and that one which misses every time still fails, with its last
// attempt's message.
func TestTimed(t *testing.T) {
	for _, c := range []struct {
		name     string
		misses   int // attempts that fail before one passes
		fatal    bool
		wantRuns int
		wantFail bool
	}{
		{"passes at once", 0, false, 1, false},
		{"passes on the last try", Attempts - 1, false, Attempts, false},
		{"passes after a fatal miss", 1, true, 2, false},
		{"misses every time", Attempts, false, Attempts, true},
		{"fatal every time", Attempts, true, Attempts, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &tryTB{TB: t} // stands for the test: keeps what would fail it
			runs := 0
			attempt := func(t testing.TB) {
				runs++
				if runs <= c.misses {
					if c.fatal {
						t.Fatalf("run %d late", runs)
					}
					t.Errorf("run %d late", runs)
				}
			}
			// Its own goroutine: a fatal last attempt ends it, as it
			// would end the test's.
			done := make(chan struct{})
			go func() {
				defer close(done)
				Timed(rec, attempt)
			}()
			<-done
			if runs != c.wantRuns || rec.Failed() != c.wantFail {
				t.Errorf("%d runs, failed %v; want %d runs, failed %v", runs, rec.Failed(), c.wantRuns, c.wantFail)
			}
			if c.wantFail && !strings.Contains(rec.report(), "run 3 late") {
				t.Errorf("failure %q, want the last attempt's", rec.report())
			}
		})
	}
}

// TestSlip checks that the live watch runs: within a few steps it has
// noted its timers' overshoots (a timer never fires exactly on time), and
// Slip reads them. What Slip makes of given overshoots is TestSlipWindow's.
func TestSlip(t *testing.T) {
	WatchTimers()
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(10 * watchStep)
		now := int64(time.Since(watch.epoch) / watchBucket)
		watch.mu.Lock()
		seen := false
		for b := now; b > now-10 && b >= 0; b-- {
			if slot := b % int64(len(watch.max)); watch.at[slot] == b && watch.max[slot] > 0 {
				seen = true
			}
		}
		watch.mu.Unlock()
		if seen && Slip(time.Second) > 0 {
			t.Logf("slip over the last second %v", Slip(time.Second))
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch noted no timer overshoot in 10 s")
		}
	}
}

// TestSlipWindow checks which overshoots a window takes in, on a watch of
// its own with times given.
func TestSlipWindow(t *testing.T) {
	w := &timerWatch{}
	ms := time.Millisecond
	w.record(7*ms, 50*ms)
	w.record(30*ms, 1000*ms)
	w.record(9*ms, 1050*ms)
	w.record(4*ms, 2500*ms)
	// Two minutes later a slot is reused: the old figure goes.
	w.record(2*ms, 2500*ms+120*time.Second)
	for _, c := range []struct {
		d, now, want time.Duration
	}{
		{100 * ms, 60 * ms, 7 * ms},
		{100 * ms, 1099 * ms, 30 * ms},
		{100 * ms, 1250 * ms, 30 * ms}, // the bucket before the window counts
		{100 * ms, 1350 * ms, 0},
		{2 * time.Second, 2550 * ms, 30 * ms},
		{10 * time.Second, 2550 * ms, 30 * ms},
		{500 * ms, 2550 * ms, 0}, // bucket 25 now holds the figure of two minutes later
		{time.Second, 2500*ms + 120*time.Second, 2 * ms},
	} {
		if got := w.slip(c.d, c.now); got != c.want {
			t.Errorf("slip over %v at %v = %v, want %v", c.d, c.now, got, c.want)
		}
	}
}
