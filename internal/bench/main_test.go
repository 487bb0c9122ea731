package bench

import (
	"testing"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestMain watches the process's timers for the checks of durations (and
// says, after the tests, how many skipped for a missing server).
func TestMain(m *testing.M) { testenv.Main(m) }
