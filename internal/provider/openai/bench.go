package openai

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ttfx/ttfx/internal/bench/request"
)

// The benchmark client's side of chat/completions and Responses.
func init() {
	auth := func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }
	request.Register(&request.API{
		Name: Chat, Auth: auth, IncludeUsage: true,
		Path: func(_ *request.Wire, base string, _ url.Values) string { return v1(base) + "/chat/completions" },
		Body: func(w *request.Wire, prompt string, m map[string]any) {
			m["model"] = w.Model
			m["messages"] = []any{map[string]any{"role": "user", "content": prompt}}
			if w.Stream {
				m["stream"] = true
				m["stream_options"] = map[string]any{"include_usage": true}
			}
			if w.MaxTokens > 0 {
				// max_completion_tokens: OpenAI's current name; reasoning
				// models reject the deprecated max_tokens.
				m["max_completion_tokens"] = w.MaxTokens
			}
			if w.ReasoningEffort != "" {
				m["reasoning_effort"] = w.ReasoningEffort
			}
			request.SetSampling(m, w.Sampling, "temperature", "top_p", "seed")
		},
	})
	request.Register(&request.API{
		Name: Responses, Auth: auth,
		Check: func(w *request.Wire) error {
			if w.Sampling.Seed != nil {
				return fmt.Errorf("seed: the %s API takes no sampling seed", w.API)
			}
			return nil
		},
		Path: func(_ *request.Wire, base string, _ url.Values) string { return v1(base) + "/responses" },
		Body: func(w *request.Wire, prompt string, m map[string]any) {
			m["model"] = w.Model
			m["input"] = prompt
			if w.Stream {
				m["stream"] = true
			}
			if w.MaxTokens > 0 {
				m["max_output_tokens"] = w.MaxTokens
			}
			if w.ReasoningEffort != "" {
				m["reasoning"] = map[string]any{"effort": w.ReasoningEffort}
			}
			request.SetSampling(m, w.Sampling, "temperature", "top_p", "")
		},
	})
}

// v1 is the base path with the /v1 version segment, which a base URL
// configured as SDKs are ("…/v1") has already.
func v1(base string) string {
	if strings.HasSuffix(base, "/v1") {
		return base
	}
	return base + "/v1"
}
