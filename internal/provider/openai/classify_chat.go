package openai

import (
	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
)

// OpenAI chat/completions streams (and every OpenAI-compatible provider:
// Azure, DeepSeek, Groq, Mistral, OpenRouter, Ollama, llama.cpp, vLLM) send
// one chat.completion.chunk per event and end with `data: [DONE]`:
//
//	{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}], "usage":…}
//
// What the delta carries decides the kinds:
//   - content (a string; Mistral sends an array of typed parts: "thinking"
//     parts are reasoning, "text" parts are text) and refusal are text;
//   - reasoning_content (DeepSeek), reasoning (OpenRouter, Groq, vLLM),
//     reasoning_details (OpenRouter: text, summary or encrypted data) are
//     reasoning;
//   - tool_calls[].function.arguments and the legacy function_call.arguments
//     are tool; the call's header (id, name, "" arguments) is metadata;
//   - role-only, empty and whitespace-only deltas are metadata.
//
// finish_reason marks its choice finished; the stream is done when every
// choice index it showed has finished (n > 1 streams several choices, each
// with its own index and finish_reason), or at [DONE]. Usage comes on the finish
// chunk, in a usage-only chunk with empty choices (stream_options.include_usage),
// after the finish chunk (OpenRouter), in x_groq.usage (Groq), or inside the
// finishing choice (Moonshot/Kimi: choices[].usage). Azure's
// first chunk has empty choices and prompt_filter_results: metadata. Errors
// arrive as {"error":{…}}, as {"error":"message"} (Hugging Face TGI, with
// error_type) or, from vLLM, {"object":"error",…}. Legacy
// /v1/completions chunks carry choices[].text.
//
// The same walk reads non-streaming bodies: chat.completion (choices[].message
// has the delta's fields), text_completion, and the usage of embeddings.
//
// `data: [DONE]` is handled by Stream.Event for every API.
func chatEvent(c *protocol.Content, e *protocol.Event, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	d.Object()
	known := false
	choices := -1 // absent
	var usage, groq, inChoice protocol.Usage
	var topType, errType []byte
	objectErr, stringErr := false, false
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "choices":
			known = true
			if d.Peek() != jsonscan.Array {
				d.Skip()
				continue
			}
			d.Array()
			choices = 0
			for d.Elem() {
				choices++
				chatChoice(&d, c, e, &inChoice)
			}
		case "usage":
			known = true
			usage = OpenAIUsage(&d)
		case "x_groq":
			groq = groqUsage(&d)
		case "error":
			if code, isErr := protocol.ErrorValue(&d); isErr {
				e.Kinds |= protocol.Error
				e.ErrCode = code
				stringErr = code == nil
			}
		case "error_type":
			errType = protocol.RawStr(&d)
		case "object":
			known = true
			if v := protocol.RawStr(&d); string(v) == "error" {
				objectErr = true
			}
		case "type":
			topType = protocol.RawStr(&d)
		case "id", "model", "created", "system_fingerprint", "prompt_filter_results", "service_tier", "data":
			known = true
			d.Skip()
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if objectErr || stringErr {
		e.Kinds |= protocol.Error
		if e.ErrCode == nil {
			e.ErrCode = protocol.StringErrorCode(errType, topType)
		}
	}
	if !usage.Any() {
		usage = inChoice
	}
	if !usage.Any() {
		usage = groq
	}
	e.Report(usage)
	if usage.Any() && choices <= 0 {
		e.UsageOnly = true
	}
	if !known && e.Kinds == 0 {
		return protocol.MarkUnknown(e)
	}
	return true
}

// chatChoice consumes one element of choices. Moonshot (Kimi) puts the
// usage inside the finishing choice (choices[].usage); it is stored in *u
// and counts when the chunk has no top-level usage.
func chatChoice(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event, u *protocol.Usage) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	var finish []byte
	idx := 0 // a choice without an index is choice 0 (single-choice servers omit it)
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "index":
			idx, _ = protocol.Count(d)
		case "usage":
			if v := OpenAIUsage(d); v.Any() {
				*u = v
			}
		case "delta", "message":
			chatDelta(d, c, e)
		case "text": // legacy /v1/completions
			protocol.Str(d, c, e, protocol.Text)
		case "finish_reason":
			// A repeated key counts with its last value, as in
			// encoding/json: "stop" then null is no finish.
			finish = protocol.RawStr(d)
		default:
			d.Skip()
		}
	}
	e.Seen.Add(idx)
	if len(finish) > 0 {
		e.Kinds |= protocol.Done
		e.Finished.Add(idx)
		e.SetFinish(idx, finish)
	}
}

// chatDelta consumes a delta (or a non-streaming message).
func chatDelta(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			return
		}
		switch string(k) {
		case "content":
			if d.Peek() == jsonscan.Array {
				contentParts(d, c, e)
			} else {
				protocol.Str(d, c, e, protocol.Text)
			}
		case "refusal":
			protocol.Str(d, c, e, protocol.Text)
		case "reasoning_content", "reasoning", "thinking":
			protocol.Str(d, c, e, protocol.Reasoning)
		case "reasoning_details":
			reasoningDetails(d, c, e)
		case "tool_calls":
			if d.Peek() != jsonscan.Array {
				d.Skip()
				continue
			}
			d.Array()
			for d.Elem() {
				toolCall(d, c, e)
			}
		case "function_call": // legacy functions API
			protocol.FunctionArgs(d, c, e, "arguments")
		default:
			d.Skip()
		}
	}
}

