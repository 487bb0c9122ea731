// Package testenv lets tests find the real servers they need (PostgreSQL,
// Prometheus, Chromium). Without one a test skips and says why — unless
// TTFX_REQUIRE_ALL=1 (set by CI), which turns every such skip into a
// failure, so that a green CI means every test really ran.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// RequireAll reports whether missing servers are failures (CI).
func RequireAll() bool { return os.Getenv("TTFX_REQUIRE_ALL") == "1" }

// Missing skips t because what is missing, or fails it under
// TTFX_REQUIRE_ALL=1; hint says how to provide it.
func Missing(t testing.TB, what, hint string) {
	t.Helper()
	if RequireAll() {
		t.Fatalf("%s is missing and TTFX_REQUIRE_ALL=1: %s", what, hint)
	}
	countSkip(what, t.Name())
	t.Skipf("skipping: %s is missing (%s)", what, hint)
}

// PostgresDSN returns the DSN of the test PostgreSQL server from
// TTFX_TEST_POSTGRES, or skips (fails under TTFX_REQUIRE_ALL=1).
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("TTFX_TEST_POSTGRES")
	if dsn == "" {
		Missing(t, "PostgreSQL (TTFX_TEST_POSTGRES)", "run `eval \"$(bash scripts/ci-postgres.sh)\"` to set it up")
	}
	return dsn
}

// PostgresSchema creates a schema of its own for t in the test server,
// dropped when t ends, and returns a DSN whose search_path is that schema:
// tests (and packages tested in parallel) never see each other's records.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	dsn := PostgresDSN(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "ttfx_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema (is PostgreSQL at TTFX_TEST_POSTGRES up?): %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("TTFX_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
