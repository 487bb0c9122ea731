package anthropicsim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sim"
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
	r      *sim.Response
	index  int          // index of the open block; -1 before the first
	open   sim.StepKind // the open block's kind; 0: none
	pinged bool
	text   sim.Template // text_delta of the block at textAt
	textAt int
}

func newAnthEncoder(r *sim.Response) *anthEncoder { return &anthEncoder{r: r, index: -1} }

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
	if e.r.HasTool {
		return "tool_use"
	}
	return "end_turn"
}

func (e *anthEncoder) usage(output int) anthUsage {
	return anthUsage{InputTokens: e.r.Input, OutputTokens: output}
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

func (e *anthEncoder) block(kind sim.StepKind, full bool) any {
	switch kind {
	case sim.StepReasoning:
		if full {
			return anthThinking{"thinking", e.r.ReasoningText, e.r.ID.Signature}
		}
		return anthThinking{"thinking", "", ""}
	case sim.StepTool:
		in := json.RawMessage("{}")
		if full {
			in = json.RawMessage(e.r.ToolArgs)
		}
		return anthToolUse{"tool_use", e.r.ID.ToolUse, e.r.ToolName, in}
	}
	if full {
		return anthText{"text", e.r.VisibleText}
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
	return sim.AppendTyped(dst, "content_block_delta", e.deltaEvent(d))
}

func (e *anthEncoder) openBlock(dst []byte, kind sim.StepKind) []byte {
	dst = e.closeBlock(dst)
	e.index++
	e.open = kind
	dst = sim.AppendTyped(dst, "content_block_start", struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}{"content_block_start", e.index, e.block(kind, false)})
	if !e.pinged {
		e.pinged = true
		dst = e.ping(dst)
	}
	if kind == sim.StepTool {
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
	if e.open == sim.StepReasoning {
		dst = e.delta(dst, struct {
			Type      string `json:"type"`
			Signature string `json:"signature"`
		}{"signature_delta", e.r.ID.Signature})
	}
	dst = sim.AppendTyped(dst, "content_block_stop", struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}{"content_block_stop", e.index})
	e.open = 0
	return dst
}

func (e *anthEncoder) ping(dst []byte) []byte {
	return sse.AppendEvent(dst, "ping", []byte(`{"type": "ping"}`))
}

func (e *anthEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepStart:
		return sim.AppendTyped(dst, "message_start", struct {
			Type    string      `json:"type"`
			Message anthMessage `json:"message"`
		}{"message_start", anthMessage{ID: e.r.ID.Msg01, Type: "message", Role: "assistant",
			Model: e.r.Model, Content: []any{}, StopSequence: sim.Null, Usage: e.usage(1)}})
	case sim.StepToolStart:
		return e.openBlock(dst, sim.StepTool)
	case sim.StepReasoning, sim.StepTool, sim.StepText:
		if e.open != st.Kind {
			dst = e.openBlock(dst, st.Kind)
		}
		switch st.Kind {
		case sim.StepReasoning:
			dst = e.delta(dst, struct {
				Type     string `json:"type"`
				Thinking string `json:"thinking"`
			}{"thinking_delta", st.Text})
		case sim.StepTool:
			dst = e.delta(dst, struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
			}{"input_json_delta", st.Text})
		default:
			if e.text.Empty() || e.textAt != e.index {
				e.text, e.textAt = sim.MakeTemplate(e.deltaEvent(anthTextDelta{"text_delta", sim.Hole})), e.index
			}
			dst = e.text.AppendEvent(dst, "content_block_delta", st.Text)
		}
		if st.Last {
			dst = e.closeBlock(dst)
		}
		return dst
	case sim.StepHeartbeat:
		return e.ping(dst)
	case sim.StepFinish:
		dst = e.closeBlock(dst)
		dst = sim.AppendTyped(dst, "message_delta", struct {
			Type  string `json:"type"`
			Delta struct {
				StopReason   string          `json:"stop_reason"`
				StopSequence json.RawMessage `json:"stop_sequence"`
			} `json:"delta"`
			Usage anthUsage `json:"usage"`
		}{Type: "message_delta", Delta: struct {
			StopReason   string          `json:"stop_reason"`
			StopSequence json.RawMessage `json:"stop_sequence"`
		}{e.stopReason(), sim.Null}, Usage: e.usage(e.r.OutputTokens())})
		return sim.AppendTyped(dst, "message_stop", struct {
			Type string `json:"type"`
		}{"message_stop"})
	case sim.StepError:
		return sse.AppendEvent(dst, "error", errorBody(protocol.ErrorResponse{Status: 529, Message: "Overloaded (simulated fault error_event_after)"}))
	}
	return dst
}

func (e *anthEncoder) Body() []byte {
	m := anthMessage{ID: e.r.ID.Msg01, Type: "message", Role: "assistant", Model: e.r.Model,
		Content: []any{}, StopReason: sim.Ptr(e.stopReason()), StopSequence: sim.Null, Usage: e.usage(e.r.OutputTokens())}
	for _, k := range e.r.Order {
		m.Content = append(m.Content, e.block(k, true))
	}
	return sim.Marshal(m)
}
