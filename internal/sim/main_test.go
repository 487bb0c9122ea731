package sim

import (
	"testing"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestMain watches the process's timers for the checks of durations.
func TestMain(m *testing.M) { testenv.Main(m) }
