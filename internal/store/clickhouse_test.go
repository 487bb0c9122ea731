package store

import (
	"context"
	"testing"

	"github.com/ttfx/ttfx/internal/testenv"
)

// openTestClickHouse opens a store in a database of its own, dropped at the
// end; it skips (fails under TTFX_REQUIRE_ALL=1) without a test server.
func openTestClickHouse(t testing.TB) (Store, string) {
	t.Helper()
	dsn := testenv.ClickHouseDatabase(t)
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dsn
}
