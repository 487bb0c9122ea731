package sqlstore

import (
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/timeline"
)

// TestDurationsNsOnUpgrade: a database of schema 41, its durations float
// milliseconds and its names text, gets whole nanoseconds (0042) and
// names as ids of record_names (0043) when a gateway of this version
// opens it (a rebuild on SQLite, ALTER TABLE on PostgreSQL), and every
// record reads exactly as the same records written by this version read,
// with the same exact summaries, filters included.
func TestDurationsNsOnUpgrade(t *testing.T) {
	const days = 1
	recs := storetest.RandomRecords(rand.New(rand.NewPCG(42, 42)), 1200, days, storetest.Distributions[1])
	// Durations the random records may not reach: a sub-microsecond one,
	// one over the 2.1 s a 4-byte integer holds, a long stream's.
	recs[0].Fields.AuthMs = timeline.SpanOf(1)
	recs[0].Fields.TotalHandlerMs = timeline.At(3*time.Hour + 7)
	recs[0].Fields.UpstreamDoneMs = timeline.At(2200*time.Millisecond + 999)
	// Attempts, whose durations and names move too.
	for i := range recs[:100] {
		recs[i].Attempts = []record.Attempt{
			{Channel: recs[i].Channel, Status: "error", Role: "primary", Outcome: "failed", HTTPStatus: 503, Error: "upstream 503",
				UpstreamStartMs: timeline.At(time.Duration(i) * time.Microsecond), UpstreamHeadersMs: timeline.SpanOf(123456789)},
			{Channel: "backup-" + recs[i].Channel, Status: recs[i].Status, Role: "retry", Outcome: "won", HTTPStatus: 200,
				UpstreamStartMs: timeline.At(time.Second + 1), FirstResponseAtMs: timeline.At(2*time.Second + 3)},
		}
	}
	for _, e := range storetest.SQLEngines() {
		t.Run(e.Name, func(t *testing.T) {
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "old.db")
			fresh := "sqlite:" + filepath.Join(t.TempDir(), "new.db")
			if e.Name == "postgres" {
				dsn, fresh = testenv.PostgresSchema(t), testenv.PostgresSchema(t)
			}
			d, db := openRaw(t, dsn)
			if err := migrateTo(storetest.Ctx(t), db, d, 41); err != nil {
				t.Fatal(err)
			}
			if d.partitioned {
				s := newSQLStore(d, db, db)
				ts := make([]int64, len(recs))
				for i := range recs {
					ts[i] = recs[i].Timestamp.UnixNano()
				}
				if err := s.ensurePartitions(storetest.Ctx(t), daysOf(ts)); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := db.BeginTx(storetest.Ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := insertRecordsAs(storetest.Ctx(t), tx, d, recs, 41, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := writeRollups(storetest.Ctx(t), tx, d, "w41", stored); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			var before float64
			if err := db.QueryRowContext(storetest.Ctx(t), "SELECT SUM(total_handler_ms) FROM requests").Scan(&before); err != nil {
				t.Fatal(err)
			}
			db.Close()

			s, err := store.Open(storetest.Ctx(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var typ string
			q := "SELECT typeof(total_handler_ns) FROM requests WHERE total_handler_ns IS NOT NULL LIMIT 1"
			if e.Name == "postgres" {
				q = "SELECT pg_typeof(total_handler_ns)::text FROM requests WHERE total_handler_ns IS NOT NULL LIMIT 1"
			}
			if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t), q).Scan(&typ); err != nil || (typ != "integer" && typ != "bigint") {
				t.Errorf("total_handler_ns is %q (%v) after the upgrade, want an integer", typ, err)
			}
			q = "SELECT lower(type) FROM pragma_table_info('request_attempts') WHERE name = 'channel'"
			if e.Name == "postgres" {
				q = "SELECT data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'request_attempts' AND column_name = 'channel'"
			}
			if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t), q).Scan(&typ); err != nil || (typ != "integer" && typ != "bigint") {
				t.Errorf("request_attempts.channel is %q (%v) after the upgrade, want an id", typ, err)
			}
			if n := storetest.CountRows(t, s, "SELECT COUNT(*) FROM requests"); n != len(recs) {
				t.Errorf("%d requests after the upgrade, want %d", n, len(recs))
			}
			now, err := store.Open(storetest.Ctx(t), fresh)
			if err != nil {
				t.Fatal(err)
			}
			defer now.Close()
			storetest.Insert(t, now, recs...)

			got, want := listAll(t, s), listAll(t, now)
			if len(got) != len(recs) || len(want) != len(recs) {
				t.Fatalf("%d records after the upgrade, %d written by this version, want %d", len(got), len(want), len(recs))
			}
			for id, w := range want {
				if g := got[id]; !reflect.DeepEqual(g, w) {
					t.Errorf("%s after the upgrade:\n%+v\nwritten by this version:\n%+v", id, g, w)
					break
				}
			}
			g0 := got[recs[0].RequestID]
			if v, _ := g0.Fields.AuthMs.Get(); v != 1 {
				t.Errorf("auth 1 ns read back as %v", v)
			}
			if v, _ := g0.Fields.TotalHandlerMs.Get(); v != 3*time.Hour+7 {
				t.Errorf("total 3h+7ns read back as %v", v)
			}
			var after float64
			if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t), "SELECT SUM(total_handler_ns) / 1e6 FROM requests").Scan(&after); err != nil {
				t.Fatal(err)
			}
			if d := after - before; d > before*1e-9 || d < -before*1e-9 {
				t.Errorf("sum of total_handler: %v ms before the upgrade, %v after", before, after)
			}
			// Filters on names, on the migrated store and on one written
			// by this version.
			for _, f := range []store.Filter{{Channel: recs[0].Channel}, {Group: recs[0].Group, Status: recs[0].Status},
				{KeyName: recs[0].KeyName}, {Channel: "no such channel"}} {
				f.Limit = store.MaxLimit
				a, b := storetest.Must(s.List(storetest.Ctx(t), f)), storetest.Must(now.List(storetest.Ctx(t), f))
				if !reflect.DeepEqual(a.Records, b.Records) || len(a.Records) == 0 && f.Channel != "no such channel" {
					t.Errorf("filter %+v: %d records after the upgrade, %d written by this version", f, len(a.Records), len(b.Records))
				}
			}
			storetest.CheckQueries(t, s, recs, days, "migrated")
			storetest.CompactAll(t, s, storetest.RollupBase.Add(days*24*time.Hour+time.Hour))
			storetest.CheckQueries(t, s, recs, days, "compacted")
		})
	}
}

// listAll lists every record of s by id.
func listAll(t *testing.T, s store.Store) map[string]record.Record {
	t.Helper()
	out := map[string]record.Record{}
	f := store.Filter{Limit: store.MaxLimit}
	for {
		p := storetest.Must(s.List(storetest.Ctx(t), f))
		for _, r := range p.Records {
			out[r.RequestID] = r
		}
		if p.Next == "" {
			return out
		}
		f.Cursor = p.Next
	}
}
