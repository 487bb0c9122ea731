package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Engine is a database engine a Store opens on. Each engine package
// registers its registered in an init function (sqlstore: SQLite and
// PostgreSQL; chstore: ClickHouse), so that Open knows their DSNs without
// this package importing them: a program that opens stores imports the
// engine packages it wants, as database/sql's drivers are imported.
type Engine struct {
	Name string // "sqlite", "postgres", "clickhouse"
	// Schemes are the DSN prefixes the engine opens ("postgres://").
	Schemes []string
	// Default: the engine opens a DSN without a scheme (a bare SQLite path).
	Default bool
	// Open opens the store a DSN names and applies the engine's migrations.
	Open func(ctx context.Context, dsn string) (Store, error)
	// Server: the database is reached over the network and may be down
	// when the gateway starts; OpenOrRetry then keeps trying.
	Server bool
	// Permanent reports whether a failed Open cannot succeed by waiting
	// (a refused password, a missing database, a malformed DSN); nil:
	// every failure may be transient.
	Permanent func(err error) bool
	// DataFault reports whether an Insert error says a record's values
	// cannot be stored as given, so that retrying it is pointless (see
	// Writer); nil: never.
	DataFault func(err error) bool
	// Lanes, BatchSize and FlushInterval are what a Writer takes for the
	// engine's stores before one is reached (see OpenOrRetry); zero: the
	// Writer's defaults.
	Lanes         int
	BatchSize     int
	FlushInterval time.Duration
}

var (
	enginesMu  sync.RWMutex
	registered []Engine
)

// Register makes an engine known to Open. It panics on a name registered
// twice, as a program that links one engine twice is built wrong.
func Register(e Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if slices.ContainsFunc(registered, func(o Engine) bool { return o.Name == e.Name }) {
		panic("store: engine " + e.Name + " registered twice")
	}
	registered = append(registered, e)
}

// Engines returns the registered registered.
func Engines() []Engine {
	enginesMu.RLock()
	defer enginesMu.RUnlock()
	return slices.Clone(registered)
}

// engineFor returns the engine that opens dsn.
func engineFor(dsn string) (Engine, error) {
	if dsn == "" {
		return Engine{}, errors.New("open store: empty DSN")
	}
	es := Engines()
	for _, e := range es {
		for _, s := range e.Schemes {
			if strings.HasPrefix(dsn, s) {
				return e, nil
			}
		}
	}
	if !strings.Contains(dsn, "://") {
		for _, e := range es {
			if e.Default {
				return e, nil
			}
		}
	}
	var schemes []string
	for _, e := range es {
		schemes = append(schemes, e.Schemes...)
	}
	if len(schemes) == 0 {
		return Engine{}, fmt.Errorf("open store %s: no store engine is linked into this program (import internal/store/sqlstore or internal/store/chstore)", redactDSN(dsn))
	}
	return Engine{}, fmt.Errorf("open store: unsupported DSN scheme in %q (want %s)", redactDSN(dsn), strings.Join(schemes, ", "))
}

// Batcher is a Store that wants batches of its own size from a Writer:
// BatchSize records at most, and a queue that is not full waits up to
// FlushInterval for more before it is written.
type Batcher interface {
	WriterBatching() (batchSize int, flushInterval time.Duration)
}

// Laner is a store that can take several inserts at once: a Writer over it
// runs WriterLanes of them.
type Laner interface {
	WriterLanes() int
}
