package openaisim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/sse"
)

// OpenAI Responses (POST /v1/responses), in the event sequence of the
// fixtures openai__responses__*.sse: response.created and
// response.in_progress, then for each output item output_item.added, its
// parts and deltas (reasoning summary text, function-call arguments, output
// text), their .done events and output_item.done, and response.completed
// with usage. Every event carries its sequence_number.

type respEncoder struct {
	r    *sim.Response
	seq  int
	out  int          // output_index of the open item; -1 before the first
	open sim.StepKind // the open item's kind; 0: none
	buf  []byte       // text of the open item so far
	done []any        // finished output items, for response.completed
}

func newRespEncoder(r *sim.Response) *respEncoder { return &respEncoder{r: r, out: -1} }

type respUsage struct {
	InputTokens         int             `json:"input_tokens"`
	InputTokensDetails  cachedTokens    `json:"input_tokens_details"`
	OutputTokens        int             `json:"output_tokens"`
	OutputTokensDetails reasoningTokens `json:"output_tokens_details"`
	TotalTokens         int             `json:"total_tokens"`
}

type respObject struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Background         bool            `json:"background"`
	Error              json.RawMessage `json:"error"`
	IncompleteDetails  json.RawMessage `json:"incomplete_details"`
	Instructions       json.RawMessage `json:"instructions"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage `json:"previous_response_id"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         string          `json:"tool_choice"`
	Tools              []any           `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              any             `json:"usage"`
	Metadata           struct{}        `json:"metadata"`
}

func (e *respEncoder) object(status string, output []any, usage any) respObject {
	if output == nil {
		output = []any{}
	}
	return respObject{
		ID: e.r.ID.Response, Object: "response", CreatedAt: sim.Created, Status: status,
		Error: sim.Null, IncompleteDetails: sim.Null, Instructions: sim.Null, MaxOutputTokens: sim.Null,
		Model: e.r.Model, Output: output, ParallelToolCalls: true, PreviousResponseID: sim.Null,
		Reasoning:   json.RawMessage(`{"effort":null,"summary":null}`),
		Temperature: 1, Text: json.RawMessage(`{"format":{"type":"text"}}`),
		ToolChoice: "auto", Tools: []any{}, TopP: 1, Truncation: "disabled", Usage: usage,
	}
}

func (e *respEncoder) usage() respUsage {
	out := e.r.OutputTokens()
	return respUsage{InputTokens: e.r.Input, OutputTokens: out, TotalTokens: e.r.Input + out,
		OutputTokensDetails: reasoningTokens{e.r.ReasoningTokens}}
}

// event appends one Responses event: fields is the event's JSON object
// without "type" and "sequence_number", which are added here in the order
// the API writes them (type first, sequence_number among the rest).
func (e *respEncoder) event(dst []byte, typ string, fields map[string]any) []byte {
	fields["sequence_number"] = e.seq
	e.seq++
	// encoding/json writes map keys sorted, which is the API's own order
	// (see the fixtures) except that "type" comes first: write it by hand.
	body := sim.Marshal(fields)
	b := make([]byte, 0, len(body)+len(typ)+12)
	b = append(b, `{"type":`...)
	b = append(b, sim.Marshal(typ)...)
	if len(body) > 2 {
		b = append(b, ',')
		b = append(b, body[1:]...)
	} else {
		b = append(b, '}')
	}
	return sse.AppendEvent(dst, typ, b)
}

// Output items as the API writes them.

type reasoningItem struct {
	ID      string        `json:"id"`
	Type    string        `json:"type"`
	Summary []summaryPart `json:"summary"`
}

type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type functionItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

type messageItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Content []outputText `json:"content"`
	Role    string       `json:"role"`
}

type outputText struct {
	Type        string `json:"type"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

func (e *respEncoder) item(kind sim.StepKind, text, status string) any {
	switch kind {
	case sim.StepReasoning:
		it := reasoningItem{ID: e.r.ID.ReasoningItem, Type: "reasoning", Summary: []summaryPart{}}
		if status == "completed" {
			it.Summary = []summaryPart{{"summary_text", text}}
		}
		return it
	case sim.StepTool:
		return functionItem{ID: e.r.ID.FunctionItem, Type: "function_call", Status: status,
			Arguments: text, CallID: e.r.ID.Call, Name: e.r.ToolName}
	}
	it := messageItem{ID: e.r.ID.Message, Type: "message", Status: status, Content: []outputText{}, Role: "assistant"}
	if status == "completed" {
		it.Content = []outputText{{"output_text", []any{}, []any{}, text}}
	}
	return it
}

func (e *respEncoder) itemID(kind sim.StepKind) string {
	switch kind {
	case sim.StepReasoning:
		return e.r.ID.ReasoningItem
	case sim.StepTool:
		return e.r.ID.FunctionItem
	}
	return e.r.ID.Message
}

// openItem starts an output item of kind, closing the one before.
func (e *respEncoder) openItem(dst []byte, kind sim.StepKind) []byte {
	dst = e.closeItem(dst)
	e.out++
	e.open, e.buf = kind, e.buf[:0]
	dst = e.event(dst, "response.output_item.added", map[string]any{"item": e.item(kind, "", "in_progress"), "output_index": e.out})
	id := e.itemID(kind)
	switch kind {
	case sim.StepReasoning:
		dst = e.event(dst, "response.reasoning_summary_part.added", map[string]any{
			"item_id": id, "output_index": e.out, "summary_index": 0, "part": summaryPart{"summary_text", ""}})
	case sim.StepText:
		dst = e.event(dst, "response.content_part.added", map[string]any{
			"item_id": id, "output_index": e.out, "content_index": 0, "part": outputText{"output_text", []any{}, []any{}, ""}})
	}
	return dst
}

// closeItem ends the open output item with its .done events.
func (e *respEncoder) closeItem(dst []byte) []byte {
	if e.open == 0 {
		return dst
	}
	id, text := e.itemID(e.open), string(e.buf)
	switch e.open {
	case sim.StepReasoning:
		dst = e.event(dst, "response.reasoning_summary_text.done", map[string]any{
			"item_id": id, "output_index": e.out, "summary_index": 0, "text": text})
		dst = e.event(dst, "response.reasoning_summary_part.done", map[string]any{
			"item_id": id, "output_index": e.out, "summary_index": 0, "part": summaryPart{"summary_text", text}})
	case sim.StepTool:
		dst = e.event(dst, "response.function_call_arguments.done", map[string]any{
			"item_id": id, "output_index": e.out, "arguments": text})
	case sim.StepText:
		dst = e.event(dst, "response.output_text.done", map[string]any{
			"item_id": id, "output_index": e.out, "content_index": 0, "logprobs": []any{}, "text": text})
		dst = e.event(dst, "response.content_part.done", map[string]any{
			"item_id": id, "output_index": e.out, "content_index": 0, "part": outputText{"output_text", []any{}, []any{}, text}})
	}
	it := e.item(e.open, text, "completed")
	e.done = append(e.done, it)
	dst = e.event(dst, "response.output_item.done", map[string]any{"item": it, "output_index": e.out})
	e.open, e.buf = 0, e.buf[:0]
	return dst
}

func (e *respEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepStart:
		dst = e.event(dst, "response.created", map[string]any{"response": e.object("in_progress", nil, nil)})
		return e.event(dst, "response.in_progress", map[string]any{"response": e.object("in_progress", nil, nil)})
	case sim.StepToolStart:
		return e.openItem(dst, sim.StepTool)
	case sim.StepReasoning, sim.StepTool, sim.StepText:
		if e.open != st.Kind {
			dst = e.openItem(dst, st.Kind)
		}
		e.buf = append(e.buf, st.Text...)
		id := e.itemID(st.Kind)
		switch st.Kind {
		case sim.StepReasoning:
			dst = e.event(dst, "response.reasoning_summary_text.delta", map[string]any{
				"item_id": id, "output_index": e.out, "summary_index": 0, "delta": st.Text})
		case sim.StepTool:
			dst = e.event(dst, "response.function_call_arguments.delta", map[string]any{
				"item_id": id, "output_index": e.out, "delta": st.Text})
		default:
			dst = e.event(dst, "response.output_text.delta", map[string]any{
				"item_id": id, "output_index": e.out, "content_index": 0, "logprobs": []any{}, "delta": st.Text})
		}
		if st.Last {
			dst = e.closeItem(dst)
		}
		return dst
	case sim.StepHeartbeat:
		return e.r.KeepAlive(dst)
	case sim.StepFinish:
		dst = e.closeItem(dst)
		return e.event(dst, "response.completed", map[string]any{"response": e.object("completed", e.done, e.usage())})
	case sim.StepError:
		return e.event(dst, "error", map[string]any{"code": "server_error", "message": sim.StreamErrorMessage, "param": nil})
	}
	return dst
}

func (e *respEncoder) Body() []byte {
	var out []any
	for _, k := range e.r.Order {
		switch k {
		case sim.StepReasoning:
			out = append(out, e.item(k, e.r.ReasoningText, "completed"))
		case sim.StepTool:
			out = append(out, e.item(k, e.r.ToolArgs, "completed"))
		case sim.StepText:
			out = append(out, e.item(k, e.r.VisibleText, "completed"))
		}
	}
	return sim.Marshal(e.object("completed", out, e.usage()))
}
