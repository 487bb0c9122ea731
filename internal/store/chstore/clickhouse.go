package chstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The ClickHouse engine keeps the same Store contract as SQLite and
// PostgreSQL with a schema of its own (migrations_clickhouse/): one
// ReplacingMergeTree row per request with attempts and labels as arrays,
// partitioned by day and sorted by time, then group, channel and model.
// Summaries come from the same rollups (per-minute sketches, compacted to
// ten minutes, hours and days) as on the other engines, stored in a
// ReplacingMergeTree and merged in Go by the same code (Acc).
//
// Its SQL keeps to what ClickHouse 18.16 — Debian's package — accepts, and
// nothing removed since.
//
// ClickHouse has no transactions and no unique keys. What the SQL engines
// get from them is built here from two things that it has: a
// ReplacingMergeTree keeps one row per sorting key once merged (reads take
// FINAL or LIMIT 1 BY until then, or drop duplicates in Go), and CREATE
// TABLE is atomic, so it can
// serve as the migrations' lock (see chMigrate).
type chStore struct {
	write *sql.DB // inserts, partition drops, compaction, pings
	read  *sql.DB // queries: a pool of its own, as on PostgreSQL
	// clock is the pool whose server's clock stamps rollup marks (see
	// serverNow): the store's own server, or a cluster's first node, so
	// that gateways on different nodes stamp with one clock.
	clock *sql.DB
	// cluster is the layout of a store over a cluster (cluster.go), or
	// nil on one server.
	cluster *chCluster

	// statsSlots holds a token per Stats call running (see
	// MaxConcurrentStats).
	statsSlots chan struct{}
	// maxStatsRows is MaxStatsRows; tests lower it.
	maxStatsRows int
}

// The pool sizes of a ClickHouse store, per gateway replica.
const (
	clickhouseWriteConns = 2
	clickhouseReadConns  = 8
)

// ClickHouse wants few large inserts: every insert makes a part on disk
// that background merges fold together, and the documentation's advice is
// at most about one insert a second per table with thousands of rows each.
// The Writer takes these for a ClickHouse store unless configured otherwise
// (see Batcher).
const (
	clickhouseBatchSize     = 20000
	clickhouseFlushInterval = 500 * time.Millisecond
)

// WriterBatching implements Batcher.
func (s *chStore) WriterBatching() (int, time.Duration) {
	return clickhouseBatchSize, clickhouseFlushInterval
}

// openClickHouse opens clickhouse://user:pass@host:9000/db (the native
// protocol; the options are clickhouse-go's) and applies the migrations.
// The database must exist.
func openClickHouse(ctx context.Context, dsn string) (store.Store, error) {
	chDSN, clusterName, localDB, err := splitDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
	}
	opts, err := clickhouse.ParseDSN(chDSN)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
	}
	if opts.Auth.Database == "" {
		return nil, fmt.Errorf("open store %s: the DSN names no database (clickhouse://host:9000/db)", store.RedactDSN(dsn))
	}
	var cluster *chCluster
	if clusterName != "" {
		if cluster, err = openCluster(ctx, opts, clusterName, localDB); err != nil {
			return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
		}
		// An insert returns once every shard holds its rows, so that a
		// record is readable when the writer says it is stored, and a
		// shard that is down fails the insert (an outage, retried) rather
		// than leaving its rows queued on the node.
		if opts.Settings == nil {
			opts.Settings = clickhouse.Settings{}
		}
		opts.Settings["insert_distributed_sync"] = 1
	}
	closeCluster := func() {
		if cluster != nil {
			cluster.close()
		}
	}
	open := func(conns int) (*sql.DB, error) {
		o := *opts
		o.MaxOpenConns, o.MaxIdleConns = conns, conns
		db := clickhouse.OpenDB(&o)
		db.SetMaxOpenConns(conns)
		db.SetMaxIdleConns(conns)
		db.SetConnMaxIdleTime(5 * time.Minute)
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
		}
		return db, nil
	}
	write, err := open(clickhouseWriteConns)
	if err != nil {
		closeCluster()
		return nil, err
	}
	if cluster == nil { // a cluster's nodes were migrated by openCluster
		if err := chMigrate(ctx, write); err != nil {
			write.Close()
			return nil, fmt.Errorf("open store %s: %w", store.RedactDSN(dsn), err)
		}
	}
	read, err := open(clickhouseReadConns)
	if err != nil {
		write.Close()
		closeCluster()
		return nil, err
	}
	s := &chStore{write: write, read: read, clock: write, cluster: cluster,
		statsSlots: make(chan struct{}, store.MaxConcurrentStats), maxStatsRows: store.MaxStatsRows}
	if cluster != nil {
		s.clock = cluster.nodes[0].db
	}
	return s, nil
}

func (s *chStore) Engine() string { return "clickhouse" }

func (s *chStore) Ping(ctx context.Context) error { return s.write.PingContext(ctx) }

func (s *chStore) Close() error {
	err := errors.Join(s.write.Close(), s.read.Close())
	if s.cluster != nil {
		err = errors.Join(err, s.cluster.close())
	}
	return err
}

