// Package eventstream reads and writes AWS's binary event stream
// (application/vnd.amazon.eventstream), the framing of Bedrock's
// ConverseStream and InvokeModelWithResponseStream responses.
//
// A message is a prelude (total length, headers length, both big-endian
// uint32, and the CRC-32 of those 8 bytes), the headers, the payload and
// the CRC-32 of everything before it. Headers are a name (1-byte length),
// a value type and a typed value; Bedrock sends string headers only
// (:message-type, :event-type, :exception-type, :content-type).
//
// The Reader is written for the relay's hot path rather than taken from
// aws-sdk-go-v2/aws/protocol/eventstream, whose Decoder reads with
// io.ReadFull (it waits for a whole message, so it cannot tell the relay
// when it is about to block) and allocates a Message and its headers per
// frame. This Reader yields a frame the moment its last byte is buffered,
// reads only when no complete frame is buffered, calls OnWait before each
// read (where the relay flushes), and hands out views into its buffer: no
// allocation per frame once the buffer has grown to the largest frame.
// The tests check it against the SDK's encoder and decoder.
package eventstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Sizes of the framing.
const (
	preludeLen = 12 // total length, headers length, prelude CRC
	minFrame   = preludeLen + 4
	// DefaultMaxFrame bounds one message: Bedrock's own limits are 16 MiB
	// of payload and 128 KiB of headers, but its events are a few hundred
	// bytes; a frame past this is refused, not buffered.
	DefaultMaxFrame = 4 << 20
	// maxHeaders is AWS's limit on the headers of one message.
	maxHeaders = 128 << 10
)

// Header value types (the AWS event stream encoding).
const (
	TypeTrue      byte = 0
	TypeFalse     byte = 1
	TypeByte      byte = 2
	TypeShort     byte = 3
	TypeInt       byte = 4
	TypeLong      byte = 5
	TypeBytes     byte = 6
	TypeString    byte = 7
	TypeTimestamp byte = 8
	TypeUUID      byte = 9
)

// Errors a Reader returns. They are wrapped in a *FrameError that says
// where in the stream the frame started.
var (
	ErrPreludeCRC = errors.New("eventstream: prelude CRC mismatch")
	ErrMessageCRC = errors.New("eventstream: message CRC mismatch")
	ErrTooLarge   = errors.New("eventstream: frame larger than the limit")
	ErrMalformed  = errors.New("eventstream: malformed frame")
	// ErrCut is a stream that ended inside a frame.
	ErrCut = errors.New("eventstream: stream ended inside a frame")
)

// FrameError is a frame the Reader could not read. The stream cannot be
// resynchronised after one (a length field is not trusted any more), so
// the Reader returns it from every later call too.
type FrameError struct {
	Offset int64 // stream offset of the frame's first byte
	Err    error // one of the Err… values above
	Detail string
}

func (e *FrameError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("%v at byte %d: %s", e.Err, e.Offset, e.Detail)
	}
	return fmt.Sprintf("%v at byte %d", e.Err, e.Offset)
}

func (e *FrameError) Unwrap() error { return e.Err }

// Message is one frame. Its slices point into the Reader's buffer and are
// valid until the next call to Next.
type Message struct {
	Raw     []byte // the whole frame, prelude to CRC
	Headers []byte // the encoded headers
	Payload []byte
}

// Header returns the value of the first header called name and its type;
// ok is false when there is none. It walks the encoded headers without
// allocating. The headers of a Message from a Reader were checked.
func (m *Message) Header(name string) (typ byte, val []byte, ok bool) {
	h := m.Headers
	for len(h) > 0 {
		n, t, v, rest, err := nextHeader(h)
		if err != nil {
			return 0, nil, false
		}
		if string(n) == name {
			return t, v, true
		}
		h = rest
	}
	return 0, nil, false
}

// String returns the value of the string (or bytes) header called name,
// or nil.
func (m *Message) String(name string) []byte {
	t, v, ok := m.Header(name)
	if !ok || (t != TypeString && t != TypeBytes) {
		return nil
	}
	return v
}

// EachHeader calls f for every header in order, with the raw value (for
// the fixed-size types, its big-endian bytes).
func (m *Message) EachHeader(f func(name []byte, typ byte, val []byte)) {
	h := m.Headers
	for len(h) > 0 {
		n, t, v, rest, err := nextHeader(h)
		if err != nil {
			return
		}
		f(n, t, v)
		h = rest
	}
}

