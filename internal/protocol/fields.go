package protocol

import "github.com/ttfx/ttfx/internal/jsonscan"

// This file holds the JSON walking helpers the per-API files share. Every
// helper consumes exactly one value, whatever its type, so that a field of
// an unexpected type is skipped (and still validated) rather than failing
// the walk.

// AddContent records the raw JSON string contents of content of kind k
// (Text, Reasoning or Tool). Visible text is kept for the estimate even when
// it is only white space (spaces and newlines are tokens too); the kind is
// set only for non-whitespace content (§1: whitespace-only deltas are
// metadata).
func AddContent(c *Content, e *Event, raw []byte, k Kind) {
	if k == Text {
		c.addVisible(raw)
	}
	if jsonscan.HasNonSpace(raw) {
		e.Kinds |= k
	}
}

// Str consumes a value that is content of kind k when it is a string; null
// and other types carry nothing.
func Str(d *jsonscan.Decoder, c *Content, e *Event, k Kind) {
	if d.Peek() != jsonscan.String {
		d.Skip()
		return
	}
	if raw, ok := d.Str(); ok {
		AddContent(c, e, raw, k)
	}
}

// RawStr consumes a value and returns its raw contents if it is a string.
func RawStr(d *jsonscan.Decoder) []byte {
	if d.Peek() != jsonscan.String {
		d.Skip()
		return nil
	}
	raw, _ := d.Str()
	return raw
}

// RawObject consumes a value and returns its raw bytes if it is an object
// (null, the usual "absent" of these APIs, and other types give nil).
func RawObject(d *jsonscan.Decoder) []byte {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return nil
	}
	raw, _ := d.SkipRaw()
	return raw
}

// Count consumes a value and returns it as a token count when it is a
// number whose value is a non-negative integer up to 2^53, however it is
// written: some OpenAI-compatible servers pass counts through floats and
// send 3.0 or 1e1. A fraction, a negative number or any other type is no
// count.
func Count(d *jsonscan.Decoder) (int, bool) {
	if d.Peek() != jsonscan.Number {
		d.Skip()
		return 0, false
	}
	n, ok := d.Integer()
	if !ok || n < 0 {
		return 0, false
	}
	return int(n), true
}

// NonEmptyObject consumes a value and reports whether it is an object with
// at least one member (a tool call's input that carries arguments).
func NonEmptyObject(d *jsonscan.Decoder) bool {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return false
	}
	d.Object()
	n := 0
	for {
		if _, ok := d.Key(); !ok {
			break
		}
		n++
		d.Skip()
	}
	return n > 0
}

// errorCode consumes an error object ({"type","code","status","message"} in
// the forms the providers use) and returns its most specific
// code: a string code, else the type, else the status, else a numeric code.
// Messages are not returned: they may quote the request.
func errorCode(d *jsonscan.Decoder) []byte {
	if d.Peek() != jsonscan.Object {
		d.Skip()
		return nil
	}
	var code, typ, status, num []byte
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "code":
			switch d.Peek() {
			case jsonscan.String:
				code, _ = d.Str()
			case jsonscan.Number:
				num, _ = d.SkipRaw()
			default:
				d.Skip()
			}
		case "type":
			typ = RawStr(d)
		case "status":
			status = RawStr(d)
		default:
			d.Skip()
		}
	}
	for _, v := range [...][]byte{code, typ, status, num} {
		if len(v) > 0 {
			return v
		}
	}
	return ErrorWord
}

// ErrorValue consumes the value of an "error" member and reports whether it
// is an error: an object (whose code errorCode reads), or a non-empty
// string. A string is the error's message — Hugging Face TGI and other
// OpenAI-compatible servers send {"error":"upstream connection reset"} or
// {"error":"…","error_type":"overloaded"} mid-stream — so it gives no code
// (nil); the caller takes one from a sibling member (see stringErrorCode).
// null, "" and other values are no error (Responses objects carry
// "error":null).
func ErrorValue(d *jsonscan.Decoder) (code []byte, isErr bool) {
	switch d.Peek() {
	case jsonscan.Object:
		return errorCode(d), true
	case jsonscan.String:
		raw, _ := d.Str()
		return nil, len(raw) > 0
	}
	d.Skip()
	return nil, false
}

// StringErrorCode is the code of an error given as a string: the first
// non-empty candidate (TGI's error_type, a top-level type or code), else
// "error". The string itself is never the code: it is the message.
func StringErrorCode(candidates ...[]byte) []byte {
	for _, c := range candidates {
		if len(c) > 0 {
			return c
		}
	}
	return ErrorWord
}

// ErrorWord is the code of an error object that gives none.
var ErrorWord = []byte("error")

// MarkUnknown marks a well-formed event nobody recognises; it returns true so
// that callers can write `return unknown(e)` for a valid walk.
func MarkUnknown(e *Event) bool {
	e.Kinds |= Unknown
	return true
}

// FunctionArgs consumes an object whose member named field holds argument
// text. Some OpenAI-compatible servers send the arguments as a JSON object
// instead of a string ("arguments":{"city":"Paris"}): a non-empty object is
// tool content too, an empty one ({}) is the call's header.
func FunctionArgs(d *jsonscan.Decoder, c *Content, e *Event, field string) {
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
			if NonEmptyObject(d) {
				e.Kinds |= Tool
			}
		default:
			Str(d, c, e, Tool)
		}
	}
}
