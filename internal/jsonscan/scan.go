// Package jsonscan is a small pull scanner for JSON (RFC 8259) that finds the
// few values a caller needs without building anything: no maps, no structs,
// no allocations. The classifiers of internal/protocol walk every chunk of
// every stream with it (issue 2: ≤ 1 µs and ≤ 1 allocation per event), which
// encoding/json cannot do when it unmarshals a whole chunk into structs.
//
// A Decoder validates everything it walks, skipped values included, with the
// grammar encoding/json accepts (json.Valid), so a chunk that is not JSON is
// reported as such and never half-classified. Like encoding/json it does not
// check that strings are valid UTF-8.
//
// The caller drives the walk: Object then Key until it reports false, Array
// then Elem until it reports false, and for every member or element exactly
// one value call (Str, Int, Bool, Object, Array or Skip). Errors are sticky:
// after the first one every call reports false, and Failed is true.
package jsonscan

import "encoding/binary"

// MaxDepth is the deepest nesting of objects and arrays a Decoder accepts;
// it is encoding/json's limit, so that both agree on what is valid.
const MaxDepth = 10000

// Kind is the type of a JSON value, as told by its first byte.
type Kind uint8

// The kinds of JSON values. Invalid is anything that cannot start a value,
// including the end of the input.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{"invalid", "null", "bool", "number", "string", "array", "object"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// Decoder walks one JSON text. The zero value walks an empty input (and
// fails); use New or Reset. A Decoder is a value: keep it on the stack and
// pass its address to helpers.
type Decoder struct {
	data   []byte
	pos    int
	depth  int
	first  bool // the container just opened has had no member or element yet
	failed bool

	// scratch holds a short key or identifier with escapes, unescaped, so
	// that `"\u0074ype"` still compares equal to "type".
	scratch [48]byte
}

// New returns a Decoder of data.
func New(data []byte) Decoder { return Decoder{data: data} }

// Reset makes d walk data from its start.
func (d *Decoder) Reset(data []byte) { *d = Decoder{data: data} }

// Failed reports whether the input was found not to be valid JSON (or a
// value was asked for with the wrong call, which is a caller's bug).
func (d *Decoder) Failed() bool { return d.failed }

// Offset returns the byte offset the Decoder has reached; after a failure it
// is close to where the input stopped making sense.
func (d *Decoder) Offset() int { return d.pos }

// End reports whether the whole input was one valid JSON value: nothing
// failed, every container was closed and only whitespace is left.
func (d *Decoder) End() bool {
	if d.failed || d.depth != 0 {
		return false
	}
	d.skipSpace()
	return d.pos == len(d.data)
}

func (d *Decoder) fail() bool {
	d.failed = true
	return false
}

func (d *Decoder) skipSpace() {
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return
		}
		d.pos++
	}
}

// Peek returns the kind of the next value without consuming it.
func (d *Decoder) Peek() Kind {
	if d.failed {
		return Invalid
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return Invalid
	}
	switch c := d.data[d.pos]; c {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return Number
		}
		return Invalid
	}
}

// Object consumes the '{' of an object. Walk its members with Key.
func (d *Decoder) Object() bool { return d.open('{') }

// Array consumes the '[' of an array. Walk its elements with Elem.
func (d *Decoder) Array() bool { return d.open('[') }

func (d *Decoder) open(c byte) bool {
	if d.failed {
		return false
	}
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != c {
		return d.fail()
	}
	d.depth++
	if d.depth > MaxDepth {
		return d.fail()
	}
	d.pos++
	d.first = true
	return true
}

// Key moves to the next member of the object being walked and returns its
// key; the member's value must be consumed next. It returns false at the
// closing '}' (which it consumes) or on an error.
//
// The key is unescaped when it has escapes and fits a small scratch buffer
// (valid until the next call); a longer escaped key is returned raw and so
// matches none of the short names callers look for.
func (d *Decoder) Key() ([]byte, bool) {
	if !d.next('}') {
		return nil, false
	}
	start, end, esc, ok := d.scanString()
	if !ok {
		return nil, false
	}
	d.skipSpace()
	if d.pos >= len(d.data) || d.data[d.pos] != ':' {
		return nil, d.fail()
	}
	d.pos++
	return d.ident(d.data[start:end], esc), true
}

// Elem moves to the next element of the array being walked; the element
// must be consumed next. It returns false at the closing ']' (which it
// consumes) or on an error.
func (d *Decoder) Elem() bool { return d.next(']') }

