package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

	"github.com/ttfx/ttfx/internal/testenv"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

func TestRoundTrip(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		full := storetest.FullRecord("req-full", storetest.Base)
		sparse := storetest.SparseRecord("req-sparse", storetest.Base.Add(time.Second))
		// Served under the name asked: upstream_model is the model.
		same := storetest.FullRecord("req-same", storetest.Base.Add(2*time.Second))
		same.UpstreamModel = same.Model
		storetest.Insert(t, s, full, sparse, same)
		for _, want := range []record.Record{full, sparse, same} {
			got, err := s.Get(storetest.Ctx(t), want.RequestID)
			if err != nil {
				t.Fatalf("get %s: %v", want.RequestID, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("get %s:\n got %+v\nwant %+v", want.RequestID, got, want)
			}
			// The API returns json.Marshal(record): the stored record storetest.Must
			// give byte-identical JSON, nanoseconds and absent marks
			// included.
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			if string(gj) != string(wj) {
				t.Errorf("json of %s:\n got %s\nwant %s", want.RequestID, gj, wj)
			}
		}
		gj, _ := json.Marshal(storetest.Must(s.Get(storetest.Ctx(t), "req-sparse")))
		for _, field := range []string{`"first_text_delta_ms":null`, `"upstream_headers_ms":null`, `"visible_output_tps":null`, `"input":null`, `"attempts":[]`, `"diagnosis":[]`} {
			if !strings.Contains(string(gj), field) {
				t.Errorf("sparse record JSON lacks %s: %s", field, gj)
			}
		}
		if _, err := s.Get(storetest.Ctx(t), "req-missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get missing: %v, want ErrNotFound", err)
		}
		if _, err := s.Get(storetest.Ctx(t), strings.Repeat("x", store.MaxIDLen+1)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("get over-long id: %v, want ErrNotFound", err)
		}
	})
}

func TestInsertIdempotent(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		r := storetest.FullRecord("req-dup", storetest.Base)
		storetest.Insert(t, s, r)
		// A batch retried after an ambiguous failure, and a duplicate
		// within one batch, are kept once.
		storetest.Insert(t, s, r, storetest.FullRecord("req-other", storetest.Base), r)
		p, err := s.List(storetest.Ctx(t), store.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) != 2 {
			t.Fatalf("%d records, want 2", len(p.Records))
		}
		got := storetest.Must(s.Get(storetest.Ctx(t), "req-dup"))
		if len(got.Attempts) != 2 || len(got.Diagnosis) != 2 {
			t.Errorf("duplicate insert changed side tables: %d attempts, %d labels", len(got.Attempts), len(got.Diagnosis))
		}
	})
}

func TestInsertDuplicateIDKeepsFirstRecordWhole(t *testing.T) {
	// A second record with a stored request id is skipped whole: its
	// attempts and labels storetest.Must not be added to the first record's, which
	// the per-table ON CONFLICT alone would do wherever they do not
	// collide (more attempts, more labels).
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		first := storetest.FullRecord("req-dup", storetest.Base)
		storetest.Insert(t, s, first)
		second := storetest.FullRecord("req-dup", storetest.Base.Add(time.Hour))
		second.Model = "impostor"
		second.Attempts = append(slices.Clone(first.Attempts),
			record.Attempt{Channel: "x", Status: record.StatusUpstreamHTTPError, HTTPStatus: 500})
		second.Diagnosis = []string{"truncated", "upstream_slow", "generation_slow"}
		storetest.Insert(t, s, second, storetest.FullRecord("req-new", storetest.Base))
		if got := storetest.Must(s.Get(storetest.Ctx(t), "req-dup")); !reflect.DeepEqual(got, first) {
			t.Errorf("after a second record with its id:\n got %+v\nwant %+v", got, first)
		}
		if got := storetest.Must(s.Get(storetest.Ctx(t), "req-new")); len(got.Attempts) != 2 || len(got.Diagnosis) != 2 {
			t.Errorf("the new record of the batch: %d attempts, %d labels", len(got.Attempts), len(got.Diagnosis))
		}

		// Within one batch the first of two records with one id is kept,
		// whole.
		a := storetest.SparseRecord("req-twice", storetest.Base)
		a.Diagnosis = []string{"local_overhead"}
		b := storetest.FullRecord("req-twice", storetest.Base)
		storetest.Insert(t, s, a, b)
		if got := storetest.Must(s.Get(storetest.Ctx(t), "req-twice")); !reflect.DeepEqual(got, a) {
			t.Errorf("two records with one id in a batch:\n got %+v\nwant %+v", got, a)
		}
	})
}

