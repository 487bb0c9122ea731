package protocol_test

// The classifiers live in their units, which register them in init: the
// tests of this package (the shared Stream machinery, and every API's
// cases, fixtures, fuzz targets and benchmarks through it) link them all.
import _ "github.com/ttfx/ttfx/internal/provider/all"
