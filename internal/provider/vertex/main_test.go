package vertex_test

import (
	"testing"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestMain reports the Node SDK test's skips for a missing Node or
// node_modules, and makes them failures under TTFX_REQUIRE_ALL=1 (as CI runs).
func TestMain(m *testing.M) { testenv.Main(m) }
