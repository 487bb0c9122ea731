package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

	"github.com/ttfx/ttfx/internal/testenv"
)

// Failures a database gives while it cannot take a write now — a lock held
// by another session, a full disk, a read-only server after a failover, a
// write slower than WriteTimeout — are outages: the writer keeps every
// record and retries, and says so (Retrying), however well the database
// answers pings meanwhile.

// holdWriteLock takes the write lock of s's database from a session of its
// own, as an operator's sqlite3 shell or psql would, and returns the
// function that releases it.
func holdWriteLock(t *testing.T, engine, dsn string) (release func()) {
	t.Helper()
	var db *sql.DB
	var err error
	var lock string
	switch engine {
	case "sqlite":
		// BEGIN IMMEDIATE: the session holds SQLite's one write lock
		// until it ends its transaction.
		db, err = sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite:")+"?_txlock=immediate")
	case "postgres":
		db, err = sql.Open("pgx", dsn)
		lock = "LOCK TABLE requests IN ACCESS EXCLUSIVE MODE"
	}
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(storetest.Ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if lock != "" {
		if _, err := tx.ExecContext(storetest.Ctx(t), lock); err != nil {
			t.Fatal(err)
		}
	}
	released := false
	release = func() {
		if !released {
			released = true
			tx.Rollback()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

func TestWriterWaitsOutHeldLock(t *testing.T) {
	for _, e := range storetest.SQLEngines() { // ClickHouse takes no locks a session could hold
		t.Run(e.Name, func(t *testing.T) {
			s, dsn := e.Open(t)
			release := holdWriteLock(t, e.Name, dsn)
			opts := storetest.FastRetry
			opts.WriteTimeout = 300 * time.Millisecond
			w := store.NewWriter(s, opts)
			defer w.Close(context.Background())
			for i := range 20 {
				w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Millisecond))))
			}
			// Several write timeouts while the lock is held, the store
			// answering pings all along.
			storetest.WaitFor(t, "three failed writes", func() bool { return w.Stats().FailedBatches >= 3 })
			time.Sleep(time.Second)
			if err := s.Ping(storetest.Ctx(t)); err != nil {
				t.Fatalf("the store should answer pings during the lock: %v", err)
			}
			st := w.Stats()
			if st.Rejected != 0 || st.Written != 0 || st.Queued != 20 || !st.Retrying {
				t.Errorf("while the lock is held: %+v", st)
			}
			accounted(t, st, 20)
			t.Logf("last error while locked: %s", st.LastError)

			release()
			storetest.WaitFor(t, "the queue to drain after the lock", func() bool { return w.Stats().Queued == 0 })
			st = w.Stats()
			if st.Written != 20 || st.Rejected != 0 || st.Retrying {
				t.Errorf("after the lock: %+v", st)
			}
			if n := storetest.CountAll(t, s); n != 20 {
				t.Errorf("%d records stored, want 20", n)
			}
		})
	}
}

func TestWriterWaitsOutFullSQLite(t *testing.T) {
	// The database may not grow (as on a full disk): SQLITE_FULL is an
	// outage, and once there is room every record is written.
	s, _ := storetest.OpenSQLite(t)
	wdb := storetest.WriteDB(s) // one connection, so the pragma sticks
	var pages int
	if err := wdb.QueryRowContext(storetest.Ctx(t), "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := wdb.ExecContext(storetest.Ctx(t), fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(s, storetest.FastRetry)
	defer w.Close(context.Background())
	for i := range 200 {
		w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Millisecond))))
	}
	storetest.WaitFor(t, "three failed writes", func() bool { return w.Stats().FailedBatches >= 3 })
	st := w.Stats()
	// A first record may still fit in the pages there are; the rest
	// cannot.
	if st.Rejected != 0 || st.Written >= 200 || !st.Retrying || !strings.Contains(st.LastError, "full") {
		t.Errorf("while the database is full: %+v", st)
	}
	accounted(t, st, 200)
	if _, err := wdb.ExecContext(storetest.Ctx(t), "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	storetest.WaitFor(t, "the queue to drain", func() bool { return w.Stats().Queued == 0 })
	if st := w.Stats(); st.Written != 200 || st.Rejected != 0 || st.Retrying {
		t.Errorf("after making room: %+v", st)
	}
}