func TestInsertInvalid(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		bad := []record.Record{
			{Timestamp: storetest.Base}, // no id
			{RequestID: "req-1"},        // no timestamp
			{RequestID: strings.Repeat("a", store.MaxIDLen+1), Timestamp: storetest.Base}, // too long
			{RequestID: "req\x00x", Timestamp: storetest.Base},                            // control character
			{RequestID: "req-\xff", Timestamp: storetest.Base},                            // invalid UTF-8
			{RequestID: "req-old", Timestamp: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)},
		}
		for _, r := range bad {
			err := s.Insert(storetest.Ctx(t), []record.Record{storetest.FullRecord("req-good", storetest.Base), r})
			if !errors.Is(err, store.ErrInvalidRecord) {
				t.Errorf("insert %q: %v, want ErrInvalidRecord", r.RequestID, err)
			}
		}
		if _, err := s.Get(storetest.Ctx(t), "req-good"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a batch with an invalid record was partly written: %v", err)
		}
	})
}

func TestInsertCleansStrings(t *testing.T) {
	// The model name is the one string a client chooses. Invalid UTF-8 and
	// NUL would make PostgreSQL refuse the whole batch; both engines store
	// the same cleaned value instead.
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		r := storetest.SparseRecord("req-clean", storetest.Base)
		r.Model = "gpt\x00-4o\xff" + strings.Repeat("é", 200)
		r.Diagnosis = []string{"first\x00label"}
		storetest.Insert(t, s, r)
		got := storetest.Must(s.Get(storetest.Ctx(t), "req-clean"))
		want := "gpt-4o\uFFFD" + strings.Repeat("é", (store.MaxNameLen-len("gpt-4o\uFFFD"))/2)
		if got.Model != want {
			t.Errorf("model stored as %q (%d bytes), want %q", got.Model, len(got.Model), want)
		}
		if !slices.Equal(got.Diagnosis, []string{"firstlabel"}) {
			t.Errorf("labels %q", got.Diagnosis)
		}
	})
}

// listFixture inserts 30 records over 30 minutes, several sharing a
// timestamp so that the cursor's tie-break by id is exercised.
func listFixture(t *testing.T, s store.Store) []record.Record {
	var recs []record.Record
	for i := range 30 {
		r := storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i/3)*time.Minute))
		r.Model = []string{"gpt-4o", "claude", "gemini"}[i%3]
		r.Channel = []string{"ch-a", "ch-b"}[i%2]
		r.Group = []string{"team-a", "team-b", "team-c", "team-d", "team-e"}[i%5]
		r.KeyName = r.Group + "-app"
		r.Diagnosis = []string{}
		if i%4 == 0 {
			r.Status = record.StatusTruncated
			r.Diagnosis = []string{"truncated"}
		}
		if i%7 == 0 {
			r.Diagnosis = append(r.Diagnosis, "generation_slow")
		}
		recs = append(recs, r)
	}
	storetest.Insert(t, s, recs...)
	return recs
}

