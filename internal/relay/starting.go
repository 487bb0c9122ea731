package relay

import (
	"sync/atomic"
	"time"
)

// Starting counts the requests a gateway is setting up: from t0 until
// their first effective output is relayed (t4) or they end. Its Busy tells
// the store's writer when a transaction would take a core from requests on
// their way to a first token (store.WriterOptions.Busy; issue 15). Safe
// for concurrent use; the zero value is ready.
type Starting struct {
	n    atomic.Int64
	last atomic.Int64 // when the last request began, as a startingEpoch offset
}

// StartingQuiet is how long after the last request began Busy still
// reports busy: requests that arrive together (a burst, a wave of
// kept-alive clients) come a few hundred microseconds to a few
// milliseconds apart, and a write begun in such a gap would take a core
// from those that follow.
const StartingQuiet = 5 * time.Millisecond

// startingEpoch is the origin of Starting's monotonic stamps.
var startingEpoch = time.Now()

func (s *Starting) begin() {
	s.n.Add(1)
	s.last.Store(int64(time.Since(startingEpoch)))
}

func (s *Starting) end() { s.n.Add(-1) }

// Busy reports whether a request is being set up, or one began within
// StartingQuiet.
func (s *Starting) Busy() bool {
	return s.n.Load() > 0 || time.Since(startingEpoch)-time.Duration(s.last.Load()) < StartingQuiet
}

// Count returns how many requests are being set up.
func (s *Starting) Count() int64 { return s.n.Load() }
