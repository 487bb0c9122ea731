package relay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestAzureKind: openai-go's own Azure client (deployment URLs,
// api-version, api-key) is served by the simulator's Azure side, and an
// OpenAI client of the gateway is relayed to a channel of kind azure in
// either URL form: streaming and not, tool calls, legacy completions,
// embeddings, Responses, a 429 and a stream cut mid-answer.
func TestAzureKind(t *testing.T) {
	t.Parallel()
	const key = "upstream-key-az" // what channel() gives channel "az"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: key}))
	t.Cleanup(up.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")}

	streamText := func(c openai.Client, model string) (string, error) {
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: model, Messages: msgs})
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		s.Close()
		if err := s.Err(); err != nil {
			return "", err
		}
		if len(acc.Choices) == 0 {
			return "", errors.New("no choices")
		}
		return acc.Choices[0].Message.Content, nil
	}

	// The SDK's Azure client against the simulator directly (over loopback
	// HTTP, which the SDK allows only when told to).
	az := openai.NewClient(azure.WithEndpoint(up.URL, "2024-10-21"), azure.WithAPIKey(key), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	direct, err := streamText(az, "fast")
	if err != nil || direct == "" {
		t.Fatalf("openai-go azure client, streaming: %q %v", direct, err)
	}
	if c, err := az.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast", Messages: msgs}); err != nil || c.Choices[0].Message.Content == "" {
		t.Fatalf("openai-go azure client, not streaming: %v", err)
	}
	wrong := openai.NewClient(azure.WithEndpoint(up.URL, "2024-10-21"), azure.WithAPIKey("wrong"), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	var apiErr *openai.Error
	if _, err := wrong.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast", Messages: msgs}); !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Errorf("a wrong api-key: %v, want a 401 the SDK reads", err)
	}
	req, _ := http.NewRequest("POST", up.URL+"/openai/deployments/fast/chat/completions", strings.NewReader(`{"messages":[]}`))
	req.Header.Set("Api-Key", key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("a deployment URL without api-version: %v %v, want 404", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	for _, form := range []struct{ name, base string }{
		{"deployment", up.URL + "?api-version=2024-10-21"},
		{"deployment-default-version", up.URL},
		{"v1", up.URL + "/openai/v1"},
	} {
		t.Run(form.name, func(t *testing.T) {
			gw, recs := gateway(t, channel("az", "azure", form.base, fastTimeouts))
			c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
			if got, err := streamText(c, "fast"); err != nil || got != direct {
				t.Errorf("streaming through azure: %q %v, want %q", got, err, direct)
			}
			if r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast", Messages: msgs}); err != nil || r.Choices[0].Message.Content != direct || r.Usage.CompletionTokens == 0 {
				t.Errorf("not streaming through azure: %v", err)
			}
			// A tool call, streamed.
			s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "tool-call", Messages: msgs})
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil || len(acc.Choices) == 0 || len(acc.Choices[0].Message.ToolCalls) == 0 || acc.Choices[0].Message.ToolCalls[0].Function.Arguments == "" {
				t.Errorf("tool call through azure: %v %+v", err, acc.Choices)
			}
			s.Close()
			if r, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "fast", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say hello.")}}); err != nil || r.Choices[0].Text == "" {
				t.Errorf("legacy completions through azure: %v", err)
			}
			if r, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "fast", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}}); err != nil || len(r.Data) == 0 {
				t.Errorf("embeddings through azure: %v", err)
			}
			rs := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "fast", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")}})
			completed := false
			for rs.Next() {
				completed = completed || rs.Current().Type == "response.completed"
			}
			if err := rs.Err(); err != nil || !completed {
				t.Errorf("responses through azure: %v, completed %v", err, completed)
			}
			rs.Close()
			// Errors: a 429 reaches the client as a 429; a cut stream ends
			// with the in-band error after the text.
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "status-429", Messages: msgs})
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
				t.Errorf("status-429 through azure: %v", err)
			}
			if got, err := streamText(c, "flaky"); err == nil || !strings.Contains(err.Error(), "upstream stream failed") {
				t.Errorf("flaky through azure: %q, %v; want the gateway's in-band error", got, err)
			}

			// A stream read to its end by a plain client: its record is ok
			// and has the timeline's marks.
			resp, body := do(t, gw.URL, clientKey, call{api: "chat", model: "fast", stream: true})
			if resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
				t.Fatalf("a raw stream through azure: %d %s", resp.StatusCode, body)
			}
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != record.StatusOK || rec.Channel != "az" || !rec.FirstTextDeltaMs.Valid() || !rec.UpstreamDoneMs.Valid() || rec.Tokens.Visible == nil {
				t.Errorf("the raw stream's record: %s %s first text %v done %v", rec.Status, rec.Channel, rec.FirstTextDeltaMs, rec.UpstreamDoneMs)
			}

			recs.mu.Lock()
			defer recs.mu.Unlock()
			want := map[string]string{ // API/model/stream → status
				"openai.chat/fast/false":        record.StatusOK,
				"openai.completions/fast/false": record.StatusOK,
				"openai.embeddings/fast/false":  record.StatusOK,
				"openai.responses/fast/true":    record.StatusOK,
				"openai.chat/status-429/false":  record.StatusRateLimited,
				"openai.chat/flaky/true":        record.StatusUpstreamStreamError,
			}
			for _, r := range recs.recs {
				if r.Channel != "az" {
					t.Errorf("record of %s on channel %q", r.API, r.Channel)
				}
				k := r.API + "/" + r.Model + "/" + map[bool]string{true: "true", false: "false"}[r.Stream]
				if w, ok := want[k]; ok {
					if r.Status != w {
						t.Errorf("record %s: %s (%s), want %s", k, r.Status, r.Error, w)
					}
					delete(want, k)
				}
			}
			for k := range want {
				t.Errorf("no record of %s", k)
			}
		})
	}
}
