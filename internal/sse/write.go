package sse

import "bytes"

// AppendEvent appends one event in event-stream framing to dst: an `event:`
// line when typ is not empty, one `data:` line per line of data, and the blank
// line that dispatches it. Line ends are LF.
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	if typ != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	for {
		i := bytes.IndexByte(data, '\n')
		dst = append(dst, "data: "...)
		if i < 0 {
			dst = append(dst, data...)
			dst = append(dst, '\n')
			break
		}
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		data = data[i+1:]
	}
	return append(dst, '\n')
}

// AppendComment appends a comment line (": text") to dst. Clients ignore it;
// providers send them as keep-alives.
func AppendComment(dst []byte, text string) []byte {
	dst = append(dst, ':')
	if text != "" {
		dst = append(dst, ' ')
		dst = append(dst, text...)
	}
	return append(dst, '\n', '\n')
}
