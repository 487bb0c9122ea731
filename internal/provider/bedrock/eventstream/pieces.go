package eventstream

import (
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/ttfx/ttfx/internal/sse"
)

// Pieces reads frames as the pieces the relay and the classifier take
// from an SSE stream: each frame is one sse.PieceEvent whose Raw is the
// whole frame (relayed byte for byte), whose Event.Type is its
// :event-type (or, for an exception, its :exception-type) and whose
// Event.Data is its payload.
type Pieces struct {
	r *Reader
	p sse.Piece
}

// NewPieces returns a piece reader of r; maxFrame bounds one frame.
func NewPieces(r io.Reader, maxFrame int) *Pieces { return &Pieces{r: NewReader(r, maxFrame)} }

// OnWait sets the function called before each read of the body.
func (p *Pieces) OnWait(f func()) { p.r.OnWait(f) }

// Reader returns the frame reader underneath.
func (p *Pieces) Reader() *Reader { return p.r }

// Next returns the next frame as a piece; errors are the Reader's.
func (p *Pieces) Next() (*sse.Piece, error) {
	m, err := p.r.Next()
	if err != nil {
		return nil, err
	}
	typ := m.String(":event-type")
	if typ == nil {
		typ = m.String(":exception-type")
	}
	p.p = sse.Piece{Kind: sse.PieceEvent, Raw: m.Raw, Event: sse.Event{Type: typ, Data: m.Payload}}
	return &p.p, nil
}

// Sniff reports whether b starts with an event-stream frame's prelude (its
// CRC matches), and whether that first frame, when complete, is an
// InvokeModelWithResponseStream `chunk` (Anthropic events inside) rather
// than a Converse event.
func Sniff(b []byte) (isStream, chunks bool) {
	if len(b) < preludeLen || crc32.Checksum(b[:8], crcTable) != binary.BigEndian.Uint32(b[8:12]) {
		return false, false
	}
	total := int(binary.BigEndian.Uint32(b[0:4]))
	if total > len(b) {
		return true, false
	}
	m, err := Parse(b[:total])
	return true, err == nil && string(m.String(":event-type")) == "chunk"
}
