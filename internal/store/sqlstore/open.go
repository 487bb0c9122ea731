package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/ttfx/ttfx/internal/store"
	"modernc.org/sqlite" // registers the "sqlite" driver: pure Go, no cgo (SPEC.md §7)
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect is everything that differs between the two engines. The queries
// do not: both accept $N placeholders (SQLite binds $N by position), row
// values, window-free GROUP BY, ON CONFLICT DO NOTHING and the DDL in
// migrations/.
type dialect struct {
	name string
	// migrationLock runs first in the migration transaction so that two
	// replicas starting at once do not both apply a migration. Empty when
	// the transaction itself serialises (SQLite's BEGIN IMMEDIATE).
	migrationLock string
	// readTx opens the transaction Stats reads in, so that its two queries
	// see one snapshot.
	readTx *sql.TxOptions
	// arrays: batches are inserted column-wise from typed arrays
	// (insertUnnest, PostgreSQL); otherwise as multi-row VALUES with plain
	// ? placeholders (insertValues, SQLite, where each $N or ?N parameter
	// costs a linear search of those seen before: a 650-row insert took 2 s
	// to parse with $N, 22 ms with ?). Both write the same rows.
	arrays bool
	// stmts keeps a store's VALUES inserts prepared (SQLite); nil in the
	// package's dialect values, set per store by newSQLStore.
	stmts *stmtCache
	// names caches a store's record_names (names.go); nil in the
	// package's dialect values, set per store by newSQLStore.
	names *nameCache
	// series keeps the rollup series ids a store has looked up (see
	// ensureSeries); nil in the package's dialect values (migrations look
	// every series up), set per store by newSQLStore.
	series *seriesCache
	// planTime: Stats chooses between the time index and a table scan
	// itself (see wideWindow) because the engine's planner cannot.
	planTime bool
	// partitioned: the record tables are partitioned by day (PostgreSQL,
	// see partition.go): inserts make the partitions of new days, and
	// retention drops whole days.
	partitioned bool
}

var (
	sqliteDialect = dialect{
		name: "sqlite",
		// A read transaction in WAL mode is a snapshot already; SQLite
		// has no isolation levels to ask for.
		readTx:   &sql.TxOptions{ReadOnly: true},
		planTime: true,
	}
	postgresDialect = dialect{
		name: "postgres",
		// A constant key of ttfx's own: "ttfx" in ASCII.
		migrationLock: "SELECT pg_advisory_xact_lock(1953785464)",
		readTx:        &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead},
		arrays:        true,
		partitioned:   true,
	}
)

// readFileBudget is how much of the database file one SQLite read
// connection may keep in the process: its page cache, with no memory map.
// /api/stats reads every row of its window, and with SQLite's default
// 2 MiB cache each page came from a pread call (a third slower over 50k
// records, measured). The 1 GiB map it had before took a quarter less CPU
// on a rows read over a million records (6.9 s against 9.2 s), but every
// page a read touched stayed in the process's RSS: that one call grew it
// by 520 MiB of mapped file (issue 50).
const readFileBudget = 32 << 20

// openSQLite opens a SQLite file with two pools: one connection that
// writes (SQLite has a single writer; BEGIN IMMEDIATE takes the write lock up
// front so a transaction never fails upgrading it) and a few read-only ones
// that WAL mode lets run beside it, so a long /api/stats never holds up the
// writer. synchronous=NORMAL is durable in WAL mode except for the last
// transactions before a power loss, which is the right trade for telemetry.
func openSQLite(ctx context.Context, file string) (store.Store, error) {
	if file == "" {
		return nil, errors.New("open store: empty SQLite path")
	}
	if strings.ContainsAny(file, "?#") {
		return nil, fmt.Errorf("open store: SQLite path %q may not contain '?' or '#'", file)
	}
	pragmas := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "synchronous(NORMAL)")
		for _, e := range extra {
			k, v, _ := strings.Cut(e, "=")
			q.Add(k, v)
		}
		return file + "?" + q.Encode()
	}
	write, err := sql.Open("sqlite", pragmas("_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxIdleTime(0)
	// A new file gets pages of 16 KB before anything makes its first page
	// (an existing one keeps its own; see rebuildRollupsWithoutRowid),
	// then WAL mode, which is persistent. The driver would run both as
	// _pragma parameters in the order of their names, WAL first.
	for _, q := range []string{"", "PRAGMA page_size = 16384", "PRAGMA journal_mode = WAL"} {
		if err := retryBusy(ctx, func() error {
			if q == "" {
				return write.PingContext(ctx)
			}
			_, err := write.ExecContext(ctx, q)
			return err
		}); err != nil {
			write.Close()
			return nil, fmt.Errorf("open store %s: %w", file, err)
		}
	}
	if err := migrate(ctx, write, sqliteDialect); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store %s: %w", file, err)
	}
	// The read pool opens after the writer has switched the file to WAL
	// (a persistent setting) and created the schema. See readFileBudget.
	read, err := sql.Open("sqlite", pragmas("_pragma=query_only(1)", "_pragma=mmap_size(0)",
		fmt.Sprintf("_pragma=cache_size(%d)", -readFileBudget/1024)))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	read.SetMaxOpenConns(4)
	read.SetMaxIdleConns(4)
	if err := retryBusy(ctx, func() error { return read.PingContext(ctx) }); err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("open store %s: %w", file, err)
	}
	return newSQLStore(sqliteDialect, write, read), nil
}

