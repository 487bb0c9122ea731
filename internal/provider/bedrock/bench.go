package bedrock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
)

// The benchmark client's side of the Converse API: POST
// /model/{modelId}/converse-stream (or /converse), the key as a bearer
// token, streams read frame by frame.
func init() {
	request.Register(&request.API{
		Name: API,
		Check: func(w *request.Wire) error {
			if w.Sampling.Seed != nil {
				return fmt.Errorf("seed: the %s API takes no sampling seed", w.API)
			}
			if _, err := strconv.Atoi(w.ReasoningEffort); err != nil && w.ReasoningEffort != "" && strings.Contains(w.Model, "anthropic.") {
				return fmt.Errorf("reasoning-effort: Claude models take a thinking budget through the %s API (a number of tokens), not %q", w.API, w.ReasoningEffort)
			}
			return nil
		},
		Path: func(w *request.Wire, base string, _ url.Values) string {
			method := methodConverse
			if w.Stream {
				method = methodConverseStream
			}
			return base + "/model/" + escapeSegment(w.Model) + "/" + method
		},
		// The model id is one segment, escaped as the AWS SDKs escape it
		// (an ARN's ":" and "/" included).
		EscapedPath: true,
		Body: func(w *request.Wire, prompt string, m map[string]any) {
			m["messages"] = []any{map[string]any{"role": "user", "content": []any{map[string]any{"text": prompt}}}}
			cfg := map[string]any{}
			if w.MaxTokens > 0 {
				cfg["maxTokens"] = w.MaxTokens
			}
			request.SetSampling(cfg, w.Sampling, "temperature", "topP", "")
			if len(cfg) > 0 {
				m["inferenceConfig"] = cfg
			}
			if f := reasoningFields(w.Model, w.ReasoningEffort); f != nil {
				m["additionalModelRequestFields"] = f
			}
		},
		// Converse takes tools (its own toolSpec objects) in toolConfig.
		Tools:      func(m map[string]any, tools json.RawMessage) { m["toolConfig"] = map[string]any{"tools": tools} },
		Auth:       func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		StreamType: ContentType,
		NewReader:  func(r io.Reader) request.PieceReader { return eventstream.NewPieces(r, 0) },
		ErrorCode:  ErrorTypeOf,
	})
}

// reasoningFields is the additionalModelRequestFields that asks model for
// reasoning: Converse has no field of its own, each model family reads
// its own. A number is a thinking budget, which Anthropic's Claude models
// take ({"thinking":{"type":"enabled","budget_tokens":N}}); a word is an
// effort, which OpenAI's gpt-oss models take as reasoning_effort and
// Amazon Nova as reasoningConfig.maxReasoningEffort (the form sent to any
// other model). nil: none asked.
func reasoningFields(model, effort string) map[string]any {
	if effort == "" {
		return nil
	}
	if n, err := strconv.Atoi(effort); err == nil {
		return map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": n}}
	}
	if strings.Contains(model, "openai.") {
		return map[string]any{"reasoning_effort": effort}
	}
	return map[string]any{"reasoningConfig": map[string]any{"type": "enabled", "maxReasoningEffort": effort}}
}
