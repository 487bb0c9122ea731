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

// readBudget is what reads may take from the gateway: slots for the reads
// running at once and a bound on those waiting.
type readBudget struct {
	slots   chan struct{}
	waiting atomic.Int64
}

func newReadBudget(n int) *readBudget {
	return &readBudget{slots: make(chan struct{}, n)}
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
		return func() { <-b.slots }, nil
	default:
	}
	if b.waiting.Add(1) > int64(maxWaitingPerSlot*cap(b.slots)) {
		b.waiting.Add(-1)
		return nil, &busyError{running: cap(b.slots)}
	}
	defer b.waiting.Add(-1)
	select {
	case b.slots <- struct{}{}:
		return func() { <-b.slots }, nil
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