// migration is one embedded schema change, NNNN_what.sql.
type migration struct {
	version int
	name    string
	stmts   []string
}

//go:embed migrations/*.sql
var chMigrationFiles embed.FS

func loadCHMigrations() ([]migration, error) {
	names, err := fs.Glob(chMigrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and '_'", base)
		}
		b, err := chMigrationFiles.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, stmts: store.SplitSQL(string(b))})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a version", ms[i-1].name, ms[i].name)
		}
	}
	return ms, nil
}

// The migrations' lock is a table: CREATE TABLE of a name that exists fails
// (code 57), and a server creates a table atomically, so of several
// gateways starting at once exactly one creates it and migrates while the
// others wait for it to be dropped. A lock older than chLockStale is
// taken to be left by a gateway that died while migrating; it is renamed
// away (RENAME is atomic too: of several waiters one succeeds) and taken
// anew.
const (
	chLockTable   = "schema_migrations_lock"
	chLockStale   = 5 * time.Minute
	chLockWait    = 2 * time.Minute
	chTableExists = 57
)

// chMigrate applies the ClickHouse migrations not yet recorded in
// schema_migrations, holding the lock table meanwhile. schema_migrations is
// a plain MergeTree, so a migration applied twice would show as two rows:
// the tests count them.
func chMigrate(ctx context.Context, db *sql.DB) error {
	ms, err := loadCHMigrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	release, err := chLock(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer release()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version Int64, name String, applied_ns Int64) ENGINE = MergeTree() ORDER BY version`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	applied := map[int]bool{}
	newest := 0
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("migrate: %w", err)
		}
		applied[int(v)] = true
		newest = max(newest, int(v))
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if known := ms[len(ms)-1].version; newest > known {
		return fmt.Errorf("migrate: the database has schema version %d, newer than this ttfx knows (%d)", newest, known)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		// DDL is not transactional in ClickHouse: every statement is
		// written to be repeatable (IF NOT EXISTS), so a migration cut
		// short is finished by the next start.
		for _, st := range m.stmts {
			if _, err := db.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("migrate %s: %w", m.name, err)
			}
		}
		err := chInsert(ctx, db, "schema_migrations", []string{"version", "name", "applied_ns"},
			[][]any{{int64(m.version), m.name, time.Now().UnixNano()}})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", m.name, err)
		}
	}
	return nil
}

// chLock takes the migrations' lock table, waiting up to chLockWait for
// another holder, and returns its release. The lock's age is its table's
// creation time on the server's clock (system.tables), so it needs no row
// and every gateway reads the same age.
func chLock(ctx context.Context, db *sql.DB) (func(), error) {
	var b [8]byte
	rand.Read(b[:])
	owner := hex.EncodeToString(b[:])
	deadline := time.Now().Add(chLockWait)
	for {
		_, err := db.ExecContext(ctx, "CREATE TABLE "+chLockTable+" (owner String) ENGINE = Memory")
		if err == nil {
			return func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				db.ExecContext(ctx, "DROP TABLE IF EXISTS "+chLockTable)
			}, nil
		}
		if chCode(err) != chTableExists {
			return nil, fmt.Errorf("lock: %w", err)
		}
		// Held: by a live migrator, or by one that died.
		var age int64
		err = db.QueryRowContext(ctx, `SELECT toInt64(now()) - toInt64(metadata_modification_time) FROM system.tables
			WHERE database = currentDatabase() AND name = ?`, chLockTable).Scan(&age)
		if err == nil && time.Duration(age)*time.Second > chLockStale {
			stale := chLockTable + "_stale_" + owner
			if _, err := db.ExecContext(ctx, "RENAME TABLE "+chLockTable+" TO "+stale); err == nil {
				db.ExecContext(ctx, "DROP TABLE IF EXISTS "+stale)
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock: another gateway has held %s for over %v", chLockTable, chLockWait)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// chCode returns the ClickHouse error code of err, or 0.
func chCode(err error) int32 {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code
	}
	return 0
}

// chInsert writes rows into table in one native INSERT: clickhouse-go
// gathers a prepared statement's rows in a transaction into one block and
// sends it at Commit. Rows are in the order of cols.
func chInsert(ctx context.Context, db *sql.DB, table string, cols []string, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, "INSERT INTO "+table+" ("+strings.Join(cols, ", ")+")")
	if err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	defer st.Close()
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, r...); err != nil {
			return fmt.Errorf("insert %s: %w", table, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("insert %s: %w", table, err)
	}
	return nil
}

// batchToken names an insert batch by its request ids: a batch retried
// whole gets the same token, so its rows replace those of an attempt that
// may have landed.
func batchToken(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Pools returns the store's read and write pools, for tests and tools
// that look inside the database (see internal/store/storetest).
func (s *chStore) Pools() (read, write *sql.DB) { return s.read, s.write }

// SetMaxStatsRows lowers MaxStatsRows for this store, so that tests need
// not store millions of records to reach it.
func (s *chStore) SetMaxStatsRows(n int) { s.maxStatsRows = n }

// StatsSlots is the channel that bounds concurrent Stats calls, for tests
// that hold its slots.
func (s *chStore) StatsSlots() chan struct{} { return s.statsSlots }
