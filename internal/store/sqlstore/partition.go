package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"
)

// On PostgreSQL the record tables are partitioned by UTC day of their
// timestamp_ns (migration 0004): retention drops a day's partitions rather
// than deleting rows, which at millions of records a day is the difference
// between a catalogue change and hours of DELETE, vacuum and bloat.

// partitionedTables are the tables partitioned by day, in the order their
// partitions are made (and dropped in reverse).
var partitionedTables = []string{"requests", "request_attempts", "request_labels"}

const dayNs = int64(24 * time.Hour)

// partitionName is the partition of table for the day starting at day
// (Unix ns).
func partitionName(table string, day int64) string {
	return table + "_d" + time.Unix(0, day).UTC().Format("20060102")
}

// partitionLock serialises partition DDL between gateways sharing a
// database ("ttfy" in ASCII: next to the migration lock's "ttfx").
const partitionLock = "SELECT pg_advisory_xact_lock(1953785465)"

// createPartitions makes the partitions of the days (Unix ns, day starts)
// that do not exist yet, in tx. Each is made as a table of its own and then
// attached: ATTACH PARTITION takes a lock on the parent that reads and
// inserts do not wait for (CREATE TABLE … PARTITION OF would take one that
// waits for every read in progress and holds up every insert behind it).
func createPartitions(ctx context.Context, tx *sql.Tx, days []int64) error {
	for _, day := range days {
		for _, table := range partitionedTables {
			name := partitionName(table, day)
			var exists bool
			if err := tx.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
				return fmt.Errorf("partition %s: %w", name, err)
			}
			if exists {
				continue
			}
			for _, q := range []string{
				fmt.Sprintf("CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS)", name, table),
				fmt.Sprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)", table, name, day, day+dayNs),
			} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("create partition %s: %w", name, err)
				}
			}
		}
	}
	return nil
}

// prepareDays makes the partitions of the day of now and the next one
// ahead of their records, so that the writer of a live gateway never waits
// for partition DDL; run at open and with every compaction.
func (s *sqlStore) prepareDays(ctx context.Context, now time.Time) error {
	today := rollup.FloorUnit(store.UnixNano(now), 24*time.Hour)
	return s.ensurePartitions(ctx, []int64{today, today + dayNs})
}

// ensurePartitions makes sure the days of recs have their partitions,
// in a transaction of its own before the insert (DDL takes locks an insert
// should not hold). Days known to exist are remembered; retention forgets
// the days it drops.
func (s *sqlStore) ensurePartitions(ctx context.Context, days []int64) error {
	var missing []int64
	for _, d := range days {
		if _, ok := s.partitions.Load(d); !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("partitions: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, partitionLock); err != nil {
		return fmt.Errorf("partitions: lock: %w", err)
	}
	if err := createPartitions(ctx, tx, missing); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("partitions: commit: %w", err)
	}
	for _, d := range missing {
		s.partitions.Store(d, struct{}{})
	}
	return nil
}

// daysOf returns the distinct UTC days (Unix ns of their start) of recs'
// timestamps, ascending.
func daysOf(ts []int64) []int64 {
	var days []int64
	for _, t := range ts {
		if d := rollup.FloorUnit(t, 24*time.Hour); !slices.Contains(days, d) {
			days = append(days, d)
		}
	}
	slices.Sort(days)
	return days
}

