package jsonscan

import (
	"encoding/json"
	"errors"
)

// errEditNotObject is a body editObject cannot edit.
var errEditNotObject = errors.New("the request body is not a JSON object")

// EditObject returns the JSON object b without its members named in drop
// and with the member add: value appended unless b has one, leaving every
// other byte as the client sent it (no decoding and re-encoding of the
// prompt: key order, number spelling and whitespace are kept, and the cost
// is one copy). value must be valid JSON. A body that is not one JSON
// object is an error.
func EditObject(b []byte, add, value string, drop ...string) ([]byte, error) {
	i := editSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errEditNotObject
	}
	out := make([]byte, 0, len(b)+len(add)+len(value)+4)
	out = append(out, b[:i+1]...)
	i++
	members, has := 0, false
	if j := editSpace(b, i); j < len(b) && b[j] == '}' {
		i = j
	} else {
		for {
			k := editSpace(b, i)
			kEnd := editString(b, k)
			if kEnd < 0 {
				return nil, errEditNotObject
			}
			c := editSpace(b, kEnd)
			if c >= len(b) || b[c] != ':' {
				return nil, errEditNotObject
			}
			v := editSpace(b, c+1)
			vEnd := editValue(b, v)
			if vEnd < 0 {
				return nil, errEditNotObject
			}
			n := editSpace(b, vEnd)
			if n >= len(b) || b[n] != ',' && b[n] != '}' {
				return nil, errEditNotObject
			}
			switch key := b[k:kEnd]; {
			case keyIn(key, drop):
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
	if editSpace(rest, 1) != len(rest) {
		return nil, errEditNotObject
	}
	return append(out, rest...), nil
}

// keyIn reports whether the JSON string s (quotes included) decodes to one
// of names.
func keyIn(s []byte, names []string) bool {
	for _, n := range names {
		if keyIs(s, n) {
			return true
		}
	}
	return false
}

// keyIs reports whether the JSON string s (quotes included) decodes to
// name; without an escape it compares the bytes, allocating nothing (the
// top-level keys of every request a kind edits pass here).
func keyIs(s []byte, name string) bool {
	for _, c := range s {
		if c == '\\' {
			var k string
			return json.Unmarshal(s, &k) == nil && k == name
		}
	}
	return string(s[1:len(s)-1]) == name
}

func editSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// editString returns the index after the JSON string starting at i, or -1.
func editString(b []byte, i int) int {
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

// editValue returns the index after the JSON value starting at i, or -1.
// It checks nesting and strings, not the spelling of scalars: the relay
// has parsed the body as JSON already.
func editValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return editString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = editString(b, i); i < 0 {
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