// faultCase is an error a probe of a real database returned, and whether
// store.DataFault storetest.Must call it the record's fault.
type faultCase struct {
	name string
	err  error
	data bool
}

// checkFaults fails t for each case whose probe did not fail or that
// store.DataFault classifies wrongly (wrapped, as the writer sees it).
func checkFaults(t *testing.T, cases []faultCase) {
	t.Helper()
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("%s: the probe did not fail", c.name)
			continue
		}
		if got := store.DataFault(fmt.Errorf("insert requests: %w", c.err)); got != c.data {
			t.Errorf("%s (%T: %v): store.DataFault %v, want %v", c.name, c.err, c.err, got, c.data)
		}
	}
}

// TestDataFault classifies real errors of both engines: only those about
// the data itself may cost a record.
func TestDataFault(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "probe.db")
		db, err := sql.Open("sqlite", file+"?_pragma=busy_timeout(0)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("INSERT INTO t (id, v) VALUES (1, 'a')"); err != nil {
			t.Fatal(err)
		}
		probe := func(q string) error { _, err := db.Exec(q); return err }
		cases := []faultCase{
			{"not null", probe("INSERT INTO t (id, v) VALUES (2, NULL)"), true},
			{"unique", probe("INSERT INTO t (id, v) VALUES (3, 'a')"), true},
			{"mismatch", probe("INSERT INTO t (id, v) VALUES ('abc', 'b')"), true},
			{"too big", probe("SELECT zeroblob(2000000000)"), true},
		}
		// Another session holds the write lock.
		other, err := sql.Open("sqlite", file+"?_txlock=immediate")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.Begin()
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, faultCase{"busy", probe("INSERT INTO t (id, v) VALUES (4, 'c')"), false})
		tx.Rollback()
		if _, err := db.Exec("PRAGMA max_page_count = 2"); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, faultCase{"full", probe("INSERT INTO t (v) SELECT hex(zeroblob(100000))"), false})
		checkFaults(t, cases)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.PostgresSchema(t)
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ctx := storetest.Ctx(t)
		if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		// Each probe runs in a session of its own, so that what one sets
		// (read-only, timeouts) does not leak into the next.
		probe := func(stmts ...string) error {
			conn, err := sql.Open("pgx", dsn)
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetMaxOpenConns(1)
			for _, q := range stmts {
				if _, err := conn.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}
		held := holdTable(t, db, "t")
		lockTimeout := probe("SET lock_timeout = '50ms'", "INSERT INTO t (id, v) VALUES (9, 'x')")
		held()
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, deadline := db.ExecContext(short, "SELECT pg_sleep(2)")
		cancel()
		refused, err := sql.Open("pgx", "postgres://ttfx:x@127.0.0.1:1/ttfx?sslmode=disable&connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		defer refused.Close()
		checkFaults(t, []faultCase{
			{"not null 23502", probe("INSERT INTO t (id, v) VALUES (1, NULL)"), true},
			{"out of range 22003", probe("INSERT INTO t (id, v) VALUES (3000000000, 'a')"), true},
			{"bad text 22021", probe("INSERT INTO t (id, v) VALUES (2, convert_from('\\xff'::bytea, 'UTF8'))"), true},
			{"read only 25006", probe("SET default_transaction_read_only = on", "INSERT INTO t (id, v) VALUES (4, 'a')"), false},
			{"lock timeout 55P03", lockTimeout, false},
			{"statement timeout 57014", probe("SET statement_timeout = '20ms'", "SELECT pg_sleep(2)"), false},
			{"context deadline", deadline, false},
			{"connection refused", refused.PingContext(ctx), false},
			{"no such table 42P01", probe("INSERT INTO missing (id) VALUES (1)"), false},
			{"invalid record", fmt.Errorf("%w: empty request id", store.ErrInvalidRecord), true},
		})
	})
}

