package main

import (
	"testing"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestMain says, after the tests, how many skipped for a missing server.
func TestMain(m *testing.M) { testenv.Main(m) }
