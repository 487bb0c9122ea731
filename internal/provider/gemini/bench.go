package gemini

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/bench/request"
)

// The benchmark client's side of generateContent.
func init() {
	request.Register(&request.API{
		Name: API,
		// The model and the method are in the path; a stream is asked as
		// server-sent events (alt=sse).
		Path: func(w *request.Wire, base string, q url.Values) string {
			if !strings.HasSuffix(base, "/v1beta") && !strings.HasSuffix(base, "/v1") {
				base += "/v1beta"
			}
			method := ":generateContent"
			if w.Stream {
				method = ":streamGenerateContent"
				q.Set("alt", "sse")
			}
			return base + "/models/" + url.PathEscape(strings.TrimPrefix(w.Model, "models/")) + method
		},
		Body: func(w *request.Wire, prompt string, m map[string]any) {
			m["contents"] = []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}}
			gc := map[string]any{}
			if w.MaxTokens > 0 {
				gc["maxOutputTokens"] = w.MaxTokens
			}
			// A number is a thinking budget, a word a thinking level.
			if n, err := strconv.Atoi(w.ReasoningEffort); err == nil {
				gc["thinkingConfig"] = map[string]any{"thinkingBudget": n}
			} else if w.ReasoningEffort != "" {
				gc["thinkingConfig"] = map[string]any{"thinkingLevel": w.ReasoningEffort}
			}
			request.SetSampling(gc, w.Sampling, "temperature", "topP", "seed")
			if len(gc) > 0 {
				m["generationConfig"] = gc
			}
		},
		Auth: func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
	})
}
