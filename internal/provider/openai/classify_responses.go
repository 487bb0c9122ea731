package openai

import (
	"bytes"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
)

// OpenAI Responses streams name every event by its "type" (repeated in the
// SSE event field):
//
//   - response.output_text.delta and response.refusal.delta are text;
//   - response.reasoning_summary_text.delta and response.reasoning_text.delta
//     are reasoning;
//   - response.function_call_arguments.delta, response.custom_tool_call_input.delta,
//     response.mcp_call_arguments.delta and response.code_interpreter_call_code.delta
//     are tool; the call's header (response.output_item.added of a
//     function_call) is metadata;
//   - response.completed and response.incomplete are done (with the usage);
//   - response.failed and error are error, and so is an event with no type
//     it knows that carries a top-level error (an object, or a string as
//     OpenAI-compatible servers send: {"error":"…"});
//   - keepalive ({"type":"keepalive","sequence_number":n}, sent on long
//     requests though undocumented) is a heartbeat;
//   - every other response.* event (created, in_progress, output_item.*,
//     content_part.*, *.done repeats of the full text) is metadata. A
//     reasoning item with only encrypted_content carries no reasoning text:
//     metadata (INDEX.md, gpt-5.2 fixture).
//
// One leniency: the .done events of text and tool content
// (response.output_text.done "text", response.refusal.done "refusal",
// response.function_call_arguments.done and response.mcp_call_arguments.done
// "arguments", response.custom_tool_call_input.done "input",
// response.code_interpreter_call_code.done "code") repeat what the deltas
// carried, but a compatible server that sends no deltas (a non-streaming
// answer replayed as events) would otherwise show no content at all; when
// no text (or no tool content) has been seen yet in the stream, the .done
// event counts as that content.

type respType uint8

const (
	respUnknown respType = iota
	respMeta
	respText
	respReasoning
	respTool
	respCompleted
	respIncomplete
	respFailed
	respError
	respKeepalive
	respTextDone    // response.output_text.done: "text"
	respRefusalDone // response.refusal.done: "refusal"
	respToolDone    // response.function_call_arguments.done, mcp_call_arguments.done: "arguments"
	respInputDone   // response.custom_tool_call_input.done: "input"
	respCodeDone    // response.code_interpreter_call_code.done: "code"
)

func respTypeOf(t []byte) respType {
	switch string(t) {
	case "response.output_text.delta", "response.refusal.delta":
		return respText
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return respReasoning
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
		"response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta":
		return respTool
	case "response.completed":
		return respCompleted
	case "response.incomplete":
		return respIncomplete
	case "response.failed":
		return respFailed
	case "error":
		return respError
	case "keepalive":
		return respKeepalive
	case "response.output_text.done":
		return respTextDone
	case "response.refusal.done":
		return respRefusalDone
	case "response.function_call_arguments.done", "response.mcp_call_arguments.done":
		return respToolDone
	case "response.custom_tool_call_input.done":
		return respInputDone
	case "response.code_interpreter_call_code.done":
		return respCodeDone
	}
	if bytes.HasPrefix(t, []byte("response.")) {
		switch {
		case bytes.HasSuffix(t, []byte("_arguments.delta")):
			return respTool
		case bytes.HasSuffix(t, []byte("_arguments.done")):
			return respToolDone
		}
		return respMeta
	}
	return respUnknown
}

