package protocol

import "github.com/ttfx/ttfx/internal/jsonscan"

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

func anthropicEvent(c *content, e *event, sseType, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && unknown(e)
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
			message = object(&d)
		case "content_block":
			block = object(&d)
		case "delta":
			delta = object(&d)
		case "usage":
			usage = object(&d)
		case "error":
			errCode, hasErr = errorValue(&d)
		case "error_type":
			errType = rawStr(&d)
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
		e.kinds |= Heartbeat
	case antMessageStart:
		e.kinds |= Metadata
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
					e.report(u)
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
		e.kinds |= Metadata
	case antMessageDelta:
		e.kinds |= Metadata
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
					stop = rawStr(&dd)
				} else {
					dd.Skip()
				}
			}
			if len(stop) > 0 {
				e.kinds |= Done
				e.finish = stop
			}
		}
		if usage != nil {
			ud := jsonscan.New(usage)
			e.report(anthropicUsage(&ud))
		}
	case antMessageStop:
		e.kinds |= Done
	case antError:
		e.kinds |= Error
		e.errCode = errCode
		if errCode == nil {
			e.errCode = stringErrorCode(errType)
		}
	default:
		return unknown(e)
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
func anthropicBlock(d *jsonscan.Decoder, c *content, e *event) {
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
			text = rawStr(d)
		case "thinking":
			thinking = rawStr(d)
		case "data":
			data = rawStr(d)
		case "input":
			input = nonEmptyObject(d)
		default:
			d.Skip()
		}
	}
	switch typ {
	case blockText:
		addContent(c, e, text, Text)
	case blockThinking:
		addContent(c, e, thinking, Reasoning)
	case blockRedacted:
		addContent(c, e, data, Reasoning)
	case blockToolUse:
		if input {
			e.kinds |= Tool
		}
	}
}

// anthropicDelta consumes a content_block_delta's delta. signature_delta,
// citations_delta and empty deltas carry no content: metadata.
func anthropicDelta(d *jsonscan.Decoder, c *content, e *event) {
	var k Kind
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
				k = Text
			case "thinking_delta":
				k = Reasoning
			case "input_json_delta":
				k = Tool
			}
		case "text":
			text = rawStr(d)
		case "thinking":
			thinking = rawStr(d)
		case "partial_json":
			partial = rawStr(d)
		default:
			d.Skip()
		}
	}
	switch k {
	case Text:
		addContent(c, e, text, Text)
	case Reasoning:
		addContent(c, e, thinking, Reasoning)
	case Tool:
		addContent(c, e, partial, Tool)
	}
}

// anthropicUsage consumes an Anthropic usage object.
func anthropicUsage(d *jsonscan.Decoder) Usage {
	var u Usage
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
			if n, ok := count(d); ok {
				u.Input += n
				u.HasInput = true
			}
		case "output_tokens":
			u.Output, u.HasOutput = count(d)
		default:
			d.Skip()
		}
	}
}
