package relay

import (
	_ "github.com/ttfx/ttfx/internal/provider/all" // the provider units the tests relay through
)

// The record API names the tests name.
const (
	apiChat        = "openai.chat"
	apiCompletions = "openai.completions"
	apiResponses   = "openai.responses"
	apiEmbeddings  = "openai.embeddings"
	apiModels      = "openai.models"
	apiAnthropic   = "anthropic"
	apiGemini      = "gemini"
)

// endpointOf returns the gateway's route of api.
func endpointOf(api string) endpoint {
	for _, ep := range endpoints() {
		if ep.api == api {
			return ep
		}
	}
	panic("no endpoint of " + api)
}
