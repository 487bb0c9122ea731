package server_test

import (
	"fmt"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// dumpClickHouse returns every row of every table of the DSN's database as
// text (its files are compressed, so the tables are read instead).
func dumpClickHouse(t *testing.T, dsn string) []byte {
	t.Helper()
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := clickhouse.OpenDB(opts)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM system.tables WHERE database = currentDatabase()`)
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
	if len(tables) == 0 {
		t.Fatal("no tables in the database")
	}
	var out []byte
	for _, tb := range tables {
		rs, err := db.Query("SELECT * FROM " + tb)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		vals := make([]any, len(cols))
		dest := make([]any, len(cols))
		for i := range dest {
			dest[i] = &vals[i]
		}
		for rs.Next() {
			if err := rs.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				out = fmt.Appendf(out, "%v\t", v)
			}
			out = append(out, '\n')
		}
		rs.Close()
	}
	return out
}
