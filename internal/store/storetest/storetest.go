// Package storetest holds what the tests of the store packages share: the
// engines the contract suite runs on, records to store, and helpers that
// look inside a store's database. It is imported by tests only.
//
// The same tests run on every engine: SQLite in a real file in t.TempDir(),
// PostgreSQL when TTFX_TEST_POSTGRES names a server (a DSN, e.g. what
// scripts/ci-postgres.sh prints) and ClickHouse when TTFX_TEST_CLICKHOUSE
// does (scripts/ci-clickhouse.sh). Without them those runs skip, or fail
// when TTFX_REQUIRE_ALL=1 (CI). Stores open through store.Open: the test
// package imports the engine packages (sqlstore, chstore), which register
// themselves.
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/timeline"
)

// Engine is one engine the suite runs on.
type Engine struct {
	Name string
	Open func(t testing.TB) (store.Store, string) // the store and its DSN
}

// Engines are every engine, in the order the suite runs them.
func Engines() []Engine {
	return []Engine{
		{"sqlite", OpenSQLite},
		{"postgres", OpenPostgres},
		{"clickhouse", OpenClickHouse},
	}
}

// SQLEngines are the Engines of sqlStore (one schema, migrations/), for the
// tests of what they share beyond the Store contract.
func SQLEngines() []Engine {
	var out []Engine
	for _, e := range Engines() {
		if e.Name != "clickhouse" {
			out = append(out, e)
		}
	}
	return out
}

// pooled is a store over database/sql pools (every engine's).
type pooled interface {
	Pools() (read, write *sql.DB)
}

// ReadDB and WriteDB return a store's pools, for tests that look inside.
func ReadDB(s store.Store) *sql.DB {
	r, _ := s.(pooled).Pools()
	return r
}

func WriteDB(s store.Store) *sql.DB {
	_, w := s.(pooled).Pools()
	return w
}

// SetMaxStatsRows lowers a store's MaxStatsRows.
func SetMaxStatsRows(s store.Store, n int) {
	s.(interface{ SetMaxStatsRows(int) }).SetMaxStatsRows(n)
}

// StatsSlots is the channel that bounds a store's concurrent Stats calls.
func StatsSlots(s store.Store) chan struct{} {
	return s.(interface{ StatsSlots() chan struct{} }).StatsSlots()
}

// ForEachEngine runs fn as a subtest per Engine, each with a fresh store.
func ForEachEngine(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	for _, e := range Engines() {
		t.Run(e.Name, func(t *testing.T) {
			s, _ := e.Open(t)
			fn(t, s)
		})
	}
}

// ForEachEngineAtOnce is ForEachEngine with the engines' subtests run at
// the same time, for the tests that spend minutes each on compaction and
// queries: most of that is waiting on a database server, and on a loaded
// machine the engines one after another took most of the package's time.
func ForEachEngineAtOnce(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	EachEngineAtOnce(t, func(t *testing.T, e Engine) {
		s, _ := e.Open(t)
		fn(t, s)
	})
}

// EachEngineAtOnce runs fn as a subtest per Engine, all at once (t.Run from
// a goroutine each), and returns when every one has finished.
func EachEngineAtOnce(t *testing.T, fn func(t *testing.T, e Engine)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, e := range Engines() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(e.Name, func(t *testing.T) { fn(t, e) })
		}()
	}
	wg.Wait()
}

