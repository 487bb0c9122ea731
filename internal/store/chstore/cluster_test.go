package chstore

import (
	"database/sql"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestClickHouseTwoShards runs the store over a cluster of two ClickHouse
// servers of its own, two shards of one remote_servers cluster, in the
// layout docs/scale.md describes: each node's local tables (made by ttfx's
// migrations, one node at a time: ON CLUSTER needs ZooKeeper on 18.16) and
// Distributed tables over them. Two gateways, one on each node, open the
// store at once and write through their own writers. Then:
//
//   - every record is stored once, spread over both shards, and listed and
//     found through either gateway;
//   - stats from the rollups are exact (counts, statuses, labels, min, max,
//     mean; percentiles within the sketch's bound) before and after
//     compaction, which reads and writes rollups on both shards;
//   - one shard killed while the gateways write is an outage each writer
//     counts (failed batches, retrying, nothing dropped); once it is back
//     every record is written once and the stats are exact again;
//   - retention drops the oldest day's partitions on both shards, and the
//     rest stays exact.
func TestClickHouseTwoShards(t *testing.T) {
	nodes := testenv.StartClickHouseCluster(t, "ttfx", 2)
	const days = 3
	now := storetest.RollupBase.Add(days*24*time.Hour + time.Hour)

	// Two gateways start at once on an empty cluster, each on its node.
	stores := make([]store.Store, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, n := range nodes {
		wg.Go(func() { stores[i], errs[i] = store.Open(storetest.Ctx(t), n.DSN("ttfx")+"?cluster=ttfx") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("gateway %d: %v", i, err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	local := make([]*sql.DB, len(nodes)) // each node's local tables, as an operator sees them
	for i, n := range nodes {
		local[i] = clickhouse.OpenDB(&clickhouse.Options{Addr: []string{n.Addr()}, Auth: clickhouse.Auth{Database: "ttfx_local"}})
		t.Cleanup(func() { local[i].Close() })
		for table := range chShardKeys {
			engines := tableEngines(t, local[i], table)
			if engines["ttfx_local"] != "ReplacingMergeTree" && engines["ttfx_local"] != "MergeTree" || engines["ttfx"] != "Distributed" {
				t.Fatalf("node %d table %s: engines %v, want a MergeTree in ttfx_local and a Distributed in ttfx", i, table, engines)
			}
		}
		if n := nodeCount(t, local[i], "SELECT count() FROM schema_migrations"); n != len(mustMigrations(t)) {
			t.Fatalf("node %d: %d migrations applied, want %d (once each)", i, n, len(mustMigrations(t)))
		}
	}
	writers := make([]*store.Writer, 2)
	for i, s := range stores {
		writers[i] = store.NewWriter(s, store.WriterOptions{MaxBackoff: time.Second})
	}
	// recordAll hands recs to the two gateways' writers in turn, a few at a
	// time, as requests end on either.
	recordAll := func(recs []record.Record, pause time.Duration) {
		for i := 0; i < len(recs); i += 50 {
			for j := i; j < min(i+50, len(recs)); j++ {
				writers[(j/50)%2].Record(&recs[j])
			}
			time.Sleep(pause)
		}
	}
	drained := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Until(callDeadlineOf(t)))
		for {
			if writers[0].Stats().Queued == 0 && writers[1].Stats().Queued == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: writers still hold records: %+v %+v", what, writers[0].Stats(), writers[1].Stats())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	rng := rand.New(rand.NewPCG(47, 2))
	recs := storetest.RandomRecords(rng, 2000, days, storetest.Distributions[0])
	recordAll(recs, 10*time.Millisecond)
	drained("first records")
	checkRecords := func(stage string, recs []record.Record) {
		t.Helper()
		total := 0
		for i, db := range local {
			n := nodeCount(t, db, "SELECT uniqExact(request_id) FROM requests")
			if n == 0 || n == len(recs) {
				t.Errorf("%s: shard %d holds %d of %d records: not sharded", stage, i+1, n, len(recs))
			}
			total += n
		}
		if total != len(recs) {
			t.Errorf("%s: the shards hold %d records, want %d", stage, total, len(recs))
		}
		for i, s := range stores {
			if n := storetest.CountAll(t, s); n != len(recs) {
				t.Errorf("%s: gateway %d lists %d records, want %d", stage, i+1, n, len(recs))
			}
			for _, r := range []*record.Record{&recs[0], &recs[len(recs)/2], &recs[len(recs)-1]} {
				got, err := s.Get(storetest.Ctx(t), r.RequestID)
				if err != nil || !got.Timestamp.Equal(r.Timestamp) || got.Model != r.Model || got.Status != r.Status {
					t.Errorf("%s: gateway %d Get %s: %v %v %q %q, want %v %q %q", stage, i+1, r.RequestID, err,
						got.Timestamp, got.Model, got.Status, r.Timestamp, r.Model, r.Status)
				}
			}
		}
	}
	checkRecords("written", recs)
	storetest.CheckQueries(t, stores[0], recs, days, "written, gateway 1")
	storetest.CompactAll(t, stores[1], now)
	for i, db := range local {
		if n := nodeCount(t, db, "SELECT count() FROM rollups WHERE level > 0"); n == 0 {
			t.Errorf("shard %d holds no compacted rollups", i+1)
		}
	}
	storetest.CheckQueries(t, stores[1], recs, days, "compacted, gateway 2")
	if t.Failed() {
		return
	}

	// One shard is lost while both gateways write, and comes back.
	more := storetest.RandomRecords(rng, 1000, days, storetest.Distributions[1])
	recordAll(more[:200], 10*time.Millisecond)
	nodes[1].Stop()
	lost := time.Now()
	recordAll(more[200:], 20*time.Millisecond)
	for i, w := range writers {
		for {
			st := w.Stats()
			if st.FailedBatches > 0 && st.Retrying && st.Queued > 0 {
				break
			}
			if time.Since(lost) > 30*time.Second {
				t.Fatalf("gateway %d: 30 s after a shard was lost its writer says %+v, want failed batches, retrying, records held", i+1, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	nodes[1].Start()
	drained("after the shard came back")
	all := slices.Concat(recs, more)
	var written uint64
	for i, w := range writers {
		st := w.Stats()
		t.Logf("gateway %d writer after the outage: %+v", i+1, st)
		if st.Dropped != 0 || st.Rejected != 0 || st.LastError == "" {
			t.Errorf("gateway %d: %+v, want nothing dropped or rejected and the outage's error told", i+1, st)
		}
		written += st.Written
	}
	if written != uint64(len(all)) {
		t.Errorf("the writers wrote %d records, want %d", written, len(all))
	}
	checkRecords("after the outage", all)
	storetest.CheckQueries(t, stores[0], all, days, "after the outage")
	storetest.CompactAll(t, stores[0], now)
	storetest.CheckQueries(t, stores[1], all, days, "after the outage, compacted")

	// A closed day's rollups are one part on each shard (mergeDay).
	day0 := strconv.FormatInt(storetest.RollupBase.UnixNano()/chDayNs, 10)
	for i, db := range local {
		if n := nodeCount(t, db, "SELECT count() FROM system.parts WHERE database = 'ttfx_local' AND active AND table = 'rollups' AND partition = ?", day0); n != 1 {
			t.Errorf("shard %d: day %s of rollups is in %d parts, want 1", i+1, day0, n)
		}
	}

	// Retention: the first day goes from both shards.
	cut := storetest.RollupBase.Add(24 * time.Hour)
	var kept []record.Record
	for _, r := range all {
		if !r.Timestamp.Before(cut) {
			kept = append(kept, r)
		}
	}
	tables := []string{"requests", "request_ids", "rollups", "rollup_marks"}
	for i, db := range local {
		for _, table := range tables {
			if n := partitionParts(t, db, table, day0); n == 0 {
				t.Fatalf("shard %d has no day %s in %s before retention: the check below would prove nothing", i+1, day0, table)
			}
		}
	}
	for _, w := range writers {
		if err := w.Close(storetest.Ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := stores[1].DeleteBefore(storetest.Ctx(t), cut, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(all)-len(kept) {
		t.Errorf("retention dropped %d records, want %d", n, len(all)-len(kept))
	}
	for i, db := range local {
		for _, table := range tables {
			if n := partitionParts(t, db, table, day0); n != 0 {
				t.Errorf("shard %d: day %s of %s still has %d parts after retention", i+1, day0, table, n)
			}
		}
	}
	checkRecords("after retention", kept)
	storetest.CheckQueries(t, stores[0], kept, days, "after retention")

	// What the cluster costs on disk is the sum of its nodes.
	sizes, err := stores[0].(store.Sizer).StorageSize(storetest.Ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var sum, want int64
	for _, sz := range sizes {
		sum += sz.Bytes
	}
	for _, db := range local {
		want += int64(nodeCount(t, db, "SELECT toInt64(sum(bytes_on_disk)) FROM system.parts WHERE database = 'ttfx_local' AND active"))
	}
	if sum != want || sum == 0 {
		t.Errorf("StorageSize sums to %d bytes, the nodes' parts to %d", sum, want)
	}
}

// tableEngines returns the engine of each table named table, by database.
func tableEngines(t *testing.T, db *sql.DB, table string) map[string]string {
	t.Helper()
	rows, err := db.QueryContext(storetest.Ctx(t), "SELECT database, engine FROM system.tables WHERE name = ?", table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var d, e string
		if err := rows.Scan(&d, &e); err != nil {
			t.Fatal(err)
		}
		out[d] = e
	}
	return out
}

func nodeCount(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n any
	if err := db.QueryRowContext(storetest.Ctx(t), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	switch v := n.(type) {
	case uint64:
		return int(v)
	case int64:
		return int(v)
	}
	t.Fatalf("%s: a %T", q, n)
	return 0
}

func partitionParts(t *testing.T, db *sql.DB, table, partition string) int {
	t.Helper()
	return nodeCount(t, db, "SELECT count() FROM system.parts WHERE database = 'ttfx_local' AND active AND table = ? AND partition = ?", table, partition)
}

func mustMigrations(t *testing.T) []migration {
	ms, err := loadCHMigrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// callDeadlineOf is when storetest.Ctx's contexts end for t.
func callDeadlineOf(t *testing.T) time.Time {
	d, _ := storetest.Ctx(t).Deadline()
	return d
}
