// Package sqlstore keeps request records in SQLite or PostgreSQL: one
// schema (migrations/), the same queries over database/sql, and a small
// dialect (driver, connection pools, how concurrent migrators are
// serialised, PostgreSQL's day partitions) for what differs. Keeping both
// engines in one package is what makes "one schema, the same queries" true
// by construction rather than by review.
//
// Records go into three tables (requests, request_attempts,
// request_labels); their summaries into the rollups table, written in the
// records' transaction as per-minute rows of each writer and compacted to
// coarser units and projections (see internal/store/rollup). Stats answers
// from the rollups, or from the records when a filter needs them.
//
// Importing the package registers two engines with internal/store:
// "sqlite" (sqlite:PATH, or a bare path) and "postgres" (postgres:// and
// postgresql://).
package sqlstore

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/ttfx/ttfx/internal/store"
)

func init() {
	store.Register(store.Engine{
		Name:    "sqlite",
		Schemes: []string{"sqlite:"},
		Default: true,
		Open: func(ctx context.Context, dsn string) (store.Store, error) {
			path := strings.TrimPrefix(dsn, "sqlite:")
			path = strings.TrimPrefix(path, "//")
			return openSQLite(ctx, path)
		},
		DataFault: sqliteDataFault,
	})
	store.Register(store.Engine{
		Name:      "postgres",
		Schemes:   []string{"postgres://", "postgresql://"},
		Open:      openPostgres,
		Server:    true,
		Permanent: postgresPermanent,
		DataFault: postgresDataFault,
		Lanes:     insertLanes,
	})
}

// postgresPermanent reports the failures of an open that waiting cannot
// cure: the server's refusal of who we are or what we asked for (SQLSTATE
// class 28, invalid authorization; 3D, invalid catalog name) and a DSN
// that does not parse.
func postgresPermanent(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "28") || strings.HasPrefix(pg.Code, "3D")
	}
	var pe *pgconn.ParseConfigError
	return errors.As(err, &pe)
}

// postgresDataFault: SQLSTATE class 22 (data exception) or 23 (integrity
// constraint violation).
func postgresDataFault(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23")
	}
	return false
}

// sqliteDataFault: SQLITE_CONSTRAINT, SQLITE_MISMATCH or SQLITE_TOOBIG
// (the primary code: the low byte of an extended one).
func sqliteDataFault(err error) bool {
	var lite *sqlite.Error
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff {
		case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG:
			return true
		}
	}
	return false
}
