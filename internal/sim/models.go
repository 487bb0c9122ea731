package sim

import (
	"net/http"
	"strings"
)

// GET /v1/models lists the profiles as OpenAI models, or as Anthropic
// models when the request carries anthropic-version (Anthropic's SDKs
// always send it); GET /v1beta/models lists them as Gemini models.

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

type geminiModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

const anthropicCreatedAt = "2026-01-01T00:00:00Z"

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	gemini := strings.HasPrefix(r.URL.Path, "/v1beta/")
	f := familyOpenAI
	if gemini {
		f = familyGemini
	}
	if r.Method != http.MethodGet {
		s.methodNotAllowed(w, f, "GET")
		return
	}
	names := s.Profiles()
	var body []byte
	switch {
	case gemini:
		ms := make([]geminiModel, len(names))
		for i, n := range names {
			ms[i] = geminiModel{"models/" + n, "sim", n, []string{"generateContent", "streamGenerateContent"}}
		}
		body = marshal(struct {
			Models []geminiModel `json:"models"`
		}{ms})
	case r.Header.Get("Anthropic-Version") != "":
		ms := make([]anthropicModel, len(names))
		for i, n := range names {
			ms[i] = anthropicModel{"model", n, n, anthropicCreatedAt}
		}
		var first, last *string
		if len(names) > 0 {
			first, last = ptr(names[0]), ptr(names[len(names)-1])
		}
		body = marshal(struct {
			Data    []anthropicModel `json:"data"`
			HasMore bool             `json:"has_more"`
			FirstID *string          `json:"first_id"`
			LastID  *string          `json:"last_id"`
		}{ms, false, first, last})
	default:
		ms := make([]openAIModel, len(names))
		for i, n := range names {
			ms[i] = openAIModel{n, "model", created, "ttfx-sim"}
		}
		body = marshal(struct {
			Object string        `json:"object"`
			Data   []openAIModel `json:"data"`
		}{"list", ms})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// model serves GET /v1/models/{name} and /v1beta/models/{name}.
func (s *Server) model(w http.ResponseWriter, r *http.Request, name string) {
	gemini := strings.HasPrefix(r.URL.Path, "/v1beta/")
	anthropic := !gemini && r.Header.Get("Anthropic-Version") != ""
	f := familyOpenAI
	switch {
	case gemini:
		f = familyGemini
	case anthropic:
		f = familyAnthropic
	}
	if _, ok := s.profiles[name]; !ok {
		writeError(w, f, errorf(http.StatusNotFound, "The model '"+name+"' does not exist."))
		return
	}
	var body []byte
	switch {
	case gemini:
		body = marshal(geminiModel{"models/" + name, "sim", name, []string{"generateContent", "streamGenerateContent"}})
	case anthropic:
		body = marshal(anthropicModel{"model", name, name, anthropicCreatedAt})
	default:
		body = marshal(openAIModel{name, "model", created, "ttfx-sim"})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}
