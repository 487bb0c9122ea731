// Package sse reads and writes the text/event-stream format (WHATWG HTML,
// "Server-sent events", §9.2.6 interpreting an event stream).
//
// The Reader is incremental and yields every byte it reads in exactly one
// Piece: a dispatched event with the exact bytes that made it, or the comment
// and blank lines between events, or bytes it could not make sense of. A relay
// can therefore forward each piece's Raw bytes unchanged the moment it is
// yielded, and classify events on the way, without adding delay: a client acts
// on an event only once its blank line arrives, which is exactly when the
// Reader yields it.
package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
)

// DefaultMaxEventBytes bounds the bytes a Reader buffers for one line or one
// event. Real tool-call and image events exceed bufio.Scanner's 64 KiB, so
// the default is generous; past it the bytes are yielded as PieceMalformed.
const DefaultMaxEventBytes = 4 << 20

// PieceKind says what a Piece holds.
type PieceKind uint8

const (
	// PieceEvent is a dispatched event: its field lines and the blank line
	// that ended it (or the end of the stream, see Reader).
	PieceEvent PieceKind = iota + 1
	// PieceComment is comment lines and blank lines outside any event.
	PieceComment
	// PieceSkipped is a block that ended without a data field (only
	// `event:`, `id:` or `retry:` lines): the standard dispatches nothing.
	PieceSkipped
	// PieceMalformed is bytes of a line or event longer than the Reader's
	// limit, up to and including the blank line that ends that block.
	PieceMalformed
	// PieceIncomplete is what was buffered when the underlying reader
	// failed with an error other than io.EOF: a block that never ended.
	PieceIncomplete
)

var kindNames = [...]string{"", "event", "comment", "skipped", "malformed", "incomplete"}

