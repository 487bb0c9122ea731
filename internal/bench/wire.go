package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/anthropic"
	"github.com/ttfx/ttfx/internal/provider/gemini"
	"github.com/ttfx/ttfx/internal/provider/openai"
)

// Wire builds the requests of a run in the wire format of its API.
type Wire struct {
	API    protocol.API
	Base   *url.URL // base URL; a path ending in /v1 (/v1beta for Gemini) is used as is
	Model  string
	Key    string // sent the way the API expects it; empty: none
	Stream bool
	// MaxTokens is the output cap (max_completion_tokens, max_output_tokens,
	// max_tokens, maxOutputTokens); 0: none sent.
	MaxTokens int
	// ReasoningEffort is sent as reasoning_effort (openai.chat),
	// reasoning.effort (openai.responses), thinking.budget_tokens for a
	// number or output_config.effort for a word (anthropic),
	// thinkingConfig.thinkingBudget for a number or thinkingLevel for a
	// word (gemini). Empty: none sent.
	ReasoningEffort string
	Tools           json.RawMessage // a JSON array of tool definitions in the API's own format; nil: none
	Sampling        Sampling
}

// anthropicVersion is the Messages API version header the bench sends
// when talking to Anthropic (required by the API).
const anthropicVersion = "2023-06-01"

// Check reports the first setting the API cannot take.
func (w *Wire) Check() error {
	if w.Base == nil || (w.Base.Scheme != "http" && w.Base.Scheme != "https") || w.Base.Host == "" {
		return errors.New("url: want an http:// or https:// base URL")
	}
	if strings.TrimSpace(w.Model) == "" {
		return errors.New("model: required")
	}
	if w.MaxTokens < 0 {
		return errors.New("max-tokens: must be ≥ 0")
	}
	if w.API == anthropic.API && w.MaxTokens == 0 {
		return errors.New("max-tokens: the Anthropic Messages API requires max_tokens; give --max-tokens N")
	}
	if w.Sampling.Seed != nil && (w.API == openai.Responses || w.API == anthropic.API) {
		return fmt.Errorf("seed: the %s API takes no sampling seed", w.API)
	}
	return nil
}

// Route returns the method and path every request of the run is sent to
// (without the query), for the conditions.
func (w *Wire) Route() string {
	u := w.url()
	return http.MethodPost + " " + u.Path
}

// url returns the endpoint URL. A query on the base URL is kept (some
// deployments need one, such as an api-version); it is not part of Route
// and not recorded.
func (w *Wire) url() *url.URL {
	u := *w.Base
	u.Fragment, u.User = "", nil
	base := strings.TrimRight(u.Path, "/")
	var p string
	switch w.API {
	case gemini.API:
		if !strings.HasSuffix(base, "/v1beta") && !strings.HasSuffix(base, "/v1") {
			base += "/v1beta"
		}
		method := ":generateContent"
		if w.Stream {
			method = ":streamGenerateContent"
			q := u.Query()
			q.Set("alt", "sse")
			u.RawQuery = q.Encode()
		}
		p = base + "/models/" + url.PathEscape(strings.TrimPrefix(w.Model, "models/")) + method
	default:
		if !strings.HasSuffix(base, "/v1") {
			base += "/v1"
		}
		switch w.API {
		case openai.Chat:
			p = base + "/chat/completions"
		case openai.Responses:
			p = base + "/responses"
		case anthropic.API:
			p = base + "/messages"
		}
	}
	u.Path, u.RawPath = p, ""
	return &u
}

// Body returns the JSON body of a request with the prompt.
func (w *Wire) Body(prompt string) ([]byte, error) {
	m := map[string]any{}
	s := w.Sampling
	effortNum, numErr := strconv.Atoi(w.ReasoningEffort)
	switch w.API {
	case openai.Chat:
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
		setSampling(m, s, "temperature", "top_p", "seed")
	case openai.Responses:
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
		setSampling(m, s, "temperature", "top_p", "")
	case anthropic.API:
		m["model"] = w.Model
		m["max_tokens"] = w.MaxTokens
		m["messages"] = []any{map[string]any{"role": "user", "content": prompt}}
		if w.Stream {
			m["stream"] = true
		}
		switch {
		case w.ReasoningEffort == "":
		case numErr == nil:
			m["thinking"] = map[string]any{"type": "enabled", "budget_tokens": effortNum}
		default:
			m["output_config"] = map[string]any{"effort": w.ReasoningEffort}
		}
		setSampling(m, s, "temperature", "top_p", "")
	case gemini.API:
		m["contents"] = []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}}
		gc := map[string]any{}
		if w.MaxTokens > 0 {
			gc["maxOutputTokens"] = w.MaxTokens
		}
		switch {
		case w.ReasoningEffort == "":
		case numErr == nil:
			gc["thinkingConfig"] = map[string]any{"thinkingBudget": effortNum}
		default:
			gc["thinkingConfig"] = map[string]any{"thinkingLevel": w.ReasoningEffort}
		}
		setSampling(gc, s, "temperature", "topP", "seed")
		if len(gc) > 0 {
			m["generationConfig"] = gc
		}
	default:
		return nil, fmt.Errorf("unknown api %q", w.API)
	}
	if w.Tools != nil {
		m["tools"] = w.Tools
	}
	return json.Marshal(m)
}

func setSampling(m map[string]any, s Sampling, temp, topP, seed string) {
	if s.Temperature != nil {
		m[temp] = *s.Temperature
	}
	if s.TopP != nil {
		m[topP] = *s.TopP
	}
	if s.Seed != nil && seed != "" {
		m[seed] = *s.Seed
	}
}

// NewRequest returns the HTTP request carrying body.
func (w *Wire) NewRequest(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url().String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "ttfx-bench/"+Version)
	if w.Stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	switch w.API {
	case anthropic.API:
		h.Set("Anthropic-Version", anthropicVersion)
		if w.Key != "" {
			h.Set("X-Api-Key", w.Key)
		}
	case gemini.API:
		if w.Key != "" {
			h.Set("X-Goog-Api-Key", w.Key)
		}
	default:
		if w.Key != "" {
			h.Set("Authorization", "Bearer "+w.Key)
		}
	}
	return req, nil
}

// LoadTools reads a JSON file holding an array of tool definitions in the
// API's own format and describes it for the conditions. The definitions
// are sent as they are (compacted).
func LoadTools(name string, data []byte) (json.RawMessage, *Tools, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, nil, fmt.Errorf("tools %s: want a JSON array of tool definitions: %w", name, err)
	}
	if len(list) == 0 {
		return nil, nil, fmt.Errorf("tools %s: the array is empty", name)
	}
	t := &Tools{File: filepath.Base(name), Count: len(list)}
	for i, raw := range list {
		var def struct {
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			return nil, nil, fmt.Errorf("tools %s: element %d is not an object: %w", name, i, err)
		}
		switch {
		case def.Function != nil && def.Function.Name != "":
			t.Names = append(t.Names, def.Function.Name)
		case def.Name != "":
			t.Names = append(t.Names, def.Name)
		case len(def.FunctionDeclarations) > 0:
			for _, d := range def.FunctionDeclarations {
				t.Names = append(t.Names, d.Name)
			}
		default:
			t.Names = append(t.Names, "")
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, nil, fmt.Errorf("tools %s: %w", name, err)
	}
	sum := sha256.Sum256(buf.Bytes())
	t.SHA256 = hex.EncodeToString(sum[:])
	return json.RawMessage(buf.Bytes()), t, nil
}
