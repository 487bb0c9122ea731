package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/protocol"
)

// call is one request of the demo: an API and a simulator profile.
type call struct {
	api   protocol.API // one the benchmark client speaks (request.APIs)
	model string
}

// client sends the demo's requests as the benchmark client builds them
// for each API (the API's unit: its path, body, key header).
type client struct {
	base, key string
}

// prompt is the demo's question.
const prompt = "Explain where the time of an LLM request goes."

// do sends c, streaming, reads the response to its end and returns the
// gateway's request id.
func (cl *client) do(ctx context.Context, c call) (string, error) {
	base, err := url.Parse(cl.base)
	if err != nil {
		return "", err
	}
	// Every API takes an output cap, and some require one.
	w := &request.Wire{API: c.api, Base: base, Model: c.model, Key: cl.key, Stream: true, MaxTokens: 1024, UserAgent: "ttfx-demo"}
	if err := w.Check(); err != nil {
		return "", fmt.Errorf("%s %s: %w", c.api, c.model, err)
	}
	body, err := w.Body(prompt)
	if err != nil {
		return "", err
	}
	req, err := w.NewRequest(ctx, body)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", c.api, c.model, err)
	}
	defer resp.Body.Close()
	// Faulty profiles end with an error or a cut connection: that is what
	// they are for, and the record says so.
	io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("X-Request-Id"), nil
}

// mixedLoad is the short mixed load: the profiles in order (text,
// reasoning and tool calls, a few faults), each sent in the next API the
// benchmark client speaks, round the registered APIs.
func mixedLoad() []call {
	apis := request.APIs()
	out := make([]call, len(mixedProfiles))
	for i, p := range mixedProfiles {
		out[i] = call{protocol.API(apis[i%len(apis)]), p}
	}
	return out
}
