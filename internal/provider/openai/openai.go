// Package openai is the unit of OpenAI's APIs (chat/completions, legacy
// completions, Responses, embeddings, models) and of the openai provider
// kind: OpenAI itself and every server compatible with it.
package openai

import (
	"encoding/json"
	"net/http"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/wire"
)

// Family is the protocol family of OpenAI's APIs and the name of its kind.
const Family = "openai"

// The classifiers' names: the record's api of chat/completions and of
// Responses.
const (
	Chat      protocol.API = "openai.chat"
	Responses protocol.API = "openai.responses"
)

// The record's api of legacy completions and of embeddings.
const (
	Completions = "openai.completions"
	Embeddings  = "openai.embeddings"
)

func init() {
	// A chat finish_reason ends its choice, not the stream (n > 1). A
	// non-streaming body (chat.completion, text_completion, an embeddings
	// list) reads as one chunk.
	protocol.Register(Chat, &protocol.Classifier{
		Event: func(c *protocol.Content, e *protocol.Event, _, data []byte) bool { return chatEvent(c, e, data) },
		Response: func(c *protocol.Content, e *protocol.Event, body []byte) bool {
			return chatEvent(c, e, protocol.TrimSpace(body))
		},
		PerChoice: true,
		Detect:    detectChat,
	})
	protocol.Register(Responses, &protocol.Classifier{
		Event: responsesEvent, Response: responsesBody, Detect: detectResponses,
	})
	chat := &wire.API{
		Name: string(Chat), Family: Family,
		Endpoints: []wire.Endpoint{{Pattern: "POST /v1/chat/completions", HasBody: true}},
		Stream:    Chat, Response: Chat,
		UsageOption: true, Default: true,
		GenAIOperation: "chat", GenAIProvider: "openai",
	}
	completions := &wire.API{
		Name: Completions, Family: Family,
		Endpoints: []wire.Endpoint{{Pattern: "POST /v1/completions", HasBody: true}},
		// Legacy completions stream chat.completion-like chunks whose
		// choices[].text is the text: the chat classifier reads them.
		Stream: Chat, Response: Chat,
		UsageOption:    true,
		GenAIOperation: "text_completion", GenAIProvider: "openai",
	}
	responses := &wire.API{
		Name: string(Responses), Family: Family,
		Endpoints: []wire.Endpoint{{Pattern: "POST /v1/responses", HasBody: true}},
		Stream:    Responses, Response: Responses,
		GenAIOperation: "chat", GenAIProvider: "openai",
	}
	embeddings := &wire.API{
		Name: Embeddings, Family: Family,
		Endpoints: []wire.Endpoint{{Pattern: "POST /v1/embeddings", HasBody: true}},
		// An embeddings response has a chat-shaped usage member.
		Response:       Chat,
		GenAIOperation: "embeddings", GenAIProvider: "openai",
	}
	models := &wire.API{
		Name: "openai.models", Family: Family,
		Endpoints: []wire.Endpoint{{Pattern: "GET /v1/models", SharedPath: true}},
	}
	for _, a := range []*wire.API{chat, completions, responses, embeddings, models} {
		a.KeyHeader = "Authorization: Bearer KEY"
		a.ErrorBody = ErrorBody
		a.StreamError = streamError
		if a == responses {
			a.StreamError = responsesStreamError
		}
		wire.RegisterAPI(a)
	}
	wire.RegisterKind(&wire.Kind{
		Name: Family, Families: []string{Family}, ZeroConfig: true,
		Authorize: func(h http.Header, key string) {
			if key != "" {
				h.Set("Authorization", "Bearer "+key)
			}
		},
		// Not OpenAI-Organization or OpenAI-Project: they name the
		// client's account, and with the channel's key they would not
		// match.
		ForwardHeaders: []string{"Openai-Beta"},
		RateLimits:     RateLimits,
		Example:        wire.Example{Host: "api.openai.com", Models: map[string][]string{Family: {"gpt-4o-mini", "gpt-4o", "o4-mini"}}},
	})
}

// streamError is the error chunk OpenAI sends mid-stream, which its SDKs
// raise: {"error":{"message","type","param","code"}}.
func streamError(f wire.Failure) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": f.Msg, "type": "server_error", "param": nil, "code": f.Status}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}

// responsesStreamError is a Responses error event: it carries the
// sequence_number that comes next (the data events relayed so far; OpenAI
// numbers them from 0).
func responsesStreamError(f wire.Failure) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "code": f.Status, "message": f.Msg, "param": nil, "sequence_number": f.Seq})
	return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
}
