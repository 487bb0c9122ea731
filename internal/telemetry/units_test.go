package telemetry_test

import _ "github.com/ttfx/ttfx/internal/provider/all" // the provider kinds channels name
