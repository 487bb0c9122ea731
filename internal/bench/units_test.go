package bench_test

// The benchmark client's request builders and the simulator's sides of
// each API live in the provider units, which register them in init: the
// tests of this package link them all.
import _ "github.com/ttfx/ttfx/internal/provider/all"
