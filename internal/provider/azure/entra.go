package azure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// Entra ID credentials: a channel that names a tenant_id authenticates with
// an access token of an Entra ID application (a service principal) instead
// of the resource's api-key, through the OAuth2 client-credentials grant:
//
//	POST {authority_host}/{tenant_id}/oauth2/v2.0/token
//	grant_type=client_credentials&client_id=…&client_secret=…&scope=https://cognitiveservices.azure.com/.default
//
// The token (Entra ID issues them for 60 to 90 minutes) is cached and
// refreshed before it expires, off the request path, by wire.TokenCache.

// DefaultAuthorityHost is Entra ID's public cloud.
const DefaultAuthorityHost = "https://login.microsoftonline.com"

// DefaultScope is Azure OpenAI's (Cognitive Services') scope.
const DefaultScope = "https://cognitiveservices.azure.com/.default"

// maxTokenResponse bounds a token endpoint's answer.
const maxTokenResponse = 64 << 10

var settings = []wire.Setting{
	{Name: "tenant_id", Doc: "the Entra ID tenant of the application; set to authenticate with Entra ID tokens instead of an api-key"},
	{Name: "client_id", Doc: "the Entra ID application (client) ID"},
	{Name: "client_secret_env", Doc: "an environment variable holding the application's client secret"},
	{Name: "authority_host", Doc: "the Entra ID authority (default " + DefaultAuthorityHost + "; sovereign clouds have their own)"},
	{Name: "scope", Doc: "the token's scope (default " + DefaultScope + ")"},
}

// open gives a channel with a tenant_id its Entra ID credentials; a
// channel without one keeps the api-key (nil Upstream).
func open(c wire.ChannelConfig) (*wire.Upstream, error) {
	s := c.Settings
	tenant := s["tenant_id"]
	if tenant == "" {
		for _, k := range []string{"client_id", "client_secret_env", "authority_host", "scope"} {
			if s[k] != "" {
				return nil, fmt.Errorf("%s is set without tenant_id", k)
			}
		}
		return nil, nil
	}
	switch {
	case c.Key != "":
		return nil, errors.New("give key_env/key_file (an api-key) or tenant_id (Entra ID), not both")
	case s["client_id"] == "":
		return nil, errors.New("tenant_id needs client_id")
	case s["client_secret_env"] == "" || c.Env["client_secret_env"] == "":
		return nil, errors.New("tenant_id needs client_secret_env naming a set variable")
	}
	for _, r := range tenant {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return nil, fmt.Errorf("tenant_id %q is not a tenant ID or domain", tenant)
		}
	}
	authority := s["authority_host"]
	if authority == "" {
		authority = DefaultAuthorityHost
	}
	a, err := url.Parse(authority)
	if err != nil || (a.Scheme != "https" && a.Scheme != "http") || a.Host == "" {
		return nil, fmt.Errorf("authority_host %q is not an http(s) URL", authority)
	}
	scope := s["scope"]
	if scope == "" {
		scope = DefaultScope
	}
	e := &entra{
		url:    strings.TrimSuffix(authority, "/") + "/" + tenant + "/oauth2/v2.0/token",
		form:   url.Values{"grant_type": {"client_credentials"}, "client_id": {s["client_id"]}, "client_secret": {c.Env["client_secret_env"]}, "scope": {scope}}.Encode(),
		client: c.Client,
	}
	if e.client == nil {
		e.client = http.DefaultClient
	}
	return &wire.Upstream{Credentials: wire.NewTokenCache(e.fetch, wire.TokenCacheOptions{Channel: c.Name})}, nil
}

// entra fetches tokens of one application.
type entra struct {
	url    string
	form   string // the encoded request body; holds the secret
	client *http.Client
}

// fetch asks the token endpoint for a new token.
func (e *entra) fetch(ctx context.Context) (wire.Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(e.form))
	if err != nil {
		return wire.Token{}, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		return wire.Token{}, fmt.Errorf("entra id token endpoint %s: %w", e.url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return wire.Token{}, fmt.Errorf("entra id token endpoint %s: %w", e.url, err)
	}
	var r struct {
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"` // a number, or a string of one (v1 endpoints)
		Error       string          `json:"error"`
		Description string          `json:"error_description"`
	}
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != http.StatusOK || r.AccessToken == "" {
		msg := r.Error
		if r.Description != "" {
			// Its first line: Entra ID appends trace and correlation IDs.
			d, _, _ := strings.Cut(r.Description, "\r\n")
			msg += ": " + d
		}
		if msg == "" {
			msg = "no access_token in the answer"
		}
		return wire.Token{}, fmt.Errorf("entra id token endpoint %s: %d %s", e.url, resp.StatusCode, clip(msg, 300))
	}
	secs, err := expiresIn(r.ExpiresIn)
	if err != nil {
		return wire.Token{}, fmt.Errorf("entra id token endpoint %s: %w", e.url, err)
	}
	// From when the request was sent: the token was issued after.
	return wire.Token{Value: r.AccessToken, Expiry: start.Add(time.Duration(secs) * time.Second)}, nil
}

// expiresIn reads expires_in as a number of seconds or a string of one.
func expiresIn(raw json.RawMessage) (int64, error) {
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil && n > 0 {
		return n, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		var m int64
		if _, err := fmt.Sscan(s, &m); err == nil && m > 0 {
			return m, nil
		}
	}
	return 0, fmt.Errorf("expires_in %s is not a number of seconds", clip(string(raw), 40))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
