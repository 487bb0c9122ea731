package relay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ttfx/ttfx/internal/record"
)

// The official SDKs stream through the gateway unchanged (SPEC.md §11).

func TestOpenAISDK(t *testing.T) {
	t.Parallel()
	gw, recs, up, _ := allProtocols(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	text := func(base, key string) string {
		client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:    "fast",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("openai-go stream via %s: %v", base, err)
		}
		stream.Close()
		if len(acc.Choices) == 0 {
			t.Fatalf("openai-go: no choices")
		}
		return acc.Choices[0].Message.Content
	}
	direct := text(up.URL, "x")
	relayed := text(gw.URL, clientKey)
	if relayed == "" || relayed != direct {
		t.Fatalf("relayed text %q, direct %q", relayed, direct)
	}

	// Responses API, streaming.
	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	rs := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "reasoning",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
	})
	var deltas strings.Builder
	completed := false
	for rs.Next() {
		ev := rs.Current()
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			completed = true
		}
	}
	if err := rs.Err(); err != nil || !completed || deltas.Len() == 0 {
		t.Fatalf("responses stream: err %v, completed %v, text %d bytes", err, completed, deltas.Len())
	}

	// A wrong key is an API error the SDK understands.
	bad := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err := bad.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("wrong key: %v", err)
	}

	// Non-streaming through the SDK, and the record of it.
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "fast", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")}})
	if err != nil || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" || c.Usage.CompletionTokens != 60 {
		t.Fatalf("non-streaming: %v %+v", err, c)
	}
	recs.mu.Lock()
	n := len(recs.recs)
	recs.mu.Unlock()
	if n < 3 {
		t.Fatalf("%d records", n)
	}
}

func TestAnthropicSDK(t *testing.T) {
	t.Parallel()
	gw, recs, up, _ := allProtocols(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(base, key, model string) anthropic.Message {
		client := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
		stream := client.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model:     model,
			MaxTokens: 512,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("anthropic-sdk-go stream via %s: %v", base, err)
		}
		return msg
	}
	for _, model := range []string{"fast", "reasoning", "tool-call"} {
		direct := run(up.URL, "x", model)
		relayed := run(gw.URL, clientKey, model)
		if len(relayed.Content) == 0 || len(relayed.Content) != len(direct.Content) || relayed.StopReason != direct.StopReason {
			t.Fatalf("%s: relayed %+v, direct %+v", model, relayed, direct)
		}
		for i := range relayed.Content {
			if relayed.Content[i].Text != direct.Content[i].Text || relayed.Content[i].Type != direct.Content[i].Type {
				t.Fatalf("%s: block %d differs", model, i)
			}
		}
		if relayed.Usage.OutputTokens != direct.Usage.OutputTokens || relayed.Usage.OutputTokens == 0 {
			t.Fatalf("%s: usage %+v vs %+v", model, relayed.Usage, direct.Usage)
		}
	}
	recs.mu.Lock()
	defer recs.mu.Unlock()
	for _, r := range recs.recs {
		if r.Status != record.StatusOK || r.API != "anthropic" {
			t.Errorf("record %s: %s %s", r.RequestID, r.API, r.Status)
		}
	}
}
