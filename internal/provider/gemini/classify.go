package gemini

import (
	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
)

// Gemini streamGenerateContent?alt=sse sends one GenerateContentResponse per
// event, CRLF-framed, and no end marker:
//
//	{"candidates":[{"content":{"parts":[{"text":"…"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{…}}
//
// The parts decide the kinds:
//   - a text part is text, or reasoning with "thought": true;
//   - a functionCall part is tool: a whole call, even with no arguments.
//     Vertex AI can stream a call (streamFunctionCallArguments): a part with
//     only the name and "willContinue": true is its header (metadata), and
//     parts with partialArgs values are tool;
//   - an executableCode part is tool (code the model runs);
//   - an empty text part with only a thoughtSignature is metadata.
//
// A candidate with finishReason is done — also MALFORMED_FUNCTION_CALL,
// which ends the stream with no output (FinishReason exposes it).
// promptFeedback.blockReason (prompt blocked, no candidates) ends the
// response: done, with the block reason as the finish reason.
// {"error":{"code","message","status"}} is error, and so is an error given
// as a string by a proxy ({"error":"…"}, with error_type as its code).
//
// Usage: usageMetadata on (nearly) every chunk, cumulative; the last report
// wins whole. candidatesTokenCount excludes thoughts (thoughtsTokenCount),
// so Gemini breaks reasoning out: output = candidates + thoughts, reasoning
// = thoughts. A count absent from usageMetadata is absent, not 0, with the
// one exception proto3 JSON forces: it omits counts that are zero, so
//   - a missing thoughtsTokenCount beside a candidates count is 0 (the model
//     did not think);
//   - a missing candidatesTokenCount beside promptTokenCount and
//     totalTokenCount is derived: candidates = total − prompt −
//     toolUsePrompt − thoughts, when that is ≥ 0 (the
//     MALFORMED_FUNCTION_CALL chunk of INDEX.md reports prompt 61 = total
//     61: 0 output, 0 thoughts; thinking chunks report prompt, thoughts and
//     total with no candidates yet);
//   - without a total (or a prompt) nothing says the output was 0, so the
//     output is not reported;
//   - an empty usageMetadata ({}, or only details) is no report at all and
//     does not replace an earlier one.
func geminiEvent(c *protocol.Content, e *protocol.Event, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	known := false
	var errType, block []byte
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "candidates":
			known = true
			if d.Peek() != jsonscan.Array {
				d.Skip()
				continue
			}
			d.Array()
			for d.Elem() {
				geminiCandidate(&d, c, e)
			}
		case "usageMetadata":
			known = true
			if u, ok := geminiUsage(&d); ok {
				e.Report(u)
			}
		case "promptFeedback":
			known = true
			block = blockReason(&d) // the last one counts
		case "error":
			if code, isErr := protocol.ErrorValue(&d); isErr {
				e.Kinds |= protocol.Error
				e.ErrCode = code
			}
		case "error_type":
			errType = protocol.RawStr(&d)
		case "modelVersion", "responseId", "createTime":
			known = true
			d.Skip()
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
	if len(block) > 0 {
		e.Kinds |= protocol.Done
		e.Finish = block
	}
	if !known && e.Kinds == 0 {
		return protocol.MarkUnknown(e)
	}
	return true
}

func geminiCandidate(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	var finish []byte
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "content":
			if d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			d.Object()
			for {
				k, ok := d.Key()
				if !ok {
					break
				}
				if string(k) != "parts" || d.Peek() != jsonscan.Array {
					d.Skip()
					continue
				}
				d.Array()
				for d.Elem() {
					geminiPart(d, c, e)
				}
			}
		case "finishReason":
			finish = protocol.RawStr(d) // the last one counts
		default:
			d.Skip()
		}
	}
	if len(finish) > 0 {
		e.Kinds |= protocol.Done
		e.Finish = finish
	}
}

func geminiPart(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	var text []byte
	hasText, thought := false, false
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "text":
			if d.Peek() == jsonscan.String {
				text, _ = d.Str()
				hasText = true
			} else {
				d.Skip()
			}
		case "thought":
			if d.Peek() == jsonscan.Bool {
				thought, _ = d.Bool()
			} else {
				d.Skip()
			}
		case "functionCall":
			if functionCall(d) {
				e.Kinds |= protocol.Tool
			}
		case "executableCode":
			protocol.FunctionArgs(d, c, e, "code")
		default:
			d.Skip()
		}
	}
	if hasText {
		if thought {
			protocol.AddContent(c, e, text, protocol.Reasoning)
		} else {
			protocol.AddContent(c, e, text, protocol.Text)
		}
	}
}