// next handles the separator before a member or element: nothing before the
// first one, a ',' before the others, or the closing byte.
func (d *Decoder) next(closing byte) bool {
	if d.failed {
		return false
	}
	d.skipSpace()
	if d.pos >= len(d.data) {
		return d.fail()
	}
	c := d.data[d.pos]
	if c == closing {
		d.pos++
		d.depth--
		d.first = false
		return false
	}
	if d.first {
		d.first = false
	} else {
		if c != ',' {
			return d.fail()
		}
		d.pos++
	}
	if closing == '}' {
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return d.fail()
		}
	}
	return true
}

// Str consumes a string and returns its raw contents between the quotes,
// escapes still in place (see HasNonSpace and AppendUnescaped). It fails if
// the value is not a string.
func (d *Decoder) Str() ([]byte, bool) {
	if d.Peek() != String {
		return nil, d.fail()
	}
	start, end, _, ok := d.scanString()
	if !ok {
		return nil, false
	}
	return d.data[start:end], true
}

// Ident consumes a string and returns it unescaped when it is short enough
// for the scratch buffer (valid until the next call), raw otherwise: for
// comparing type names and other identifiers with string(b) == "name".
func (d *Decoder) Ident() ([]byte, bool) {
	if d.Peek() != String {
		return nil, d.fail()
	}
	start, end, esc, ok := d.scanString()
	if !ok {
		return nil, false
	}
	return d.ident(d.data[start:end], esc), true
}

func (d *Decoder) ident(raw []byte, esc bool) []byte {
	if !esc || len(raw) > len(d.scratch) {
		return raw
	}
	// Unescaping never makes a string longer than its escaped form.
	return AppendUnescaped(d.scratch[:0], raw)
}

// StrOrNull consumes a string or null. It returns the raw string and true
// for a string, nil and true for null, and fails for anything else.
func (d *Decoder) StrOrNull() ([]byte, bool) {
	if d.Peek() == Null {
		return nil, d.Skip()
	}
	return d.Str()
}