func OpenSQLite(t testing.TB) (store.Store, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ttfx.db")
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// OpenPostgres opens a store in a schema of its own, dropped at the
// end, so tests do not see each other's records; it skips (fails under
// TTFX_REQUIRE_ALL=1) without a test server.
func OpenPostgres(t testing.TB) (store.Store, string) {
	t.Helper()
	dsn := testenv.PostgresSchema(t)
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

var Base = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC)

func Ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// FullRecord is a record with every field present and distinct.
func FullRecord(id string, ts time.Time) record.Record {
	return record.Record{
		RequestID: id, Timestamp: ts,
		API: "openai.chat", Route: "POST /v1/chat/completions", Model: "gpt-4o-mini", Group: "team-a",
		KeyName: "team-a-app", UserHash: "5f2b9c0e4a1d7e3b8c6a9f0d2e4b1c7a",
		Channel: "openai-eu", Region: "eu", Provider: "api.example.test",
		Status: record.StatusOK, HTTPStatus: 200, Stream: true, Terminal: "done", FinishReason: "stop",
		Fields: timeline.Fields{
			AuthMs:              timeline.SpanOf(Ms(0.118)),
			DistributionMs:      timeline.SpanOf(Ms(0.021)),
			BodyReadMs:          timeline.SpanOf(Ms(0.455)),
			UpstreamHeadersMs:   timeline.SpanOf(Ms(240.25)),
			UpstreamStartMs:     timeline.At(Ms(1.5)),
			UpstreamHeadersAtMs: timeline.At(Ms(241.75)),
			FirstSSEEventMs:     timeline.At(Ms(250.125)),
			FirstResponseMs:     timeline.At(Ms(2900.5)),
			FirstTextDeltaMs:    timeline.At(Ms(8700.000001)),
			FirstTextSentMs:     timeline.At(Ms(8700.2)),
			UpstreamDoneMs:      timeline.At(Ms(10150)),
			TotalHandlerMs:      timeline.At(Ms(10200.333)),
			RequestWaitMs:       timeline.SpanOf(Ms(0.031)),
			UpstreamAuthMs:      timeline.SpanOf(Ms(41.5)),
			HeadersSentMs:       timeline.At(Ms(242.5)),
			MaxOutputGapMs:      timeline.SpanOf(Ms(3500.25)),
			MaxOutputGapAtMs:    timeline.At(Ms(9100.75)),
			AdmissionWaitMs:     timeline.SpanOf(Ms(120.5)),
		},
		VisibleOutputTPS:    timeline.RateOf(55.125),
		InterTokenLatencyMs: timeline.SpanOf(Ms(18.2)),
		ProviderLatencyMs:   timeline.SpanOf(Ms(9874)),
		Tokens:              record.Tokens{Input: record.Int(1200), Output: record.Int(380), Reasoning: record.Int(300), Visible: record.Int(80), Source: record.TokensUsage},
		Events:              record.Events{Heartbeat: 3, Metadata: 2, Reasoning: 40, Tool: 5, Text: 80, Done: 1, Error: 0, Unknown: 1},
		Inflight:            record.Inflight{Gateway: 17, Channel: 4},
		Attempts: []record.Attempt{
			{Channel: "openai-us", UpstreamStartMs: timeline.At(Ms(1.2)), Status: record.StatusUpstreamConnectError, Error: "dial tcp: connection refused",
				Role: record.RolePrimary, Outcome: record.OutcomeFailed},
			{Channel: "openai-eu", UpstreamStartMs: timeline.At(Ms(1.5)), UpstreamHeadersMs: timeline.SpanOf(Ms(240.25)),
				UpstreamHeadersAtMs: timeline.At(Ms(241.75)), Status: record.StatusOK, HTTPStatus: 200,
				Role: record.RoleRetry, Outcome: record.OutcomeWon, FirstResponseAtMs: timeline.At(Ms(2900.5)),
				TokensInput: record.Int(1200), TokensOutput: record.Int(380),
				RemainingRequests: i64(4999), RemainingTokens: i64(1_998_620)},
		},
		Diagnosis:      []string{"response_to_text_gap", "local_overhead"},
		SkippedEjected: []string{"openai-backup"},
		SkippedRateLimited: []record.RateLimitSkip{{Channel: "openai-us2", Limit: "tokens", Remaining: 310, Need: 1200, ResetMs: 8250.5},
			{Channel: "openai-us3", Limit: "requests", Remaining: 0, Need: 1, ResetMs: 120}},
		TraceID:       "4bf92f3577b34da6a3ce929d0e0e4736",
		UpstreamModel: "prod-gpt4o-mini", // the channel's alias (a deployment's name)
	}
}

func i64(n int64) *int64 { return &n }

// SparseRecord is a request that failed before anything happened: every
// mark absent, no tokens, no attempts, no labels.
func SparseRecord(id string, ts time.Time) record.Record {
	return record.Record{
		RequestID: id, Timestamp: ts, API: "openai.responses", Route: "POST /v1/responses",
		Status: record.StatusAuthFailed, HTTPStatus: 401, Error: "invalid key",
		Attempts: []record.Attempt{}, Diagnosis: []string{}, SkippedEjected: []string{},
	}
}

// Insert stores recs or fails the test. Its deadline is Ctx's, a hang
// guard: a fixed 30 s ran out on a ClickHouse insert beside stress-ng.
func Insert(t testing.TB, s store.Store, recs ...record.Record) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), callDeadline(t))
	defer cancel()
	if err := s.Insert(ctx, recs); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// Ctx is the context of a store call in a test. It is a guard against a
