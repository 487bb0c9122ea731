package jsonscan

import (
	"unicode"
	"unicode/utf8"
)

// HasNonSpace reports whether the raw contents of a JSON string (escapes
// still in place, as Str returns them) decode to at least one character that
// is not white space (unicode.IsSpace). It decides without unescaping: `\n`,
// `\t`, `\r`, `\f` and `\u0020`-style escapes of spaces are white space; any
// other escape, and any other character, is not. This is the SPEC §1 test for
// an effective or visible delta: whitespace-only deltas are metadata.
func HasNonSpace(raw []byte) bool {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\\':
			if i+1 >= len(raw) {
				return true // not valid JSON; it is something
			}
			switch raw[i+1] {
			case 'n', 't', 'r', 'f':
				i += 2
			case 'u':
				r, n := decodeU(raw[i:])
				if n == 0 || !unicode.IsSpace(r) {
					return true
				}
				i += n
			default: // \" \\ \/ \b
				return true
			}
		case c < utf8.RuneSelf:
			return true
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n <= 1 {
				return true
			}
			if !unicode.IsSpace(r) {
				return true
			}
			i += n
		}
	}
	return false
}

// decodeU decodes a \uXXXX escape (and its low surrogate, when it starts a
// valid pair) at the start of b. It returns n == 0 if b does not start with a
// complete escape. A lone surrogate decodes to U+FFFD, as in encoding/json.
func decodeU(b []byte) (r rune, n int) {
	h, ok := hex4(b)
	if !ok {
		return 0, 0
	}
	r = rune(h)
	if r >= 0xD800 && r < 0xDC00 {
		if lo, ok := hex4(b[6:]); ok && lo >= 0xDC00 && lo < 0xE000 {
			return (r-0xD800)<<10 + (rune(lo) - 0xDC00) + 0x10000, 12
		}
		return utf8.RuneError, 6
	}
	if r >= 0xDC00 && r < 0xE000 {
		return utf8.RuneError, 6
	}
	return r, 6
}

// hex4 parses `\uXXXX` at the start of b.
func hex4(b []byte) (uint16, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var v uint16
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint16(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint16(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint16(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// AppendUnescaped appends the decoded text of the raw contents of a JSON
// string to dst, as encoding/json would decode it (lone surrogates become
// U+FFFD, and so do bytes that are not valid UTF-8). Input that is not a valid
// JSON string body is copied as far as it can be made sense of, never a
// panic.
func AppendUnescaped(dst, raw []byte) []byte {
	for len(raw) > 0 {
		i := 0
		for i < len(raw) && raw[i] != '\\' {
			i++
		}
		dst = appendValid(dst, raw[:i])
		raw = raw[i:]
		if len(raw) == 0 {
			break
		}
		if len(raw) < 2 {
			return appendValid(dst, raw)
		}
		switch c := raw[1]; c {
		case 'n':
			dst = append(dst, '\n')
		case 't':
			dst = append(dst, '\t')
		case 'r':
			dst = append(dst, '\r')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'u':
			r, n := decodeU(raw)
			if n == 0 {
				return appendValid(dst, raw)
			}
			dst = utf8.AppendRune(dst, r)
			raw = raw[n:]
			continue
		default:
			dst = appendValid(dst, raw[:2])
		}
		raw = raw[2:]
	}
	return dst
}

// appendValid appends s to dst with every byte that is not part of valid
// UTF-8 replaced by U+FFFD, as encoding/json decodes strings.
func appendValid(dst, s []byte) []byte {
	if utf8.Valid(s) {
		return append(dst, s...)
	}
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, s[:n]...)
		}
		s = s[n:]
	}
	return dst
}
