package openaisim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/sse"
)

// OpenAI chat completions (POST /v1/chat/completions), written as the
// fixtures openai__chat__*.sse show: a role chunk with empty content, one
// chunk per delta, reasoning as DeepSeek's delta.reasoning_content, a
// tool_calls header chunk (id, name, empty arguments) then argument deltas,
// a finish chunk with an empty delta, the usage-only chunk (empty choices)
// only when the request asked for stream_options.include_usage (and then
// "usage":null on every other chunk, as OpenAI documents), and data: [DONE].

type chatChunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	ServiceTier       string          `json:"service_tier"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []chatChoice    `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Delta        chatDelta       `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Refusal          json.RawMessage `json:"refusal,omitempty"`
	ToolCalls        []chatToolCall  `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	Index    int          `json:"index"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type chatUsage struct {
	PromptTokens            int `json:"prompt_tokens"`
	CompletionTokens        int `json:"completion_tokens"`
	TotalTokens             int `json:"total_tokens"`
	PromptTokensDetails     any `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails any `json:"completion_tokens_details,omitempty"`
}

type cachedTokens struct {
	CachedTokens int `json:"cached_tokens"`
}

type reasoningTokens struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

func usageOf(r *sim.Response) chatUsage {
	out := r.OutputTokens()
	return chatUsage{
		PromptTokens: r.Input, CompletionTokens: out, TotalTokens: r.Input + out,
		PromptTokensDetails:     cachedTokens{0},
		CompletionTokensDetails: reasoningTokens{r.ReasoningTokens},
	}
}

func finishReason(r *sim.Response) string {
	if r.HasTool {
		return "tool_calls"
	}
	return "stop"
}

type chatEncoder struct {
	r               *sim.Response
	text, reasoning sim.Template // made at the first delta of each
}

func (e *chatEncoder) chunk(d chatDelta, finish *string) chatChunk {
	ch := chatChunk{
		ID: e.r.ID.Chat, Object: "chat.completion.chunk", Created: sim.Created, Model: e.r.Model,
		ServiceTier: "default", SystemFingerprint: e.r.ID.Fingerprint,
		Choices: []chatChoice{{Delta: d, Logprobs: sim.Null, FinishReason: finish}},
	}
	if e.r.IncludeUsage {
		ch.Usage = sim.Null
	}
	return ch
}

func (e *chatEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepStart:
		return sim.AppendData(dst, e.chunk(chatDelta{Role: "assistant", Content: sim.Ptr(""), Refusal: sim.Null}, nil))
	case sim.StepReasoning:
		if e.reasoning.Empty() {
			e.reasoning = sim.MakeTemplate(e.chunk(chatDelta{ReasoningContent: sim.Ptr(sim.Hole)}, nil))
		}
		return e.reasoning.AppendEvent(dst, "", st.Text)
	case sim.StepToolStart:
		return sim.AppendData(dst, e.chunk(chatDelta{ToolCalls: []chatToolCall{{
			ID: e.r.ID.Call, Type: "function", Function: chatFunction{Name: e.r.ToolName}}}}, nil))
	case sim.StepTool:
		return sim.AppendData(dst, e.chunk(chatDelta{ToolCalls: []chatToolCall{{Function: chatFunction{Arguments: st.Text}}}}, nil))
	case sim.StepText:
		if e.text.Empty() {
			e.text = sim.MakeTemplate(e.chunk(chatDelta{Content: sim.Ptr(sim.Hole)}, nil))
		}
		return e.text.AppendEvent(dst, "", st.Text)
	case sim.StepHeartbeat:
		return e.r.KeepAlive(dst)
	case sim.StepFinish:
		dst = sim.AppendData(dst, e.chunk(chatDelta{}, sim.Ptr(finishReason(e.r))))
		if e.r.IncludeUsage {
			u := e.chunk(chatDelta{}, nil)
			u.Choices = []chatChoice{}
			u.Usage = sim.Marshal(usageOf(e.r))
			dst = sim.AppendData(dst, u)
		}
		return sse.AppendEvent(dst, "", []byte("[DONE]"))
	case sim.StepError:
		return sim.AppendData(dst, json.RawMessage(errorBody(protocol.ErrorResponse{Status: 500, Message: sim.StreamErrorMessage})))
	}
	return dst
}

