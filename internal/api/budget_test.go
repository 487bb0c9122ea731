package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
)

// blockingStore holds every Stats call until its context ends (or, with
// hold set, until hold is closed, as a query that does not notice its
// deadline would) and tells the test when each starts and how it ended.
type blockingStore struct {
	store.Store
	started chan struct{}
	ended   chan error
	hold    chan struct{}
}

func (b *blockingStore) Stats(ctx context.Context, q store.StatsQuery) (store.Stats, error) {
	b.started <- struct{}{}
	if b.hold != nil {
		<-b.hold
	} else {
		<-ctx.Done()
	}
	b.ended <- ctx.Err()
	return store.Stats{}, ctx.Err()
}

// TestReadBudget: a read's query is cancelled the moment its client goes
// away, freeing its turn; reads past the concurrency wait for a turn within
// their deadline and get a 503 that states it; past the waiting bound they
// are refused at once.
func TestReadBudget(t *testing.T) {
	bs := &blockingStore{Store: openSQLite(t), started: make(chan struct{}, 100), ended: make(chan error, 100)}
	const deadline = 800 * time.Millisecond
	h := New(Options{Store: bs, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }, Timeout: deadline, Concurrency: 1})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// Registered after srv.Close, so it runs first: a failed check must end
	// the test, not leave srv.Close waiting forever on a held read.
	t.Cleanup(func() {
		if bs.hold != nil {
			select {
			case <-bs.hold:
			default:
				close(bs.hold)
			}
		}
	})

	// A client that leaves: its query ends at once, not at the deadline.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stats?since=1h", nil)
	req.Header.Set("Authorization", "Bearer "+keyAdmin)
	go http.DefaultClient.Do(req)
	<-bs.started
	left := time.Now()
	cancel()
	if err := <-bs.ended; err != context.Canceled || time.Since(left) > deadline/2 {
		t.Fatalf("the query ended with %v %v after its client left, want canceled at once", err, time.Since(left))
	}

	// One read holds the only turn; the next waits and gets the stated 503.
	bs.hold = make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { call(t, "GET", srv.URL+"/api/stats?since=1h", keyAdmin) })
	<-bs.started
	start := time.Now()
	a := call(t, "GET", srv.URL+"/api/requests", keyAdmin)
	if a.status != 503 || !strings.Contains(string(a.body), "deadline of 800ms") || time.Since(start) < deadline-50*time.Millisecond {
		t.Fatalf("a read waiting for its turn: %d after %v: %s", a.status, time.Since(start), a.body)
	}
	close(bs.hold)
	wg.Wait()
	<-bs.ended
	bs.hold = make(chan struct{})

	// Past the waiting bound: refused at once, with Retry-After.
	wg.Go(func() { call(t, "GET", srv.URL+"/api/stats?since=1h", keyAdmin) })
	<-bs.started
	for range maxWaitingPerSlot {
		wg.Go(func() { call(t, "GET", srv.URL+"/api/requests", keyAdmin) })
	}
	waitFor := time.Now().Add(5 * time.Second)
	for h.budget.waiting.Load() < maxWaitingPerSlot && time.Now().Before(waitFor) {
		time.Sleep(5 * time.Millisecond)
	}
	start = time.Now()
	a = call(t, "GET", srv.URL+"/api/requests", keyAdmin)
	if a.status != 503 || a.header.Get("Retry-After") == "" || !strings.Contains(string(a.body), "busy") || time.Since(start) > deadline/2 {
		t.Fatalf("a read past the waiting bound: %d after %v: %s", a.status, time.Since(start), a.body)
	}
	close(bs.hold)
	wg.Wait()
	<-bs.ended
}

// TestReadRest: a slot rests after each read in proportion to what the read
// took (read_cpu_share), capped by maxRest, so that reads in a loop leave
// the relay the rest of the cores (issue 50: four loops of rollup reads cut
// relayed throughput by 40 %). Only lower bounds are asserted: a timer
// never fires early, whatever the load.
func TestReadRest(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	// n slots of a share of procs/(4n): each slot may run a quarter of
	// its time, so it rests three times what a read held it.
	const hold = 40 * time.Millisecond
	b := newReadBudget(1, 0.25/float64(procs), time.Second)
	release, err := b.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(hold)
	release()
	start := time.Now()
	release, err = b.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 3*hold {
		t.Errorf("the next read had its turn after %v, want at least 3 × the %v the last one held it", waited, hold)
	}
	release()

	// The rest is capped, so that one long read does not hold the
	// others past their deadline; and a share of 1 never rests.
	// Uncapped it would be 3 × 40ms; the bound allows the cap, the hold
	// again and whatever timer slip this run saw meanwhile.
	testenv.WatchTimers()
	b = newReadBudget(1, 0.25/float64(procs), 10*time.Millisecond)
	release, _ = b.acquire(context.Background())
	time.Sleep(hold)
	release()
	start = time.Now()
	release, _ = b.acquire(context.Background())
	waited := time.Since(start)
	release()
	if limit := 10*time.Millisecond + hold + testenv.Slip(waited); waited > limit {
		t.Errorf("the rest was not capped at 10ms: the next turn came after %v (allowed %v)", waited, limit)
	}
	b = newReadBudget(procs, 1, time.Second)
	release, _ = b.acquire(context.Background())
	release()
	if len(b.slots) != 0 {
		t.Errorf("read_cpu_share 1 with a slot per core: the slot rests after a read")
	}
}
