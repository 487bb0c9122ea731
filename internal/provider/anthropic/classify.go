package anthropic

import (
	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
)

// Anthropic Messages streams name every event by its "type" (repeated in the
// SSE event field): message_start, content_block_start, ping,
// content_block_delta, content_block_stop, message_delta, message_stop, and
// error.
//
//   - ping is a heartbeat (its payload may have a space: {"type": "ping"});
//   - content_block_delta is text (text_delta), reasoning (thinking_delta)
//     or tool (input_json_delta); signature_delta and citations_delta, and
//     empty deltas (an empty input_json_delta comes before the first ping
//     in tool-only streams), are metadata;
//   - content_block_start is metadata (text, thinking, tool_use headers),
//     except a redacted_thinking block, which is reasoning whose text is
//     encrypted (§2);
//   - message_delta carries stop_reason (done) and the output usage;
//     message_stop is done; error is error, and so is an event of no type
//     it knows with a top-level error (an object, or a string from a
//     proxy: {"error":"…"}).
//
// Usage: input in message_start (input_tokens + cache_creation_input_tokens
// + cache_read_input_tokens: the three are disjoint parts of the prompt),
// output in message_delta. message_start's output_tokens is a running
// count of 1 or 2 taken before anything was generated, so it is not taken
// as the output: a stream cut before message_delta has no output usage,
// and its visible tokens are estimated. Anthropic's output_tokens lump
// thinking and tool input with the text, so a stream with either has its
// visible tokens estimated (§3).

type antType uint8

const (
	antUnknown antType = iota
	antPing
	antMessageStart
	antBlockStart
	antBlockDelta
	antBlockStop
	antMessageDelta
	antMessageStop
	antError
	antMessage // a non-streaming message body
)

func antTypeOf(t []byte) antType {
	switch string(t) {
	case "ping":
		return antPing
	case "message_start":
		return antMessageStart
	case "content_block_start":
		return antBlockStart
	case "content_block_delta":
		return antBlockDelta
	case "content_block_stop":
		return antBlockStop
	case "message_delta":
		return antMessageDelta
	case "message_stop":
		return antMessageStop
	case "error":
		return antError
	case "message":
		return antMessage
	}
	return antUnknown
}

func anthropicEvent(c *protocol.Content, e *protocol.Event, sseType, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	t := antUnknown
	hasType := false
	var message, block, delta, usage, errCode, errType []byte
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
				t, hasType = antTypeOf(v), true
			} else {
				d.Skip()
			}
		case "message":
			message = protocol.RawObject(&d)
		case "content_block":
			block = protocol.RawObject(&d)
		case "delta":
			delta = protocol.RawObject(&d)
		case "usage":
			usage = protocol.RawObject(&d)
		case "error":
			errCode, hasErr = protocol.ErrorValue(&d)
		case "error_type":
			errType = protocol.RawStr(&d)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if !hasType {
		t = antTypeOf(sseType)
	}
	if t == antUnknown && hasErr {
		t = antError
	}
	switch t {
	case antPing:
		e.Kinds |= protocol.Heartbeat
	case antMessageStart:
		e.Kinds |= protocol.Metadata
		if message != nil {
			md := jsonscan.New(message)
			md.Object()
			for {
				k, ok := md.Key()
				if !ok {
					break
				}
				if string(k) == "usage" {
					u := anthropicUsage(&md)
					u.Output, u.HasOutput = 0, false // a running count, see above
					e.Report(u)
				} else {
					md.Skip()
				}
			}
		}
	case antBlockStart:
		if block != nil {
			bd := jsonscan.New(block)
			anthropicBlock(&bd, c, e)
		}
	case antBlockDelta:
		if delta != nil {
			dd := jsonscan.New(delta)
			anthropicDelta(&dd, c, e)
		}
	case antBlockStop:
		e.Kinds |= protocol.Metadata
	case antMessageDelta:
		e.Kinds |= protocol.Metadata
		if delta != nil {
			var stop []byte // the last stop_reason member counts
			dd := jsonscan.New(delta)
			dd.Object()
			for {
				k, ok := dd.Key()
				if !ok {
					break
				}
				if string(k) == "stop_reason" {
					stop = protocol.RawStr(&dd)
				} else {
					dd.Skip()
				}
			}
			if len(stop) > 0 {
				e.Kinds |= protocol.Done
				e.Finish = stop
			}
		}
		if usage != nil {
			ud := jsonscan.New(usage)
			e.Report(anthropicUsage(&ud))
		}
	case antMessageStop:
		e.Kinds |= protocol.Done
	case antError:
		e.Kinds |= protocol.Error
		e.ErrCode = errCode
		if errCode == nil {
			e.ErrCode = protocol.StringErrorCode(errType)
		}
	default:
		return protocol.MarkUnknown(e)
	}
	return true
}

type blockType uint8

const (
	blockOther blockType = iota
	blockText
	blockThinking
	blockRedacted
	blockToolUse
)

