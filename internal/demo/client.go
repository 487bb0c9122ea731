package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// call is one request of the demo: an API and a simulator profile.
type call struct {
	api   string // chat, responses, anthropic, gemini
	model string
}

// client sends the demo's requests the way SDK clients do.
type client struct {
	base, key string
}

// do sends c, streaming, reads the response to its end and returns the
// gateway's request id.
func (cl *client) do(ctx context.Context, c call) (string, error) {
	var path, body string
	switch c.api {
	case "chat":
		path = "/v1/chat/completions"
		body = fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"Explain where the time of an LLM request goes."}]}`, c.model)
	case "responses":
		path = "/v1/responses"
		body = fmt.Sprintf(`{"model":%q,"stream":true,"input":"Explain where the time of an LLM request goes."}`, c.model)
	case "anthropic":
		path = "/v1/messages"
		body = fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":1024,"messages":[{"role":"user","content":"Explain where the time of an LLM request goes."}]}`, c.model)
	case "gemini":
		path = "/v1beta/models/" + c.model + ":streamGenerateContent?alt=sse"
		body = `{"contents":[{"role":"user","parts":[{"text":"Explain where the time of an LLM request goes."}]}]}`
	default:
		return "", fmt.Errorf("unknown api %q", c.api)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.base+path, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	switch c.api {
	case "anthropic":
		req.Header.Set("X-Api-Key", cl.key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	case "gemini":
		req.Header.Set("X-Goog-Api-Key", cl.key)
	default:
		req.Header.Set("Authorization", "Bearer "+cl.key)
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
