package anthropic

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/bench/request"
)

// The benchmark client's side of the Messages API.
func init() {
	request.Register(&request.API{
		Name: API,
		Check: func(w *request.Wire) error {
			if w.MaxTokens == 0 {
				return errors.New("max-tokens: the Anthropic Messages API requires max_tokens; give --max-tokens N")
			}
			if w.Sampling.Seed != nil {
				return fmt.Errorf("seed: the %s API takes no sampling seed", w.API)
			}
			return nil
		},
		Path: func(_ *request.Wire, base string, _ url.Values) string {
			if !strings.HasSuffix(base, "/v1") {
				base += "/v1"
			}
			return base + "/messages"
		},
		Body: func(w *request.Wire, prompt string, m map[string]any) {
			m["model"] = w.Model
			m["max_tokens"] = w.MaxTokens
			m["messages"] = []any{map[string]any{"role": "user", "content": prompt}}
			if w.Stream {
				m["stream"] = true
			}
			// A number is a thinking budget, a word an effort.
			if n, err := strconv.Atoi(w.ReasoningEffort); err == nil {
				m["thinking"] = map[string]any{"type": "enabled", "budget_tokens": n}
			} else if w.ReasoningEffort != "" {
				m["output_config"] = map[string]any{"effort": w.ReasoningEffort}
			}
			request.SetSampling(m, w.Sampling, "temperature", "top_p", "")
		},
		// The API requires anthropic-version on every request.
		Headers: func(h http.Header) { h.Set("Anthropic-Version", Version) },
		Auth:    func(h http.Header, key string) { h.Set("X-Api-Key", key) },
	})
}