func responsesEvent(c *protocol.Content, e *protocol.Event, sseType, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	t := respUnknown
	hasType := false
	// code is an error event's code, or the code text of
	// response.code_interpreter_call_code.done.
	var delta, text, refusal, args, input, resp, code, errType, errCode []byte
	hasErr := false
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "type":
			if d.Peek() == jsonscan.String {
				v, _ := d.Ident()
				t, hasType = respTypeOf(v), true
			} else {
				d.Skip()
			}
		case "delta":
			delta = protocol.RawStr(&d)
		case "text":
			text = protocol.RawStr(&d)
		case "refusal":
			refusal = protocol.RawStr(&d)
		case "arguments":
			args = protocol.RawStr(&d)
		case "input":
			input = protocol.RawStr(&d)
		case "response":
			resp = protocol.RawObject(&d)
		case "error":
			errCode, hasErr = protocol.ErrorValue(&d)
		case "error_type":
			errType = protocol.RawStr(&d)
		case "code":
			code = protocol.RawStr(&d)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if !hasType {
		t = respTypeOf(sseType)
	}
	if t == respUnknown && hasErr {
		t = respError
	}
	switch t {
	case respText:
		protocol.AddContent(c, e, delta, protocol.Text)
	case respReasoning:
		protocol.AddContent(c, e, delta, protocol.Reasoning)
	case respTool:
		protocol.AddContent(c, e, delta, protocol.Tool)
	case respTextDone, respRefusalDone:
		if !c.SawText {
			if t == respRefusalDone {
				text = refusal
			}
			protocol.AddContent(c, e, text, protocol.Text)
		}
	case respToolDone, respInputDone, respCodeDone:
		if !c.SawTool {
			switch t {
			case respInputDone:
				args = input
			case respCodeDone:
				args = code
			}
			protocol.AddContent(c, e, args, protocol.Tool)
		}
	case respCompleted, respIncomplete, respFailed:
		if resp != nil {
			rd := jsonscan.New(resp)
			responseObject(&rd, c, e, false)
		}
		switch t {
		case respFailed:
			e.Kinds |= protocol.Error
			if e.ErrCode == nil {
				e.ErrCode = protocol.ErrorWord
			}
		default:
			e.Kinds |= protocol.Done
		}
	case respError:
		e.Kinds |= protocol.Error
		switch {
		case len(code) > 0:
			e.ErrCode = code
		case errCode != nil:
			e.ErrCode = errCode
		default:
			e.ErrCode = protocol.StringErrorCode(errType)
		}
	case respKeepalive:
		e.Kinds |= protocol.Heartbeat
	case respMeta:
		e.Kinds |= protocol.Metadata
	default:
		return protocol.MarkUnknown(e)
	}
	return true
}

// responseObject consumes a Responses response object: its usage, its
// status (the finish reason: incomplete_details.reason when it gives one,
// else the status) and its error. With output set (non-streaming bodies) it
// also reads the output items; in a stream they repeat what the deltas
// already carried. It reports whether the walk was valid, and whether the
// object had the shape of a response (object "response", an output array)
// or of an error body (an error): ParseResponse takes nothing else for a
// Responses body.
func responseObject(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event, output bool) (valid, shaped bool) {
	if d.Peek() != jsonscan.Object {
		return false, false
	}
	var status, reason, errType []byte
	stringErr := false
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "usage":
			e.Report(OpenAIUsage(d))
		case "status":
			status = protocol.RawStr(d)
		case "incomplete_details":
			if raw := protocol.RawObject(d); raw != nil {
				id := jsonscan.New(raw)
				id.Object()
				for {
					k, ok := id.Key()
					if !ok {
						break
					}
					if string(k) == "reason" {
						reason = protocol.RawStr(&id)
					} else {
						id.Skip()
					}
				}
			}
		case "error":
			if code, isErr := protocol.ErrorValue(d); isErr {
				e.Kinds |= protocol.Error
				e.ErrCode = code
				stringErr = code == nil
				shaped = true
			}
		case "error_type":
			errType = protocol.RawStr(d)
		case "object":
			if string(protocol.RawStr(d)) == "response" {
				shaped = true
			}
		case "output":
			if d.Peek() != jsonscan.Array {
				d.Skip()
				continue
			}
			shaped = true
			if !output {
				d.Skip()
				continue
			}
			d.Array()
			for d.Elem() {
				responsesItem(d, c, e)
			}
		default:
			d.Skip()
		}
	}
	if stringErr && e.ErrCode == nil {
		e.ErrCode = protocol.StringErrorCode(errType)
	}
	switch {
	case len(reason) > 0:
		e.Finish = reason
	case len(status) > 0:
		e.Finish = status
	}
	switch string(status) {
	case "completed", "incomplete":
		e.Kinds |= protocol.Done
	case "failed", "cancelled":
		e.Kinds |= protocol.Error
		if e.ErrCode == nil {
			e.ErrCode = status
		}
	}
	return !d.Failed(), shaped
}

