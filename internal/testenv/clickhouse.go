package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClickHouseDSN returns the DSN of the test ClickHouse server from
// TTFX_TEST_CLICKHOUSE (clickhouse://host:9000/db), or skips (fails under
// TTFX_REQUIRE_ALL=1).
func ClickHouseDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("TTFX_TEST_CLICKHOUSE")
	if dsn == "" {
		Missing(t, "ClickHouse (TTFX_TEST_CLICKHOUSE)", "run `eval \"$(bash scripts/ci-clickhouse.sh)\"` to set it up")
	}
	return dsn
}

// ClickHouseDatabase creates a database of its own for t in the test
// server, dropped when t ends, and returns a DSN naming it: tests (and
// packages tested in parallel) never see each other's records.
func ClickHouseDatabase(t testing.TB) string {
	t.Helper()
	dsn := ClickHouseDSN(t)
	var b [6]byte
	rand.Read(b[:])
	name := "ttfx_test_" + hex.EncodeToString(b[:])
	exec := func(q string) error {
		opts, err := clickhouse.ParseDSN(dsn)
		if err != nil {
			return err
		}
		db := clickhouse.OpenDB(opts)
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = db.ExecContext(ctx, q)
		return err
	}
	if err := exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database (is ClickHouse at TTFX_TEST_CLICKHOUSE up?): %v", err)
	}
	t.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("TTFX_TEST_CLICKHOUSE: %v", err)
	}
	u.Path = "/" + strings.TrimPrefix(name, "/")
	return u.String()
}
