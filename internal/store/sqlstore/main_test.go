package sqlstore

import (
	"testing"

	_ "github.com/ttfx/ttfx/internal/store/chstore" // the other engines, for the suite's runs on every engine
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestMain says, after the tests, how many skipped for a missing server.
func TestMain(m *testing.M) { testenv.Main(m) }
