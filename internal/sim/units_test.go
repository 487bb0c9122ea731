package sim_test

// The simulator sides live in the provider units, which register them in
// init: the tests of this package link them all.
import _ "github.com/ttfx/ttfx/internal/provider/all"