// Parse splits one complete frame (as a Reader yielded it) into its
// parts. It checks the lengths and the headers, not the CRCs, which the
// Reader checked.
func Parse(frame []byte) (Message, error) {
	if len(frame) < minFrame {
		return Message{}, ErrMalformed
	}
	total := int(binary.BigEndian.Uint32(frame[0:4]))
	hlen := int(binary.BigEndian.Uint32(frame[4:8]))
	if total != len(frame) || hlen > total-minFrame {
		return Message{}, ErrMalformed
	}
	h := frame[preludeLen : preludeLen+hlen]
	if checkHeaders(h) != nil {
		return Message{}, ErrMalformed
	}
	return Message{Raw: frame, Headers: h, Payload: frame[preludeLen+hlen : total-4]}, nil
}

// nextHeader decodes the first header of h.
func nextHeader(h []byte) (name []byte, typ byte, val, rest []byte, err error) {
	if len(h) < 2 {
		return nil, 0, nil, nil, errors.New("header cut short")
	}
	nl := int(h[0])
	if nl == 0 {
		return nil, 0, nil, nil, errors.New("empty header name")
	}
	if len(h) < 1+nl+1 {
		return nil, 0, nil, nil, errors.New("header name cut short")
	}
	name, typ, h = h[1:1+nl], h[1+nl], h[2+nl:]
	var n int
	switch typ {
	case TypeTrue, TypeFalse:
		n = 0
	case TypeByte:
		n = 1
	case TypeShort:
		n = 2
	case TypeInt:
		n = 4
	case TypeLong, TypeTimestamp:
		n = 8
	case TypeUUID:
		n = 16
	case TypeBytes, TypeString:
		if len(h) < 2 {
			return nil, 0, nil, nil, errors.New("header value length cut short")
		}
		n = int(binary.BigEndian.Uint16(h))
		h = h[2:]
	default:
		return nil, 0, nil, nil, fmt.Errorf("unknown header value type %d", typ)
	}
	if len(h) < n {
		return nil, 0, nil, nil, errors.New("header value cut short")
	}
	return name, typ, h[:n], h[n:], nil
}

// checkHeaders reports whether h is a well-formed run of headers.
func checkHeaders(h []byte) error {
	for len(h) > 0 {
		_, _, _, rest, err := nextHeader(h)
		if err != nil {
			return err
		}
		h = rest
	}
	return nil
}

var crcTable = crc32.MakeTable(crc32.IEEE)

// Reader reads messages incrementally from an io.Reader. It calls Read
// only when no complete message is buffered and never waits to fill its
// buffer, so each message is yielded as soon as its last byte arrives.
type Reader struct {
	r   io.Reader
	max int

	buf   []byte // buffered bytes; buf[start:] is not yet yielded
	start int
	off   int64 // stream offset of buf[0]
	err   error // sticky: io.EOF, the underlying reader's error, or a *FrameError

	msg    Message
	onWait func()
}

// initialBuffer is a Reader's first buffer; Bedrock's events are a few
// hundred bytes, and the buffer doubles (up to the frame limit) for larger.
const initialBuffer = 1024

// NewReader returns a Reader of r; maxFrame bounds one message (zero or
// less: DefaultMaxFrame).
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	maxFrame = max(maxFrame, minFrame)
	return &Reader{r: r, max: maxFrame, buf: make([]byte, 0, min(initialBuffer, maxFrame))}
}

// OnWait sets a function the Reader calls before each Read of the
// underlying reader, the only place it may block.
func (r *Reader) OnWait(f func()) { r.onWait = f }

// Buffered returns the bytes read but not yet yielded as a message: at an
// error, the part of a frame that was cut or refused.
func (r *Reader) Buffered() int { return len(r.buf) - r.start }

// Next returns the next message. At the clean end of the stream (at a
// frame boundary) it returns io.EOF; a stream that ends inside a frame
// returns a *FrameError wrapping ErrCut (or, when the underlying reader
// failed, that reader's error); a bad frame returns a *FrameError. The
// returned message is reused by the next call.
func (r *Reader) Next() (*Message, error) {
	for {
		if r.err != nil {
			if _, ok := r.err.(*FrameError); ok {
				return nil, r.err
			}
		}
		m, need, err := r.frame()
		if err != nil {
			r.err = err
			return nil, err
		}
		if m != nil {
			return m, nil
		}
		if r.err != nil {
			if r.err == io.EOF && r.start < len(r.buf) {
				r.err = &FrameError{Offset: r.off + int64(r.start), Err: ErrCut,
					Detail: fmt.Sprintf("%d of %d bytes", len(r.buf)-r.start, need)}
			}
			return nil, r.err
		}
		r.fill(need)
	}
}

