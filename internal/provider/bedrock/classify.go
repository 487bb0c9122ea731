package bedrock

import (
	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
)

// Bedrock Converse streams (POST /model/{modelId}/converse-stream) are AWS
// event-stream messages, not SSE: the relay's reader yields each frame as
// a piece whose Raw is the whole frame and whose Event is its :event-type
// and JSON payload. They are classified by :event-type (SPEC §2):
//
//   - messageStart ({"role":"assistant"}) is metadata;
//   - contentBlockStart is metadata: the header of a toolUse block
//     ({"start":{"toolUse":{"toolUseId","name"}}}) or of any other block;
//   - contentBlockDelta is text ({"delta":{"text":…}}), reasoning
//     ({"delta":{"reasoningContent":{"text":…}}}, or redactedContent,
//     reasoning the provider encrypted, as Anthropic's redacted_thinking)
//     or tool input ({"delta":{"toolUse":{"input":…}}}); a reasoning
//     signature, a citation and empty deltas are metadata;
//   - contentBlockStop is metadata; messageStop ({"stopReason":…}) is done;
//   - metadata carries usage ({"usage":{"inputTokens","outputTokens",
//     "cacheReadInputTokens","cacheWriteInputTokens"}}) and Bedrock's own
//     {"metrics":{"latencyMs"}}, which the record keeps beside the
//     gateway's marks;
//   - a message whose :message-type is exception (throttlingException,
//     modelStreamErrorException, validationException, …) is an error, its
//     :exception-type the error code.
//
// Usage: inputTokens does not count the prompt read from or written to the
// cache, which Bedrock reports apart; Input is their sum, as for
// Anthropic. outputTokens lumps reasoning and tool input with the text,
// so a stream with either has its visible tokens estimated (§3).

type cvType uint8

const (
	cvUnknown cvType = iota
	cvMessageStart
	cvBlockStart
	cvBlockDelta
	cvBlockStop
	cvMessageStop
	cvMetadata
)

func cvTypeOf(t []byte) cvType {
	switch string(t) {
	case "messageStart":
		return cvMessageStart
	case "contentBlockStart":
		return cvBlockStart
	case "contentBlockDelta":
		return cvBlockDelta
	case "contentBlockStop":
		return cvBlockStop
	case "messageStop":
		return cvMessageStop
	case "metadata":
		return cvMetadata
	}
	return cvUnknown
}

// exception is the classifier's Exception hook: a frame whose
// :message-type is exception (throttlingException,
// modelStreamErrorException, …) or error (a service-level failure) ends
// the stream as an error, its :exception-type (or :error-code) the code.
// A frame that does not parse is left to the Event hook, which counts it
// as unknown.
func exception(raw []byte) ([]byte, bool) {
	m, err := eventstream.Parse(raw)
	if err != nil {
		return nil, false
	}
	switch string(m.String(":message-type")) {
	case "exception":
		return m.String(":exception-type"), true
	case "error":
		return m.String(":error-code"), true
	}
	return nil, false
}

// converseEvent classifies the JSON payload of a Converse event of type typ.
func converseEvent(c *protocol.Content, e *protocol.Event, typ, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	t := cvTypeOf(typ)
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "delta":
			if t != cvBlockDelta || d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			converseDelta(&d, c, e)
		case "stopReason":
			if t == cvMessageStop {
				if r := protocol.RawStr(&d); len(r) > 0 {
					e.SetFinish(0, r)
				}
			} else {
				d.Skip()
			}
		case "usage":
			if t == cvMetadata && d.Peek() == jsonscan.Object {
				e.Report(converseUsage(&d))
			} else {
				d.Skip()
			}
		case "metrics":
			if t == cvMetadata && d.Peek() == jsonscan.Object {
				e.LatencyMs, e.HasLatency = converseLatency(&d)
			} else {
				d.Skip()
			}
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	switch t {
	case cvMessageStart, cvBlockStart, cvBlockStop, cvMetadata:
		e.Kinds |= protocol.Metadata
	case cvBlockDelta:
		// The kinds its delta carried; an empty one is metadata.
	case cvMessageStop:
		e.Kinds |= protocol.Done
	default:
		return protocol.MarkUnknown(e)
	}
	return true
}