func TestList(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		recs := listFixture(t, s)
		newestFirst := slices.Clone(recs)
		slices.SortFunc(newestFirst, func(a, b record.Record) int {
			if c := b.Timestamp.Compare(a.Timestamp); c != 0 {
				return c
			}
			return strings.Compare(b.RequestID, a.RequestID)
		})
		ids := func(rs []record.Record) []string {
			out := []string{}
			for _, r := range rs {
				out = append(out, r.RequestID)
			}
			return out
		}
		where := func(keep func(r record.Record) bool) []string {
			var out []record.Record
			for _, r := range newestFirst {
				if keep(r) {
					out = append(out, r)
				}
			}
			return ids(out)
		}
		cases := []struct {
			name string
			f    store.Filter
			want []string
		}{
			{"all", store.Filter{}, ids(newestFirst)},
			{"model", store.Filter{Model: "claude"}, where(func(r record.Record) bool { return r.Model == "claude" })},
			{"channel", store.Filter{Channel: "ch-b"}, where(func(r record.Record) bool { return r.Channel == "ch-b" })},
			{"group", store.Filter{Group: "team-c"}, where(func(r record.Record) bool { return r.Group == "team-c" })},
			{"status", store.Filter{Status: record.StatusTruncated}, where(func(r record.Record) bool { return r.Status == record.StatusTruncated })},
			{"label primary", store.Filter{Label: "truncated"}, where(func(r record.Record) bool { return slices.Contains(r.Diagnosis, "truncated") })},
			{"label second", store.Filter{Label: "generation_slow"}, where(func(r record.Record) bool { return slices.Contains(r.Diagnosis, "generation_slow") })},
			{"key", store.Filter{KeyName: "team-a-app"}, where(func(r record.Record) bool { return r.KeyName == "team-a-app" })},
			{"from to", store.Filter{From: storetest.Base.Add(2 * time.Minute), To: storetest.Base.Add(5 * time.Minute)}, where(func(r record.Record) bool {
				return !r.Timestamp.Before(storetest.Base.Add(2*time.Minute)) && r.Timestamp.Before(storetest.Base.Add(5*time.Minute))
			})},
			{"combined", store.Filter{Model: "gpt-4o", Channel: "ch-a", Label: "truncated"}, where(func(r record.Record) bool {
				return r.Model == "gpt-4o" && r.Channel == "ch-a" && slices.Contains(r.Diagnosis, "truncated")
			})},
			{"none", store.Filter{Model: "no-such-model"}, []string{}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.name != "none" && len(c.want) == 0 {
					t.Fatal("fixture selects nothing: the case tests nothing")
				}
				// Page through in small pages: every record exactly once, in order.
				var got []string
				f := c.f
				f.Limit = 4
				for pages := 0; ; pages++ {
					if pages > 20 {
						t.Fatal("pagination does not end")
					}
					p, err := s.List(storetest.Ctx(t), f)
					if err != nil {
						t.Fatal(err)
					}
					if len(p.Records) > 4 {
						t.Fatalf("page of %d > limit 4", len(p.Records))
					}
					got = append(got, ids(p.Records)...)
					if p.Next == "" {
						break
					}
					f.Cursor = p.Next
				}
				if got == nil {
					got = []string{}
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("got  %v\nwant %v", got, c.want)
				}
			})
		}
		// Listed records are whole: attempts and labels attached.
		p, err := s.List(storetest.Ctx(t), store.Filter{Label: "generation_slow", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := newestFirst[slices.IndexFunc(newestFirst, func(r record.Record) bool { return slices.Contains(r.Diagnosis, "generation_slow") })]
		if !reflect.DeepEqual(p.Records[0], want) {
			t.Errorf("listed record\n got %+v\nwant %+v", p.Records[0], want)
		}
		if _, err := s.List(storetest.Ctx(t), store.Filter{Cursor: "not a cursor!"}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("bad cursor: %v", err)
		}
		for _, l := range []int{-1, store.MaxLimit + 1} {
			if _, err := s.List(storetest.Ctx(t), store.Filter{Limit: l}); !errors.Is(err, store.ErrBadQuery) {
				t.Errorf("limit %d: %v", l, err)
			}
		}
	})
}

