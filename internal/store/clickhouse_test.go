package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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

// clickhouseDump returns every row of every table in the store's database
// as text: ClickHouse compresses its files, so the canary search reads
// the tables rather than the disk.
func clickhouseDump(t *testing.T, s Store) []byte {
	db := readDB(s)
	rows, err := db.QueryContext(ctxT(t), "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if !slices.Contains(tables, "requests") || !slices.Contains(tables, "rollups") {
		t.Fatalf("tables %v", tables)
	}
	var dump bytes.Buffer
	for _, tbl := range tables {
		rows, err := db.QueryContext(ctxT(t), "SELECT * FROM "+tbl)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		dest := make([]any, len(cols))
		for i := range dest {
			dest[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				fmt.Fprintf(&dump, "%v\t", v)
			}
			dump.WriteByte('\n')
		}
		rows.Close()
	}
	return dump.Bytes()
}
