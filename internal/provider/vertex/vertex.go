// Package vertex is the unit of the vertex provider kind: Google Cloud's
// Vertex AI, which serves Google's Gemini models through the
// generateContent API and Anthropic's Claude models through the Messages
// API, both under a project and a location and both with OAuth2 access
// tokens of a Google identity (a service account).
//
// A channel names its project and location; requests go to
//
//	{base}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:streamGenerateContent?alt=sse
//	                                                                          …:generateContent
//	{base}/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:streamRawPredict
//	                                                                            …:rawPredict
//
// where {base} is the regional endpoint (https://{location}-aiplatform.googleapis.com,
// or https://aiplatform.googleapis.com for the global location) unless
// base_url says otherwise. An Anthropic request's body loses its model (the
// URL names it) and gains anthropic_version: vertex-2023-10-16, as Vertex
// requires; a Gemini request's body is Google's own and is sent unchanged.
//
// Credentials come from a service-account JSON key (credentials_file, or
// the file an environment variable named by credentials_env points at) or,
// without either, from Google's application default credentials; tokens
// are fetched by cloud.google.com/go/auth and cached by wire.TokenCache,
// which refreshes them before they expire, off the request path.
package vertex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/provider/anthropic"
	"github.com/ttfx/ttfx/internal/provider/gemini"
	"github.com/ttfx/ttfx/internal/wire"
)

// Kind is the name of the kind.
const Kind = "vertex"

// AnthropicVersion is the anthropic_version Vertex requires in the body of
// an Anthropic model's request.
const AnthropicVersion = "vertex-2023-10-16"

// Scope is the OAuth2 scope of Vertex AI's API.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// googleTokenURL is Google's token endpoint, for a key without token_uri.
const googleTokenURL = "https://oauth2.googleapis.com/token"

func init() {
	wire.RegisterKind(&wire.Kind{
		Name: Kind, Families: []string{gemini.Family, anthropic.Family}, GenAIProvider: "gcp.vertex_ai",
		// Vertex reads Anthropic's beta flags from the header, as
		// Anthropic does; the version is in the body.
		ForwardHeaders: []string{"X-Goog-Api-Client", "Anthropic-Beta"},
		Settings: []wire.Setting{
			{Name: "project", Doc: "the Google Cloud project ID", Required: true},
			{Name: "location", Doc: "the Vertex AI location: a region such as us-east5, or global", Required: true},
			{Name: "credentials_file", Doc: "a service-account JSON key file; without it or credentials_env, application default credentials"},
			{Name: "credentials_env", Doc: "an environment variable holding the path of a service-account JSON key file"},
		},
		DefaultBaseURL: defaultBaseURL,
		Open:           open,
		Example: wire.Example{Host: "us-east5-aiplatform.googleapis.com", Models: map[string][]string{
			gemini.Family: {"gemini-2.5-flash"}, anthropic.Family: {"claude-sonnet-4-5"}}},
	})
}

// defaultBaseURL is the location's endpoint.
func defaultBaseURL(_ string, s map[string]string) string {
	loc := s["location"]
	if loc == "" || loc == "global" {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + loc + "-aiplatform.googleapis.com"
}

// open checks a channel's settings and starts its credentials.
func open(c wire.ChannelConfig) (*wire.Upstream, error) {
	project, location := c.Settings["project"], c.Settings["location"]
	if !segment(project) {
		return nil, fmt.Errorf("project %q is not a Google Cloud project ID", project)
	}
	if !segment(location) {
		return nil, fmt.Errorf("location %q is not a Vertex AI location", location)
	}
	keyFile := c.Settings["credentials_file"]
	if v := c.Settings["credentials_env"]; v != "" {
		if keyFile != "" {
			return nil, errors.New("give credentials_file or credentials_env, not both")
		}
		keyFile = c.Env["credentials_env"]
		if keyFile == "" {
			return nil, fmt.Errorf("credentials_env: %s is empty", v)
		}
	}
	tp, err := tokenProvider(keyFile, c.Client)
	if err != nil {
		return nil, err
	}
	cache := wire.NewTokenCache(func(ctx context.Context) (wire.Token, error) {
		t, err := tp.Token(ctx)
		if err != nil {
			return wire.Token{}, err
		}
		return wire.Token{Value: t.Value, Expiry: t.Expiry}, nil
	}, wire.TokenCacheOptions{Channel: c.Name})
	prefix := "/v1/projects/" + project + "/locations/" + location
	v := &vertex{google: prefix + "/publishers/google/models/", anthropic: prefix + "/publishers/anthropic/models/"}
	return &wire.Upstream{URL: v.url, Body: body, Credentials: cache}, nil
}

// segment reports whether s can stand as one path segment of the URL as
// is: the IDs Google gives projects and locations are lowercase letters,
// digits and hyphens (a domain-scoped project has "domain:name").
func segment(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == ':' || c == '_') {
			return false
		}
	}
	return true
}