func (e *chatEncoder) Body() []byte {
	// A non-streaming tool call has no "index".
	type toolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	type message struct {
		Role             string          `json:"role"`
		Content          *string         `json:"content"`
		ReasoningContent *string         `json:"reasoning_content,omitempty"`
		Refusal          json.RawMessage `json:"refusal"`
		ToolCalls        []toolCall      `json:"tool_calls,omitempty"`
	}
	type choice struct {
		Index        int             `json:"index"`
		Message      message         `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
	}
	m := message{Role: "assistant", Refusal: sim.Null}
	if e.r.VisibleText != "" {
		m.Content = sim.Ptr(e.r.VisibleText)
	}
	if e.r.ReasoningText != "" {
		m.ReasoningContent = sim.Ptr(e.r.ReasoningText)
	}
	if e.r.HasTool {
		m.ToolCalls = []toolCall{{e.r.ID.Call, "function", chatFunction{Name: e.r.ToolName, Arguments: e.r.ToolArgs}}}
	}
	return sim.Marshal(struct {
		ID                string    `json:"id"`
		Object            string    `json:"object"`
		Created           int64     `json:"created"`
		Model             string    `json:"model"`
		Choices           []choice  `json:"choices"`
		Usage             chatUsage `json:"usage"`
		ServiceTier       string    `json:"service_tier"`
		SystemFingerprint string    `json:"system_fingerprint"`
	}{
		ID: e.r.ID.Chat, Object: "chat.completion", Created: sim.Created, Model: e.r.Model,
		Choices: []choice{{0, m, sim.Null, finishReason(e.r)}},
		Usage:   usageOf(e.r), ServiceTier: "default", SystemFingerprint: e.r.ID.Fingerprint,
	})
}

// Legacy completions (POST /v1/completions): text_completion chunks with
// choices[].text. The API has no reasoning or tool calls, so those parts
// are silent here and their tokens are not reported; the first chunk is an
// empty text (metadata) at the first-event time.

type completionChunk struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Choices           []completionChoice `json:"choices"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Usage             json.RawMessage    `json:"usage,omitempty"`
}

type completionChoice struct {
	Text         string          `json:"text"`
	Index        int             `json:"index"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type completionEncoder struct {
	r    *sim.Response
	text sim.Template
}

func (e *completionEncoder) usage() chatUsage {
	v := e.r.VisibleTokens
	return chatUsage{PromptTokens: e.r.Input, CompletionTokens: v, TotalTokens: e.r.Input + v}
}

func (e *completionEncoder) chunk(text string, finish *string) completionChunk {
	ch := completionChunk{ID: e.r.ID.Completion, Object: "text_completion", Created: sim.Created,
		Choices: []completionChoice{{Text: text, Logprobs: sim.Null, FinishReason: finish}},
		Model:   e.r.Model, SystemFingerprint: e.r.ID.Fingerprint}
	if e.r.IncludeUsage {
		ch.Usage = sim.Null
	}
	return ch
}

func (e *completionEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepStart:
		return sim.AppendData(dst, e.chunk("", nil))
	case sim.StepText:
		if e.text.Empty() {
			e.text = sim.MakeTemplate(e.chunk(sim.Hole, nil))
		}
		return e.text.AppendEvent(dst, "", st.Text)
	case sim.StepHeartbeat:
		return e.r.KeepAlive(dst)
	case sim.StepFinish:
		dst = sim.AppendData(dst, e.chunk("", sim.Ptr("stop")))
		if e.r.IncludeUsage {
			u := e.chunk("", nil)
			u.Choices = []completionChoice{}
			u.Usage = sim.Marshal(e.usage())
			dst = sim.AppendData(dst, u)
		}
		return sse.AppendEvent(dst, "", []byte("[DONE]"))
	case sim.StepError:
		return sim.AppendData(dst, json.RawMessage(errorBody(protocol.ErrorResponse{Status: 500, Message: sim.StreamErrorMessage})))
	}
	return dst
}

func (e *completionEncoder) Body() []byte {
	ch := e.chunk(e.r.VisibleText, sim.Ptr("stop"))
	ch.Usage = sim.Marshal(e.usage())
	return sim.Marshal(ch)
}
