package eventstream

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/sse"
)

// SSEPieces reads an InvokeModelWithResponseStream response of an
// Anthropic model and yields each event inside it as the SSE event it is:
// a `chunk` message's payload is {"bytes":"<base64 of an Anthropic stream
// event>"}, and the piece's Raw is "event: <type>\ndata: <event>\n\n",
// yielded the moment the frame carrying it is complete. An exception
// message becomes Anthropic's `event: error` (its :exception-type mapped
// to the Anthropic error type an SDK raises). Bedrock adds
// "amazon-bedrock-invocationMetrics" to message_stop; it is passed on, as
// Bedrock's own SDKs pass it on.
type SSEPieces struct {
	r   *Reader
	p   sse.Piece
	buf []byte // the SSE bytes of the current piece
	dec []byte // the decoded event
}

// NewSSEPieces returns an SSE piece reader of r; maxFrame bounds one frame.
func NewSSEPieces(r io.Reader, maxFrame int) *SSEPieces {
	return &SSEPieces{r: NewReader(r, maxFrame)}
}

// OnWait sets the function called before each read of the body.
func (p *SSEPieces) OnWait(f func()) { p.r.OnWait(f) }

// ErrNotChunk is a frame of an InvokeModelWithResponseStream response that
// is neither a chunk nor an exception, or a chunk whose payload is not
// {"bytes":"<base64>"}.
var ErrNotChunk = errors.New("eventstream: not a chunk of an Anthropic event")

// Next returns the next event. A frame that is no chunk is yielded as an
// sse.PieceSkipped piece with its Raw empty (nothing of it reaches the
// client); reading errors are the Reader's.
func (p *SSEPieces) Next() (*sse.Piece, error) {
	m, err := p.r.Next()
	if err != nil {
		return nil, err
	}
	switch string(m.String(":message-type")) {
	case "exception", "error":
		typ := m.String(":exception-type")
		if typ == nil {
			typ = m.String(":error-code")
		}
		return p.errorEvent(typ, m.Payload), nil
	}
	if string(m.String(":event-type")) != "chunk" {
		p.p = sse.Piece{Kind: sse.PieceSkipped}
		return &p.p, nil
	}
	data, ok := decodeChunk(p.dec, m.Payload)
	p.dec = data
	if !ok {
		p.p = sse.Piece{Kind: sse.PieceSkipped}
		return &p.p, nil
	}
	for i, c := range data {
		// One data line: a line break outside a JSON string is
		// whitespace (inside one it is escaped).
		if c == '\n' || c == '\r' {
			data[i] = ' '
		}
	}
	return p.event(eventType(data), data), nil
}

// event builds the SSE piece of one event of type typ.
func (p *SSEPieces) event(typ, data []byte) *sse.Piece {
	b := p.buf[:0]
	if len(typ) > 0 {
		b = append(append(append(b, "event: "...), typ...), '\n')
	}
	b = append(b, "data: "...)
	ds := len(b)
	b = append(b, data...)
	de := len(b)
	b = append(b, "\n\n"...)
	p.buf = b
	var t []byte
	if len(typ) > 0 {
		t = b[len("event: ") : len("event: ")+len(typ)]
	}
	p.p = sse.Piece{Kind: sse.PieceEvent, Raw: b, Event: sse.Event{Type: t, Data: b[ds:de]}}
	return &p.p
}

// errorEvent is Anthropic's error event for a Bedrock exception.
func (p *SSEPieces) errorEvent(exception, payload []byte) *sse.Piece {
	var body struct {
		Message string `json:"message"`
	}
	json.Unmarshal(payload, &body)
	if body.Message == "" {
		body.Message = string(exception)
	}
	ev, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error", Error: struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{AnthropicErrorType(string(exception)), body.Message}})
	return p.event([]byte("error"), ev)
}

// AnthropicErrorType is the Anthropic error type of a Bedrock exception,
// as Anthropic's SDKs tell them apart.
func AnthropicErrorType(exception string) string {
	switch exception {
	case "throttlingException", "ThrottlingException":
		return "rate_limit_error"
	case "serviceUnavailableException", "ServiceUnavailableException", "modelNotReadyException":
		return "overloaded_error"
	case "validationException", "ValidationException":
		return "invalid_request_error"
	}
	return "api_error"
}

// chunkBytes returns the base64 "bytes" of a chunk payload.
func chunkBytes(payload []byte) ([]byte, bool) {
	d := jsonscan.New(payload)
	if !d.Object() {
		return nil, false
	}
	var out []byte
	found := false
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		if string(k) == "bytes" {
			if out, found = d.Str(); !found {
				return nil, false
			}
		} else if !d.Skip() {
			return nil, false
		}
	}
	return out, found && d.End()
}

// eventType returns the top-level "type" of an Anthropic event, or nil.
func eventType(data []byte) []byte {
	d := jsonscan.New(data)
	if !d.Object() {
		return nil
	}
	for {
		k, ok := d.Key()
		if !ok {
			return nil
		}
		if string(k) == "type" {
			if t, ok := d.Str(); ok && isToken(t) {
				return t
			}
			return nil
		}
		if !d.Skip() {
			return nil
		}
	}
}

// isToken reports whether t may stand on an SSE event line as it is.
func isToken(t []byte) bool {
	for _, c := range t {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return len(t) > 0
}
