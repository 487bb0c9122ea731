// Package store keeps the request records of SPEC.md §7 in SQLite or
// PostgreSQL and reads them back for the API of §8: one record per request,
// metadata only, with its attempts and diagnosis labels.
//
// One package serves both engines. The schema (migrations/), the queries and
// the statistics are the same code over database/sql; the engines differ
// only in a small dialect (driver, connection pools, how concurrent
// migrators are serialised). Keeping them together is what makes "one
// schema, the same queries" true by construction rather than by review, and
// percentiles are computed in Go from the rows both engines return, so they
// cannot drift apart (see Stats).
//
// Writes reach a Store through a Writer: a bounded queue and batched inserts
// off the request path, with retries while the database cannot take them and a
// count of everything it could not keep.
//
// The tests run on SQLite always, and on PostgreSQL as well when
// TTFX_TEST_POSTGRES holds a DSN (with TTFX_REQUIRE_ALL=1 they fail rather
// than skip without one). On a Debian machine, as root:
//
//	eval "$(bash scripts/ci-postgres.sh)"   # installs and starts PostgreSQL, creates ttfx/ttfx
//	go test ./internal/store/... ./internal/api/...
//
// Each test works in a schema of its own, dropped afterwards.
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// Store holds request records. The same implementation, schema and queries
// serve SQLite and PostgreSQL. It is safe for concurrent use.
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

// Open opens the store a DSN names and applies the embedded schema
// migrations:
//
//	postgres://user:pass@host:5432/db?sslmode=disable   PostgreSQL (also postgresql://)
//	clickhouse://user:pass@host:9000/db                  ClickHouse, native protocol (see clickhouse.go)
//	sqlite:ttfx.db, sqlite:///var/lib/ttfx.db            SQLite
//	ttfx.db                                              SQLite, a bare path
//
// PostgreSQL must answer at Open (migrations need it); afterwards a Writer
// rides out outages. Query parameters of a postgres DSN are pgx's, e.g.
// search_path=ttfx to keep the tables in their own schema.
func Open(ctx context.Context, dsn string) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "clickhouse://"):
		return openClickHouse(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite:"):
		path := strings.TrimPrefix(dsn, "sqlite:")
		path = strings.TrimPrefix(path, "//")
		return openSQLite(ctx, path)
	case dsn == "":
		return nil, errors.New("open store: empty DSN")
	case strings.Contains(dsn, "://"):
		return nil, fmt.Errorf("open store: unsupported DSN scheme in %q (want postgres://, clickhouse:// or sqlite:)", redactDSN(dsn))
	default:
		return openSQLite(ctx, dsn)
	}
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
