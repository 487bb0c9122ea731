package eventstream

import (
	"bytes"
	"encoding/base64"
	"io"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/sse"
)

// ChunkPieces reads an InvokeModelWithResponseStream response for a client
// of InvokeModel itself, who gets the frames as they are: each frame is one
// piece whose Raw is the whole frame (relayed byte for byte) and whose
// Event is what the classifier reads. For a `chunk` message that is the
// model's event inside it: Data the decoded "bytes", Type its top-level
// "type" when it has one (an Anthropic event's), nil otherwise (the other
// model families' events name no type). For an exception it is the
// :exception-type and the payload; for any other frame, or a chunk whose
// payload is not {"bytes":"<base64>"}, the :event-type and the payload as
// sent.
type ChunkPieces struct {
	r   *Reader
	p   sse.Piece
	dec []byte // the decoded event of the current chunk
}

// NewChunkPieces returns a piece reader of r; maxFrame bounds one frame.
func NewChunkPieces(r io.Reader, maxFrame int) *ChunkPieces {
	return &ChunkPieces{r: NewReader(r, maxFrame)}
}

// OnWait sets the function called before each read of the body.
func (p *ChunkPieces) OnWait(f func()) { p.r.OnWait(f) }

// Next returns the next frame as a piece; errors are the Reader's.
func (p *ChunkPieces) Next() (*sse.Piece, error) {
	m, err := p.r.Next()
	if err != nil {
		return nil, err
	}
	typ, data := m.String(":event-type"), m.Payload
	switch string(m.String(":message-type")) {
	case "exception":
		typ = m.String(":exception-type")
	case "error":
		typ = m.String(":error-code")
	default:
		if string(typ) == "chunk" {
			if dec, ok := p.decode(m.Payload); ok {
				typ, data = eventType(dec), dec
			}
		}
	}
	p.p = sse.Piece{Kind: sse.PieceEvent, Raw: m.Raw, Event: sse.Event{Type: typ, Data: data}}
	return &p.p, nil
}

// decode returns the decoded "bytes" of a chunk payload, in p's buffer.
func (p *ChunkPieces) decode(payload []byte) ([]byte, bool) {
	var ok bool
	p.dec, ok = decodeChunk(p.dec, payload)
	return p.dec, ok
}

// decodeChunk decodes the base64 "bytes" of a chunk payload into buf
// (grown when short) and returns the event.
func decodeChunk(buf, payload []byte) ([]byte, bool) {
	b64, ok := chunkBytes(payload)
	if !ok {
		return buf[:0], false
	}
	if bytes.IndexByte(b64, '\\') >= 0 {
		// An encoder that escaped "/" as "\/".
		b64 = jsonscan.AppendUnescaped(nil, b64)
	}
	n := base64.StdEncoding.DecodedLen(len(b64))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(buf[:n], b64)
	if err != nil {
		return buf[:0], false
	}
	return buf[:n], true
}
