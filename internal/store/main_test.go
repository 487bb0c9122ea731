package store_test

import (
	"testing"

	_ "github.com/ttfx/ttfx/internal/store/chstore"  // registers ClickHouse
	_ "github.com/ttfx/ttfx/internal/store/sqlstore" // registers SQLite and PostgreSQL
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestMain says, after the tests, how many skipped for a missing server.
func TestMain(m *testing.M) { testenv.Main(m) }