// retryBusy runs a step of opening a SQLite file (the first connection,
// which applies the pragmas, or a setting of the file) until it does not
// fail SQLITE_BUSY. Two processes opening a new file at once both switch
// it to WAL, and SQLite answers one of them SQLITE_BUSY at once instead of
// calling the busy handler, since both waiting on each other would
// deadlock (about one concurrent first open in 25 failed so). The other
// finishes within milliseconds, so the open retries for a few seconds.
func retryBusy(ctx context.Context, step func() error) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := step()
		var lite *sqlite.Error
		if err == nil || !errors.As(err, &lite) || lite.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return err
		}
	}
}

// openPostgres opens a PostgreSQL database through pgx's database/sql
// adapter, with two pools as on SQLite: two connections that write (the
// Writer's inserts, retention's deletes, pings) and eight that read. Reads
// are what a client controls — eight concurrent /api/stats calls held a
// shared pool of eight, and the writer's inserts queued behind them until
// their timeout while records piled up — so they must not be able to take
// the writer's connections.
func openPostgres(ctx context.Context, dsn string) (store.Store, error) {
	open := func(conns, idle int) (*sql.DB, error) {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
		}
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(idle)
		db.SetConnMaxIdleTime(5 * time.Minute)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
		}
		return db, nil
	}
	write, err := open(postgresWriteConns, postgresWriteConns)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, write, postgresDialect); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
	}
	read, err := open(postgresReadConns, postgresReadConns/2)
	if err != nil {
		write.Close()
		return nil, err
	}
	s := newSQLStore(postgresDialect, write, read)
	// Today's and tomorrow's partitions, ahead of their records; should
	// this fail, the insert that needs them makes them, and so does the
	// next compaction.
	_ = s.prepareDays(ctx, time.Now())
	return s, nil
}

// The pool sizes of a PostgreSQL store, per gateway replica.
const (
	postgresWriteConns = insertLanes + 1 // the Writer's inserts, beside retention or a ping
	postgresReadConns  = 8               // concurrent API reads
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// goMigrations are steps in Go that run after the statements of their
// migration, in its transaction, on the engines they name ("" for both):
// data moves that the shared SQL cannot express.
var goMigrations = map[int]map[string]func(ctx context.Context, tx *sql.Tx, d dialect) error{
	4: {"postgres": partitionByDay}, // 0004_partitions.*.sql
	// (The rollups of records stored before 0003_rollups.sql are made by
	// 0038's step, once the rollups table has the shape that writing them
	// needs: see toSeries.)
	// Attempts and labels rebuilt WITHOUT ROWID from their own
	// definitions: see without_rowid.go.
	34: {"sqlite": rebuildWithoutRowid}, // 0034_without_rowid.sqlite.sql
	// Rollups WITHOUT ROWID in a file of 16 KB pages.
	36: {"sqlite": rebuildRollupsWithoutRowid}, // 0036_rollups_without_rowid.sqlite.sql
	// Rollup rows name their key by a series id: see series.go.
	38: {"": toSeries}, // 0038_rollup_series.*.sql
	// Durations in nanoseconds: see durations.go.
	42: {"sqlite": durationsToNs}, // 0042_durations_ns.*.sql
	// Names as ids of record_names: see names.go.
	43: {"sqlite": namesToIds}, // 0043_record_names.*.sql
}

// migration is one embedded schema change: NNNN_what.sql for both engines,
// NNNN_what.sqlite.sql or NNNN_what.postgres.sql for one. A version may
// have files of both kinds; on an engine it has nothing for, it is recorded
// as applied and does nothing.
type migration struct {
	version int
	name    string
	stmts   map[string][]string // by engine, "" for both
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*migration{}
	for _, n := range names {
		base := path.Base(n)
		num, rest, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		engine := ""
		for _, e := range []string{"sqlite", "postgres"} {
			if strings.HasSuffix(rest, "."+e+".sql") {
				engine = e
			}
		}
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		m := byVersion[v]
		if m == nil {
			m = &migration{version: v, name: base, stmts: map[string][]string{}}
			byVersion[v] = m
		} else if strings.SplitN(m.name, ".", 2)[0] != strings.SplitN(base, ".", 2)[0] {
			return nil, fmt.Errorf("migrations %s and %s share a version", m.name, base)
		}
		if _, dup := m.stmts[engine]; dup {
			return nil, fmt.Errorf("migration %s: two files for one engine", base)
		}
		m.stmts[engine] = store.SplitSQL(string(b))
	}
	var ms []migration
	for _, m := range byVersion {
		ms = append(ms, *m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the embedded migrations not yet recorded in
// schema_migrations, all in one transaction.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	return migrateTo(ctx, db, d, 0)
}

// migrateTo is migrate up to version upTo (0: all); tests make databases
// of earlier versions with it.
func migrateTo(ctx context.Context, db *sql.DB, d dialect, upTo int) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, d.migrationLock); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		name TEXT NOT NULL,
		applied_ns BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	applied := map[int]bool{}
	newest := 0
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: %w", err)
		}
		applied[v] = true
		newest = max(newest, v)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if known := ms[len(ms)-1].version; newest > known {
		return fmt.Errorf("migrate: the database has schema version %d, newer than this ttfx knows (%d)", newest, known)
	}
	for _, m := range ms {
		if applied[m.version] || upTo > 0 && m.version > upTo {
			continue
		}
		for _, s := range slices.Concat(m.stmts[""], m.stmts[d.name]) {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("migrate %s: %w", m.name, err)
			}
		}
		for _, engine := range []string{"", d.name} {
			if step := goMigrations[m.version][engine]; step != nil {
				if err := step(ctx, tx, d); err != nil {
					return fmt.Errorf("migrate %s: %w", m.name, err)
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_ns) VALUES ($1, $2, $3)`,
			m.version, m.name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
