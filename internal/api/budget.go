package api

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

// DefaultReadTimeout is the deadline of one read (waiting for its turn
// included) when Options leave it unset. A frozen database once held a read
// for 30 s before its 503; a dashboard or script should learn sooner, and a
// summary that needs longer is one to narrow.
const DefaultReadTimeout = 10 * time.Second

// DefaultReadConcurrency is how many reads run at once when Options leave
// it unset: a quarter of the cores, at least one. A read of the records
// themselves (a label filter over a day) is a CPU-bound scan in this
// process with SQLite; four of them on two cores once took relayed
// throughput from 1,183 to 366 requests/s. Reads beyond it wait their turn
// within their deadline, so the relay always keeps the other cores.
func DefaultReadConcurrency() int { return max(1, runtime.GOMAXPROCS(0)/4) }

// maxWaitingPerSlot bounds the reads waiting for a turn, per slot; past it
// a read is refused at once rather than held (with its goroutine and
// connection) until its deadline.
const maxWaitingPerSlot = 16

// DefaultReadShare is the share of the machine's CPU time that reads may
// take at full tilt. Go has no goroutine priorities: a read running on a
// slot takes a whole core while it runs, and four loops of cheap rollup
// reads on two cores (one slot) cut relayed throughput by 40 % (issue 50:
// 1,999 → 1,208 requests/s). So each slot rests after a read, in
// proportion to what the read took (see release): reads get at most this
// share of the cores, whatever their number and cost, and the relay the
// rest.
const DefaultReadShare = 0.1

// readBudget is what reads may take from the gateway: slots for the reads
// running at once, a bound on those waiting, and the rest a slot takes
// after each read.
type readBudget struct {
	slots   chan struct{}
	waiting atomic.Int64
	// rest is how long a slot rests per unit of time a read held it;
	// maxRest bounds one rest, so that a long read does not keep the
	// others waiting past their deadline.
	rest    float64
	maxRest time.Duration
}

// newReadBudget returns a budget of n slots that together take at most
// share of the cores.
func newReadBudget(n int, share float64, maxRest time.Duration) *readBudget {
	duty := min(share*float64(runtime.GOMAXPROCS(0))/float64(n), 1) // of each slot's time
	return &readBudget{slots: make(chan struct{}, n), rest: 1/duty - 1, maxRest: maxRest}
}

// turn returns the release of a slot taken at start: the slot rests for
// rest × the time it was held (at most maxRest) before the next read may
// take it.
func (b *readBudget) turn(start time.Time) func() {
	return func() {
		rest := min(time.Duration(float64(time.Since(start))*b.rest), b.maxRest)
		if rest <= 0 {
			<-b.slots
			return
		}
		time.AfterFunc(rest, func() { <-b.slots })
	}
}

// busyError is a read refused for want of a turn.
type busyError struct{ running int }

func (e *busyError) Error() string {
	return "the gateway is busy with " + strconv.Itoa(e.running) + " other reads (its read concurrency); retry shortly"
}

// acquire waits for a turn within ctx. The returned func gives it back.
func (b *readBudget) acquire(ctx context.Context) (release func(), err error) {
	select {
	case b.slots <- struct{}{}:
		return b.turn(time.Now()), nil
	default:
	}
	if b.waiting.Add(1) > int64(maxWaitingPerSlot*cap(b.slots)) {
		b.waiting.Add(-1)
		return nil, &busyError{running: cap(b.slots)}
	}
	defer b.waiting.Add(-1)
	select {
	case b.slots <- struct{}{}:
		return b.turn(time.Now()), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// begin starts one read of r: its context ends at the read deadline or
// when the client goes away (which cancels the query in the database), and
// it holds a turn of the budget until done is called. When it reports
// false it has answered.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request) (ctx context.Context, done func(), ok bool) {
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.Timeout)
	release, err := h.budget.acquire(ctx)
	if err != nil {
		cancel()
		h.storeError(w, r, err)
		return nil, nil, false
	}
	return ctx, func() { release(); cancel() }, true
}
