package azure

import (
	"github.com/ttfx/ttfx/internal/provider/openai"
	"github.com/ttfx/ttfx/internal/wire"
)

// Azure's client-facing paths: the gateway answers them as the resource
// does, so that an application using Azure's SDKs (openai's AzureOpenAI,
// @ai-sdk/azure, Azure.AI.OpenAI) moves behind the gateway by changing its
// endpoint and key only. They are OpenAI's operations under Azure's
// spelling, relayed as OpenAI's own paths: any channel of the openai
// family serves them, an azure channel in its own form (upstreamURL).
//
// In the deployment form the deployment is the model a client asks for:
// it goes through aliases and routing as any model name does, and the body
// the upstream gets names it. The client's api-version is not passed on;
// an azure channel asks its resource with the version of its base_url.
//
// The unit imports openai's so that OpenAI's APIs are registered first.
func init() {
	drop := []string{"api-version"}
	deployment := func(op, path string) wire.Endpoint {
		return wire.Endpoint{Pattern: "POST /openai/deployments/{deployment}" + op, HasBody: true,
			Path: path, Model: "deployment", DropQuery: drop}
	}
	v1 := func(op, path string) wire.Endpoint {
		return wire.Endpoint{Pattern: "POST /openai/v1" + op, HasBody: true, Path: path, DropQuery: drop}
	}
	wire.AddEndpoints(string(openai.Chat),
		deployment("/chat/completions", "/v1/chat/completions"), v1("/chat/completions", "/v1/chat/completions"))
	wire.AddEndpoints(openai.Completions,
		deployment("/completions", "/v1/completions"), v1("/completions", "/v1/completions"))
	wire.AddEndpoints(openai.Embeddings,
		deployment("/embeddings", "/v1/embeddings"), v1("/embeddings", "/v1/embeddings"))
	// Responses takes the model in the body (/openai/responses, as the
	// AzureOpenAI client sends it); @ai-sdk/azure's deployment-based URLs
	// name the deployment in the path.
	wire.AddEndpoints(string(openai.Responses),
		wire.Endpoint{Pattern: "POST /openai/responses", HasBody: true, Path: "/v1/responses", DropQuery: drop},
		deployment("/responses", "/v1/responses"), v1("/responses", "/v1/responses"))
}
