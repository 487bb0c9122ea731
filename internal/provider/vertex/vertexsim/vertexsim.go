// Package vertexsim is the simulator's side of the vertex provider kind:
// Vertex AI's model URLs under a project and a location, for both model
// families it serves,
//
//	POST /{v1|v1beta1}/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
//	                                                                                      …:streamGenerateContent?alt=sse
//	POST /{v1|v1beta1}/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
//	                                                                                         …:streamRawPredict
//
// each with an OAuth2 bearer token the simulator issued, an expired one
// refused with Google's 401, and Google's token endpoint, POST /token: the
// JWT-bearer grant (RFC 7523) that a service account's key signs, as
// https://oauth2.googleapis.com/token takes it
// (grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT,
// the JWT RS256-signed by a key sim.Identity.ServiceAccounts holds, issued
// by that account, for the token endpoint, with a scope, and at most an
// hour long).
//
// A Gemini body is Google's own; an Anthropic body is Anthropic's Messages
// request with anthropic_version vertex-2023-10-16 and without model,
// which Vertex refuses. The model names a profile as everywhere, so
// profiles and faults work on this kind as on the others.
package vertexsim

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/provider/anthropic/anthropicsim"
	"github.com/ttfx/ttfx/internal/provider/gemini/geminisim"
	"github.com/ttfx/ttfx/internal/provider/vertex"
	"github.com/ttfx/ttfx/internal/sim"
)

// TokenURL is Google's token endpoint: a service account's JWT is signed
// for it (or for the simulator's own /token).
const TokenURL = "https://oauth2.googleapis.com/token"

func init() {
	var routes []sim.Route
	for _, v := range []string{"v1", "v1beta1"} {
		routes = append(routes, sim.Route{
			Path:   "/" + v + "/projects/{project}/locations/{location}/publishers/{publisher}/models/{target}",
			API:    geminisim.API,
			Accept: accept,
		})
	}
	sim.RegisterKind(&sim.Kind{
		Name:      vertex.Kind,
		Routes:    routes,
		Endpoints: []sim.Endpoint{{Path: "/token", Serve: token}},
	})
}

// accept checks the bearer token, as Google's front end does (in Google's
// format), then picks the API by publisher and method.
func accept(c *sim.Call) *sim.Error {
	publisher := c.R.PathValue("publisher")
	c.API = geminisim.API
	if c.R.Method != http.MethodPost {
		return sim.MethodNotAllowed("POST")
	}
	const invalid = "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential."
	switch why := c.Bearer(); why {
	case "":
	case "expired":
		return sim.Errorf(http.StatusUnauthorized, invalid+" (ACCESS_TOKEN_EXPIRED: the access token expired)")
	default:
		return sim.Errorf(http.StatusUnauthorized, invalid+" ("+why+" token)")
	}
	model, method, _ := strings.Cut(c.R.PathValue("target"), ":")
	switch {
	case publisher == "google" && (method == "generateContent" || method == "streamGenerateContent"):
		c.Model, c.Target, c.Stream = model, true, method == "streamGenerateContent"
		return nil
	case publisher == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
		c.API, c.Model = anthropicsim.API, model
		return anthropicBody(c)
	case publisher != "google" && publisher != "anthropic":
		return sim.Errorf(http.StatusNotFound, fmt.Sprintf("Publisher %s is not found; the simulator serves google and anthropic.", sim.Clip(publisher)))
	}
	if publisher == "anthropic" {
		c.API = anthropicsim.API
	}
	return sim.Errorf(http.StatusNotFound, fmt.Sprintf("Unknown method %s for publisher %s.", sim.Clip(method), publisher))
}

// anthropicBody checks what Vertex requires of an Anthropic body.
// @anthropic-ai/vertex-sdk 1.x sends a Messages API version instead of
// vertex.AnthropicVersion (its anthropic-version header, a date such as
// 2023-06-01, copied into the body), which Vertex takes too; anything
// else, or none, is refused.
func anthropicBody(c *sim.Call) *sim.Error {
	b, e := c.Body()
	if e != nil {
		return e
	}
	var f struct {
		Model   json.RawMessage `json:"model"`
		Version *string         `json:"anthropic_version"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return sim.JSONError(err)
	}
	switch {
	case f.Model != nil:
		return sim.Errorf(http.StatusBadRequest, "model: Extra inputs are not permitted (Vertex names the model in the URL)")
	case f.Version == nil:
		return sim.Errorf(http.StatusBadRequest, "anthropic_version: Field required")
	case *f.Version != vertex.AnthropicVersion && !messagesVersion(*f.Version):
		return sim.Errorf(http.StatusBadRequest, "anthropic_version: Input should be '"+vertex.AnthropicVersion+"', not '"+sim.Clip(*f.Version)+"'")
	}
	return nil
}

// messagesVersion reports whether v has the form of a Messages API
// version (YYYY-MM-DD).
func messagesVersion(v string) bool {
	_, err := time.Parse(time.DateOnly, v)
	return err == nil
}

// maxAssertion bounds a JWT the token endpoint reads.
const maxAssertion = 16 << 10

// token serves POST /token: the JWT-bearer grant.
func token(s *sim.Server, w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		sim.OAuthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAssertion+1024)
	if err := r.ParseForm(); err != nil {
		sim.OAuthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		sim.OAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "Invalid grant_type: "+sim.Clip(g))
		return
	}
	var accounts map[string]*rsa.PublicKey
	if id := s.Identity(); id != nil {
		accounts = id.ServiceAccounts
	}
	aud := []string{TokenURL, "http://" + r.Host + "/token", "https://" + r.Host + "/token"}
	sub, err := sim.VerifyJWT(r.PostForm.Get("assertion"), accounts, aud, s.Now())
	if err != nil {
		sim.OAuthError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return
	}
	s.IssueToken(w, "jwt-bearer", sub)
}
