package azure

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

func TestUpstreamURL(t *testing.T) {
	for _, tt := range []struct{ base, path, query, model, want string }{
		{"https://r.openai.azure.com", "/v1/chat/completions", "", "prod-4o",
			"https://r.openai.azure.com/openai/deployments/prod-4o/chat/completions?api-version=" + APIVersion},
		{"https://r.openai.azure.com/?api-version=2025-01-01-preview", "/v1/completions", "", "d",
			"https://r.openai.azure.com/openai/deployments/d/completions?api-version=2025-01-01-preview"},
		{"https://r.openai.azure.com", "/v1/embeddings", "", "a b/c",
			"https://r.openai.azure.com/openai/deployments/a%20b%2Fc/embeddings?api-version=" + APIVersion},
		{"https://r.openai.azure.com", "/v1/responses", "", "d",
			"https://r.openai.azure.com/openai/responses?api-version=" + ResponsesAPIVersion},
		{"https://r.openai.azure.com", "/v1/models", "", "",
			"https://r.openai.azure.com/openai/models?api-version=" + APIVersion},
		{"https://r.openai.azure.com/openai/v1", "/v1/chat/completions", "", "gpt-4o",
			"https://r.openai.azure.com/openai/v1/chat/completions"},
		{"https://r.openai.azure.com/openai/v1/", "/v1/responses", "x=1", "gpt-4o",
			"https://r.openai.azure.com/openai/v1/responses?x=1"},
		// A client's own api-version (Azure's SDKs send one) gives way to
		// the channel's.
		{"https://r.openai.azure.com/?api-version=2024-10-21", "/v1/responses", "api-version=2025-03-01-preview&x=1", "d",
			"https://r.openai.azure.com/openai/responses?api-version=2024-10-21&x=1"},
		{"https://r.openai.azure.com/openai/v1", "/v1/responses", "api-version=preview", "d",
			"https://r.openai.azure.com/openai/v1/responses"},
	} {
		base, _ := url.Parse(tt.base)
		if got := upstreamURL(wire.Target{Base: base, Path: tt.path, Query: tt.query, Model: tt.model}).String(); got != tt.want {
			t.Errorf("upstreamURL(%s, %s, %s) =\n%s, want\n%s", tt.base, tt.path, tt.model, got, tt.want)
		}
	}
}

func TestAuthorize(t *testing.T) {
	h := http.Header{}
	wire.LookupKind(Kind).Authorize(h, "k")
	if h.Get("Api-Key") != "k" || h.Get("Authorization") != "" {
		t.Errorf("headers %v", h)
	}
	if !wire.Serves(Kind, "openai") || wire.Serves(Kind, "anthropic") {
		t.Error("azure serves the openai family only")
	}
}
