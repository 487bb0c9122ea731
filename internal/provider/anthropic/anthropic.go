// Package anthropic is the unit of Anthropic's Messages API and of the
// anthropic provider kind.
package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/wire"
)

// Family is the protocol family of the Messages API and the name of its kind.
const Family = "anthropic"

// API is the Messages API's name (the record's api) and its classifier's.
const API protocol.API = "anthropic"

// Version is the anthropic-version the gateway sends when the client sent none.
const Version = "2023-06-01"

func init() {
	// Messages streams split one usage report: input in message_start,
	// output in message_delta.
	protocol.Register(API, &protocol.Classifier{
		Event: anthropicEvent, Response: anthropicMessage, SplitUsage: true, Detect: detect,
	})
	wire.RegisterAPI(&wire.API{
		Name: string(API), Family: Family,
		Endpoints: []wire.Endpoint{{Pattern: "POST /v1/messages", HasBody: true}},
		Stream:    API, Response: API,
		KeyHeader: "x-api-key: KEY",
		// Its clients always send anthropic-version (its GET /v1/models
		// shares OpenAI's path and is told apart by it).
		Claim: func(r *http.Request) int {
			switch {
			case strings.HasPrefix(r.URL.Path, "/v1/messages"):
				return 2
			case r.Header.Get("Anthropic-Version") != "":
				return 1
			}
			return 0
		},
		ErrorBody:      ErrorBody,
		StreamError:    streamError,
		GenAIOperation: "chat", GenAIProvider: "anthropic",
	})
	wire.RegisterKind(&wire.Kind{
		Name: Family, Families: []string{Family}, ZeroConfig: true,
		Authorize: func(h http.Header, key string) {
			h.Set("X-Api-Key", key)
			if h.Get("Anthropic-Version") == "" {
				h.Set("Anthropic-Version", Version)
			}
		},
		ForwardHeaders: []string{"Anthropic-Version", "Anthropic-Beta"},
		RateLimits:     rateLimits,
		Example:        wire.Example{Host: "api.anthropic.com", Models: map[string][]string{Family: {"claude-haiku-4-5", "claude-sonnet-4-5"}}},
	})
}

// streamError is the error event Anthropic sends mid-stream.
func streamError(f wire.Failure) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": f.Msg}})
	return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
}