// Int consumes a number and returns its value when it is an integer that
// fits an int64. Other valid numbers (12.5, 1e3, huge ones) are consumed
// and reported with ok false but without failing the walk.
func (d *Decoder) Int() (n int64, ok bool) {
	if d.Peek() != Number {
		return 0, d.fail()
	}
	start := d.pos
	if !d.scanNumber() {
		return 0, false
	}
	b := d.data[start:d.pos]
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 18 {
		return 0, false // may not fit; usage counts never come close
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// MaxInteger is the largest magnitude Integer returns: 2^53, the last
// integer a float64 (and so a JavaScript or Python JSON decoder) holds
// exactly.
const MaxInteger = 1 << 53

// Integer consumes a number and returns its value when that value is an
// integer of magnitude at most MaxInteger, whatever its notation: 3.0 is 3,
// 1e1 is 10, 1.5e2 is 150, 300e-2 is 3. JSON does not say an integer is
// written without a fraction or an exponent, and some OpenAI-compatible
// servers serialise token counts through floats. A number with
// a fractional value (2.5, 1e-1) or a larger magnitude is consumed and
// reported with ok false, without failing the walk.
func (d *Decoder) Integer() (n int64, ok bool) {
	if d.Peek() != Number {
		return 0, d.fail()
	}
	start := d.pos
	if !d.scanNumber() {
		return 0, false
	}
	return integerValue(d.data[start:d.pos])
}

// integerValue evaluates a number that scanNumber accepted, exactly and
// without floating point: its digits (integer part, then fraction) times
// ten to the exponent less the fraction's length.
func integerValue(b []byte) (int64, bool) {
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	whole := b[:i]
	var frac []byte
	if i < len(b) && b[i] == '.' {
		j := i + 1
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		frac = b[i+1 : j]
		i = j
	}
	exp := 0
	if i < len(b) { // 'e' or 'E', then an optional sign and digits
		i++
		expNeg := b[i] == '-'
		if b[i] == '+' || b[i] == '-' {
			i++
		}
		for ; i < len(b); i++ {
			if exp < 1<<20 { // past this the answer is decided anyway
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	digit := func(k int) byte {
		if k < len(whole) {
			return whole[k]
		}
		return frac[k-len(whole)]
	}
	lo, hi := 0, len(whole)+len(frac)
	for lo < hi && digit(lo) == '0' {
		lo++
	}
	if lo == hi {
		return 0, true // zero, however written (0.0, -0, 0e9)
	}
	scale := exp - len(frac)
	for digit(hi-1) == '0' {
		hi--
		scale++
	}
	if scale < 0 {
		return 0, false // the last non-zero digit is below the units
	}
	if hi-lo+scale > 16 {
		return 0, false // at least 10^16, past MaxInteger
	}
	var v int64
	for k := lo; k < hi; k++ {
		v = v*10 + int64(digit(k)-'0')
	}
	for ; scale > 0; scale-- {
		v *= 10
	}
	if v > MaxInteger {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// Bool consumes true or false.
func (d *Decoder) Bool() (v, ok bool) {
	if d.Peek() != Bool {
		return false, d.fail()
	}
	if d.literal("true") {
		return true, true
	}
	if d.literal("false") {
		return false, true
	}
	return false, d.fail()
}

// Skip consumes one value of any kind, validating it.
func (d *Decoder) Skip() bool {
	switch d.Peek() {
	case Object:
		d.Object()
		for {
			if _, ok := d.Key(); !ok {
				break
			}
			if !d.Skip() {
				return false
			}
		}
	case Array:
		d.Array()
		for d.Elem() {
			if !d.Skip() {
				return false
			}
		}
	case String:
		_, _, _, ok := d.scanString()
		return ok
	case Number:
		return d.scanNumber()
	case Bool:
		if !d.literal("true") && !d.literal("false") {
			return d.fail()
		}
		return true
	case Null:
		if !d.literal("null") {
			return d.fail()
		}
		return true
	default:
		return d.fail()
	}
	return !d.failed
}

// SkipRaw consumes one value and returns its raw bytes.
func (d *Decoder) SkipRaw() ([]byte, bool) {
	d.Peek()
	start := d.pos
	if !d.Skip() {
		return nil, false
	}
	return d.data[start:d.pos], true
}

func (d *Decoder) literal(s string) bool {
	if len(d.data)-d.pos < len(s) || string(d.data[d.pos:d.pos+len(s)]) != s {
		return false
	}
	d.pos += len(s)
	return true
}

// special marks the bytes a string scan must stop at: the closing quote, a
// backslash, and the control characters JSON forbids unescaped.
var special = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

// scanString consumes a string whose opening quote is at pos and returns the
// offsets of its contents and whether it has escapes.
func (d *Decoder) scanString() (start, end int, esc, ok bool) {
	data := d.data
	i := d.pos + 1
	start = i
	for {
		// Eight bytes at a time while none of them needs attention (most
		// of a chunk is ids, names and base64 blobs), then byte by byte.
		for i+8 <= len(data) && !needsAttention(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		for i < len(data) && !special[data[i]] {
			i++
		}
		if i >= len(data) {
			d.pos = i
			return 0, 0, false, d.fail()
		}
		switch data[i] {
		case '"':
			d.pos = i + 1
			return start, i, esc, true
		case '\\':
			esc = true
			if i+1 >= len(data) {
				d.pos = i
				return 0, 0, false, d.fail()
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(data) || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) || !isHex(data[i+5]) {
					d.pos = i
					return 0, 0, false, d.fail()
				}
				i += 6
			default:
				d.pos = i
				return 0, 0, false, d.fail()
			}
		default: // an unescaped control character
			d.pos = i
			return 0, 0, false, d.fail()
		}
	}
}

// needsAttention reports whether any byte of w is a quote, a backslash or
// below 0x20 (the classic SWAR zero-byte and less-than tests; a false
// positive only sends the caller to the byte loop).
func needsAttention(w uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	quote := w ^ (ones * '"')
	bslash := w ^ (ones * '\\')
	return ((quote-ones)&^quote|(bslash-ones)&^bslash|(w-ones*0x20)&^w)&highs != 0
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// scanNumber consumes a number at pos:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *Decoder) scanNumber() bool {
	data := d.data
	i := d.pos
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && data[i] >= '1' && data[i] <= '9':
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	default:
		return d.fail()
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return d.fail()
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || data[i] < '0' || data[i] > '9' {
			return d.fail()
		}
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			i++
		}
	}
	d.pos = i
	return true
}

// Valid reports whether data is one valid JSON value, as json.Valid does.
func Valid(data []byte) bool {
	d := New(data)
	return d.Skip() && d.End()
}