// TestDataFaultClickHouse probes a real ClickHouse server for the errors
// the writer storetest.Must tell apart: a value the server cannot take is the
// record's fault, a missing table or a lost server is an outage.
func TestDataFaultClickHouse(t *testing.T) {
	dsn := testenv.ClickHouseDatabase(t)
	db, err := sql.Open("clickhouse", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := storetest.Ctx(t)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id Int64, v String) ENGINE = MergeTree() ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	probe := func(q string) error {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
		}
		return rows.Err()
	}
	conv := func() error { // the driver's own refusal of a value
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		st, err := tx.PrepareContext(ctx, "INSERT INTO t (id, v)")
		if err != nil {
			return err
		}
		if _, err := st.ExecContext(ctx, "not a number", "x"); err != nil {
			return err
		}
		return tx.Commit()
	}
	refused, err := sql.Open("clickhouse", "clickhouse://127.0.0.1:1/ttfx?dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	checkFaults(t, []faultCase{
		{"cannot parse 6", probe("SELECT toInt64('abc')"), true},
		{"null in ordinary column", probe("INSERT INTO t (id, v) SELECT 1, NULL"), true},
		{"driver conversion", conv(), true},
		{"unknown table 60", probe("INSERT INTO missing (id) VALUES (1)"), false},
		{"connection refused", refused.PingContext(ctx), false},
	})
}

// holdTable locks table from a transaction of its own until the returned
// function is called.
func holdTable(t *testing.T, db *sql.DB, table string) (release func()) {
	t.Helper()
	tx, err := db.BeginTx(storetest.Ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(storetest.Ctx(t), "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	return func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.Error(err)
		}
	}
}

func TestWriterNotStarvedByReads(t *testing.T) {
	// Every read connection busy (as with a burst of /api/stats calls):
	// the writer still writes at once, on connections of its own.
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		// What one insert costs with the pools free: ClickHouse's is
		// several statements, each a part on disk, slower than a second
		// on a loaded machine.
		start := time.Now()
		storetest.Insert(t, s, storetest.FullRecord("req-baseline", storetest.Base))
		baseline := time.Since(start)
		read := storetest.ReadDB(s)
		n := read.Stats().MaxOpenConnections
		if n <= 0 {
			t.Fatal("the read pool is unbounded: it cannot be saturated, and neither can the database")
		}
		for range n {
			c, err := read.Conn(storetest.Ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			// A read in progress on every connection.
			tx, err := c.BeginTx(storetest.Ctx(t), &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			var k int
			if err := tx.QueryRowContext(storetest.Ctx(t), "SELECT COUNT(*) FROM requests").Scan(&k); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback(); c.Close() })
		}
		opts := storetest.FastRetry
		opts.WriteTimeout = 2*time.Second + 2*baseline
		opts.FlushInterval = time.Nanosecond // at once, on every engine
		w := store.NewWriter(s, opts)
		defer w.Close(context.Background())
		start = time.Now()
		w.Record(new(storetest.FullRecord("req-starved", storetest.Base)))
		deadline := time.Now().Add(3*time.Second + 2*baseline)
		for w.Stats().Written == 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		// Milliseconds when the writer has its own pool; a generous
		// bound for a loaded machine, far below the write timeout a
		// starved writer would hit.
		if d := time.Since(start); w.Stats().Written != 1 || d > time.Second+2*baseline {
			t.Errorf("with %d reads holding the read pool the record took %v (an insert with them free: %v): %+v", n, d, baseline, w.Stats())
		}
		if err := s.Ping(storetest.Ctx(t)); err != nil {
			t.Errorf("ping with the read pool busy: %v", err)
		}
	})
}
