package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The simulator's side of the vertex provider kind: Vertex AI's model URLs
// under a project and a location, for both model families it serves,
//
//	POST /{v1|v1beta1}/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
//	                                                                                      …:streamGenerateContent?alt=sse
//	POST /{v1|v1beta1}/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
//	                                                                                         …:streamRawPredict
//
// each with an OAuth2 bearer token the simulator issued (identity.go), an
// expired one refused with Google's 401. A Gemini body is Google's own; an
// Anthropic body is Anthropic's Messages request with anthropic_version
// vertex-2023-10-16 and without model, which Vertex refuses. The model
// names a profile as everywhere, so profiles and faults work on this kind
// as on the others.

// vertexAnthropicVersion is the anthropic_version Vertex documents.
// @anthropic-ai/vertex-sdk 1.x sends a Messages API version instead (its
// anthropic-version header, a date such as 2023-06-01, copied into the
// body), which Vertex takes too; anything else, or none, is refused.
const vertexAnthropicVersion = "vertex-2023-10-16"

// messagesVersion reports whether v has the form of a Messages API
// version (YYYY-MM-DD).
func messagesVersion(v string) bool {
	_, err := time.Parse(time.DateOnly, v)
	return err == nil
}

func (s *Server) vertexRoutes(m *http.ServeMux) {
	for _, v := range []string{"v1", "v1beta1"} {
		m.HandleFunc("/"+v+"/projects/{project}/locations/{location}/publishers/{publisher}/models/{target}", s.vertex)
	}
	m.HandleFunc("/token", s.googleToken)
	m.HandleFunc("/{tenant}/oauth2/v2.0/token", s.entraToken)
}

// vertex serves one model request of the vertex kind.
func (s *Server) vertex(w http.ResponseWriter, r *http.Request) {
	publisher := r.PathValue("publisher")
	f := familyGemini
	if publisher == "anthropic" {
		f = familyAnthropic
	}
	if r.Method != http.MethodPost {
		s.methodNotAllowed(w, familyGemini, "POST")
		return
	}
	// Google's front end answers for the token, in Google's format.
	switch why := s.bearer(r); why {
	case "":
	case "expired":
		writeError(w, familyGemini, errorf(http.StatusUnauthorized, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. (ACCESS_TOKEN_EXPIRED: the access token expired)"))
		return
	default:
		writeError(w, familyGemini, errorf(http.StatusUnauthorized, "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. ("+why+" token)"))
		return
	}
	model, method, _ := strings.Cut(r.PathValue("target"), ":")
	switch {
	case publisher == "google" && (method == "generateContent" || method == "streamGenerateContent"):
		s.serve(w, r, APIGemini, model, method == "streamGenerateContent", true)
	case publisher == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
		if e := s.vertexAnthropicBody(w, r); e != nil {
			writeError(w, familyAnthropic, e)
			return
		}
		s.serve(w, r, APIAnthropic, model, false, true)
	case publisher != "google" && publisher != "anthropic":
		writeError(w, familyGemini, errorf(http.StatusNotFound, fmt.Sprintf("Publisher %s is not found; the simulator serves google and anthropic.", clip(publisher))))
	default:
		writeError(w, f, errorf(http.StatusNotFound, fmt.Sprintf("Unknown method %s for publisher %s.", clip(method), publisher)))
	}
}

// vertexAnthropicBody checks what Vertex requires of an Anthropic body
// and puts the body back for serve.
func (s *Server) vertexAnthropicBody(w http.ResponseWriter, r *http.Request) *apiError {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errorf(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", mbe.Limit))
		}
		return errorf(http.StatusBadRequest, "The request body could not be read.")
	}
	var f struct {
		Model   json.RawMessage `json:"model"`
		Version *string         `json:"anthropic_version"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return jsonError(err)
	}
	switch {
	case f.Model != nil:
		return &apiError{status: http.StatusBadRequest, msg: "model: Extra inputs are not permitted (Vertex names the model in the URL)"}
	case f.Version == nil:
		return &apiError{status: http.StatusBadRequest, msg: "anthropic_version: Field required"}
	case *f.Version != vertexAnthropicVersion && !messagesVersion(*f.Version):
		return &apiError{status: http.StatusBadRequest, msg: "anthropic_version: Input should be '" + vertexAnthropicVersion + "', not '" + clip(*f.Version) + "'"}
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}