// serviceAccountKey is the part of a service account's JSON key that
// two-legged OAuth reads.
type serviceAccountKey struct {
	Type         string `json:"type"`
	ClientEmail  string `json:"client_email"`
	PrivateKey   string `json:"private_key"`
	PrivateKeyID string `json:"private_key_id"`
	TokenURI     string `json:"token_uri"`
}

// tokenProvider returns the provider of new tokens (each call a fetch: the
// caching is wire.TokenCache's, so that a fetch on a request's path can be
// timed). A service-account key gets two-legged OAuth (a JWT signed with
// the key, exchanged at the key's token_uri); other key files and
// application default credentials go through the library's detection,
// whose own cache hands a token back until less than 225 s are left, so
// TokenCache's refresh five minutes ahead may get the same token once and
// then a new one before the old expires.
func tokenProvider(keyFile string, client *http.Client) (auth.TokenProvider, error) {
	if keyFile == "" {
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{Scope}, Client: client, DisableAsyncRefresh: true})
		if err != nil {
			return nil, fmt.Errorf("no credentials_file or credentials_env, and no application default credentials: %w", err)
		}
		return creds, nil
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	var k serviceAccountKey
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("credentials %s: not a JSON key: %w", keyFile, err)
	}
	if k.Type != "service_account" {
		creds, err := credentials.DetectDefault(&credentials.DetectOptions{Scopes: []string{Scope}, Client: client, CredentialsJSON: b, DisableAsyncRefresh: true})
		if err != nil {
			return nil, fmt.Errorf("credentials %s: %w", keyFile, err)
		}
		return creds, nil
	}
	if k.TokenURI == "" {
		k.TokenURI = googleTokenURL
	}
	tp, err := auth.New2LOTokenProvider(&auth.Options2LO{
		Email: k.ClientEmail, PrivateKey: []byte(k.PrivateKey), PrivateKeyID: k.PrivateKeyID,
		Scopes: []string{Scope}, TokenURL: k.TokenURI, Client: client,
	})
	if err != nil {
		return nil, fmt.Errorf("credentials %s: %w", keyFile, err)
	}
	return tp, nil
}

// vertex is one channel's URL rule.
type vertex struct {
	// The paths of the two publishers' models,
	// "/v1/projects/P/locations/L/publishers/google/models/".
	google, anthropic string
}

// url builds the model's URL: the publisher from the client's API family,
// the method from whether it streams. The model is one escaped path
// segment, so no model name reaches another path.
func (v *vertex) url(t wire.Target) *url.URL {
	var tail, method, query string
	switch t.Family {
	case anthropic.Family:
		tail, method = v.anthropic, ":rawPredict"
		if t.Stream {
			method = ":streamRawPredict"
		}
	case gemini.Family:
		tail, method, query = v.google, ":generateContent", t.Query
		if t.Stream {
			method = ":streamGenerateContent"
			// Vertex streams JSON arrays unless asked for SSE; the
			// gateway relays SSE.
			if !hasAlt(query) {
				query = join(query, "alt=sse")
			}
		}
	default:
		return wire.JoinURL(t.Base, t.Path, t.Query)
	}
	u := new(url.URL)
	*u = *t.Base
	base := strings.TrimSuffix(t.Base.Path, "/")
	u.Path = base + tail + t.Model + method
	u.RawPath = ""
	if esc := url.PathEscape(t.Model); esc != t.Model || t.Base.RawPath != "" {
		// Only a model name with a character to escape ("/") needs the
		// path spelled out; the others are escaped as Path says.
		u.RawPath = strings.TrimSuffix(t.Base.EscapedPath(), "/") + tail + esc + method
	}
	u.RawQuery = join(t.Base.RawQuery, query)
	return u
}

func hasAlt(q string) bool {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if strings.HasPrefix(kv, "alt=") {
			return true
		}
	}
	return false
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "&" + b
}

// body is the body Vertex gets: an Anthropic request without its model and
// with Vertex's anthropic_version (unless the client set one); a Gemini
// request unchanged.
func body(t wire.Target, b []byte) ([]byte, error) {
	if t.Family != anthropic.Family {
		return b, nil
	}
	return jsonscan.EditObject(b, "anthropic_version", `"`+AnthropicVersion+`"`, "model")
}
