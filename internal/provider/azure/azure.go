// Package azure is the unit of the azure provider kind: Azure OpenAI
// (Azure AI Foundry) resources, reached with an api-key. A channel's
// base_url is the resource endpoint in one of Azure's two URL forms:
//
//   - the deployment form, https://RESOURCE.openai.azure.com, optionally
//     with ?api-version=…: the model a client asks for names the
//     deployment, and requests go to
//     /openai/deployments/{deployment}/chat/completions?api-version=…
//     (completions and embeddings alike; Responses to
//     /openai/responses?api-version=…);
//   - the v1 form, https://RESOURCE.openai.azure.com/openai/v1: requests go
//     to /openai/v1/chat/completions and so on, with the model in the body
//     as OpenAI's own API has it, and no api-version.
//
// Azure speaks OpenAI's wire format, so the kind serves the openai family.
// A channel authenticates with the resource's api-key (key_env or key_file)
// or, when it names a tenant_id, with Entra ID tokens (entra.go).
package azure

import (
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/ttfx/ttfx/internal/provider/openai"
	"github.com/ttfx/ttfx/internal/wire"
)

// Kind is the name of the kind.
const Kind = "azure"

// APIVersion is the api-version the deployment form gets when the
// channel's base_url names none: the latest generally available one that
// serves chat, completions and embeddings.
const APIVersion = "2024-10-21"

// ResponsesAPIVersion is the api-version the deployment form's Responses
// path needs when the base_url names none (Responses came with it).
const ResponsesAPIVersion = "2025-04-01-preview"

func init() {
	wire.RegisterKind(&wire.Kind{
		Name: Kind, Families: []string{openai.Family}, GenAIProvider: "azure.ai.openai",
		Authorize: func(h http.Header, key string) {
			if key != "" { // an Entra ID channel has none: its token is its credential
				h.Set("Api-Key", key)
			}
		},
		// Not the client's x-ms-client-request-id or the like: they
		// would name the client's calls.
		ForwardHeaders: []string{"Openai-Beta"},
		URL:            upstreamURL,
		Settings:       settings,
		Open:           open,
		RateLimits:     rateLimits,
		Example:        wire.Example{Host: "ttfx-east.openai.azure.com", Models: map[string][]string{openai.Family: {"gpt-4o-mini", "gpt-4o"}}},
	})
}

// upstreamURL builds the URL in the base_url's form.
func upstreamURL(t wire.Target) *url.URL {
	base := strings.TrimSuffix(t.Base.Path, "/")
	if strings.HasSuffix(base, "/openai/v1") {
		// The v1 form: OpenAI's paths under /openai/v1, no api-version.
		return wire.JoinURL(t.Base, t.Path, clientQuery(t.Query))
	}
	rest, _ := strings.CutPrefix(t.Path, "/v1")
	u := new(url.URL)
	*u = *t.Base
	u.RawPath = ""
	switch rest {
	case "/chat/completions", "/completions", "/embeddings":
		u.Path = base + "/openai/deployments/" + t.Model + rest
		u.RawPath = strings.TrimSuffix(t.Base.EscapedPath(), "/") + "/openai/deployments/" + url.PathEscape(t.Model) + rest
	default: // /responses, /models
		u.Path = base + "/openai" + rest
	}
	u.RawQuery = baseQuery(t.Base.RawQuery, rest == "/responses")
	if cq := clientQuery(t.Query); cq != "" {
		u.RawQuery += "&" + cq
	}
	return u
}

// baseQueries holds the query each channel's base_url gives its requests,
// with the default api-version when the base_url names none: [0] for the
// deployment paths, [1] for Responses. Keyed by the base_url's query, so it
// holds one entry per configured base_url, built on its first request
// instead of parsed and encoded again on every one.
var baseQueries [2]sync.Map

// baseQuery is the encoded query of a base_url whose raw query is raw, with
// api-version set to the default of the path's kind when raw has none.
func baseQuery(raw string, responses bool) string {
	i := 0
	if responses {
		i = 1
	}
	if v, ok := baseQueries[i].Load(raw); ok {
		return v.(string)
	}
	q, _ := url.ParseQuery(raw) // as url.URL.Query: a malformed pair is dropped
	if !q.Has("api-version") {
		v := APIVersion
		if responses {
			v = ResponsesAPIVersion
		}
		q.Set("api-version", v)
	}
	enc := q.Encode()
	baseQueries[i].Store(raw, enc)
	return enc
}

// clientQuery is the client's query without an api-version: a client of
// Azure's SDKs sends its own (the AzureOpenAI client on every request),
// while the channel's base_url says which version its resource is asked.
func clientQuery(q string) string {
	if !strings.Contains(q, "api-version") {
		return q
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return q
	}
	v.Del("api-version")
	return v.Encode()
}