// frame returns the complete message at start, or nil and how many bytes
// the frame needs (at least) when it is not complete.
func (r *Reader) frame() (*Message, int, error) {
	b := r.buf[r.start:]
	if len(b) < preludeLen {
		return nil, preludeLen, nil
	}
	total := int(binary.BigEndian.Uint32(b[0:4]))
	hlen := int(binary.BigEndian.Uint32(b[4:8]))
	at := r.off + int64(r.start)
	if crc32.Checksum(b[:8], crcTable) != binary.BigEndian.Uint32(b[8:12]) {
		return nil, 0, &FrameError{Offset: at, Err: ErrPreludeCRC}
	}
	switch {
	case total < minFrame || hlen > total-minFrame:
		return nil, 0, &FrameError{Offset: at, Err: ErrMalformed, Detail: fmt.Sprintf("length %d with %d bytes of headers", total, hlen)}
	case total > r.max:
		return nil, 0, &FrameError{Offset: at, Err: ErrTooLarge, Detail: fmt.Sprintf("%d bytes, limit %d", total, r.max)}
	case hlen > maxHeaders:
		return nil, 0, &FrameError{Offset: at, Err: ErrTooLarge, Detail: fmt.Sprintf("%d bytes of headers", hlen)}
	}
	if len(b) < total {
		return nil, total, nil
	}
	f := b[:total]
	if crc32.Checksum(f[:total-4], crcTable) != binary.BigEndian.Uint32(f[total-4:]) {
		return nil, 0, &FrameError{Offset: at, Err: ErrMessageCRC}
	}
	h := f[preludeLen : preludeLen+hlen]
	if err := checkHeaders(h); err != nil {
		return nil, 0, &FrameError{Offset: at, Err: ErrMalformed, Detail: err.Error()}
	}
	r.start += total
	r.msg = Message{Raw: f, Headers: h, Payload: f[preludeLen+hlen : total-4]}
	return &r.msg, 0, nil
}

// fill reads once into the buffer, which it first compacts or grows so
// that need bytes from start fit.
func (r *Reader) fill(need int) {
	if r.start > 0 && (r.start == len(r.buf) || r.start+need > cap(r.buf)) {
		n := copy(r.buf, r.buf[r.start:])
		r.buf = r.buf[:n]
		r.off += int64(r.start)
		r.start = 0
	}
	if need > cap(r.buf) || len(r.buf) == cap(r.buf) {
		// need is at most max (frame checked it); grow to fit it, doubling.
		nc := max(need, min(2*cap(r.buf), r.max))
		nb := make([]byte, len(r.buf), nc)
		copy(nb, r.buf)
		r.buf = nb
	}
	if r.onWait != nil {
		r.onWait()
	}
	for range 100 {
		n, err := r.r.Read(r.buf[len(r.buf):cap(r.buf)])
		if n < 0 || n > cap(r.buf)-len(r.buf) {
			n, err = 0, errors.New("eventstream: reader returned an invalid count")
		}
		r.buf = r.buf[:len(r.buf)+n]
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// Header is one header to encode.
type Header struct {
	Name  string
	Value string // a string header (TypeString), the only type Bedrock sends
}

// Append appends the frame of a message with string headers and payload.
func Append(dst []byte, headers []Header, payload []byte) []byte {
	hlen := 0
	for _, h := range headers {
		hlen += 1 + len(h.Name) + 1 + 2 + len(h.Value)
	}
	total := minFrame + hlen + len(payload)
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, uint32(hlen))
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:start+8], crcTable))
	for _, h := range headers {
		dst = append(dst, byte(len(h.Name)))
		dst = append(dst, h.Name...)
		dst = append(dst, TypeString)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.Value)))
		dst = append(dst, h.Value...)
	}
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// AppendEvent appends an event message (:message-type event) of the
// given :event-type with a JSON payload, as Bedrock sends them.
func AppendEvent(dst []byte, eventType string, payload []byte) []byte {
	return Append(dst, []Header{
		{":event-type", eventType},
		{":content-type", "application/json"},
		{":message-type", "event"},
	}, payload)
}

// AppendException appends an exception message (:message-type exception)
// of the given :exception-type with a JSON payload ({"message":"…"}).
func AppendException(dst []byte, exceptionType string, payload []byte) []byte {
	return Append(dst, []Header{
		{":exception-type", exceptionType},
		{":content-type", "application/json"},
		{":message-type", "exception"},
	}, payload)
}