// functionCall consumes a functionCall and reports whether it is an action
// (tool) rather than the header of a streamed Vertex call.
func functionCall(d *jsonscan.Decoder) bool {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return false
	}
	hasArgs, partial, willContinue, named := false, false, false, false
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "args":
			hasArgs = d.Peek() == jsonscan.Object
			d.Skip()
		case "partialArgs":
			partial = partialArgs(d) || partial
		case "willContinue":
			if d.Peek() == jsonscan.Bool {
				willContinue, _ = d.Bool()
			} else {
				d.Skip()
			}
		case "name":
			named = len(protocol.RawStr(d)) > 0
		default:
			d.Skip()
		}
	}
	switch {
	case hasArgs, partial:
		return true
	case willContinue:
		return false // the header of a streamed call
	default:
		return named // a whole call of a function without parameters
	}
}

// partialArgs consumes Vertex's partialArgs list
// ([{"jsonPath":"$.city","stringValue":"Bos","willContinue":true}, …]) and
// reports whether any element carries a value: a non-whitespace
// stringValue, or a number, bool or null value.
func partialArgs(d *jsonscan.Decoder) bool {
	if d.Peek() != jsonscan.Array {
		d.Skip()
		return false
	}
	found := false
	d.Array()
	for d.Elem() {
		if d.Peek() != jsonscan.Object {
			d.Skip()
			continue
		}
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			switch string(k) {
			case "stringValue":
				if raw := protocol.RawStr(d); jsonscan.HasNonSpace(raw) {
					found = true
				}
			case "numberValue", "boolValue", "nullValue":
				found = true
				d.Skip()
			default:
				d.Skip()
			}
		}
	}
	return found
}

// blockReason consumes promptFeedback and returns its blockReason.
func blockReason(d *jsonscan.Decoder) []byte {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return nil
	}
	var r []byte
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			return r
		}
		if string(k) == "blockReason" {
			r = protocol.RawStr(d)
		} else {
			d.Skip()
		}
	}
}

// geminiUsage consumes usageMetadata and reports whether it was a report
// (see geminiEvent for the rules on absent counts). Input is
// promptTokenCount + toolUsePromptTokenCount (both are prompt the model
// read; cachedContentTokenCount is part of promptTokenCount).
func geminiUsage(d *jsonscan.Decoder) (protocol.Usage, bool) {
	var u protocol.Usage
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return u, false
	}
	var prompt, toolPrompt, candidates, thoughts, total int
	var hasPrompt, hasToolPrompt, hasCandidates, hasThoughts, hasTotal bool
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "promptTokenCount":
			prompt, hasPrompt = protocol.Count(d)
		case "toolUsePromptTokenCount":
			toolPrompt, hasToolPrompt = protocol.Count(d)
		case "candidatesTokenCount":
			candidates, hasCandidates = protocol.Count(d)
		case "thoughtsTokenCount":
			thoughts, hasThoughts = protocol.Count(d)
		case "totalTokenCount":
			total, hasTotal = protocol.Count(d)
		default:
			d.Skip()
		}
	}
	if hasPrompt || hasToolPrompt {
		u.Input, u.HasInput = prompt+toolPrompt, true
	}
	if !hasCandidates && hasTotal && hasPrompt {
		// proto3 omitted a zero candidates count; total says so.
		if c := total - prompt - toolPrompt - thoughts; c >= 0 {
			candidates, hasCandidates = c, true
		}
	}
	switch {
	case hasCandidates:
		u.Output, u.HasOutput = candidates+thoughts, true
		u.Reasoning, u.HasReasoning = thoughts, true
	case hasThoughts:
		u.Reasoning, u.HasReasoning = thoughts, true
	}
	return u, u.Any()
}

// detect scores an event for protocol.DetectData: 4 for a
// GenerateContentResponse's members (candidates, usageMetadata,
// promptFeedback), 3 for an error object with a "status" (google.rpc.Status:
// {code, message, status}).
func detect(s *protocol.Shape) int {
	switch {
	case s.Has("candidates") || s.Has("usageMetadata") || s.Has("promptFeedback"):
		return 4
	case s.NestedError && s.ErrorHas("status"):
		return 3
	}
	return 0
}
