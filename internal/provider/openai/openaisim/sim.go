// Package openaisim is the simulator's side of OpenAI's APIs: how the
// simulator reads their requests and writes their streams, bodies and
// model lists as OpenAI does (internal/sim serves them).
package openaisim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/openai"
	"github.com/ttfx/ttfx/internal/sim"
)

// The APIs' names, as internal/wire registers them.
const (
	Chat        sim.API = sim.API(openai.Chat)
	Completions sim.API = "openai.completions"
	Responses   sim.API = sim.API(openai.Responses)
	Embeddings  sim.API = "openai.embeddings"
)

func init() {
	sim.Register(&sim.Unit{
		API: Chat,
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			if e := readUsageOption(b, req); e != nil {
				return nil, e
			}
			return []string{"messages"}, b.Array("messages", true)
		},
		NewEncoder: func(r *sim.Response) sim.Encoder { return &chatEncoder{r: r} },
		// GET /v1/models is OpenAI's path, which other providers share
		// (told apart by their headers); the model paths of the default
		// API's unit.
		ModelPaths:  []string{"/v1/models", "/v1/models/{target}"},
		ModelList:   modelList,
		ModelObject: func(name string) []byte { return sim.Marshal(model{name, "model", sim.Created, "ttfx-sim"}) },
	})
	sim.Register(&sim.Unit{
		API: Completions,
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			if e := readUsageOption(b, req); e != nil {
				return nil, e
			}
			return []string{"prompt", "suffix"}, b.Required("prompt")
		},
		NewEncoder: func(r *sim.Response) sim.Encoder { return &completionEncoder{r: r} },
	})
	sim.Register(&sim.Unit{
		API: Responses,
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			return []string{"input", "instructions"}, b.Required("input")
		},
		NewEncoder: func(r *sim.Response) sim.Encoder { return newRespEncoder(r) },
	})
	// Embeddings have no encoder: the simulator answers them with vectors.
	sim.Register(&sim.Unit{
		API: Embeddings,
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			return []string{"input"}, sim.ReadEmbeddings(b, req)
		},
	})
}

// readUsageOption reads stream_options.include_usage.
func readUsageOption(b sim.Body, req *sim.Request) *sim.Error {
	raw, ok := b.Raw("stream_options")
	if !ok {
		return nil
	}
	var so struct {
		IncludeUsage *bool `json:"include_usage"`
	}
	if json.Unmarshal(raw, &so) != nil {
		return sim.FieldError("stream_options", "must be an object with a boolean include_usage")
	}
	req.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	return nil
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func modelList(names []string) []byte {
	ms := make([]model, len(names))
	for i, n := range names {
		ms[i] = model{n, "model", sim.Created, "ttfx-sim"}
	}
	return sim.Marshal(struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", ms})
}

func errorBody(e protocol.ErrorResponse) []byte { return openai.ErrorBody(e) }
