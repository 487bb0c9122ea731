package protocol

import "github.com/ttfx/ttfx/internal/jsonscan"

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
func chatEvent(c *content, e *event, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && unknown(e)
	}
	d.Object()
	known := false
	choices := -1 // absent
	var usage, groq, inChoice Usage
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
			usage = openAIUsage(&d)
		case "x_groq":
			groq = groqUsage(&d)
		case "error":
			if code, isErr := errorValue(&d); isErr {
				e.kinds |= Error
				e.errCode = code
				stringErr = code == nil
			}
		case "error_type":
			errType = rawStr(&d)
		case "object":
			known = true
			if v := rawStr(&d); string(v) == "error" {
				objectErr = true
			}
		case "type":
			topType = rawStr(&d)
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
		e.kinds |= Error
		if e.errCode == nil {
			e.errCode = stringErrorCode(errType, topType)
		}
	}
	if !usage.any() {
		usage = inChoice
	}
	if !usage.any() {
		usage = groq
	}
	e.report(usage)
	if usage.any() && choices <= 0 {
		e.usageOnly = true
	}
	if !known && e.kinds == 0 {
		return unknown(e)
	}
	return true
}

// unknown marks a well-formed event nobody recognises; it returns true so
// that callers can write `return unknown(e)` for a valid walk.
func unknown(e *event) bool {
	e.kinds |= Unknown
	return true
}

// chatChoice consumes one element of choices. Moonshot (Kimi) puts the
// usage inside the finishing choice (choices[].usage); it is stored in *u
// and counts when the chunk has no top-level usage.
func chatChoice(d *jsonscan.Decoder, c *content, e *event, u *Usage) {
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
			idx, _ = count(d)
		case "usage":
			if v := openAIUsage(d); v.any() {
				*u = v
			}
		case "delta", "message":
			chatDelta(d, c, e)
		case "text": // legacy /v1/completions
			str(d, c, e, Text)
		case "finish_reason":
			// A repeated key counts with its last value, as in
			// encoding/json: "stop" then null is no finish.
			finish = rawStr(d)
		default:
			d.Skip()
		}
	}
	e.seen.add(idx)
	if len(finish) > 0 {
		e.kinds |= Done
		e.finished.add(idx)
		e.setFinish(idx, finish)
	}
}

// chatDelta consumes a delta (or a non-streaming message).
func chatDelta(d *jsonscan.Decoder, c *content, e *event) {
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
				str(d, c, e, Text)
			}
		case "refusal":
			str(d, c, e, Text)
		case "reasoning_content", "reasoning", "thinking":
			str(d, c, e, Reasoning)
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
			functionArgs(d, c, e, "arguments")
		default:
			d.Skip()
		}
	}
}

// toolCall consumes one tool_calls element: a function call's arguments
// (or a custom tool's input) are tool content; its id, type and name are
// the header.
func toolCall(d *jsonscan.Decoder, c *content, e *event) {
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
			functionArgs(d, c, e, "arguments")
		case "custom":
			functionArgs(d, c, e, "input")
		default:
			d.Skip()
		}
	}
}

// functionArgs consumes an object whose member named field holds argument
// text. Some OpenAI-compatible servers send the arguments as a JSON object
// instead of a string ("arguments":{"city":"Paris"}): a non-empty object is
// tool content too, an empty one ({}) is the call's header.
func functionArgs(d *jsonscan.Decoder, c *content, e *event, field string) {
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
		switch {
		case string(k) != field:
			d.Skip()
		case d.Peek() == jsonscan.Object:
			if nonEmptyObject(d) {
				e.kinds |= Tool
			}
		default:
			str(d, c, e, Tool)
		}
	}
}

// contentParts consumes Mistral's array form of delta.content:
// [{"type":"thinking","thinking":[{"type":"text","text":"…"}]}, {"type":"text","text":"…"}].
func contentParts(d *jsonscan.Decoder, c *content, e *event) {
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
				text = rawStr(d)
			case "thinking":
				// A list of text chunks, or a plain string.
				thinking, _ = d.SkipRaw()
			default:
				d.Skip()
			}
		}
		switch typ {
		case partText:
			addContent(c, e, text, Text)
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
func reasoningTexts(raw []byte, c *content, e *event) {
	d := jsonscan.New(raw)
	switch d.Peek() {
	case jsonscan.String:
		str(&d, c, e, Reasoning)
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
					str(&d, c, e, Reasoning)
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
func reasoningDetails(d *jsonscan.Decoder, c *content, e *event) {
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
				str(d, c, e, Reasoning)
			default:
				d.Skip()
			}
		}
	}
}

// groqUsage consumes Groq's x_groq object and returns the usage in it.
func groqUsage(d *jsonscan.Decoder) Usage {
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
		if string(k) == "usage" {
			u = openAIUsage(d)
		} else {
			d.Skip()
		}
	}
}