// call that hangs, not a measure of speed: it ends a little before the test
// binary's -timeout does, so the hung call fails its own test by name
// instead of the whole binary's timeout panic. A fixed 30 s, as before, was
// too short on a loaded machine: a ClickHouse compaction's OPTIMIZE … FINAL
// and a DROP DATABASE ran past it at a load average of 40.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), callDeadline(t))
	t.Cleanup(cancel)
	return ctx
}

// callDeadline is Ctx's deadline: a minute before t's deadline (the
// binary's -timeout; half the time left when that is under two minutes),
// or ten minutes from now when it has none.
func callDeadline(t testing.TB) time.Time {
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			return d.Add(-min(time.Minute, time.Until(d)/2))
		}
	}
	return time.Now().Add(10 * time.Minute)
}

func IDN(i int) string { return fmt.Sprintf("req-%06d", i) }

// WaitFor polls cond until it holds or 60 s pass.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// A deadline that only ends a test that is stuck: on a loaded machine
	// (a ClickHouse insert beside stress-ng) 20 s was seen to pass.
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func CountAll(t *testing.T, s store.Store) int {
	t.Helper()
	n := 0
	f := store.Filter{Limit: store.MaxLimit}
	for {
		p, err := s.List(Ctx(t), f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Records)
		if p.Next == "" {
			return n
		}
		f.Cursor = p.Next
	}
}

// OpenClickHouse opens a store in a database of its own, dropped at the
// end; it skips (fails under TTFX_REQUIRE_ALL=1) without a test server.
func OpenClickHouse(t testing.TB) (store.Store, string) {
	t.Helper()
	dsn := testenv.ClickHouseDatabase(t)
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// ChCount runs a count query on s's read pool.
func ChCount(t *testing.T, s store.Store, q string, args ...any) int {
	t.Helper()
	var n uint64
	if err := ReadDB(s).QueryRowContext(Ctx(t), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return int(n)
}

// StatsTotal is the record count of a one-group summary of everything.
func StatsTotal(t *testing.T, s store.Store, q store.StatsQuery) int {
	t.Helper()
	st, err := s.Stats(Ctx(t), q)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range st.Groups {
		n += g.Count
	}
	return n
}

func Keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// statsFixture: model m1 has first_text_delta_ms 1..10 plus two requests
// without visible text; m2 has 15, 20, 35, 40, 50, one of them truncated.
// m1's first five are in the first minute, the rest in the second.
func StatsFixture(t *testing.T, s store.Store) {
	var recs []record.Record
	for i := range 12 {
		r := SparseRecord(IDN(i), Base.Truncate(time.Minute).Add(time.Duration(i/5)*time.Minute+time.Second))
		r.Model, r.Channel, r.Group, r.Route = "m1", "ch-1", "team-a", "POST /v1/chat/completions"
		r.Status = record.StatusOK
		if i < 10 {
			v := float64(i + 1)
			r.FirstTextDeltaMs = timeline.At(Ms(v))
			r.FirstTextSentMs = timeline.At(Ms(v + 0.5))
			r.VisibleOutputTPS = timeline.RateOf(10 * v)
		}
		switch {
		case i < 3:
			r.Diagnosis = []string{"generation_slow"}
		case i == 3:
			r.Diagnosis = []string{"truncated", "generation_slow"}
		}
		recs = append(recs, r)
	}
	for i, v := range []float64{50, 15, 40, 20, 35} {
		r := SparseRecord(IDN(100+i), Base.Add(time.Duration(i)*time.Second))
		r.Model, r.Channel, r.Group, r.Route = "m2", "ch-2", "team-b", "POST /v1/messages"
		r.Status = record.StatusOK
		r.FirstTextDeltaMs = timeline.At(Ms(v))
		if i == 2 {
			r.Status = record.StatusTruncated
			r.Diagnosis = []string{"truncated"}
		}
		recs = append(recs, r)
	}
	Insert(t, s, recs...)
}

func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var FastRetry = store.WriterOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, WriteTimeout: 5 * time.Second}
