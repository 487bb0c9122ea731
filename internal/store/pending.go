package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// ErrUnavailable is the error of a store whose database has not been
// reached since the gateway started (see OpenOrRetry).
var ErrUnavailable = errors.New("store: the database has not been reached yet")

// Retry bounds of OpenOrRetry's background attempts.
const (
	openRetryMin = time.Second
	openRetryMax = 30 * time.Second
	// openAttemptTimeout bounds one background Open (connect and
	// migrations): a frozen server must not hold the loop forever.
	openAttemptTimeout = 30 * time.Second
)

// OpenOrRetry opens the store a DSN names, like Open. When the database is
// a server (PostgreSQL) that cannot be reached now, it does not fail: it
// returns a Store that refuses every call with ErrUnavailable while it keeps
// connecting and migrating in the background, with backoff, and from the
// first success on is that store. A gateway started during a database
// outage thus relays from the start: its Writer queues records (bounded,
// counted) against the refusals and writes them once the database is there,
// /api/health says degraded, and reads answer 503. Errors that waiting
// cannot cure fail at once: a malformed DSN, a refused password, a missing
// database, a SQLite file that cannot be opened.
func OpenOrRetry(ctx context.Context, dsn string, log *slog.Logger) (Store, error) {
	s, err := Open(ctx, dsn)
	if err == nil || !isServerDSN(dsn) {
		return s, err
	}
	if !transientOpenError(dsn, err) {
		// Said the same way as the retrying case below: what is wrong,
		// then what happens next.
		return nil, fmt.Errorf("%w\nthe database at %s answered but refused the user, password or database name; "+
			"waiting cannot cure that, so the gateway does not start: correct the DSN (store or store_env) and start again", err, redactDSN(dsn))
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The gateway's own log: the error whole (the DSN in it has its
	// password hidden), so that the operator sees the host and port.
	log.Warn(fmt.Sprintf("store: cannot reach the database at %s; the gateway serves anyway, queues records in memory and retries in the background (every %v, up to every %v)",
		redactDSN(dsn), openRetryMin, openRetryMax), "err", err.Error())
	return newPendingStore(dsn, err, log, Open), nil
}

func isServerDSN(dsn string) bool {
	e, err := engineFor(dsn)
	return err == nil && e.Server
}

// transientOpenError reports whether a failed Open may succeed later: any
// failure but those its engine calls permanent.
func transientOpenError(dsn string, err error) bool {
	e, eerr := engineFor(dsn)
	return eerr == nil && (e.Permanent == nil || !e.Permanent(err))
}

// pendingStore is the Store of OpenOrRetry until the database is reached.
type pendingStore struct {
	dsn    string
	log    *slog.Logger
	open   func(context.Context, string) (Store, error)
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.RWMutex // guards s and lastErr
	s       Store        // nil until opened
	lastErr error        // why the last attempt failed
}

func newPendingStore(dsn string, first error, log *slog.Logger, open func(context.Context, string) (Store, error)) *pendingStore {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pendingStore{dsn: dsn, log: log, open: open, cancel: cancel, done: make(chan struct{}), lastErr: first}
	go p.retry(ctx)
	return p
}

// retry opens the store with backoff until it succeeds or Close.
func (p *pendingStore) retry(ctx context.Context) {
	defer close(p.done)
	wait := openRetryMin
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		actx, cancel := context.WithTimeout(ctx, openAttemptTimeout)
		s, err := p.open(actx, p.dsn)
		cancel()
		if err == nil {
			p.mu.Lock()
			p.s, p.lastErr = s, nil
			p.mu.Unlock()
			p.log.Info("store: the database is reachable; migrations applied, queued records will be written")
			return
		}
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		p.log.Warn("store: the database is still unreachable; retrying", "store", redactDSN(p.dsn), "retry_in", wait, "err", err.Error())
		wait = min(2*wait, openRetryMax)
	}
}

// store returns the opened store, or nil and the error to answer.
func (p *pendingStore) store() (Store, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.s != nil {
		return p.s, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrUnavailable, ErrorMessage(p.lastErr))
}

func (p *pendingStore) Insert(ctx context.Context, recs []record.Record) error {
	s, err := p.store()
	if err != nil {
		return err
	}
	return s.Insert(ctx, recs)
}

func (p *pendingStore) Get(ctx context.Context, id string) (record.Record, error) {
	s, err := p.store()
	if err != nil {
		return record.Record{}, err
	}
	return s.Get(ctx, id)
}

func (p *pendingStore) List(ctx context.Context, f Filter) (Page, error) {
	s, err := p.store()
	if err != nil {
		return Page{}, err
	}
	return s.List(ctx, f)
}

func (p *pendingStore) Stats(ctx context.Context, q StatsQuery) (Stats, error) {
	s, err := p.store()
	if err != nil {
		return Stats{}, err
	}
	return s.Stats(ctx, q)
}

func (p *pendingStore) DeleteBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	s, err := p.store()
	if err != nil {
		return 0, err
	}
	return s.DeleteBefore(ctx, t, limit)
}

// Compact implements Compactor once the store is open.
func (p *pendingStore) Compact(ctx context.Context, now time.Time) (int, error) {
	s, err := p.store()
	if err != nil {
		return 0, err
	}
	if c, ok := s.(Compactor); ok {
		return c.Compact(ctx, now)
	}
	return 0, nil
}

func (p *pendingStore) Ping(ctx context.Context) error {
	s, err := p.store()
	if err != nil {
		return err
	}
	return s.Ping(ctx)
}

func (p *pendingStore) Engine() string {
	if s, _ := p.store(); s != nil {
		return s.Engine()
	}
	return "postgres"
}

// Close stops the background attempts and closes the store if one opened.
func (p *pendingStore) Close() error {
	p.cancel()
	<-p.done
	if s, _ := p.store(); s != nil {
		return s.Close()
	}
	return nil
}

// ListKeys and ChangeKeys are the opened store's (KeyStore): until the
// database is reached they fail with ErrUnavailable, and the gateway works
// with its configuration's keys, reading the stored ones when they come.
func (p *pendingStore) ListKeys(ctx context.Context) ([]KeyRow, error) {
	s, err := p.store()
	if err != nil {
		return nil, err
	}
	ks, ok := s.(KeyStore)
	if !ok {
		return nil, nil // it keeps none: the configuration's keys are all
	}
	return ks.ListKeys(ctx)
}

func (p *pendingStore) ChangeKeys(ctx context.Context, c KeyChange) (KeyResult, error) {
	s, err := p.store()
	if err != nil {
		return KeyResult{}, err
	}
	ks, ok := s.(KeyStore)
	if !ok {
		return KeyResult{}, fmt.Errorf("the %s store keeps no keys", s.Engine())
	}
	return ks.ChangeKeys(ctx, c)
}

// WriterLanes implements Laner as the store the DSN names will.
func (p *pendingStore) WriterLanes() int {
	if e, err := engineFor(p.dsn); err == nil && e.Lanes > 0 {
		return e.Lanes
	}
	return 1
}

// WriterBatching implements Batcher: a Writer made before the database was
// reached gets the batching its engine wants (ClickHouse's large batches),
// known from the DSN.
func (p *pendingStore) WriterBatching() (int, time.Duration) {
	if e, err := engineFor(p.dsn); err == nil {
		return e.BatchSize, e.FlushInterval
	}
	return 0, 0
}
