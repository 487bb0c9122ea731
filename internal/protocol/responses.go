package protocol

import (
	"bytes"

	"github.com/ttfx/ttfx/internal/jsonscan"
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

func responsesEvent(c *content, e *event, sseType, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && unknown(e)
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
			delta = rawStr(&d)
		case "text":
			text = rawStr(&d)
		case "refusal":
			refusal = rawStr(&d)
		case "arguments":
			args = rawStr(&d)
		case "input":
			input = rawStr(&d)
		case "response":
			resp = object(&d)
		case "error":
			errCode, hasErr = errorValue(&d)
		case "error_type":
			errType = rawStr(&d)
		case "code":
			code = rawStr(&d)
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
		addContent(c, e, delta, Text)
	case respReasoning:
		addContent(c, e, delta, Reasoning)
	case respTool:
		addContent(c, e, delta, Tool)
	case respTextDone, respRefusalDone:
		if !c.sawText {
			if t == respRefusalDone {
				text = refusal
			}
			addContent(c, e, text, Text)
		}
	case respToolDone, respInputDone, respCodeDone:
		if !c.sawTool {
			switch t {
			case respInputDone:
				args = input
			case respCodeDone:
				args = code
			}
			addContent(c, e, args, Tool)
		}
	case respCompleted, respIncomplete, respFailed:
		if resp != nil {
			rd := jsonscan.New(resp)
			responseObject(&rd, c, e, false)
		}
		switch t {
		case respFailed:
			e.kinds |= Error
			if e.errCode == nil {
				e.errCode = errorWord
			}
		default:
			e.kinds |= Done
		}
	case respError:
		e.kinds |= Error
		switch {
		case len(code) > 0:
			e.errCode = code
		case errCode != nil:
			e.errCode = errCode
		default:
			e.errCode = stringErrorCode(errType)
		}
	case respKeepalive:
		e.kinds |= Heartbeat
	case respMeta:
		e.kinds |= Metadata
	default:
		return unknown(e)
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
func responseObject(d *jsonscan.Decoder, c *content, e *event, output bool) (valid, shaped bool) {
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
			e.report(openAIUsage(d))
		case "status":
			status = rawStr(d)
		case "incomplete_details":
			if raw := object(d); raw != nil {
				id := jsonscan.New(raw)
				id.Object()
				for {
					k, ok := id.Key()
					if !ok {
						break
					}
					if string(k) == "reason" {
						reason = rawStr(&id)
					} else {
						id.Skip()
					}
				}
			}
		case "error":
			if code, isErr := errorValue(d); isErr {
				e.kinds |= Error
				e.errCode = code
				stringErr = code == nil
				shaped = true
			}
		case "error_type":
			errType = rawStr(d)
		case "object":
			if string(rawStr(d)) == "response" {
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
	if stringErr && e.errCode == nil {
		e.errCode = stringErrorCode(errType)
	}
	switch {
	case len(reason) > 0:
		e.finish = reason
	case len(status) > 0:
		e.finish = status
	}
	switch string(status) {
	case "completed", "incomplete":
		e.kinds |= Done
	case "failed", "cancelled":
		e.kinds |= Error
		if e.errCode == nil {
			e.errCode = status
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
func responsesItem(d *jsonscan.Decoder, c *content, e *event) {
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
			if raw := rawStr(d); raw != nil {
				args = raw
			}
		default:
			d.Skip()
		}
	}
	switch typ {
	case itemMessage:
		// output_text parts carry "text", refusal parts "refusal".
		partTexts(parts, c, e, Text, "text", "refusal")
	case itemReasoning:
		partTexts(summary, c, e, Reasoning, "text", "")
		partTexts(parts, c, e, Reasoning, "text", "")
	case itemFunctionCall, itemCustomCall, itemCodeCall:
		addContent(c, e, args, Tool)
	}
}

// partTexts reads an array of content parts and treats the string members
// named f1 or f2 as content of kind k.
func partTexts(raw []byte, c *content, e *event, k Kind, f1, f2 string) {
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
				str(&d, c, e, k)
			} else {
				d.Skip()
			}
		}
	}
}