func TestDeleteBefore(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		if s.Engine() == "clickhouse" {
			t.Skip("ClickHouse deletes whole days: TestClickHouseDeleteBeforeDropsDays")
		}
		if s.Engine() == "postgres" {
			testDropDays(t, s)
			return
		}
		recs := listFixture(t, s) // 3 records a minute for 10 minutes
		cut := storetest.Base.Add(4 * time.Minute)
		n, err := s.DeleteBefore(storetest.Ctx(t), cut, 5)
		if err != nil || n != 5 {
			t.Fatalf("first batch: %d, %v; want 5", n, err)
		}
		// Oldest first.
		for _, r := range recs[:5] {
			if _, err := s.Get(storetest.Ctx(t), r.RequestID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s survived the first batch: %v", r.RequestID, err)
			}
		}
		n, err = s.DeleteBefore(storetest.Ctx(t), cut, 100)
		if err != nil || n != 7 {
			t.Fatalf("second batch: %d, %v; want 7", n, err)
		}
		if n, err := s.DeleteBefore(storetest.Ctx(t), cut, 100); err != nil || n != 0 {
			t.Fatalf("third batch: %d, %v; want 0", n, err)
		}
		p := storetest.Must(s.List(storetest.Ctx(t), store.Filter{Limit: store.MaxLimit}))
		if len(p.Records) != 18 {
			t.Fatalf("%d records left, want 18", len(p.Records))
		}
		for _, r := range p.Records {
			if r.Timestamp.Before(cut) {
				t.Errorf("%s at %v survived", r.RequestID, r.Timestamp)
			}
		}
		// Side tables go with their records.
		db := storetest.ReadDB(s)
		for _, table := range []string{"request_attempts", "request_labels"} {
			var orphans int
			err := db.QueryRowContext(storetest.Ctx(t), "SELECT COUNT(*) FROM "+table+
				" x WHERE NOT EXISTS (SELECT 1 FROM requests r WHERE r.request_id = x.request_id)").Scan(&orphans)
			if err != nil || orphans != 0 {
				t.Errorf("%s: %d orphans, %v", table, orphans, err)
			}
		}
	})
}

func TestRetention(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		if s.Engine() == "clickhouse" {
			t.Skip("ClickHouse deletes whole days: TestClickHouseDeleteBeforeDropsDays")
		}
		// 2500 records, one a minute; retention with a fake "now" keeps the
		// last 1000 minutes. purge takes several batches of 1000.
		var recs []record.Record
		for i := range 2500 {
			recs = append(recs, storetest.SparseRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Minute)))
		}
		storetest.Insert(t, s, recs...)
		now := storetest.Base.Add(2500 * time.Minute)
		// Records of the last 1000 minutes stay; on PostgreSQL, those of
		// the whole day the cut falls within.
		first := 1500
		if s.Engine() == "postgres" {
			cutDay := now.Add(-1000 * time.Minute).Truncate(24 * time.Hour)
			first = int(math.Ceil(cutDay.Sub(storetest.Base).Minutes()))
		}
		want := 2500 - first
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			store.RunRetention(ctx, s, 1000*time.Minute, time.Hour, func() time.Time { return now }, nil)
			close(done)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var kept []record.Record
			for f := (store.Filter{Limit: store.MaxLimit}); ; {
				p := storetest.Must(s.List(storetest.Ctx(t), f))
				kept = append(kept, p.Records...)
				if f.Cursor = p.Next; p.Next == "" {
					break
				}
			}
			if len(kept) == want {
				if oldest := kept[len(kept)-1]; oldest.RequestID != storetest.IDN(first) {
					t.Errorf("oldest kept record %s, want %s", oldest.RequestID, storetest.IDN(first))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("retention left %d records, want %d", len(kept), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("RunRetention did not return after its context ended")
		}
	})
}

