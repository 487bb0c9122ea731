package tokens

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/tiktoken-go/tokenizer"
)

func TestCount(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"Hello", 1},
		{"Hello world", 2},
		{" the quick brown fox", 4},
	}
	for _, tt := range tests {
		if got := Count(tt.text); got != tt.want {
			t.Errorf("Count(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	const s = "Streams are relayed byte for byte."
	if got := Decode(Encode(s)); got != s {
		t.Fatalf("Decode(Encode(%q)) = %q", s, got)
	}
}

// pattern is o200k_base's split expression, as tiktoken-go compiles it.
const pattern = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`

var (
	// interpreted is the expression run by regexp2's backtracking
	// interpreter: wrapped in a group, it is not the pattern string that
	// tiktoken-go registered generated code for.
	interpreted = regexp2.MustCompile("(?:"+pattern+")", regexp2.None)
	// generated is tiktoken-go's generated matcher for the same pattern.
	// It backtracks `\s*[\r\n]+` to the first line break of a run of white
	// space instead of the last: "\n  \nx" is "\n", "  \n", "x" there, and
	// "\n  \n", "x" in tiktoken and in the interpreter.
	generated = regexp2.MustCompile(pattern, regexp2.None)
)

// matches splits s with re; regexp2 reads s as runes, so an invalid byte
// comes out as U+FFFD.
func matches(t testing.TB, re *regexp2.Regexp, s string) []string {
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pieces splits s with pieceEnd, reading invalid UTF-8 as Count does.
func pieces(s string) []string {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	var out []string
	for i := 0; i < len(s); {
		end := pieceEnd(s, i)
		out = append(out, s[i:end])
		i = end
	}
	return out
}

// reference is a plain reading of tiktoken's merge over tiktoken-go's
// vocabulary in a Go map: no hash table of ours, no heap.
var reference = sync.OnceValue(func() map[string]int {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		panic(err)
	}
	m := map[string]int{}
	for id := uint(0); ; id++ {
		s, err := c.Decode([]uint{id})
		if err != nil {
			return m
		}
		m[s] = int(id)
	}
})

func referenceMerge(piece string) []uint {
	ranks := reference()
	if r, ok := ranks[piece]; ok {
		return []uint{uint(r)}
	}
	bounds := make([]int, len(piece)+1)
	for i := range bounds {
		bounds[i] = i
	}
	for {
		best, at := -1, -1
		for i := 0; i+2 < len(bounds); i++ {
			if r, ok := ranks[piece[bounds[i]:bounds[i+2]]]; ok && (best < 0 || r < best) {
				best, at = r, i
			}
		}
		if at < 0 {
			break
		}
		bounds = slices.Delete(bounds, at+1, at+2)
	}
	ids := make([]uint, 0, len(bounds)-1)
	for i := 0; i+1 < len(bounds); i++ {
		ids = append(ids, uint(ranks[piece[bounds[i]:bounds[i+1]]]))
	}
	return ids
}

func referenceEncode(t testing.TB, s string) []uint {
	var ids []uint
	for _, p := range matches(t, interpreted, s) {
		ids = append(ids, referenceMerge(p)...)
	}
	return ids
}

// alphabet has a rune of every class the expression tells apart and the
// runes its literals name: upper (Lu, Lt), lower (Ll), both (Lm, Lo, Mn,
// Mc), numbers (Nd, Nl, No), white space (ASCII, NEL, no-break, line
// separator, ideographic), the contraction letters and ſ, the characters
// alternative 4 takes after its run, others, and invalid bytes.
var alphabet = []string{
	"a", "b", "z", "A", "Q", "é", "É", "ǅ", "ʰ", "中", "の", "\u0301", "\u0903",
	"0", "7", "٣", "Ⅻ", "½",
	" ", " ", " ", "\t", "\n", "\r", "\v", "\f", "\u0085", "\u00a0", "\u2028", "\u3000",
	"'", "'", "s", "S", "t", "T", "r", "R", "e", "E", "v", "V", "m", "M", "l", "L", "d", "D", "ſ",
	"/", "!", ".", ",", "(", "-", "😀", "\u200b", "\x1c", "\x00", "\uFFFD",
	"\xff", "\xc3", "\xe4\xb8",
}

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// TestSplitMatchesExpression checks pieceEnd against regexp2's interpreter
// on 20,000 random texts of the alphabet above and on real text.
func TestSplitMatchesExpression(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	texts := corpus(t)
	for range 20000 {
		texts = append(texts, randomText(rng, 1+rng.IntN(24)))
	}
	for _, s := range texts {
		if got, want := pieces(s), matches(t, interpreted, s); !slices.Equal(got, want) {
			t.Fatalf("split %q:\n got %q\nwant %q", s, got, want)
		}
	}
}

// TestEncodeMatchesReference checks Encode, the vocabulary's table and
// both merges, against referenceEncode: random texts, runs of letters long
// enough for the heap merge, and real text.
func TestEncodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	texts := corpus(t)
	for range 3000 {
		texts = append(texts, randomText(rng, 1+rng.IntN(40)))
	}
	letters := []string{"a", "b", "e", "n", "x", "Q", "é", "中"}
	for _, n := range []int{95, 96, 97, 300, 2000} {
		for range 4 {
			var b strings.Builder
			for range n {
				b.WriteString(letters[rng.IntN(len(letters))])
			}
			texts = append(texts, b.String(), strings.Repeat("ab", n), strings.Repeat("a", n))
		}
	}
	for _, s := range texts {
		got, want := Encode(s), referenceEncode(t, s)
		if !slices.Equal(got, want) {
			t.Fatalf("Encode(%.200q):\n got %v\nwant %v", s, got, want)
		}
		if n := Count(s); n != len(want) {
			t.Fatalf("Count(%.200q) = %d, want %d", s, n, len(want))
		}
	}
}

// TestEncodeMatchesLibrary checks Encode against tiktoken-go itself on
// real text, piece by piece of its own split (which differs from the
// expression only as generated's comment says), and logs how far the two
// totals are apart.
func TestEncodeMatchesLibrary(t *testing.T) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := 0, 0
	for _, s := range corpus(t) {
		for _, p := range matches(t, generated, s) {
			want, _, _ := c.Encode(p)
			if got := Encode(p); !slices.Equal(got, want) {
				t.Fatalf("Encode(%q) = %v, tiktoken-go %v", p, got, want)
			}
		}
		n, _ := c.Count(s)
		ours, theirs = ours+Count(s), theirs+n
	}
	t.Logf("real text: %d tokens here, %d by tiktoken-go", ours, theirs)
}

// corpus is real text: the project's docs and Go sources, the recorded
// provider streams, and a multilingual sample.
func corpus(t testing.TB) []string {
	texts := []string{
		"I'm sure we'LL see THEY'RE right; she's here, DON'T worry. O'Neil's ſ'ſ",
		"日本語のテキストと中文文本。한국어 텍스트. Ελληνικά ΚΕΦΑΛΑΙΑ, Кириллица ПРОПИСНЫЕ.",
		"हिन्दी में लिखा गया पाठ। العربية نص ٣٤٥ مكتوب. Emoji 😀👍🏽 and ½ Ⅻ.",
		"line one  \n\n  \n\tindented\r\n\r\n   trailing   ",
	}
	var files []string
	for _, p := range []string{"../../docs/*.md", "../relay/*.go", "../../testdata/fixtures/*.sse"} {
		m, _ := filepath.Glob(p)
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d corpus files", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	return texts
}

// FuzzCount checks Count and Encode against the reference on any input.
func FuzzCount(f *testing.F) {
	for _, s := range []string{"", "Hello world", "\n  \nx", "don'T ſ'ſ", "\xff\xc3(", "ǅʰ\u0301a", "  12345 ½"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		want := referenceEncode(t, s)
		if got := Encode(s); !slices.Equal(got, want) {
			t.Fatalf("Encode(%q) = %v, want %v", s, got, want)
		}
		if n := Count(s); n != len(want) {
			t.Fatalf("Count(%q) = %d, want %d", s, n, len(want))
		}
	})
}

// TestCutKeepsCounts checks Cut's promise at every place it could cut, not
// only the last: the tokens of the text before it and of the text from it
// on, whatever follows, add up to the whole's.
func TestCutKeepsCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	// Words, spaces and the runes that attach to them most: apostrophes,
	// marks, upper and lower letters of several kinds, digits, punctuation.
	more := append([]string{"a", "b", "c", "X", "Y", " ", " ", " ", " ", "  ", "'", "s", "\u0301", "中", "9", ".",
		"д", "Ж", "é", "。", "\n", "\n", "\r\n", "/", "\u3000", "\u00a0", "\xe3\x80"}, alphabet...)
	var texts []string
	for _, s := range corpus(t) {
		texts = append(texts, s[:min(len(s), 3000)]) // every cut of it is counted
	}
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(60) {
			b.WriteString(more[rng.IntN(len(more))])
		}
		texts = append(texts, b.String())
	}
	// Each prefix of a text is what a stream has kept when Cut is
	// called; the rest of the text is what comes after.
	cuts := 0
	for _, s := range texts {
		cuts += checkCuts(t, s)
	}
	// from bounds the search, and a rune that starts before it is read
	// whole.
	if c := Cut([]byte("a b c"), 2); c != 3 {
		t.Errorf("Cut(\"a b c\", 2) = %d, want 3", c)
	}
	if c := Cut([]byte("a b c"), 4); c != 0 {
		t.Errorf("Cut(\"a b c\", 4) = %d, want 0", c)
	}
	if c := Cut([]byte("x\u3000 "), 3); c != 0 {
		t.Errorf("Cut after an ideographic space = %d, want 0", c)
	}
	if cuts < 10000 {
		t.Fatalf("only %d cuts tried", cuts)
	}
	for _, tt := range []struct {
		text string
		cut  int
	}{
		{"", 0}, {" ", 0}, {"a", 0}, {"  a", 0}, {"\n ", 0}, {"\u3000 ", 0}, {"a\n/", 0}, {"a\n\xe3\x80", 0}, {"\na\n/", 1},
		{"one two  three", 7}, {"中 ", 3}, {"1 ", 1}, {". ", 1}, {"да нет", 4},
		{"第一行。\n第二行", 13}, {"a\n\xff", 2}, {"a\nb \u00a0", 3},
	} {
		if c := Cut([]byte(tt.text), 0); c != tt.cut {
			t.Errorf("Cut(%q) = %d, want %d", tt.text, c, tt.cut)
		}
	}
}

// FuzzCut checks Cut's promise on any text: wherever it cuts a prefix of
// the text, the rest of the text as what follows, the counts add up.
func FuzzCut(f *testing.F) {
	for _, s := range []string{"one two\nthree", "a\n/b c", "x\u3000 y", "д\u00a0 е", "第一行。\n第二行 x", "it's  'll \r\n\tgo"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2048 {
			return
		}
		checkCuts(t, s)
	})
}

// checkCuts checks Cut on every prefix of s, the rest of s being what
// follows it, and returns how many places it checked.
func checkCuts(t testing.TB, s string) int {
	whole, checked := Count(s), map[int]bool{}
	for j := 1; j <= len(s); j++ {
		i := Cut([]byte(s[:j]), 0)
		if i == 0 || checked[i] {
			continue
		}
		checked[i] = true
		if got := Count(s[:i]) + Count(s[i:]); got != whole {
			t.Fatalf("cut %q | %q: %d + %d tokens, whole %d", s[:i], s[i:], Count(s[:i]), Count(s[i:]), whole)
		}
	}
	return len(checked)
}
