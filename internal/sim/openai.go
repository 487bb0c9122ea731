package sim

import (
	"encoding/json"

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

func (r *response) chatUsage() chatUsage {
	out := r.c.outputTokens()
	return chatUsage{
		PromptTokens: r.input, CompletionTokens: out, TotalTokens: r.input + out,
		PromptTokensDetails:     cachedTokens{0},
		CompletionTokensDetails: reasoningTokens{r.c.reasoningTokens},
	}
}

func (r *response) finishReason() string {
	if r.hasTool {
		return "tool_calls"
	}
	return "stop"
}

type chatEncoder struct {
	r               *response
	text, reasoning template // made at the first delta of each
}

func (e *chatEncoder) chunk(d chatDelta, finish *string) chatChunk {
	ch := chatChunk{
		ID: e.r.id.chat, Object: "chat.completion.chunk", Created: created, Model: e.r.model,
		ServiceTier: "default", SystemFingerprint: e.r.id.fingerprint,
		Choices: []chatChoice{{Delta: d, Logprobs: null, FinishReason: finish}},
	}
	if e.r.includeUsage {
		ch.Usage = null
	}
	return ch
}

func (e *chatEncoder) frame(dst []byte, st step) []byte {
	switch st.kind {
	case stepStart:
		return appendData(dst, e.chunk(chatDelta{Role: "assistant", Content: ptr(""), Refusal: null}, nil))
	case stepReasoning:
		if e.reasoning.pre == nil {
			e.reasoning = makeTemplate(e.chunk(chatDelta{ReasoningContent: ptr(hole)}, nil))
		}
		return e.reasoning.appendEvent(dst, "", st.text)
	case stepToolStart:
		return appendData(dst, e.chunk(chatDelta{ToolCalls: []chatToolCall{{
			ID: e.r.id.call, Type: "function", Function: chatFunction{Name: e.r.c.toolName}}}}, nil))
	case stepTool:
		return appendData(dst, e.chunk(chatDelta{ToolCalls: []chatToolCall{{Function: chatFunction{Arguments: st.text}}}}, nil))
	case stepText:
		if e.text.pre == nil {
			e.text = makeTemplate(e.chunk(chatDelta{Content: ptr(hole)}, nil))
		}
		return e.text.appendEvent(dst, "", st.text)
	case stepHeartbeat:
		return e.r.keepAlive(dst)
	case stepFinish:
		dst = appendData(dst, e.chunk(chatDelta{}, ptr(e.r.finishReason())))
		if e.r.includeUsage {
			u := e.chunk(chatDelta{}, nil)
			u.Choices = []chatChoice{}
			u.Usage = marshal(e.r.chatUsage())
			dst = appendData(dst, u)
		}
		return sse.AppendEvent(dst, "", []byte("[DONE]"))
	case stepError:
		return appendData(dst, json.RawMessage(errorBody(familyOpenAI, errorf(500, streamErrorMessage))))
	}
	return dst
}

func (e *chatEncoder) body() []byte {
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
	m := message{Role: "assistant", Refusal: null}
	if e.r.c.visibleText != "" {
		m.Content = ptr(e.r.c.visibleText)
	}
	if e.r.c.reasoningText != "" {
		m.ReasoningContent = ptr(e.r.c.reasoningText)
	}
	if e.r.hasTool {
		m.ToolCalls = []toolCall{{e.r.id.call, "function", chatFunction{Name: e.r.c.toolName, Arguments: e.r.c.toolArgs}}}
	}
	return marshal(struct {
		ID                string    `json:"id"`
		Object            string    `json:"object"`
		Created           int64     `json:"created"`
		Model             string    `json:"model"`
		Choices           []choice  `json:"choices"`
		Usage             chatUsage `json:"usage"`
		ServiceTier       string    `json:"service_tier"`
		SystemFingerprint string    `json:"system_fingerprint"`
	}{
		ID: e.r.id.chat, Object: "chat.completion", Created: created, Model: e.r.model,
		Choices: []choice{{0, m, null, e.r.finishReason()}},
		Usage:   e.r.chatUsage(), ServiceTier: "default", SystemFingerprint: e.r.id.fingerprint,
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
	r    *response
	text template
}

func (e *completionEncoder) usage() chatUsage {
	v := e.r.c.visibleTokens
	return chatUsage{PromptTokens: e.r.input, CompletionTokens: v, TotalTokens: e.r.input + v}
}

func (e *completionEncoder) chunk(text string, finish *string) completionChunk {
	ch := completionChunk{ID: e.r.id.completion, Object: "text_completion", Created: created,
		Choices: []completionChoice{{Text: text, Logprobs: null, FinishReason: finish}},
		Model:   e.r.model, SystemFingerprint: e.r.id.fingerprint}
	if e.r.includeUsage {
		ch.Usage = null
	}
	return ch
}

func (e *completionEncoder) frame(dst []byte, st step) []byte {
	switch st.kind {
	case stepStart:
		return appendData(dst, e.chunk("", nil))
	case stepText:
		if e.text.pre == nil {
			e.text = makeTemplate(e.chunk(hole, nil))
		}
		return e.text.appendEvent(dst, "", st.text)
	case stepHeartbeat:
		return e.r.keepAlive(dst)
	case stepFinish:
		dst = appendData(dst, e.chunk("", ptr("stop")))
		if e.r.includeUsage {
			u := e.chunk("", nil)
			u.Choices = []completionChoice{}
			u.Usage = marshal(e.usage())
			dst = appendData(dst, u)
		}
		return sse.AppendEvent(dst, "", []byte("[DONE]"))
	case stepError:
		return appendData(dst, json.RawMessage(errorBody(familyOpenAI, errorf(500, streamErrorMessage))))
	}
	return dst
}

func (e *completionEncoder) body() []byte {
	ch := e.chunk(e.r.c.visibleText, ptr("stop"))
	ch.Usage = marshal(e.usage())
	return marshal(ch)
}
