package sim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/sse"
)

// OpenAI Responses (POST /v1/responses), in the event sequence of the
// fixtures openai__responses__*.sse: response.created and
// response.in_progress, then for each output item output_item.added, its
// parts and deltas (reasoning summary text, function-call arguments, output
// text), their .done events and output_item.done, and response.completed
// with usage. Every event carries its sequence_number.

type respEncoder struct {
	r    *response
	seq  int
	out  int      // output_index of the open item; -1 before the first
	open stepKind // the open item's kind; 0: none
	buf  []byte   // text of the open item so far
	done []any    // finished output items, for response.completed
}

func newRespEncoder(r *response) *respEncoder { return &respEncoder{r: r, out: -1} }

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
		ID: e.r.id.response, Object: "response", CreatedAt: created, Status: status,
		Error: null, IncompleteDetails: null, Instructions: null, MaxOutputTokens: null,
		Model: e.r.model, Output: output, ParallelToolCalls: true, PreviousResponseID: null,
		Reasoning:   json.RawMessage(`{"effort":null,"summary":null}`),
		Temperature: 1, Text: json.RawMessage(`{"format":{"type":"text"}}`),
		ToolChoice: "auto", Tools: []any{}, TopP: 1, Truncation: "disabled", Usage: usage,
	}
}

func (e *respEncoder) usage() respUsage {
	out := e.r.c.outputTokens()
	return respUsage{InputTokens: e.r.input, OutputTokens: out, TotalTokens: e.r.input + out,
		OutputTokensDetails: reasoningTokens{e.r.c.reasoningTokens}}
}

// event appends one Responses event: fields is the event's JSON object
// without "type" and "sequence_number", which are added here in the order
// the API writes them (type first, sequence_number among the rest).
func (e *respEncoder) event(dst []byte, typ string, fields map[string]any) []byte {
	fields["sequence_number"] = e.seq
	e.seq++
	// encoding/json writes map keys sorted, which is the API's own order
	// (see the fixtures) except that "type" comes first: write it by hand.
	body := marshal(fields)
	b := make([]byte, 0, len(body)+len(typ)+12)
	b = append(b, `{"type":`...)
	b = append(b, marshal(typ)...)
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

func (e *respEncoder) item(kind stepKind, text, status string) any {
	switch kind {
	case stepReasoning:
		it := reasoningItem{ID: e.r.id.reasoningItem, Type: "reasoning", Summary: []summaryPart{}}
		if status == "completed" {
			it.Summary = []summaryPart{{"summary_text", text}}
		}
		return it
	case stepTool:
		return functionItem{ID: e.r.id.functionItem, Type: "function_call", Status: status,
			Arguments: text, CallID: e.r.id.call, Name: e.r.c.toolName}
	}
	it := messageItem{ID: e.r.id.message, Type: "message", Status: status, Content: []outputText{}, Role: "assistant"}
	if status == "completed" {
		it.Content = []outputText{{"output_text", []any{}, []any{}, text}}
	}
	return it
}

func (e *respEncoder) itemID(kind stepKind) string {
	switch kind {
	case stepReasoning:
		return e.r.id.reasoningItem
	case stepTool:
		return e.r.id.functionItem
	}
	return e.r.id.message
}

// openItem starts an output item of kind, closing the one before.
func (e *respEncoder) openItem(dst []byte, kind stepKind) []byte {
	dst = e.closeItem(dst)
	e.out++
	e.open, e.buf = kind, e.buf[:0]
	dst = e.event(dst, "response.output_item.added", map[string]any{"item": e.item(kind, "", "in_progress"), "output_index": e.out})
	id := e.itemID(kind)
	switch kind {
	case stepReasoning:
		dst = e.event(dst, "response.reasoning_summary_part.added", map[string]any{
			"item_id": id, "output_index": e.out, "summary_index": 0, "part": summaryPart{"summary_text", ""}})
	case stepText:
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
	case stepReasoning:
		dst = e.event(dst, "response.reasoning_summary_text.done", map[string]any{
			"item_id": id, "output_index": e.out, "summary_index": 0, "text": text})
		dst = e.event(dst, "response.reasoning_summary_part.done", map[string]any{
			"item_id": id, "output_index": e.out, "summary_index": 0, "part": summaryPart{"summary_text", text}})
	case stepTool:
		dst = e.event(dst, "response.function_call_arguments.done", map[string]any{
			"item_id": id, "output_index": e.out, "arguments": text})
	case stepText:
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

func (e *respEncoder) frame(dst []byte, st step) []byte {
	switch st.kind {
	case stepStart:
		dst = e.event(dst, "response.created", map[string]any{"response": e.object("in_progress", nil, nil)})
		return e.event(dst, "response.in_progress", map[string]any{"response": e.object("in_progress", nil, nil)})
	case stepToolStart:
		return e.openItem(dst, stepTool)
	case stepReasoning, stepTool, stepText:
		if e.open != st.kind {
			dst = e.openItem(dst, st.kind)
		}
		e.buf = append(e.buf, st.text...)
		id := e.itemID(st.kind)
		switch st.kind {
		case stepReasoning:
			dst = e.event(dst, "response.reasoning_summary_text.delta", map[string]any{
				"item_id": id, "output_index": e.out, "summary_index": 0, "delta": st.text})
		case stepTool:
			dst = e.event(dst, "response.function_call_arguments.delta", map[string]any{
				"item_id": id, "output_index": e.out, "delta": st.text})
		default:
			dst = e.event(dst, "response.output_text.delta", map[string]any{
				"item_id": id, "output_index": e.out, "content_index": 0, "logprobs": []any{}, "delta": st.text})
		}
		if st.last {
			dst = e.closeItem(dst)
		}
		return dst
	case stepHeartbeat:
		return e.r.keepAlive(dst)
	case stepFinish:
		dst = e.closeItem(dst)
		return e.event(dst, "response.completed", map[string]any{"response": e.object("completed", e.done, e.usage())})
	case stepError:
		return e.event(dst, "error", map[string]any{"code": "server_error", "message": streamErrorMessage, "param": nil})
	}
	return dst
}

func (e *respEncoder) body() []byte {
	var out []any
	for _, k := range e.r.order {
		switch k {
		case stepReasoning:
			out = append(out, e.item(k, e.r.c.reasoningText, "completed"))
		case stepTool:
			out = append(out, e.item(k, e.r.c.toolArgs, "completed"))
		case stepText:
			out = append(out, e.item(k, e.r.c.visibleText, "completed"))
		}
	}
	return marshal(e.object("completed", out, e.usage()))
}
