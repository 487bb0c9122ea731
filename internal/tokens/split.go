package tokens

import (
	"unicode"
	"unicode/utf8"
)

// o200k_base splits text into pieces before merging bytes, by this
// expression, matched leftmost-first with backtracking as tiktoken does:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
//
// pieceEnd implements it by hand: a regular-expression engine with
// look-ahead is what made the estimate cost about 1.6 µs a token. Each
// branch below says which alternative it is and how its backtracking
// resolves. The tests check it against regexp2's interpreter on the same
// expression.

// Rune classes of the expression.
const (
	cUpper  = 1 << iota // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower              // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cLetter             // \p{L}
	cNumber             // \p{N}
	cSpace              // \s (unicode.IsSpace)
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = slowClass(r)
	}
	return t
}()

func class(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return slowClass(r)
}

func slowClass(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsUpper(r), unicode.IsTitle(r):
		c = cUpper | cLetter
	case unicode.IsLower(r):
		c = cLower | cLetter
	case unicode.IsLetter(r): // Lm, Lo
		c = cUpper | cLower | cLetter
	case unicode.IsMark(r):
		c = cUpper | cLower
	case unicode.IsNumber(r):
		c = cNumber
	}
	if unicode.IsSpace(r) {
		c |= cSpace
	}
	return c
}

// at decodes the rune at s[i] and its class. s is valid UTF-8.
func at(s string, i int) (r rune, size int, c uint8) {
	if b := s[i]; b < utf8.RuneSelf {
		return rune(b), 1, asciiClass[b]
	}
	r, size = utf8.DecodeRuneInString(s[i:])
	return r, size, slowClass(r)
}

// run returns the end of the longest run of runes from i whose class has
// any bit of want.
func run(s string, i int, want uint8) int {
	for i < len(s) {
		_, n, c := at(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// pieceEnd returns the end of the piece that starts at s[i], i < len(s).
// s is valid UTF-8.
func pieceEnd(s string, i int) int {
	r0, n0, c0 := at(s, i)

	// Alternatives 1 and 2, letters: the optional first rune of class
	// [^\r\n\p{L}\p{N}] is tried taken, then not.
	prefix := r0 != '\r' && r0 != '\n' && c0&(cLetter|cNumber) == 0
	if prefix || c0&(cUpper|cLower) != 0 {
		if prefix {
			if end := upperThenLower(s, i+n0); end > 0 {
				return contraction(s, end)
			}
		}
		if end := upperThenLower(s, i); end > 0 {
			return contraction(s, end)
		}
		if prefix {
			if end := run(s, i+n0, cUpper); end > i+n0 {
				return contraction(s, run(s, end, cLower))
			}
		}
		if end := run(s, i, cUpper); end > i {
			return contraction(s, run(s, end, cLower))
		}
	}

	// Alternative 3: \p{N}{1,3}, atomic.
	if c0&cNumber != 0 {
		end := i + n0
		for k := 1; k < 3 && end < len(s); k++ {
			_, n, c := at(s, end)
			if c&cNumber == 0 {
				break
			}
			end += n
		}
		return end
	}

	// Alternative 4: ` ?[^\s\p{L}\p{N}]+[\r\n/]*`, all atomic.
	start := i
	if r0 == ' ' {
		start++
	}
	if end := otherRun(s, start); end > start {
		for end < len(s) && (s[end] == '\r' || s[end] == '\n' || s[end] == '/') {
			end++
		}
		return end
	}

	// Alternatives 5 to 7, white space. W is the run of it from i.
	//   5. \s*[\r\n]+ backtracks \s* to the last \r or \n of W.
	//   6. \s+(?!\S) takes all of W at the end of s, else gives back
	//      W's last rune if W has two or more.
	//   7. \s+ takes W.
	if c0&cSpace != 0 {
		end, lastNewline, last := i, -1, i
		for end < len(s) {
			r, n, c := at(s, end)
			if c&cSpace == 0 {
				break
			}
			if r == '\r' || r == '\n' {
				lastNewline = end + 1
			}
			last = end
			end += n
		}
		switch {
		case lastNewline > 0:
			return lastNewline
		case end == len(s), last == i:
			return end
		default:
			return last
		}
	}
	// Every rune is in one of the classes above; this is not reached.
	return i + n0
}

// upperThenLower matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// from start and returns its end, or 0 when it does not match. The greedy
// first loop takes the whole upper run; if no lower rune follows, it gives
// runes back until the second loop can start, which is at the last rune of
// the run that is of both classes (Lm, Lo, M), and the second loop then
// takes only that rune (the one after it is Lu or Lt, or ends the run).
func upperThenLower(s string, start int) int {
	i, lastBoth := start, 0
	for i < len(s) {
		_, n, c := at(s, i)
		if c&cUpper == 0 {
			break
		}
		i += n
		if c&cLower != 0 {
			lastBoth = i
		}
	}
	if end := run(s, i, cLower); end > i {
		return end
	}
	return lastBoth
}

// otherRun returns the end of the run of [^\s\p{L}\p{N}] from i.
func otherRun(s string, i int) int {
	for i < len(s) {
		_, n, c := at(s, i)
		if c&(cSpace|cLetter|cNumber) != 0 {
			break
		}
		i += n
	}
	return i
}

// contraction extends a match at end by (?i:'s|'t|'re|'ve|'m|'ll|'d),
// when one follows. Case-insensitive s includes ſ (U+017F), as the
// expression's case folding does.
func contraction(s string, end int) int {
	if end+1 >= len(s) || s[end] != '\'' {
		return end
	}
	second := func(c byte) bool { return end+2 < len(s) && s[end+2]|0x20 == c }
	switch s[end+1] {
	case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D':
		return end + 2
	case 'r', 'R', 'v', 'V':
		if second('e') {
			return end + 3
		}
	case 'l', 'L':
		if second('l') {
			return end + 3
		}
	case 0xC5: // ſ is C5 BF
		if end+2 < len(s) && s[end+2] == 0xBF {
			return end + 3
		}
	}
	return end
}