// anthropicBlock consumes a content block (content_block_start's, or one of
// a non-streaming message's content). In a stream a tool_use block starts
// with "input":{} — its header, metadata; in a message it holds the whole
// input.
func anthropicBlock(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	typ := blockOther
	var text, thinking, data []byte
	input := false
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
			case "text":
				typ = blockText
			case "thinking":
				typ = blockThinking
			case "redacted_thinking":
				typ = blockRedacted
			case "tool_use", "server_tool_use", "mcp_tool_use":
				typ = blockToolUse
			}
		case "text":
			text = protocol.RawStr(d)
		case "thinking":
			thinking = protocol.RawStr(d)
		case "data":
			data = protocol.RawStr(d)
		case "input":
			input = protocol.NonEmptyObject(d)
		default:
			d.Skip()
		}
	}
	switch typ {
	case blockText:
		protocol.AddContent(c, e, text, protocol.Text)
	case blockThinking:
		protocol.AddContent(c, e, thinking, protocol.Reasoning)
	case blockRedacted:
		protocol.AddContent(c, e, data, protocol.Reasoning)
	case blockToolUse:
		if input {
			e.Kinds |= protocol.Tool
		}
	}
}

// anthropicDelta consumes a content_block_delta's delta. signature_delta,
// citations_delta and empty deltas carry no content: metadata.
func anthropicDelta(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	var k protocol.Kind
	var text, thinking, partial []byte
	d.Object()
	for {
		key, ok := d.Key()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			if d.Peek() != jsonscan.String {
				d.Skip()
				continue
			}
			v, _ := d.Ident()
			switch string(v) {
			case "text_delta":
				k = protocol.Text
			case "thinking_delta":
				k = protocol.Reasoning
			case "input_json_delta":
				k = protocol.Tool
			}
		case "text":
			text = protocol.RawStr(d)
		case "thinking":
			thinking = protocol.RawStr(d)
		case "partial_json":
			partial = protocol.RawStr(d)
		default:
			d.Skip()
		}
	}
	switch k {
	case protocol.Text:
		protocol.AddContent(c, e, text, protocol.Text)
	case protocol.Reasoning:
		protocol.AddContent(c, e, thinking, protocol.Reasoning)
	case protocol.Tool:
		protocol.AddContent(c, e, partial, protocol.Tool)
	}
}

// anthropicUsage consumes an Anthropic usage object.
func anthropicUsage(d *jsonscan.Decoder) protocol.Usage {
	var u protocol.Usage
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return u
	}
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			return u
		}
		switch string(k) {
		case "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens":
			if n, ok := protocol.Count(d); ok {
				u.Input += n
				u.HasInput = true
			}
		case "output_tokens":
			u.Output, u.HasOutput = protocol.Count(d)
		default:
			d.Skip()
		}
	}
}

// anthropicMessage reads a non-streaming Messages body ({"type":"message",
// "content":[blocks], "stop_reason", "usage"}) or an error body
// ({"type":"error","error":{…}}).
func anthropicMessage(c *protocol.Content, e *protocol.Event, body []byte) bool {
	d := jsonscan.New(body)
	if d.Peek() != jsonscan.Object {
		return false
	}
	t := antUnknown
	var errType, stop []byte
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
				t = antTypeOf(v)
			} else {
				d.Skip()
			}
		case "content":
			if d.Peek() != jsonscan.Array {
				d.Skip()
				continue
			}
			d.Array()
			for d.Elem() {
				anthropicBlock(&d, c, e)
			}
		case "stop_reason":
			stop = protocol.RawStr(&d) // the last one counts
		case "usage":
			e.Report(anthropicUsage(&d))
		case "error":
			if code, isErr := protocol.ErrorValue(&d); isErr {
				e.Kinds |= protocol.Error
				e.ErrCode = code
			}
		case "error_type":
			errType = protocol.RawStr(&d)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if e.Kinds&protocol.Error != 0 && e.ErrCode == nil {
		e.ErrCode = protocol.StringErrorCode(errType)
	}
	if len(stop) > 0 {
		e.Kinds |= protocol.Done
		e.Finish = stop
	}
	switch t {
	case antMessage:
	case antError:
		if e.Kinds&protocol.Error == 0 {
			e.Kinds |= protocol.Error
			e.ErrCode = protocol.ErrorWord
		}
	default:
		if e.Kinds == 0 {
			e.Kinds |= protocol.Unknown
		}
	}
	return true
}

// detect scores an event for protocol.DetectData: 8 for an "error" event
// that nests an error object ({"type":"error","error":{…}}; a Responses
// error event has a sequence_number, which scores 9 there), 6 for the
// names of the stream's events (ping, message_start, content_block_*,
// message_delta, message_stop).
func detect(s *protocol.Shape) int {
	if string(s.Name) == "error" && s.NestedError {
		return 8
	}
	switch antTypeOf(s.Name) {
	case antPing, antMessageStart, antBlockStart, antBlockDelta, antBlockStop, antMessageDelta, antMessageStop:
		return 6
	}
	return 0
}