type itemType uint8

const (
	itemOther itemType = iota
	itemMessage
	itemReasoning
	itemFunctionCall // function_call, mcp_call: arguments
	itemCustomCall   // custom_tool_call: input
	itemCodeCall     // code_interpreter_call: code
)

// responsesItem consumes one output item of a non-streaming response.
func responsesItem(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	typ := itemOther
	var parts, summary, args []byte
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "type":
			if d.Peek() != jsonscan.String {
				d.Skip()
				continue
			}
			v, _ := d.Ident()
			switch string(v) {
			case "message":
				typ = itemMessage
			case "reasoning":
				typ = itemReasoning
			case "function_call", "mcp_call":
				typ = itemFunctionCall
			case "custom_tool_call":
				typ = itemCustomCall
			case "code_interpreter_call":
				typ = itemCodeCall
			}
		case "content":
			parts, _ = d.SkipRaw()
		case "summary":
			summary, _ = d.SkipRaw()
		case "arguments", "input", "code":
			// Only the one that belongs to the item's type is read below;
			// an item has one of them.
			if raw := protocol.RawStr(d); raw != nil {
				args = raw
			}
		default:
			d.Skip()
		}
	}
	switch typ {
	case itemMessage:
		// output_text parts carry "text", refusal parts "refusal".
		partTexts(parts, c, e, protocol.Text, "text", "refusal")
	case itemReasoning:
		partTexts(summary, c, e, protocol.Reasoning, "text", "")
		partTexts(parts, c, e, protocol.Reasoning, "text", "")
	case itemFunctionCall, itemCustomCall, itemCodeCall:
		protocol.AddContent(c, e, args, protocol.Tool)
	}
}

// partTexts reads an array of content parts and treats the string members
// named f1 or f2 as content of kind k.
func partTexts(raw []byte, c *protocol.Content, e *protocol.Event, k protocol.Kind, f1, f2 string) {
	if raw == nil {
		return
	}
	d := jsonscan.New(raw)
	if d.Peek() != jsonscan.Array {
		return
	}
	d.Array()
	for d.Elem() {
		if d.Peek() != jsonscan.Object {
			d.Skip()
			continue
		}
		d.Object()
		for {
			key, ok := d.Key()
			if !ok {
				break
			}
			if s := string(key); s == f1 || (f2 != "" && s == f2) {
				protocol.Str(&d, c, e, k)
			} else {
				d.Skip()
			}
		}
	}
}

// responsesBody reads a non-streaming Responses body: a response object.
func responsesBody(c *protocol.Content, e *protocol.Event, body []byte) bool {
	d := jsonscan.New(body)
	valid, shaped := responseObject(&d, c, e, true)
	if !shaped {
		// `{}`, a chat.completion, anything without the response
		// object's shape: not a Responses body.
		e.Kinds |= protocol.Unknown
	}
	return valid && d.End()
}

// detectResponses scores an event for protocol.DetectData: 9 for a name
// that starts with "response." (or is "keepalive"), and for an "error"
// event with a sequence_number (every Responses event has one, no
// Anthropic event does); 7 for an "error" event with the code or message
// at the top.
func detectResponses(s *protocol.Shape) int {
	switch {
	case bytes.HasPrefix(s.Name, []byte("response.")), string(s.Name) == "keepalive":
		return 9
	case string(s.Name) != "error":
		return 0
	case s.Has("sequence_number"):
		return 9
	case s.Has("code") || s.Has("message"):
		return 7
	}
	return 0
}
