package testenv

import (
	"runtime"
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

// TestSlip checks that the watch sees a stall of the process's timers as
// long as one made here, and forgets it once it is out of the window.
func TestSlip(t *testing.T) {
	WatchTimers()
	time.Sleep(20 * watchStep)
	quiet := Slip(time.Second)
	// Hold the scheduler: with GOMAXPROCS 1 nothing else runs while this
	// goroutine spins.
	prev := runtime.GOMAXPROCS(1)
	spin := time.Now()
	for time.Since(spin) < 60*time.Millisecond {
	}
	runtime.GOMAXPROCS(prev)
	time.Sleep(5 * watchStep)
	held := Slip(time.Second)
	if held < 40*time.Millisecond {
		t.Errorf("slip %v after the scheduler was held 60 ms (%v before), want at least 40 ms", held, quiet)
	}
	t.Logf("slip %v quiet, %v after a 60 ms hold", quiet, held)
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
