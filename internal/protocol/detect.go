package protocol

import (
	"bytes"
	"io"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/sse"
)

// DetectEvent guesses the API of a stream from one dispatched event. It
// reports false when the event does not tell (a heartbeat, or an error
// object that several APIs share the shape of); keep feeding events.
func DetectEvent(ev *sse.Event) (API, bool) { return DetectData(ev.Type, ev.Data) }

// DetectData is DetectEvent for an event's type and data:
//   - `[DONE]`, or an object with choices or object "chat.completion.chunk"
//     / "text_completion" is openai.chat;
//   - a type that starts with "response." (or "keepalive") is
//     openai.responses;
//   - the Anthropic event types (message_start, content_block_*, ping,
//     message_delta, message_stop) are anthropic; an "error" event is
//     openai.responses when it has a sequence_number (every Responses
//     event has one, no Anthropic event does) or the code and message at
//     the top, and anthropic when it nests an error object
//     ({"type":"error","error":{…}}) without a sequence_number;
//   - candidates, usageMetadata or promptFeedback is gemini;
//   - a bare {"error":{…}} is gemini when the error has a "status" (Google's
//     {code, message, status}) and openai.chat when it has a "type".
func DetectData(typ, data []byte) (API, bool) {
	data = trimSpace(data)
	if string(data) == "[DONE]" {
		return OpenAIChat, true
	}
	var (
		t            [48]byte
		tn           = -1
		nestedError  bool
		errStatus    bool
		errType      bool
		chatShape    bool
		geminiShape  bool
		topLevelCode bool
		sequence     bool // sequence_number: Responses only
	)
	d := jsonscan.New(data)
	if d.Peek() == jsonscan.Object {
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			switch string(k) {
			case "type":
				if v := rawStr(&d); v != nil && len(v) <= len(t) {
					tn = copy(t[:], v)
				}
			case "choices":
				chatShape = true
				d.Skip()
			case "object":
				switch string(rawStr(&d)) {
				case "chat.completion.chunk", "chat.completion", "text_completion":
					chatShape = true
				}
			case "candidates", "usageMetadata", "promptFeedback":
				geminiShape = true
				d.Skip()
			case "code", "message":
				topLevelCode = true
				d.Skip()
			case "sequence_number":
				sequence = true
				d.Skip()
			case "error":
				if d.Peek() != jsonscan.Object {
					d.Skip()
					continue
				}
				nestedError = true
				d.Object()
				for {
					k, ok := d.Key()
					if !ok {
						break
					}
					switch string(k) {
					case "status":
						errStatus = true
					case "type":
						errType = true
					}
					d.Skip()
				}
			default:
				d.Skip()
			}
		}
	}
	name := typ
	if tn >= 0 {
		name = t[:tn]
	}
	switch {
	case bytes.HasPrefix(name, []byte("response.")), string(name) == "keepalive":
		return OpenAIResponses, true
	case string(name) == "error" && sequence:
		return OpenAIResponses, true
	case string(name) == "error" && nestedError:
		return Anthropic, true
	case string(name) == "error" && topLevelCode:
		return OpenAIResponses, true
	}
	switch antTypeOf(name) {
	case antPing, antMessageStart, antBlockStart, antBlockDelta, antBlockStop, antMessageDelta, antMessageStop:
		return Anthropic, true
	}
	switch {
	case chatShape:
		return OpenAIChat, true
	case geminiShape:
		return Gemini, true
	case nestedError && errStatus:
		return Gemini, true
	case nestedError && errType:
		return OpenAIChat, true
	}
	return "", false
}

// Detect guesses the API of a recorded stream from its first events that
// tell (see DetectData).
func Detect(stream []byte) (API, bool) {
	r := sse.NewReader(bytes.NewReader(stream), 0)
	for {
		p, err := r.Next()
		if err == io.EOF || err != nil {
			return "", false
		}
		if p.Kind != sse.PieceEvent {
			continue
		}
		if api, ok := DetectEvent(&p.Event); ok {
			return api, true
		}
	}
}
