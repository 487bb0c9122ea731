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
// about 1.9 MB of flat arrays that garbage collection does not walk (see
// vocab.go and BenchmarkCount). tiktoken-go remains the tests' reference.
package tokens

import (
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Encoding names the tokenizer used for every estimate.
const Encoding = "o200k_base"

// Load builds the vocabulary's table now (about 10 ms and 1.9 MB), rather
// than in the first call that needs it, where it would hold that call and
// any other waiting for it.
func Load() { vocabulary() }

// Count returns the number of o200k_base tokens in text. Invalid UTF-8 is
// read as U+FFFD for each bad byte, as tiktoken-go's Count reads it; it
// never fails on any input.
func Count(text string) int {
	n := 0
	each(text, func(string) { n++ })
	return n
}

// CountBytes is Count of string(text), without the copy: Count keeps
// nothing of its text once it returns.
func CountBytes(text []byte) int {
	if len(text) == 0 {
		return 0
	}
	return Count(unsafe.String(&text[0], len(text)))
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
// any more that follows. It is the last place of either kind below, or 0
// when there is none:
//
//   - a space after a rune that is not white space. No piece holds both:
//     runs of letters, of numbers and of other runes (alternatives 1 to 4)
//     all stop at a space, as they stop at the end of the text, and the
//     space is no contraction nor one of alternative 4's trailing [\r\n/].
//     So the piece before ends there whether more text follows or not.
//   - the rune after a line break, when it is neither white space nor '/'.
//     The break ends a piece (alternative 5 takes white space up to its
//     last line break, alternative 4 takes line breaks and slashes after
//     its run); the rune after it, already in text, tells where, as the
//     end of the text would. Chinese and Japanese, which put no spaces
//     between words, have line breaks.
//
// Every piece starts where the one before it ended whatever came before,
// since the expression looks only ahead. Cut looks no further back than
// from, for a caller that searched text up to there already.
func Cut(text []byte, from int) int {
	for i := len(text) - 1; i > max(from-1, 0); i-- {
		switch {
		case text[i] == ' ':
			if r, _ := utf8.DecodeLastRune(text[:i]); !unicode.IsSpace(r) {
				return i
			}
		case text[i-1] == '\n' && text[i] != '/' && utf8.FullRune(text[i:]):
			// (A rune cut short at the end of text is not known yet.)
			if r, _ := utf8.DecodeRune(text[i:]); !unicode.IsSpace(r) {
				return i
			}
		}
	}
	return 0
}
