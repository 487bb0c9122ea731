package protocol

// The APIs the tests of this package classify, by the names their units
// register (internal/provider/…; linked by register_test.go).
const (
	OpenAIChat      API = "openai.chat"
	OpenAIResponses API = "openai.responses"
	Anthropic       API = "anthropic"
	Gemini          API = "gemini"
)
