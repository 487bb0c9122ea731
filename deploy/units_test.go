package deploy

import _ "github.com/ttfx/ttfx/internal/provider/all" // the provider kinds the example configuration names
