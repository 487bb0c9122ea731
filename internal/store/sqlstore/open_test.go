package sqlstore

import (
	"context"
	"database/sql"
	"testing"

	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestSQLiteReadMemoryBounded holds every connection of the SQLite read
// pool at once and reads each one's settings: a read may keep at most
// readFileBudget of the database file in the process, mapped (mmap_size)
// plus cached (cache_size). A 1 GiB map let one /api/stats call over a
// million records grow the gateway's RSS by 520 MiB of mapped file.
func TestSQLiteReadMemoryBounded(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	read := s.(*sqlStore).read
	ctx := context.Background()
	conns := make([]*sql.Conn, read.Stats().MaxOpenConnections)
	if len(conns) == 0 {
		t.Fatal("the read pool has no bound on its connections")
	}
	for i := range conns {
		c, err := read.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		var mapped, cache int64
		if err := c.QueryRowContext(ctx, "PRAGMA mmap_size").Scan(&mapped); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache); err != nil {
			t.Fatal(err)
		}
		// A negative cache_size is KiB, a positive one pages.
		cacheBytes := -cache * 1024
		if cache > 0 {
			var page int64
			if err := c.QueryRowContext(ctx, "PRAGMA page_size").Scan(&page); err != nil {
				t.Fatal(err)
			}
			cacheBytes = cache * page
		}
		if mapped+cacheBytes > readFileBudget || mapped < 0 {
			t.Errorf("read connection %d: mmap_size %d + cache %d bytes, want at most %d in all", i, mapped, cacheBytes, readFileBudget)
		}
		if cacheBytes < 8<<20 {
			t.Errorf("read connection %d caches %d bytes: a stats read would pread every page again", i, cacheBytes)
		}
		var only int
		if err := c.QueryRowContext(ctx, "PRAGMA query_only").Scan(&only); err != nil || only != 1 {
			t.Errorf("read connection %d: query_only %d, %v", i, only, err)
		}
	}
}
