package azure_test

// The simulator's side of the azure kind (its routes and Entra ID's token
// endpoint) and of the APIs it serves live in their units, which register
// in init: the tests of this package link them all.
import _ "github.com/ttfx/ttfx/internal/provider/all"
