// Package tokens counts tokens of text with OpenAI's o200k_base byte-pair
// encoding, from a vocabulary embedded in the binary: nothing is downloaded
// at run time. The gateway and the benchmark use it to estimate visible
// output tokens when a provider reports no usable usage (SPEC.md §3); the
// simulator builds its text from whole tokens of the same tokenizer, so its
// reported usage and the estimate agree.
//
// It is written for the gateway, where it replaced tiktoken-go (0.65 µs and
// 270 bytes of garbage a token, a map of 200,000 strings): counting
// allocates nothing, takes about 0.1 µs a token, and the vocabulary costs
// about 3 MB of flat arrays that garbage collection does not walk (see
// vocab.go and BenchmarkCount). tiktoken-go remains the tests' reference.
package tokens

import (
	"unicode/utf8"
)

// Encoding names the tokenizer used for every estimate.
const Encoding = "o200k_base"

// Count returns the number of o200k_base tokens in text. Invalid UTF-8 is
// read as U+FFFD for each bad byte, as tiktoken-go's Count reads it; it
// never fails on any input.
func Count(text string) int {
	n := 0
	each(text, func(string) { n++ })
	return n
}

// Encode returns the token ids of text.
func Encode(text string) []uint {
	v := vocabulary()
	var ids []uint
	each(text, func(tok string) {
		r, _ := v.rank(tok)
		ids = append(ids, uint(r))
	})
	return ids
}

// Decode returns the text of token ids; an id that is no token is left out.
func Decode(ids []uint) string {
	v := vocabulary()
	var b []byte
	for _, id := range ids {
		if id < uint(v.size()) {
			b = append(b, v.token(uint32(id))...)
		}
	}
	return string(b)
}

// each calls fn with the bytes of every token of text, in order.
func each(text string, fn func(tok string)) {
	if text == "" {
		return
	}
	v := vocabulary()
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	for i := 0; i < len(text); {
		// pieceEnd always moves on; the bound keeps a mistake in it from
		// holding a handler in this loop for good.
		end := max(pieceEnd(text, i), i+1)
		v.pieceTokens(text[i:end], fn)
		i = end
	}
}

// Cut returns where text can be cut to count it in parts as it grows:
// Count(text + more) == Count(text[:cut]) + Count(text[cut:] + more) for
// any more that follows. It is the last space that follows an ASCII
// letter, or 0 when there is none. The piece that holds the letter is a
// run of letters (with perhaps one rune before it and a contraction in it,
// alternatives 1 and 2), and a space ends the run as the end of the text
// does, so it ends at the space either way; every piece before it ended
// before the letters did; and the piece after it starts at the space
// whatever came before, since the expression looks only ahead.
func Cut(text []byte) int {
	for i := len(text) - 1; i > 0; i-- {
		if text[i] == ' ' && ('a' <= text[i-1]|0x20 && text[i-1]|0x20 <= 'z') {
			return i
		}
	}
	return 0
}