func TestOpenDSN(t *testing.T) {
	dir := t.TempDir()
	for _, dsn := range []string{"sqlite:" + dir + "/a.db", "sqlite://" + dir + "/b.db", dir + "/c.db"} {
		s, err := store.Open(context.Background(), dsn)
		if err != nil {
			t.Errorf("open %s: %v", dsn, err)
			continue
		}
		if s.Engine() != "sqlite" {
			t.Errorf("%s: engine %s", dsn, s.Engine())
		}
		s.Close()
	}
	for _, dsn := range []string{"", "mysql://u:secret@h/db", "sqlite:", "sqlite:a.db?mode=ro"} {
		if s, err := store.Open(context.Background(), dsn); err == nil {
			s.Close()
			t.Errorf("open %q succeeded", dsn)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	// An unreachable PostgreSQL fails Open with a clear error, and the
	// password stays out of it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := store.Open(ctx, "postgres://ttfx:hunter2@127.0.0.1:1/ttfx?sslmode=disable&connect_timeout=2")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("open unreachable postgres: %v", err)
	}
}

func TestSpanPrecision(t *testing.T) {
	// Float milliseconds keep nanoseconds exactly on both engines
	// (timeline.fromMs rounds to the nearest nanosecond).
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		r := storetest.SparseRecord("req-ns", storetest.Base)
		r.FirstTextDeltaMs = timeline.At(123456789 * time.Nanosecond)
		r.TotalHandlerMs = timeline.At(86399999999999 * time.Nanosecond) // a day less 1ns
		storetest.Insert(t, s, r)
		got := storetest.Must(s.Get(storetest.Ctx(t), "req-ns"))
		if got.FirstTextDeltaMs != r.FirstTextDeltaMs || got.TotalHandlerMs != r.TotalHandlerMs {
			t.Errorf("got %v %v, want %v %v", got.FirstTextDeltaMs, got.TotalHandlerMs, r.FirstTextDeltaMs, r.TotalHandlerMs)
		}
	})
}

func TestFilterBoundsOutsideStoredRange(t *testing.T) {
	// Bounds a client may send, far outside what a timestamp can be, still
	// select correctly (time.UnixNano is undefined before 1678).
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		storetest.Insert(t, s, storetest.FullRecord("req-1", storetest.Base))
		for _, c := range []struct {
			f    store.Filter
			want int
		}{
			{store.Filter{From: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}, 1},
			{store.Filter{To: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)}, 1},
			{store.Filter{From: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}, 0},
			{store.Filter{From: time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)}, 0},
		} {
			p, err := s.List(storetest.Ctx(t), c.f)
			if err != nil || len(p.Records) != c.want {
				t.Errorf("%v..%v: %d records, %v; want %d", c.f.From, c.f.To, len(p.Records), err, c.want)
			}
			st, err := s.Stats(storetest.Ctx(t), store.StatsQuery{Filter: c.f})
			if err != nil || len(st.Groups) != c.want {
				t.Errorf("stats %v..%v: %d groups, %v; want %d", c.f.From, c.f.To, len(st.Groups), err, c.want)
			}
		}
	})
}

func TestConcurrentFirstOpen(t *testing.T) {
	// Replicas starting at once against an empty database: one migrates,
	// the others wait for it and find the schema in place.
	dsns := map[string]func(t *testing.T) string{
		"sqlite":     func(t *testing.T) string { return "sqlite:" + t.TempDir() + "/fresh.db" },
		"postgres":   func(t *testing.T) string { return testenv.PostgresSchema(t) },
		"clickhouse": func(t *testing.T) string { return testenv.ClickHouseDatabase(t) },
	}
	for _, e := range storetest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			dsn := dsns[e.Name](t)
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := store.Open(context.Background(), dsn)
					if err != nil {
						errs <- err
						return
					}
					defer s.Close()
					errs <- s.Insert(context.Background(), []record.Record{storetest.FullRecord(storetest.IDN(i), storetest.Base)})
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			s, err := store.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if n := storetest.CountAll(t, s); n != 4 {
				t.Errorf("%d records, want 4", n)
			}
		})
	}
}

