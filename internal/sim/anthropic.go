package sim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/sse"
)

// Anthropic Messages (POST /v1/messages), as the fixtures
// anthropic__messages__*.sse show: message_start with usage (output_tokens
// 1, as Anthropic reports it before generating), for each content block a
// content_block_start, its deltas (thinking_delta then signature_delta,
// input_json_delta after an empty one, text_delta) and content_block_stop;
// a ping right after the first content_block_start; message_delta with the
// stop reason and the final usage; message_stop. Keep-alives are
// `event: ping` with Anthropic's `{"type": "ping"}` payload.

type anthEncoder struct {
	r      *response
	index  int      // index of the open block; -1 before the first
	open   stepKind // the open block's kind; 0: none
	pinged bool
	text   template // text_delta of the block at textAt
	textAt int
}

func newAnthEncoder(r *response) *anthEncoder { return &anthEncoder{r: r, index: -1} }

type anthUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

type anthMessage struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []any           `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence json.RawMessage `json:"stop_sequence"`
	Usage        anthUsage       `json:"usage"`
}

func (e *anthEncoder) stopReason() string {
	if e.r.hasTool {
		return "tool_use"
	}
	return "end_turn"
}

func (e *anthEncoder) usage(output int) anthUsage {
	return anthUsage{InputTokens: e.r.input, OutputTokens: output}
}

type anthThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type anthToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (e *anthEncoder) block(kind stepKind, full bool) any {
	switch kind {
	case stepReasoning:
		if full {
			return anthThinking{"thinking", e.r.c.reasoningText, e.r.id.signature}
		}
		return anthThinking{"thinking", "", ""}
	case stepTool:
		in := json.RawMessage("{}")
		if full {
			in = json.RawMessage(e.r.c.toolArgs)
		}
		return anthToolUse{"tool_use", e.r.id.toolUse, e.r.c.toolName, in}
	}
	if full {
		return anthText{"text", e.r.c.visibleText}
	}
	return anthText{"text", ""}
}

type anthDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type anthTextDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (e *anthEncoder) deltaEvent(d any) anthDelta {
	return anthDelta{"content_block_delta", e.index, d}
}

func (e *anthEncoder) delta(dst []byte, d any) []byte {
	return appendTyped(dst, "content_block_delta", e.deltaEvent(d))
}

func (e *anthEncoder) openBlock(dst []byte, kind stepKind) []byte {
	dst = e.closeBlock(dst)
	e.index++
	e.open = kind
	dst = appendTyped(dst, "content_block_start", struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}{"content_block_start", e.index, e.block(kind, false)})
	if !e.pinged {
		e.pinged = true
		dst = e.ping(dst)
	}
	if kind == stepTool {
		// Anthropic opens a tool_use block's input with an empty delta.
		dst = e.delta(dst, struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		}{"input_json_delta", ""})
	}
	return dst
}

func (e *anthEncoder) closeBlock(dst []byte) []byte {
	if e.open == 0 {
		return dst
	}
	if e.open == stepReasoning {
		dst = e.delta(dst, struct {
			Type      string `json:"type"`
			Signature string `json:"signature"`
		}{"signature_delta", e.r.id.signature})
	}
	dst = appendTyped(dst, "content_block_stop", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}{"content_block_stop", e.index})
	e.open = 0
	return dst
}

func (e *anthEncoder) ping(dst []byte) []byte {
	return sse.AppendEvent(dst, "ping", []byte(`{"type": "ping"}`))
}

func (e *anthEncoder) frame(dst []byte, st step) []byte {
	switch st.kind {
	case stepStart:
		return appendTyped(dst, "message_start", struct {
			Type    string      `json:"type"`
			Message anthMessage `json:"message"`
		}{"message_start", anthMessage{ID: e.r.id.anthropicMsg, Type: "message", Role: "assistant",
			Model: e.r.model, Content: []any{}, StopSequence: null, Usage: e.usage(1)}})
	case stepToolStart:
		return e.openBlock(dst, stepTool)
	case stepReasoning, stepTool, stepText:
		if e.open != st.kind {
			dst = e.openBlock(dst, st.kind)
		}
		switch st.kind {
		case stepReasoning:
			dst = e.delta(dst, struct {
				Type     string `json:"type"`
				Thinking string `json:"thinking"`
			}{"thinking_delta", st.text})
		case stepTool:
			dst = e.delta(dst, struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
			}{"input_json_delta", st.text})
		default:
			if e.text.pre == nil || e.textAt != e.index {
				e.text, e.textAt = makeTemplate(e.deltaEvent(anthTextDelta{"text_delta", hole})), e.index
			}
			dst = e.text.appendEvent(dst, "content_block_delta", st.text)
		}
		if st.last {
			dst = e.closeBlock(dst)
		}
		return dst
	case stepHeartbeat:
		return e.ping(dst)
	case stepFinish:
		dst = e.closeBlock(dst)
		dst = appendTyped(dst, "message_delta", struct {
			Type  string `json:"type"`
			Delta struct {
				StopReason   string          `json:"stop_reason"`
				StopSequence json.RawMessage `json:"stop_sequence"`
			} `json:"delta"`
			Usage anthUsage `json:"usage"`
		}{Type: "message_delta", Delta: struct {
			StopReason   string          `json:"stop_reason"`
			StopSequence json.RawMessage `json:"stop_sequence"`
		}{e.stopReason(), null}, Usage: e.usage(e.r.c.outputTokens())})
		return appendTyped(dst, "message_stop", struct {
			Type string `json:"type"`
		}{"message_stop"})
	case stepError:
		return sse.AppendEvent(dst, "error", errorBody(familyAnthropic, errorf(529, "Overloaded (simulated fault error_event_after)")))
	}
	return dst
}

func (e *anthEncoder) body() []byte {
	m := anthMessage{ID: e.r.id.anthropicMsg, Type: "message", Role: "assistant", Model: e.r.model,
		Content: []any{}, StopReason: ptr(e.stopReason()), StopSequence: null, Usage: e.usage(e.r.c.outputTokens())}
	for _, k := range e.r.order {
		m.Content = append(m.Content, e.block(k, true))
	}
	return marshal(m)
}
