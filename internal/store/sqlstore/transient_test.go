package sqlstore

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
	"github.com/ttfx/ttfx/internal/testenv"
)

func TestWriterWaitsOutReadOnlyPostgres(t *testing.T) {
	// A PostgreSQL that has become read-only (a standby after a
	// failover) refuses every write with SQLSTATE 25006 and answers
	// pings: the records wait, and are counted as dropped only when
	// Close gives up on them, never as rejected.
	dsn := testenv.PostgresSchema(t)
	s, err := store.Open(storetest.Ctx(t), dsn) // migrates
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := sql.Open("pgx", dsn+"&default_transaction_read_only=on")
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	w := store.NewWriter(newSQLStore(postgresDialect, ro, ro), storetest.FastRetry)
	for i := range 10 {
		w.Record(new(storetest.FullRecord(storetest.IDN(i), storetest.Base)))
	}
	storetest.WaitFor(t, "three failed writes", func() bool { return w.Stats().FailedBatches >= 3 })
	st := w.Stats()
	if st.Rejected != 0 || !st.Retrying || st.Queued != 10 || !strings.Contains(st.LastError, "25006") {
		t.Errorf("against a read-only database: %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); err == nil {
		t.Error("close against a read-only database reported every record written")
	}
	if st := w.Stats(); st.Rejected != 0 || st.Dropped != 10 {
		t.Errorf("after close: %+v", st)
	}
}
