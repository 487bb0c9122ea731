package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// The same tests run on every engine: SQLite in a real file in t.TempDir(),
// PostgreSQL when TTFX_TEST_POSTGRES names a server (a DSN, e.g. what
// scripts/ci-postgres.sh prints) and ClickHouse when TTFX_TEST_CLICKHOUSE
// does (scripts/ci-clickhouse.sh). Without them those runs skip, or fail
// when TTFX_REQUIRE_ALL=1 (CI).

type engine struct {
	name string
	open func(t testing.TB) (Store, string) // the store and its DSN
}

func engines() []engine {
	return []engine{
		{"sqlite", openTestSQLite},
		{"postgres", openTestPostgres},
		{"clickhouse", openTestClickHouse},
	}
}

// sqlEngines are the engines of sqlStore (one schema, migrations/), for the
// tests of what they share beyond the Store contract.
func sqlEngines() []engine {
	var out []engine
	for _, e := range engines() {
		if e.name != "clickhouse" {
			out = append(out, e)
		}
	}
	return out
}

// readDB and writeDB return a store's pools, for tests that look inside.
func readDB(s Store) *sql.DB {
	if c, ok := s.(*chStore); ok {
		return c.read
	}
	return s.(*sqlStore).read
}

func writeDB(s Store) *sql.DB {
	if c, ok := s.(*chStore); ok {
		return c.write
	}
	return s.(*sqlStore).write
}

func setMaxStatsRows(s Store, n int) {
	if c, ok := s.(*chStore); ok {
		c.maxStatsRows = n
		return
	}
	s.(*sqlStore).maxStatsRows = n
}

func statsSlotsOf(s Store) chan struct{} {
	if c, ok := s.(*chStore); ok {
		return c.statsSlots
	}
	return s.(*sqlStore).statsSlots
}

// forEachEngine runs fn as a subtest per engine, each with a fresh store.
func forEachEngine(t *testing.T, fn func(t *testing.T, s Store)) {
	t.Helper()
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			s, _ := e.open(t)
			fn(t, s)
		})
	}
}

func openTestSQLite(t testing.TB) (Store, string) {
	t.Helper()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ttfx.db")
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

// openTestPostgres opens a store in a schema of its own, dropped at the
// end, so tests do not see each other's records; it skips (fails under
// TTFX_REQUIRE_ALL=1) without a test server.
func openTestPostgres(t testing.TB) (Store, string) {
	t.Helper()
	dsn := testenv.PostgresSchema(t)
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}

var testBase = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC)

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// fullRecord is a record with every field present and distinct.
func fullRecord(id string, ts time.Time) record.Record {
	return record.Record{
		RequestID: id, Timestamp: ts,
		API: "openai.chat", Route: "POST /v1/chat/completions", Model: "gpt-4o-mini", Group: "team-a",
		KeyName: "team-a-app", UserHash: "5f2b9c0e4a1d7e3b8c6a9f0d2e4b1c7a",
		Channel: "openai-eu", Region: "eu", Provider: "api.example.test",
		Status: record.StatusOK, HTTPStatus: 200, Stream: true, Terminal: "done", FinishReason: "stop",
		Fields: timeline.Fields{
			AuthMs:              timeline.SpanOf(ms(0.118)),
			DistributionMs:      timeline.SpanOf(ms(0.021)),
			BodyReadMs:          timeline.SpanOf(ms(0.455)),
			UpstreamHeadersMs:   timeline.SpanOf(ms(240.25)),
			UpstreamStartMs:     timeline.At(ms(1.5)),
			UpstreamHeadersAtMs: timeline.At(ms(241.75)),
			FirstSSEEventMs:     timeline.At(ms(250.125)),
			FirstResponseMs:     timeline.At(ms(2900.5)),
			FirstTextDeltaMs:    timeline.At(ms(8700.000001)),
			FirstTextSentMs:     timeline.At(ms(8700.2)),
			UpstreamDoneMs:      timeline.At(ms(10150)),
			TotalHandlerMs:      timeline.At(ms(10200.333)),
			RequestWaitMs:       timeline.SpanOf(ms(0.031)),
			HeadersSentMs:       timeline.At(ms(242.5)),
			MaxOutputGapMs:      timeline.SpanOf(ms(3500.25)),
			MaxOutputGapAtMs:    timeline.At(ms(9100.75)),
		},
		VisibleOutputTPS:    timeline.RateOf(55.125),
		InterTokenLatencyMs: timeline.SpanOf(ms(18.2)),
		Tokens:              record.Tokens{Input: record.Int(1200), Output: record.Int(380), Reasoning: record.Int(300), Visible: record.Int(80), Source: record.TokensUsage},
		Events:              record.Events{Heartbeat: 3, Metadata: 2, Reasoning: 40, Tool: 5, Text: 80, Done: 1, Error: 0, Unknown: 1},
		Inflight:            record.Inflight{Gateway: 17, Channel: 4},
		Attempts: []record.Attempt{
			{Channel: "openai-us", UpstreamStartMs: timeline.At(ms(1.2)), Status: record.StatusUpstreamConnectError, Error: "dial tcp: connection refused",
				Role: record.RolePrimary, Outcome: record.OutcomeFailed},
			{Channel: "openai-eu", UpstreamStartMs: timeline.At(ms(1.5)), UpstreamHeadersMs: timeline.SpanOf(ms(240.25)),
				UpstreamHeadersAtMs: timeline.At(ms(241.75)), Status: record.StatusOK, HTTPStatus: 200,
				Role: record.RoleRetry, Outcome: record.OutcomeWon, FirstResponseAtMs: timeline.At(ms(2900.5)),
				TokensInput: record.Int(1200), TokensOutput: record.Int(380)},
		},
		Diagnosis:      []string{"response_to_text_gap", "local_overhead"},
		SkippedEjected: []string{"openai-backup"},
		TraceID:        "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

// sparseRecord is a request that failed before anything happened: every
// mark absent, no tokens, no attempts, no labels.
func sparseRecord(id string, ts time.Time) record.Record {
	return record.Record{
		RequestID: id, Timestamp: ts, API: "anthropic", Route: "POST /v1/messages",
		Status: record.StatusAuthFailed, HTTPStatus: 401, Error: "invalid key",
		Attempts: []record.Attempt{}, Diagnosis: []string{}, SkippedEjected: []string{},
	}
}

// insert stores recs or fails the test.
func insert(t testing.TB, s Store, recs ...record.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Insert(ctx, recs); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func idN(i int) string { return fmt.Sprintf("req-%06d", i) }
