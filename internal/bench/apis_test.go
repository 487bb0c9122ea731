package bench

import "github.com/ttfx/ttfx/internal/protocol"

// The APIs the tests of this package speak, by the names their units
// register (internal/provider/…; linked by units_test.go).
const (
	apiChat      protocol.API = "openai.chat"
	apiResponses protocol.API = "openai.responses"
	apiMessages  protocol.API = "anthropic"
	apiGenerate  protocol.API = "gemini"
)
