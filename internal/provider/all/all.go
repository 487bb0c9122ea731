// Package all links every provider unit: importing it registers them with
// internal/wire. It is the one list of units; adding a provider kind or a
// client-facing API adds one line here.
package all

import (
	_ "github.com/ttfx/ttfx/internal/provider/anthropic"
	_ "github.com/ttfx/ttfx/internal/provider/azure"
	_ "github.com/ttfx/ttfx/internal/provider/bedrock"
	_ "github.com/ttfx/ttfx/internal/provider/gemini"
	_ "github.com/ttfx/ttfx/internal/provider/openai"
	_ "github.com/ttfx/ttfx/internal/provider/vertex"
)
