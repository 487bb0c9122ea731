package protocol

import (
	"fmt"

	"github.com/ttfx/ttfx/internal/jsonscan"
)

// ResponseInfo is what a complete, non-streaming response body carried.
type ResponseInfo struct {
	// Kinds holds Text, Reasoning and Tool for the content the body had
	// (non-whitespace only), Done when it gave a finish/stop reason or a
	// completed status, Error for an error object or a failed status, and
	// Metadata for a usage report.
	Kinds Kind
	// Text is set when the body had non-whitespace visible text.
	Text bool
	// Effective is set when it had text, reasoning or a tool call with
	// arguments.
	Effective bool
	// Usage is the provider's usage report; FinishReason its finish/stop
	// reason (or a Responses status).
	Usage        Usage
	FinishReason string
	// Error is set for an error body or a failed response; ErrorCode is its
	// type or code (never its message).
	Error     bool
	ErrorCode string
	// Tokens are the §3 counts, visible tokens from the usage or estimated
	// over the body's visible text.
	Tokens Tokens
}

// ParseResponse reads a complete JSON response body of api: chat.completion,
// text_completion or an embeddings list (openai.chat), a Responses response
// object, an Anthropic message, a Gemini GenerateContentResponse — or the
// API's error body. It fails only for a body that is not a JSON object of
// that API.
func ParseResponse(api API, body []byte) (ResponseInfo, error) {
	var c content
	var e event
	ok := false
	switch api {
	case OpenAIChat:
		ok = chatEvent(&c, &e, trimSpace(body))
	case OpenAIResponses:
		d := jsonscan.New(body)
		valid, shaped := responseObject(&d, &c, &e, true)
		ok = valid && d.End()
		if !shaped {
			// `{}`, a chat.completion, anything without the response
			// object's shape: not a Responses body.
			e.kinds |= Unknown
		}
	case Anthropic:
		ok = anthropicMessage(&c, &e, body)
	case Gemini:
		ok = geminiEvent(&c, &e, body)
	default:
		return ResponseInfo{}, fmt.Errorf("parse response: unknown api %q", api)
	}
	if !ok {
		return ResponseInfo{}, fmt.Errorf("parse %s response: not valid JSON (%d bytes)", api, len(body))
	}
	if e.kinds&Unknown != 0 {
		return ResponseInfo{}, fmt.Errorf("parse %s response: not a %s response body", api, api)
	}
	c.usage.merge(e.usage)
	c.sawText = e.kinds&Text != 0
	c.sawReasoning = e.kinds&Reasoning != 0
	c.sawTool = e.kinds&Tool != 0
	return ResponseInfo{
		Kinds:        e.kinds,
		Text:         e.kinds&Text != 0,
		Effective:    e.kinds&(Text|Reasoning|Tool) != 0,
		Usage:        c.usage,
		FinishReason: string(unescape(nil, e.finish)),
		Error:        e.kinds&Error != 0,
		ErrorCode:    string(unescape(nil, e.errCode)),
		Tokens:       c.tokens(true),
	}, nil
}

// anthropicMessage reads a non-streaming Messages body ({"type":"message",
// "content":[blocks], "stop_reason", "usage"}) or an error body
// ({"type":"error","error":{…}}).
func anthropicMessage(c *content, e *event, body []byte) bool {
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
			stop = rawStr(&d) // the last one counts
		case "usage":
			e.report(anthropicUsage(&d))
		case "error":
			if code, isErr := errorValue(&d); isErr {
				e.kinds |= Error
				e.errCode = code
			}
		case "error_type":
			errType = rawStr(&d)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if e.kinds&Error != 0 && e.errCode == nil {
		e.errCode = stringErrorCode(errType)
	}
	if len(stop) > 0 {
		e.kinds |= Done
		e.finish = stop
	}
	switch t {
	case antMessage:
	case antError:
		if e.kinds&Error == 0 {
			e.kinds |= Error
			e.errCode = errorWord
		}
	default:
		if e.kinds == 0 {
			e.kinds |= Unknown
		}
	}
	return true
}