func (k PieceKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "PieceKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one dispatched event. Its byte slices point into the Reader's
// buffer and are valid only until the next call to Next.
type Event struct {
	// Type is the value of the last `event:` field; empty means "message".
	Type []byte
	// Data is the data buffer: the values of the `data:` fields joined by
	// LF, without the final LF. It may be empty (a lone `data:` line is
	// dispatched with empty data, as browsers do).
	Data []byte
	// ID is the event's own `id:` field, when HasID is set. The stream's
	// last event id, which persists across events, is Reader.LastEventID.
	ID    []byte
	HasID bool
	// Retry is the reconnection time in milliseconds when HasRetry is set.
	Retry    int64
	HasRetry bool
}

// Piece is one yielded part of the stream.
type Piece struct {
	Kind PieceKind
	// Raw is the exact bytes of the stream this piece covers, valid only
	// until the next call to Next.
	Raw []byte
	// Event is set for PieceEvent.
	Event Event
}

// ErrTooLong marks the error a Reader records (see Reader.Malformed) when a
// line or event passes its limit.
var ErrTooLong = errors.New("sse: line or event too long")

// Reader parses an event stream incrementally from an io.Reader. It calls
// Read only when it has no complete piece buffered, and never waits to fill
// its buffer, so each piece is yielded as soon as its last byte arrives.
type Reader struct {
	r   io.Reader
	max int

	buf   []byte // buffered bytes; buf[start:] is not yet yielded
	start int    // first byte of the piece being built
	pos   int    // first byte not yet scanned into lines
	err   error  // sticky error from r (io.EOF included)

	atStart   bool // no byte of the stream seen yet (for the BOM)
	skipLF    bool // the last line ended with a CR at the end of the buffer: a following LF belongs to it
	discard   bool // inside a malformed block: yield bytes until a blank line
	lineEmpty bool // in discard mode: the current line has no bytes yet

	// The block being built, as offsets relative to start.
	inBlock  bool // a field line was seen since the last dispatch
	nData    int  // data fields in the block
	dataOff  int  // single data value: offset and length
	dataLen  int
	typOff   int
	typLen   int // -1: no event field
	idOff    int
	idLen    int // -1: no id field
	retry    int64
	hasRetry bool
	dataBuf  []byte // data of a block with several data fields

	lastID []byte

	piece     Piece
	malformed int // pieces yielded as PieceMalformed

	onWait func() // called before each Read of r, which may block
}

// initialBuffer is a Reader's first buffer, which doubles (up to the event
// limit) when an event does not fit. A relayed stream holds it for its
// whole life: chat chunks are a few hundred bytes, so 1 KiB rather than
// 4 KiB is 3 KiB less per open stream (issue 15), and a stream of larger
// events pays one or two copies as it grows.
const initialBuffer = 1024

// NewReader returns a Reader of r. maxEventBytes bounds one line or event;
// zero or less means DefaultMaxEventBytes.
func NewReader(r io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	initial := initialBuffer
	if initial > maxEventBytes {
		initial = maxEventBytes
	}
	return &Reader{r: r, max: maxEventBytes, buf: make([]byte, 0, initial), atStart: true, typLen: -1, idLen: -1}
}

// OnWait sets a function the Reader calls before each Read of the
// underlying reader — the only place it may block. A relay flushes there:
// events that arrived together are written out together, and nothing is
// held while the Reader waits for more.
func (r *Reader) OnWait(f func()) { r.onWait = f }

// LastEventID returns the stream's last event id buffer (the standard's
// "last event ID"), valid until the next call to Next.
func (r *Reader) LastEventID() []byte { return r.lastID }

// Malformed returns how many PieceMalformed pieces the Reader has yielded.
func (r *Reader) Malformed() int { return r.malformed }

// Next returns the next piece of the stream. At the end of the stream it
// returns io.EOF; when the underlying reader fails it first yields what was
// buffered as PieceIncomplete and then returns that error. The returned
// piece is reused by the next call.
//
// Leniency: at io.EOF, a final line without a line end is still a line, and
// a block with data but without its blank line is still dispatched, as the
// providers' official SDK decoders do. A line cut in the middle
// therefore yields an event whose data does not parse, not a lost event.
func (r *Reader) Next() (*Piece, error) {
	for {
		if p := r.scan(); p != nil {
			return p, nil
		}
		if r.err != nil {
			return r.finish()
		}
		r.fill()
	}
}

// fill reads once from r into the buffer, growing or compacting it first.
func (r *Reader) fill() {
	if r.start > 0 && (r.start == len(r.buf) || len(r.buf) == cap(r.buf)) {
		n := copy(r.buf, r.buf[r.start:])
		r.buf = r.buf[:n]
		r.pos -= r.start
		r.start = 0
	}
	if len(r.buf) == cap(r.buf) {
		// The pending piece fills the buffer; the caller's limit check in
		// scan keeps it from passing max, so growing stays bounded.
		newCap := 2 * cap(r.buf)
		if newCap > r.max+1 {
			newCap = r.max + 1
		}
		if newCap <= cap(r.buf) {
			newCap = cap(r.buf) + 4096
		}
		nb := make([]byte, len(r.buf), newCap)
		copy(nb, r.buf)
		r.buf = nb
	}
	if r.onWait != nil {
		r.onWait()
	}
	n, err := r.r.Read(r.buf[len(r.buf):cap(r.buf)])
	if n < 0 || n > cap(r.buf)-len(r.buf) {
		n, err = 0, errors.New("sse: reader returned an invalid count")
	}
	r.buf = r.buf[:len(r.buf)+n]
	if err != nil {
		r.err = err
	} else if n == 0 {
		// A reader that returns 0, nil is allowed to; try again, but do not spin forever.
		r.zeroReads()
	}
}

func (r *Reader) zeroReads() {
	// io.Reader says callers should treat 0, nil as nothing happened;
	// io.ReadFull and bufio give up after a bounded number. So do we.
	for i := 0; i < 100; i++ {
		n, err := r.r.Read(r.buf[len(r.buf):cap(r.buf)])
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

// scan processes complete lines from pos and returns a piece when one is
// complete, or nil when more bytes are needed.
func (r *Reader) scan() *Piece {
	if r.atStart && len(r.buf)-r.pos > 0 {
		// A leading U+FEFF is ignored for parsing; its bytes stay in Raw.
		const bom = "\xEF\xBB\xBF"
		avail := r.buf[r.pos:]
		if len(avail) < len(bom) && bytes.HasPrefix([]byte(bom), avail) && r.err == nil {
			return nil // not yet known whether this is a BOM
		}
		r.atStart = false
		if bytes.HasPrefix(avail, []byte(bom)) {
			r.pos += len(bom)
		}
	}
	for {
		if r.skipLF && r.pos < len(r.buf) {
			r.skipLF = false
			if r.buf[r.pos] == '\n' {
				r.pos++
			}
		}
		if r.discard {
			if p := r.scanDiscard(); p != nil || r.discard {
				return p
			}
			continue
		}
		line, end, ok := r.nextLine()
		if !ok {
			// Before waiting for more bytes, yield comment and blank
			// lines already seen so that a heartbeat is not held back.
			if !r.inBlock && r.pos > r.start {
				return r.yield(PieceComment, r.pos)
			}
			if len(r.buf)-r.start > r.max {
				return r.tooLong(-1)
			}
			return nil
		}
		if len(line) == 0 {
			r.pos = end
			if !r.inBlock {
				continue // blank line between events: part of a comment piece
			}
			return r.dispatch(end)
		}
		if line[0] == ':' {
			r.pos = end
			continue // comment: inside a block it stays in the block's bytes
		}
		if !r.inBlock && r.pos > r.start {
			// A field line starts an event: yield the comment and blank
			// lines before it on their own.
			return r.yield(PieceComment, r.pos)
		}
		if end-r.start > r.max {
			return r.tooLong(end)
		}
		r.field(line)
		r.pos = end
	}
}

// nextLine finds the line starting at pos. It returns the line without its
// terminator and the offset just past the terminator. A CR at the end of the
// buffer ends the line (a following LF is swallowed later via skipLF), so
// a CR-terminated event is never held back waiting for the next byte.
func (r *Reader) nextLine() (line []byte, end int, ok bool) {
	rest := r.buf[r.pos:]
	nl := bytes.IndexByte(rest, '\n')
	seg := rest
	if nl >= 0 {
		seg = rest[:nl]
	}
	if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
		if cr+1 < len(rest) {
			if rest[cr+1] == '\n' {
				return rest[:cr], r.pos + cr + 2, true
			}
			return rest[:cr], r.pos + cr + 1, true
		}
		if r.err == nil {
			r.skipLF = true
		}
		return rest[:cr], r.pos + cr + 1, true
	}
	if nl >= 0 {
		return rest[:nl], r.pos + nl + 1, true
	}
	return nil, 0, false
}

// field processes one field line of the block that starts at start.
func (r *Reader) field(line []byte) {
	r.inBlock = true
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	off := r.pos + (len(line) - len(value)) - r.start // value offset from start
	switch string(name) {
	case "data":
		switch r.nData {
		case 0:
			r.dataOff, r.dataLen = off, len(value)
		case 1:
			r.dataBuf = append(r.dataBuf[:0], r.buf[r.start+r.dataOff:r.start+r.dataOff+r.dataLen]...)
			fallthrough
		default:
			r.dataBuf = append(r.dataBuf, '\n')
			r.dataBuf = append(r.dataBuf, value...)
		}
		r.nData++
	case "event":
		r.typOff, r.typLen = off, len(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			r.idOff, r.idLen = off, len(value)
		}
	case "retry":
		if n, ok := parseRetry(value); ok {
			r.retry, r.hasRetry = n, true
		}
	}
}

func parseRetry(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// dispatch ends the block at end (just past its blank line, or the end of
// the stream) and yields it.
func (r *Reader) dispatch(end int) *Piece {
	kind := PieceSkipped
	base := r.buf[r.start:]
	ev := Event{}
	if r.nData > 0 {
		kind = PieceEvent
		if r.nData == 1 {
			ev.Data = base[r.dataOff : r.dataOff+r.dataLen : r.dataOff+r.dataLen]
		} else {
			ev.Data = r.dataBuf
		}
		if r.typLen >= 0 {
			ev.Type = base[r.typOff : r.typOff+r.typLen : r.typOff+r.typLen]
		}
	}
	if r.idLen >= 0 {
		// The last event id buffer is set even when nothing is dispatched.
		r.lastID = append(r.lastID[:0], base[r.idOff:r.idOff+r.idLen]...)
		ev.ID, ev.HasID = r.lastID, true
	}
	ev.Retry, ev.HasRetry = r.retry, r.hasRetry
	if kind == PieceSkipped {
		ev = Event{}
	}
	p := r.yield(kind, end)
	p.Event = ev
	return p
}

// yield returns buf[start:end] as a piece and starts the next one at end.
func (r *Reader) yield(kind PieceKind, end int) *Piece {
	r.piece = Piece{Kind: kind, Raw: r.buf[r.start:end:end]}
	r.start = end
	if r.pos < end {
		r.pos = end
	}
	r.resetBlock()
	if kind == PieceMalformed {
		r.malformed++
	}
	return &r.piece
}

func (r *Reader) resetBlock() {
	r.inBlock = false
	r.nData = 0
	r.typLen = -1
	r.idLen = -1
	r.hasRetry = false
	r.retry = 0
}

// tooLong yields the current block as malformed and discards the rest of
// it as it arrives. lineEnd is the end of the line that passed the limit, or
// -1 when that line is not complete yet (all buffered bytes belong to it).
func (r *Reader) tooLong(lineEnd int) *Piece {
	r.discard = true
	if lineEnd < 0 {
		// Bytes after pos are the start of an unfinished line.
		r.lineEmpty = r.pos == len(r.buf)
		return r.yield(PieceMalformed, len(r.buf))
	}
	// The line is complete; the next one starts empty. A pending skipLF
	// stays set so that the LF of a split CRLF is not taken for a blank line.
	r.lineEmpty = true
	return r.yield(PieceMalformed, lineEnd)
}

// scanDiscard consumes bytes of a malformed block up to and including the
// blank line that ends it. It returns a piece of what it consumed when it
// reaches that line or the end of the buffer.
func (r *Reader) scanDiscard() *Piece {
	for r.pos < len(r.buf) {
		c := r.buf[r.pos]
		r.pos++
		switch c {
		case '\n', '\r':
			if c == '\r' {
				if r.pos < len(r.buf) {
					if r.buf[r.pos] == '\n' {
						r.pos++
					}
				} else if r.err == nil {
					r.skipLF = true
				}
			}
			if r.lineEmpty {
				r.discard = false
				return r.yield(PieceMalformed, r.pos)
			}
			r.lineEmpty = true
		default:
			r.lineEmpty = false
		}
	}
	if r.pos > r.start {
		return r.yield(PieceMalformed, r.pos)
	}
	return nil
}

// finish handles the end of the underlying stream.
func (r *Reader) finish() (*Piece, error) {
	if r.start == len(r.buf) {
		return nil, r.err
	}
	if r.err != io.EOF {
		p := r.yield(PieceIncomplete, len(r.buf))
		r.discard = false
		return p, nil
	}
	if r.discard {
		r.discard = false
		return r.yield(PieceMalformed, len(r.buf)), nil
	}
	// A final line without a line end is still a line.
	if r.pos < len(r.buf) {
		line := r.buf[r.pos:]
		if len(line) > 0 && line[0] != ':' {
			if !r.inBlock && r.pos > r.start {
				return r.yield(PieceComment, r.pos), nil
			}
			r.field(line)
		}
		r.pos = len(r.buf)
	}
	if r.inBlock {
		return r.dispatch(len(r.buf)), nil
	}
	return r.yield(PieceComment, len(r.buf)), nil
}