// testDropDays is TestDeleteBefore on a store partitioned by day: whole
// days that end by the cut go, whatever the limit, with their attempts,
// labels and rollups; the day the cut falls within stays whole.
func testDropDays(t *testing.T, s store.Store) {
	day0 := storetest.Base.Truncate(24 * time.Hour)
	var recs []record.Record
	for d, n := range []int{5, 4, 3} {
		for i := range n {
			recs = append(recs, storetest.FullRecord(fmt.Sprintf("req-d%d-%d", d, i),
				day0.Add(time.Duration(d)*24*time.Hour+time.Duration(i+1)*time.Hour)))
		}
	}
	storetest.Insert(t, s, recs...)
	cut := day0.Add(36 * time.Hour) // within the second day
	if n, err := s.DeleteBefore(storetest.Ctx(t), cut, 1); err != nil || n != 5 {
		t.Fatalf("first call: %d, %v; want the first day's 5", n, err)
	}
	if n, err := s.DeleteBefore(storetest.Ctx(t), cut, 100); err != nil || n != 0 {
		t.Fatalf("second call: %d, %v; want 0", n, err)
	}
	p := storetest.Must(s.List(storetest.Ctx(t), store.Filter{Limit: store.MaxLimit}))
	if len(p.Records) != 7 {
		t.Fatalf("%d records left, want the 7 of the second and third days", len(p.Records))
	}
	db := storetest.ReadDB(s)
	for _, table := range []string{"requests", "request_attempts", "request_labels"} { // partitioned by day
		var gone, kept bool
		if err := db.QueryRowContext(storetest.Ctx(t), "SELECT to_regclass($1) IS NULL, to_regclass($2) IS NOT NULL",
			table+"_d"+day0.Format("20060102"), table+"_d"+day0.Add(24*time.Hour).Format("20060102")).Scan(&gone, &kept); err != nil {
			t.Fatal(err)
		}
		if !gone || !kept {
			t.Errorf("%s: first day's partition dropped %v, second day's kept %v", table, gone, kept)
		}
		var orphans int
		if err := db.QueryRowContext(storetest.Ctx(t), "SELECT COUNT(*) FROM "+table+
			" x WHERE NOT EXISTS (SELECT 1 FROM requests r WHERE r.request_id = x.request_id)").Scan(&orphans); err != nil || orphans != 0 {
			t.Errorf("%s: %d orphans, %v", table, orphans, err)
		}
	}
	var before, after int
	if err := db.QueryRowContext(storetest.Ctx(t), "SELECT COUNT(CASE WHEN start_ns < $1 THEN 1 END), COUNT(CASE WHEN start_ns >= $1 THEN 1 END) FROM rollups",
		day0.Add(24*time.Hour).UnixNano()).Scan(&before, &after); err != nil {
		t.Fatal(err)
	}
	if before != 0 || after == 0 {
		t.Errorf("rollups: %d left of the dropped day, %d of the kept ones", before, after)
	}
}

// TestStorageSize: every engine says what its tables cost on disk, the
// records' and the rollups' among them, largest first.
func TestStorageSize(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		var recs []record.Record
		for i := range 50 {
			recs = append(recs, storetest.FullRecord(storetest.IDN(i), storetest.Base.Add(time.Duration(i)*time.Second)))
		}
		storetest.Insert(t, s, recs...)
		tables, err := s.(store.Sizer).StorageSize(storetest.Ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for i, tb := range tables {
			got[tb.Table] = tb.Bytes
			if i > 0 && tb.Bytes > tables[i-1].Bytes {
				t.Errorf("not largest first: %v", tables)
			}
		}
		for _, want := range []string{"requests", "rollups"} {
			if got[want] <= 0 {
				t.Errorf("%s: %d bytes (%v)", want, got[want], tables)
			}
		}
	})
}