// toolCall consumes one tool_calls element: a function call's arguments
// (or a custom tool's input) are tool content; its id, type and name are
// the header.
func toolCall(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return
	}
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			return
		}
		switch string(k) {
		case "function":
			protocol.FunctionArgs(d, c, e, "arguments")
		case "custom":
			protocol.FunctionArgs(d, c, e, "input")
		default:
			d.Skip()
		}
	}
}

// contentParts consumes Mistral's array form of delta.content:
// [{"type":"thinking","thinking":[{"type":"text","text":"…"}]}, {"type":"text","text":"…"}].
func contentParts(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	d.Array()
	for d.Elem() {
		if d.Peek() != jsonscan.Object {
			d.Skip()
			continue
		}
		var typ partType
		var text, thinking []byte
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			switch string(k) {
			case "type":
				typ = partTypeOf(d)
			case "text":
				text = protocol.RawStr(d)
			case "thinking":
				// A list of text chunks, or a plain string.
				thinking, _ = d.SkipRaw()
			default:
				d.Skip()
			}
		}
		switch typ {
		case partText:
			protocol.AddContent(c, e, text, protocol.Text)
		case partThinking:
			reasoningTexts(thinking, c, e)
		}
	}
}

type partType uint8

const (
	partOther partType = iota
	partText
	partThinking
)

func partTypeOf(d *jsonscan.Decoder) partType {
	if d.Peek() != jsonscan.String {
		d.Skip()
		return partOther
	}
	v, _ := d.Ident()
	switch string(v) {
	case "text":
		return partText
	case "thinking":
		return partThinking
	}
	return partOther
}

// reasoningTexts treats a thinking value (a string, or a list of
// {"type":"text","text":…} chunks) as reasoning.
func reasoningTexts(raw []byte, c *protocol.Content, e *protocol.Event) {
	d := jsonscan.New(raw)
	switch d.Peek() {
	case jsonscan.String:
		protocol.Str(&d, c, e, protocol.Reasoning)
	case jsonscan.Array:
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
				if string(k) == "text" {
					protocol.Str(&d, c, e, protocol.Reasoning)
				} else {
					d.Skip()
				}
			}
		}
	}
}

// reasoningDetails consumes OpenRouter's delta.reasoning_details:
// [{"type":"reasoning.text","text":…}, {"type":"reasoning.summary","summary":…},
// {"type":"reasoning.encrypted","data":…}]. Encrypted reasoning is
// reasoning the provider does not show, as Anthropic's redacted_thinking
// is (§2 lists both as reasoning).
func reasoningDetails(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Array {
		d.Skip()
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
			k, ok := d.Key()
			if !ok {
				break
			}
			switch string(k) {
			case "text", "summary", "data":
				protocol.Str(d, c, e, protocol.Reasoning)
			default:
				d.Skip()
			}
		}
	}
}

// groqUsage consumes Groq's x_groq object and returns the usage in it.
func groqUsage(d *jsonscan.Decoder) protocol.Usage {
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
		if string(k) == "usage" {
			u = OpenAIUsage(d)
		} else {
			d.Skip()
		}
	}
}

// OpenAIUsage consumes an OpenAI usage object, in its chat form
// (prompt_tokens, completion_tokens, completion_tokens_details.reasoning_tokens)
// or its Responses form (input_tokens, output_tokens,
// output_tokens_details.reasoning_tokens); OpenAI-compatible providers mix
// them. Cached prompt tokens are part of the prompt count already.
func OpenAIUsage(d *jsonscan.Decoder) protocol.Usage {
	var u protocol.Usage
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return u
	}
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "prompt_tokens", "input_tokens":
			u.Input, u.HasInput = protocol.Count(d)
		case "completion_tokens", "output_tokens":
			u.Output, u.HasOutput = protocol.Count(d)
		case "reasoning_tokens":
			u.Reasoning, u.HasReasoning = protocol.Count(d)
		case "completion_tokens_details", "output_tokens_details":
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
				if string(k) == "reasoning_tokens" {
					u.Reasoning, u.HasReasoning = protocol.Count(d)
				} else {
					d.Skip()
				}
			}
		default:
			d.Skip()
		}
	}
	return u
}

// detectChat scores an event for protocol.DetectData: 10 for `[DONE]`, 5
// for a chunk's members (choices, or object chat.completion.chunk,
// chat.completion or text_completion), 2 for an error object with a
// "type" ({"error":{"message","type","param","code"}}).
func detectChat(s *protocol.Shape) int {
	switch {
	case string(s.Data) == "[DONE]":
		return 10
	case s.Has("choices"):
		return 5
	}
	switch string(s.Object) {
	case "chat.completion.chunk", "chat.completion", "text_completion":
		return 5
	}
	if s.NestedError && s.ErrorHas("type") {
		return 2
	}
	return 0
}
