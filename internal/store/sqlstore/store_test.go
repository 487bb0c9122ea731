package sqlstore

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

func TestMigrationsIdempotentAndConcurrent(t *testing.T) {
	for _, e := range storetest.SQLEngines() { // ClickHouse: TestClickHouseMigrationsOnce
		t.Run(e.Name, func(t *testing.T) {
			s, dsn := e.Open(t)
			storetest.Insert(t, s, storetest.FullRecord("req-1", storetest.Base))
			// Replicas starting at once against one database.
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			for range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s2, err := store.Open(context.Background(), dsn)
					if err != nil {
						errs <- err
						return
					}
					if _, err := s2.Get(context.Background(), "req-1"); err != nil {
						errs <- err
					}
					errs <- s2.Close()
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
			var versions int
			if err := storetest.ReadDB(s).QueryRowContext(storetest.Ctx(t), "SELECT COUNT(*) FROM schema_migrations").Scan(&versions); err != nil {
				t.Fatal(err)
			}
			if ms, _ := loadMigrations(); versions != len(ms) {
				t.Errorf("schema_migrations has %d rows, want %d", versions, len(ms))
			}
			// A database migrated by a newer ttfx is refused, not mangled.
			if _, err := storetest.WriteDB(s).ExecContext(storetest.Ctx(t), "INSERT INTO schema_migrations (version, name, applied_ns) VALUES (9999, 'future.sql', 0)"); err != nil {
				t.Fatal(err)
			}
			if s3, err := store.Open(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), "newer") {
				if s3 != nil {
					s3.Close()
				}
				t.Errorf("open of a newer schema: %v", err)
			}
		})
	}
}
