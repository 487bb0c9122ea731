package vertex

import (
	"encoding/json"
	"errors"
)

// errNotObject is a body editObject cannot edit.
var errNotObject = errors.New("the request body is not a JSON object")

// editObject returns the JSON object b without its members named drop and
// with the member add: value appended unless b has one, leaving every
// other byte as the client sent it (no decoding and re-encoding of the
// prompt: key order, number spelling and whitespace are kept, and the cost
// is one copy). value must be valid JSON. A body that is not one JSON
// object is an error.
func editObject(b []byte, drop, add, value string) ([]byte, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errNotObject
	}
	out := make([]byte, 0, len(b)+len(add)+len(value)+4)
	out = append(out, b[:i+1]...)
	i++
	members, has := 0, false
	if j := skipSpace(b, i); j < len(b) && b[j] == '}' {
		i = j
	} else {
		for {
			k := skipSpace(b, i)
			kEnd := skipString(b, k)
			if kEnd < 0 {
				return nil, errNotObject
			}
			c := skipSpace(b, kEnd)
			if c >= len(b) || b[c] != ':' {
				return nil, errNotObject
			}
			v := skipSpace(b, c+1)
			vEnd := skipValue(b, v)
			if vEnd < 0 {
				return nil, errNotObject
			}
			n := skipSpace(b, vEnd)
			if n >= len(b) || b[n] != ',' && b[n] != '}' {
				return nil, errNotObject
			}
			switch key := b[k:kEnd]; {
			case keyIs(key, drop):
			default:
				if keyIs(key, add) {
					has = true
				}
				if members > 0 {
					out = append(out, ',')
				}
				// From the key to the value's end: the spaces
				// around the colon kept, the ones before the
				// comma dropped.
				out = append(out, b[k:vEnd]...)
				members++
			}
			i = n
			if b[n] == '}' {
				break
			}
			i++
		}
	}
	if !has {
		if members > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, add...)
		out = append(out, '"', ':')
		out = append(out, value...)
	}
	rest := b[i:] // "}" and what follows
	if skipSpace(rest, 1) != len(rest) {
		return nil, errNotObject
	}
	return append(out, rest...), nil
}

// keyIs reports whether the JSON string s (quotes included) decodes to
// name; without an escape it compares the bytes, allocating nothing (the
// top-level keys of every Anthropic request pass here).
func keyIs(s []byte, name string) bool {
	for _, c := range s {
		if c == '\\' {
			var k string
			return json.Unmarshal(s, &k) == nil && k == name
		}
	}
	return string(s[1:len(s)-1]) == name
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the JSON string starting at i, or -1.
func skipString(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the JSON value starting at i, or -1.
// It checks nesting and strings, not the spelling of scalars: the relay
// has parsed the body as JSON already.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
