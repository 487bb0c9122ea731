// Package anthropicsim is the simulator's side of Anthropic's Messages
// API: how the simulator reads its requests and writes its streams, bodies,
// model lists and errors as Anthropic does (internal/sim serves them).
package anthropicsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/anthropic"
	"github.com/ttfx/ttfx/internal/sim"
)

// API is the Messages API's name, as internal/wire registers it.
const API sim.API = sim.API(anthropic.API)

// createdAt is the fixed creation time of the simulated models.
const createdAt = "2026-01-01T00:00:00Z"

func init() {
	sim.Register(&sim.Unit{
		API: API,
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			if e := b.Array("messages", true); e != nil {
				return nil, e
			}
			raw, ok := b.Raw("max_tokens")
			if !ok {
				return nil, b.Missing("max_tokens")
			}
			var n int
			if json.Unmarshal(raw, &n) != nil || n < 1 {
				return nil, sim.FieldError("max_tokens", "must be an integer ≥ 1")
			}
			return []string{"system", "messages"}, nil
		},
		NewEncoder:  NewEncoder,
		RateHeaders: rateHeaders,
		Missing:     func(name string) string { return name + ": Field required" },
		// Anthropic lists models at OpenAI's GET /v1/models; its SDKs'
		// anthropic-version header tells them apart (wire's Claim).
		ModelList: modelList,
		ModelObject: func(name string) []byte {
			return sim.Marshal(model{"model", name, name, createdAt})
		},
	})
}

type model struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func modelList(names []string) []byte {
	ms := make([]model, len(names))
	for i, n := range names {
		ms[i] = model{"model", n, n, createdAt}
	}
	var first, last *string
	if len(names) > 0 {
		first, last = sim.Ptr(names[0]), sim.Ptr(names[len(names)-1])
	}
	return sim.Marshal(struct {
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID *string `json:"first_id"`
		LastID  *string `json:"last_id"`
	}{ms, false, first, last})
}

func errorBody(e protocol.ErrorResponse) []byte { return anthropic.ErrorBody(e) }

// rateHeaders are Anthropic's rate-limit headers: the limit, what remains
// and the RFC 3339 time at which the budget is whole again.
func rateHeaders(h http.Header, rs sim.RateState) {
	for _, l := range rs.Limits {
		h.Set("Anthropic-Ratelimit-"+l.Name+"-Limit", strconv.FormatInt(l.Limit, 10))
		h.Set("Anthropic-Ratelimit-"+l.Name+"-Remaining", strconv.FormatInt(l.Remaining, 10))
		h.Set("Anthropic-Ratelimit-"+l.Name+"-Reset", rs.Now.Add(l.Reset).UTC().Format(time.RFC3339))
	}
	sim.RetryAfterMs(h, rs)
}

// NewEncoder returns the writer of one Messages response, for a kind whose
// framing carries Messages events.
func NewEncoder(r *sim.Response) sim.Encoder { return newAnthEncoder(r) }
