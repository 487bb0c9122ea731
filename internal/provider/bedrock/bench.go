package bedrock

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

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
			switch {
			case w.Sampling.Seed != nil:
				return fmt.Errorf("seed: the %s API takes no sampling seed", w.API)
			case w.ReasoningEffort != "":
				return fmt.Errorf("reasoning-effort: the %s API takes reasoning as a model's own field; not sent by the benchmark client", w.API)
			case w.Tools != nil:
				return errors.New("tools: the Converse API takes tools in toolConfig, which the benchmark client does not send")
			}
			return nil
		},
		Path: func(w *request.Wire, base string, _ url.Values) string {
			method := methodConverse
			if w.Stream {
				method = methodConverseStream
			}
			return base + "/model/" + w.Model + "/" + method
		},
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
		},
		Auth:       func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		StreamType: ContentType,
		NewReader:  func(r io.Reader) request.PieceReader { return eventstream.NewPieces(r, 0) },
		ErrorCode:  ErrorTypeOf,
	})
}
