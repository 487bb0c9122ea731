package admission

import (
	"bytes"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/tokens"
)

// PromptTokens estimates the input tokens of a request body (any of the
// protocols' JSON) with the project's tokenizer: the tokens of every string
// value, keys left out. Role names and the model name count too, which
// stands for the few tokens of framing the providers add per message. Media
// sent inline (base64 data, data: URLs) is left out: providers bill it by
// image size, not by its text, and its base64 would count thousands of
// tokens a picture. The estimate is corrected by the usage the answer
// reports (Ticket.Done). A body that is not JSON counts as its text.
func PromptTokens(body []byte) int {
	d := jsonscan.New(body)
	var scratch []byte
	n, ok := countValue(&d, &scratch, 0)
	if !ok {
		return tokens.CountBytes(body)
	}
	return n
}

// maxDepth bounds the nesting the estimate walks; deeper values are skipped
// (the gateway's body scan has accepted the body already).
const maxDepth = 64

// media are member names whose string values are inline media, not text.
var media = map[string]bool{"data": true, "b64_json": true, "image_url": true, "file_data": true, "url": true, "image": true}

func countValue(d *jsonscan.Decoder, scratch *[]byte, depth int) (int, bool) {
	switch d.Peek() {
	case jsonscan.String:
		raw, ok := d.Str()
		if !ok {
			return 0, false
		}
		if bytes.HasPrefix(raw, []byte("data:")) {
			return 0, true
		}
		if bytes.IndexByte(raw, '\\') >= 0 {
			*scratch = jsonscan.AppendUnescaped((*scratch)[:0], raw)
			raw = *scratch
		}
		return tokens.CountBytes(raw), true
	case jsonscan.Object:
		if depth >= maxDepth {
			return 0, d.Skip()
		}
		d.Object()
		n := 0
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			if media[string(k)] && d.Peek() == jsonscan.String {
				d.Skip()
				continue
			}
			m, ok := countValue(d, scratch, depth+1)
			if !ok {
				return 0, false
			}
			n += m
		}
		return n, !d.Failed()
	case jsonscan.Array:
		if depth >= maxDepth {
			return 0, d.Skip()
		}
		d.Array()
		n := 0
		for d.Elem() {
			m, ok := countValue(d, scratch, depth+1)
			if !ok {
				return 0, false
			}
			n += m
		}
		return n, !d.Failed()
	}
	return 0, d.Skip()
}
