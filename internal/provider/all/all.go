// Package all links every provider unit: importing it registers them with
// internal/wire (their APIs and kinds), internal/protocol (their
// classifiers) and internal/sim (their simulator sides). It is the one list
// of units; adding a provider kind or a client-facing API adds its lines
// here.
package all

import (
	_ "github.com/ttfx/ttfx/internal/provider/anthropic"
	_ "github.com/ttfx/ttfx/internal/provider/anthropic/anthropicsim"
	_ "github.com/ttfx/ttfx/internal/provider/azure"
	_ "github.com/ttfx/ttfx/internal/provider/azure/azuresim"
	_ "github.com/ttfx/ttfx/internal/provider/bedrock"
	_ "github.com/ttfx/ttfx/internal/provider/bedrock/bedrocksim"
	_ "github.com/ttfx/ttfx/internal/provider/gemini"
	_ "github.com/ttfx/ttfx/internal/provider/gemini/geminisim"
	_ "github.com/ttfx/ttfx/internal/provider/openai"
	_ "github.com/ttfx/ttfx/internal/provider/openai/openaisim"
	_ "github.com/ttfx/ttfx/internal/provider/vertex"
	_ "github.com/ttfx/ttfx/internal/provider/vertex/vertexsim"
)
