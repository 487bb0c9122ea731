package sqlstore

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestNamesAcrossGateways: two gateways share a database, each with its
// own cache of record_names. Names one adds, the other reads, filters and
// groups by; a name added by a transaction that rolled back is not
// cached, so the id it had (SQLite gives it to the next name) never reads
// as it.
func TestNamesAcrossGateways(t *testing.T) {
	for _, e := range storetest.SQLEngines() {
		t.Run(e.Name, func(t *testing.T) {
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
			if e.Name == "postgres" {
				dsn = testenv.PostgresSchema(t)
			}
			open := func() *sqlStore {
				s, err := store.Open(storetest.Ctx(t), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s.(*sqlStore)
			}
			a, b, c := open(), open(), open()
			recs := storetest.RandomRecords(rand.New(rand.NewPCG(43, 43)), 40, 1, storetest.Distributions[1])
			recs[0].KeyName = "known-key" // c knows it when it summarises
			storetest.Insert(t, a, recs[:10]...)
			// b and c know the names of the first records.
			for _, s := range []*sqlStore{b, c} {
				if n := len(listAll(t, s)); n != 10 {
					t.Fatalf("lists %d records, want 10", n)
				}
			}

			// A transaction of a that adds a name and rolls back.
			gone := recs[10]
			gone.Channel, gone.Status = "rolled-back-channel", "rolled-back-status"
			if a.d.partitioned {
				if err := a.ensurePartitions(storetest.Ctx(t), daysOf([]int64{gone.Timestamp.UnixNano()})); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := a.write.BeginTx(storetest.Ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			fresh := map[string]int64{}
			if _, err := insertRecordsAs(storetest.Ctx(t), tx, a.d, []record.Record{gone}, 0, fresh); err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
			if _, ok := a.d.names.id("rolled-back-channel"); ok || len(fresh) == 0 {
				t.Fatalf("a rolled-back name is cached (fresh %v)", fresh)
			}

			// New names, added by a: b reads them in List, Get, a filter
			// and a summary from rows.
			for i := range recs[11:] {
				recs[11+i].Channel = "new-channel"
				recs[11+i].Status = "new-status"
				recs[11+i].KeyName = "known-key"
			}
			storetest.Insert(t, a, recs[11:]...)
			g, err := b.Get(storetest.Ctx(t), recs[11].RequestID)
			if err != nil || g.Channel != "new-channel" || g.Status != "new-status" {
				t.Fatalf("b reads %q/%q (%v), want new-channel/new-status", g.Channel, g.Status, err)
			}
			for _, s := range []*sqlStore{a, b} {
				for _, c := range []struct {
					f    store.Filter
					want int
				}{{store.Filter{Channel: "new-channel"}, len(recs) - 11}, {store.Filter{Channel: "rolled-back-channel"}, 0},
					{store.Filter{Status: "rolled-back-status"}, 0}} {
					c.f.Limit = store.MaxLimit
					p := storetest.Must(s.List(storetest.Ctx(t), c.f))
					if len(p.Records) != c.want {
						t.Errorf("filter %+v: %d records, want %d", c.f, len(p.Records), c.want)
					}
					for _, r := range p.Records {
						if r.Channel != "new-channel" {
							t.Errorf("filter %+v: a record of channel %q", c.f, r.Channel)
						}
					}
				}
			}
			// c has names of its own that this snapshot lacks (as a
			// gateway has the names it added after a summary's snapshot
			// began), as many as the snapshot has that c lacks: a summary
			// from rows must still know every name of its snapshot.
			c.d.names.add(map[string]int64{"later-1": 1 << 40, "later-2": 1<<40 + 1, "later-3": 1<<40 + 2})
			q := store.StatsQuery{Filter: store.Filter{KeyName: "known-key"}, GroupBy: []string{"channel"}}
			st, err := c.Stats(storetest.Ctx(t), q)
			if err != nil {
				t.Fatal(err)
			}
			if st.Method != store.MethodRows {
				t.Errorf("method %s, want rows", st.Method)
			}
			kept := append([]record.Record{recs[0]}, recs[11:]...) // ExactGroups does not filter by key name
			if len(st.Groups) != 2 {
				t.Errorf("%d groups, want 2 (recs[0]'s channel, new-channel)", len(st.Groups))
			}
			storetest.CheckAgainstExact(t, "c, from rows", st, storetest.ExactGroups(kept, q), q)
		})
	}
}
