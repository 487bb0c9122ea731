// Package geminisim is the simulator's side of the Gemini API: how the
// simulator reads its requests and writes its streams, bodies, model lists
// and errors as Google does (internal/sim serves them).
package geminisim

import (
	"net/http"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/gemini"
	"github.com/ttfx/ttfx/internal/sim"
)

// API is the Gemini API's name, as internal/wire registers it.
const API sim.API = sim.API(gemini.API)

func init() {
	sim.Register(&sim.Unit{
		API: API,
		// The model and the method are in the path (wire's Target).
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			return []string{"systemInstruction", "system_instruction", "contents"}, b.Array("contents", true)
		},
		Check: func(r *http.Request, req *sim.Request) *sim.Error {
			if req.Stream && r.URL.Query().Get("alt") != "sse" {
				return sim.Errorf(http.StatusBadRequest, "The simulator streams Gemini only as server-sent events: add ?alt=sse to streamGenerateContent.")
			}
			return nil
		},
		NewEncoder: func(r *sim.Response) sim.Encoder { return &geminiEncoder{r: r} },
		Missing: func(name string) string {
			return "* GenerateContentRequest." + name + ": " + name + " is not specified"
		},
		// Gemini sends no rate-limit headers, nor Retry-After-Ms.
		RateHeaders: func(http.Header, sim.RateState) {},
		ModelPaths:  []string{"/v1beta/models", "/v1beta/models/{target}"},
		ModelList: func(names []string) []byte {
			ms := make([]model, len(names))
			for i, n := range names {
				ms[i] = modelOf(n)
			}
			return sim.Marshal(struct {
				Models []model `json:"models"`
			}{ms})
		},
		ModelObject: func(name string) []byte { return sim.Marshal(modelOf(name)) },
	})
}

type model struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

func modelOf(name string) model {
	return model{"models/" + name, "sim", name, []string{"generateContent", "streamGenerateContent"}}
}

func errorBody(e protocol.ErrorResponse) []byte { return gemini.ErrorBody(e) }
