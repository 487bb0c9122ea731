package sim

// The APIs the tests of this package serve, by the names their units
// register (internal/provider/…; linked by units_test.go).
const (
	APIChat        API = "openai.chat"        // POST /v1/chat/completions
	APICompletions API = "openai.completions" // POST /v1/completions
	APIResponses   API = "openai.responses"   // POST /v1/responses
	APIEmbeddings  API = "openai.embeddings"  // POST /v1/embeddings
	APIAnthropic   API = "anthropic"          // POST /v1/messages
	APIGemini      API = "gemini"             // POST /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse
)