// converseDelta walks a contentBlockDelta's delta object.
func converseDelta(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			return
		}
		switch string(k) {
		case "text":
			protocol.Str(d, c, e, protocol.Text)
		case "reasoningContent":
			if d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			d.Object()
			for {
				rk, ok := d.Key()
				if !ok {
					break
				}
				switch string(rk) {
				case "text":
					protocol.Str(d, c, e, protocol.Reasoning)
				case "redactedContent":
					// Encrypted reasoning (base64): reasoning the user
					// waits on, as Anthropic's redacted_thinking (§2).
					if raw := protocol.RawStr(d); len(raw) > 0 {
						e.Kinds |= protocol.Reasoning
					}
				default: // signature
					d.Skip()
				}
			}
		case "toolUse":
			if d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			d.Object()
			for {
				tk, ok := d.Key()
				if !ok {
					break
				}
				if string(tk) == "input" {
					protocol.Str(d, c, e, protocol.Tool)
				} else {
					d.Skip()
				}
			}
		default: // citation, image, …
			d.Skip()
		}
	}
}

// converseUsage reads a Converse usage object.
func converseUsage(d *jsonscan.Decoder) protocol.Usage {
	var u protocol.Usage
	cache := 0
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "inputTokens":
			u.Input, u.HasInput = protocol.Count(d)
		case "outputTokens":
			u.Output, u.HasOutput = protocol.Count(d)
		case "cacheReadInputTokens", "cacheWriteInputTokens":
			n, _ := protocol.Count(d)
			cache += n
		default:
			d.Skip()
		}
	}
	if u.HasInput {
		u.Input += cache
	}
	return u
}

// converseLatency reads metrics.latencyMs.
func converseLatency(d *jsonscan.Decoder) (int, bool) {
	n, has := 0, false
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		if string(k) == "latencyMs" {
			n, has = protocol.Count(d)
		} else {
			d.Skip()
		}
	}
	return n, has
}

// converseResponse reads a non-streaming Converse response:
// {"output":{"message":{"role","content":[{"text"}|{"reasoningContent":
// {"reasoningText":{"text"}}}|{"toolUse":{"input":{…}}}]}},"stopReason",
// "usage","metrics"}, or an error body ({"message":…}).
func converseResponse(c *protocol.Content, e *protocol.Event, body []byte) bool {
	d := jsonscan.New(body)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	shaped := false
	var msg []byte
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "output":
			shaped = true
			if d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			d.Object()
			for {
				ok2 := false
				var k2 []byte
				if k2, ok2 = d.Key(); !ok2 {
					break
				}
				if string(k2) == "message" {
					converseMessage(d.Peek() == jsonscan.Object, &d, c, e)
				} else {
					d.Skip()
				}
			}
		case "stopReason":
			shaped = true
			if r := protocol.RawStr(&d); len(r) > 0 {
				e.SetFinish(0, r)
				e.Kinds |= protocol.Done
			}
		case "usage":
			if d.Peek() == jsonscan.Object {
				e.Report(converseUsage(&d))
			} else {
				d.Skip()
			}
		case "metrics":
			if d.Peek() == jsonscan.Object {
				e.LatencyMs, e.HasLatency = converseLatency(&d)
			} else {
				d.Skip()
			}
		case "message", "Message":
			msg = protocol.RawStr(&d)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if !shaped {
		if msg != nil {
			e.Kinds |= protocol.Error
			return true
		}
		return protocol.MarkUnknown(e)
	}
	return true
}

// converseMessage walks output.message's content blocks.
func converseMessage(isObject bool, d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if !isObject {
		d.Skip()
		return
	}
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			return
		}
		if string(k) != "content" || d.Peek() != jsonscan.Array {
			d.Skip()
			continue
		}
		d.Array()
		for d.Elem() {
			if d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			d.Object()
			for {
				bk, ok := d.Key()
				if !ok {
					break
				}
				switch string(bk) {
				case "text":
					protocol.Str(d, c, e, protocol.Text)
				case "reasoningContent":
					// {"reasoningText":{"text","signature"}} or
					// {"redactedContent":"…"}: reasoning either way.
					if protocol.NonEmptyObject(d) {
						e.Kinds |= protocol.Reasoning
					}
				case "toolUse":
					if d.Peek() != jsonscan.Object {
						d.Skip()
						continue
					}
					d.Object()
					for {
						tk, ok := d.Key()
						if !ok {
							break
						}
						if string(tk) == "input" && protocol.NonEmptyObject(d) {
							e.Kinds |= protocol.Tool
						} else if string(tk) != "input" {
							d.Skip()
						}
					}
				default:
					d.Skip()
				}
			}
		}
	}
}
