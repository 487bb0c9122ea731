package vertex_test

// The simulator's sides of the vertex kind and of the APIs it serves live
// in their units, which register in init: the tests of this package link
// them all.
import _ "github.com/ttfx/ttfx/internal/provider/all"
