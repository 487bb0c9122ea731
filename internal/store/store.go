// Package store is the contract of ttfx's record store: the request
// records of SPEC.md §7 go in, and come back for the API of §8 — one record
// per request, metadata only, with its attempts and diagnosis labels — as
// pages (List), single records (Get) and summaries (Stats). It holds what
// every engine shares: the Store interface and its types, the Writer (a
// bounded queue and batched inserts off the request path, with retries
// while the database cannot take them and a count of everything it could
// not keep), validation and cleaning of records, the record columns, the
// retention and compaction loops, and OpenOrRetry for a database that is
// down when the gateway starts.
//
// The engines live in packages of their own, which register with Open
// (see Engine):
//
//	internal/store/sqlstore   SQLite and PostgreSQL: one schema, one dialect layer
//	internal/store/chstore    ClickHouse
//	internal/store/rollup     what the engines' summaries share: rollup levels,
//	                          projections, read plans, sketch merging
//	internal/store/storetest  what the engines' tests share
//
// Summaries are answered from rollups written with the records (per-minute
// sketches, compacted to coarser units), so their cost follows the window
// and the variety of the traffic rather than the number of records, and
// every engine computes percentiles with the same Go code from the same
// sketches (see SketchMethod).
//
// The tests run the same contract suite on every engine: SQLite always,
// PostgreSQL when TTFX_TEST_POSTGRES holds a DSN and ClickHouse when
// TTFX_TEST_CLICKHOUSE does (with TTFX_REQUIRE_ALL=1 they fail rather than
// skip without one). On a Debian machine, as root:
//
//	eval "$(bash scripts/ci-postgres.sh)"     # installs and starts PostgreSQL, creates ttfx/ttfx
//	eval "$(bash scripts/ci-clickhouse.sh)"   # installs and starts ClickHouse
//	go test ./internal/store/... ./internal/api/...
//
// Each test works in a schema (database) of its own, dropped afterwards.
package store

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// Store holds request records. Every engine implements it (see Engine); it
// is safe for concurrent use.
type Store interface {
	// Insert stores records in one transaction. A record whose request id
	// is already stored is skipped whole, attempts and labels included, so
	// a batch retried after an ambiguous failure is not stored twice and a
	// second record cannot add to the first; of several records with one
	// id in a batch, the first is kept. It fails without writing anything
	// when a record is invalid (see Validate).
	Insert(ctx context.Context, recs []record.Record) error
	// Get returns the record of a request id, or ErrNotFound.
	Get(ctx context.Context, id string) (record.Record, error)
	// List returns the records matching f, newest first, one page at a time.
	List(ctx context.Context, f Filter) (Page, error)
	// Stats summarises the records matching q (see Stats). It fails with
	// ErrBadQuery past MaxStatsRows records and runs at most
	// MaxConcurrentStats calls at once, the others waiting their turn.
	Stats(ctx context.Context, q StatsQuery) (Stats, error)
	// DeleteBefore deletes up to limit records whose timestamp is before t,
	// oldest first, and returns how many it deleted. The call that leaves
	// none before t also deletes the rollups of the time units that end by
	// t. On PostgreSQL, whose record tables are partitioned by day, it
	// drops every day that ends by t whatever limit says, and keeps the day
	// t falls within whole until that day has passed too.
	DeleteBefore(ctx context.Context, t time.Time, limit int) (int, error)
	// Ping reports whether the database answers.
	Ping(ctx context.Context) error
	// Engine names the database engine: "sqlite", "postgres" or "clickhouse".
	Engine() string
	// Close releases the database connections.
	Close() error
}

// Errors a Store returns.
var (
	ErrNotFound  = errors.New("store: record not found")
	ErrBadCursor = errors.New("store: invalid cursor")
	ErrBadQuery  = errors.New("store: invalid query")
	// ErrInvalidRecord is a record that can never be stored (see Validate).
	ErrInvalidRecord = errors.New("store: invalid record")
)

// Page sizes of List.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// Filter selects records. Every empty field matches any value; the fields
// that are set must all match.
type Filter struct {
	From    time.Time // records at or after From; zero: no lower bound
	To      time.Time // records before To; zero: no upper bound
	Model   string
	Channel string
	Group   string
	Status  string // a terminal status of SPEC.md §5
	Label   string // a diagnosis label the record carries, at any position
	KeyName string // the configured name of the client key
	// Stream selects streaming (true) or non-streaming (false) requests;
	// nil selects both. Their latencies mean different things (a
	// non-streaming answer's headers come with the whole generation), so
	// summaries keep them apart (SPEC.md §4).
	Stream *bool

	Limit  int    // records per page, 1..MaxLimit; 0 means DefaultLimit (List only)
	Cursor string // Page.Next of the previous page; empty for the first (List only)
}

// Page is one page of List.
type Page struct {
	Records []record.Record
	Next    string // cursor of the next page; empty when this is the last
}

// Open opens the store a DSN names, with the engine registered for its
// scheme, and applies the engine's embedded schema migrations:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   PostgreSQL (also postgresql://; sqlstore)
//	clickhouse://user:pass@host:9000/db                  ClickHouse, native protocol (chstore)
//	sqlite:ttfx.db, sqlite:///var/lib/ttfx.db            SQLite (sqlstore)
//	ttfx.db                                              SQLite, a bare path
//
// PostgreSQL must answer at Open (migrations need it); afterwards a Writer
// rides out outages. Query parameters of a postgres DSN are pgx's, e.g.
// search_path=ttfx to keep the tables in their own schema.
func Open(ctx context.Context, dsn string) (Store, error) {
	e, err := engineFor(dsn)
	if err != nil {
		return nil, err
	}
	return e.Open(ctx, dsn)
}

// Redact returns dsn with its password hidden, for messages.
func Redact(dsn string) string { return redactDSN(dsn) }

// redactDSN hides the password of a DSN before it goes into a message,
// and nothing else: the host, port, user and database name are what an
// operator needs to see. The DSN is parsed as a URL, so only the password
// field changes (a password "bars" in postgres://root:bars@h/ttfx_bars
// leaves the database name whole), and a password=… query parameter is
// hidden too. A DSN that does not parse as a URL is cut at its last @.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return redactUnparsed(dsn)
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// redactUnparsed hides what lies between the user and the last @ of a DSN
// that is not a valid URL (a password with an unescaped character).
func redactUnparsed(dsn string) string {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return dsn
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return dsn
	}
	userinfo := rest[:at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		userinfo = user + ":xxxxx"
	}
	return scheme + "://" + userinfo + rest[at:]
}