// partitionByDay is migration 0004 on PostgreSQL: it turns the three record
// tables of an existing database into tables partitioned by day, in place.
// Each old table is renamed, its indexes dropped (their names are reused),
// a partitioned table made LIKE it (attempts and labels with their
// request's timestamp_ns added last), a partition made for every day that
// holds records, and the rows copied over; then the old tables go.
func partitionByDay(ctx context.Context, tx *sql.Tx, _ dialect) error {
	stmts := []string{
		"ALTER TABLE requests RENAME TO requests_unpartitioned",
		"ALTER TABLE request_attempts RENAME TO request_attempts_unpartitioned",
		"ALTER TABLE request_labels RENAME TO request_labels_unpartitioned",
		"ALTER TABLE requests_unpartitioned DROP CONSTRAINT requests_pkey",
		"ALTER TABLE request_attempts_unpartitioned DROP CONSTRAINT request_attempts_pkey",
		"ALTER TABLE request_labels_unpartitioned DROP CONSTRAINT request_labels_pkey",
		"DROP INDEX requests_time", "DROP INDEX requests_group_time", "DROP INDEX requests_model_time",
		"DROP INDEX request_labels_label",

		"CREATE TABLE requests (LIKE requests_unpartitioned INCLUDING DEFAULTS) PARTITION BY RANGE (timestamp_ns)",
		"ALTER TABLE requests ADD PRIMARY KEY (request_id, timestamp_ns)",
		"CREATE INDEX requests_time ON requests (timestamp_ns, request_id)",
		"CREATE INDEX requests_group_time ON requests (group_name, timestamp_ns)",
		"CREATE INDEX requests_model_time ON requests (model, timestamp_ns)",
		"CREATE TABLE request_attempts (LIKE request_attempts_unpartitioned INCLUDING DEFAULTS, timestamp_ns BIGINT NOT NULL) PARTITION BY RANGE (timestamp_ns)",
		"ALTER TABLE request_attempts ADD PRIMARY KEY (request_id, attempt, timestamp_ns)",
		"CREATE TABLE request_labels (LIKE request_labels_unpartitioned INCLUDING DEFAULTS, timestamp_ns BIGINT NOT NULL) PARTITION BY RANGE (timestamp_ns)",
		"ALTER TABLE request_labels ADD PRIMARY KEY (request_id, position, timestamp_ns)",
		"CREATE INDEX request_labels_label ON request_labels (label, timestamp_ns, request_id)",
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("partition: %s: %w", q, err)
		}
	}
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT timestamp_ns / $1 FROM requests_unpartitioned", dayNs)
	if err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	var days []int64
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			rows.Close()
			return fmt.Errorf("partition: %w", err)
		}
		days = append(days, d*dayNs)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("partition: %w", err)
	}
	slices.Sort(days)
	if err := createPartitions(ctx, tx, days); err != nil {
		return err
	}
	for _, q := range []string{
		"INSERT INTO requests SELECT * FROM requests_unpartitioned",
		"INSERT INTO request_attempts SELECT a.*, r.timestamp_ns FROM request_attempts_unpartitioned a JOIN requests_unpartitioned r ON r.request_id = a.request_id",
		"INSERT INTO request_labels SELECT l.*, r.timestamp_ns FROM request_labels_unpartitioned l JOIN requests_unpartitioned r ON r.request_id = l.request_id",
		"DROP TABLE request_labels_unpartitioned", "DROP TABLE request_attempts_unpartitioned", "DROP TABLE requests_unpartitioned",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("partition: %s: %w", q, err)
		}
	}
	return nil
}

// dropDaysBefore is DeleteBefore on a partitioned store: it drops, oldest
// first, the partitions of every day that ends at or before t, each day in
// a transaction of its own with the rollups of that time, and returns how
// many records they held. A day that t falls within is kept whole until it
// has passed too: records live at most a day past their retention, and no
// row is ever deleted one by one.
func (s *sqlStore) dropDaysBefore(ctx context.Context, t time.Time) (int, error) {
	cut := rollup.FloorUnit(store.UnixNano(t), 24*time.Hour)
	rows, err := s.write.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'requests'::regclass`)
	if err != nil {
		return 0, fmt.Errorf("delete: partitions: %w", err)
	}
	var days []int64
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return 0, fmt.Errorf("delete: partitions: %w", err)
		}
		stamp, ok := strings.CutPrefix(name, "requests_d")
		if !ok {
			continue
		}
		day, err := time.Parse("20060102", stamp)
		if err != nil {
			continue
		}
		if d := day.UnixNano(); d < cut {
			days = append(days, d)
		}
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("delete: partitions: %w", err)
	}
	slices.Sort(days)
	total := 0
	for _, day := range days {
		n, err := s.dropDay(ctx, day)
		total += n
		if err != nil {
			return total, err
		}
	}
	// The rollups of the dropped time (and of any day without records).
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return total, fmt.Errorf("delete: %w", err)
	}
	defer tx.Rollback()
	if err := deleteRollupsBefore(ctx, tx, cut); err != nil {
		return total, err
	}
	if err := tx.Commit(); err != nil {
		return total, fmt.Errorf("delete: commit: %w", err)
	}
	return total, nil
}

// dropDay drops the partitions of one day and returns the records they held.
func (s *sqlStore) dropDay(ctx context.Context, day int64) (int, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, partitionLock); err != nil {
		return 0, fmt.Errorf("delete: lock: %w", err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+partitionName("requests", day)).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete: count %s: %w", partitionName("requests", day), err)
	}
	for _, table := range slices.Backward(partitionedTables) {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+partitionName(table, day)); err != nil {
			return 0, fmt.Errorf("delete: drop %s: %w", partitionName(table, day), err)
		}
	}
	if err := deleteRollupsBefore(ctx, tx, day+dayNs); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete: commit: %w", err)
	}
	s.partitions.Delete(day)
	return n, nil
}
