package api

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
)

// openClickHouse opens a store in a ClickHouse database of its own, or
// skips (fails under TTFX_REQUIRE_ALL=1) without TTFX_TEST_CLICKHOUSE.
func openClickHouse(t testing.TB) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), testenv.ClickHouseDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTwoReplicasShareOneClickHouse: what one gateway's writer stores in
// ClickHouse, another gateway's API over the same database serves, record
// and stats.
func TestTwoReplicasShareOneClickHouse(t *testing.T) {
	dsn := testenv.ClickHouseDatabase(t)
	a, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := store.NewWriter(a, store.WriterOptions{})
	w.Record(new(rec("req-replica", "team-a", "client-a", now.Add(-time.Minute))))
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: b, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }}))
	defer srv.Close()
	got := call(t, "GET", srv.URL+"/api/requests/req-replica", keyClientA)
	if got.status != 200 || !strings.Contains(string(got.body), `"first_text_delta_ms":8700`) {
		t.Errorf("record from the other replica: %d %s", got.status, got.body)
	}
	if n := statsCount(t, call(t, "GET", srv.URL+"/api/stats", keyAdmin)); n != 1 {
		t.Errorf("stats count %d on the other replica", n)
	}
}
