package tokens

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

var update = flag.Bool("update", false, "rewrite o200k_base.bin from tiktoken-go's o200k_base vocabulary")

// o200kBaseSHA256 is the SHA-256 of OpenAI's o200k_base.tiktoken (base64 of
// each token, a space, its rank, a newline), which tiktoken checks its
// download against.
const o200kBaseSHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

// TestVocabularyIsO200kBase rebuilds o200k_base.tiktoken from the embedded
// vocabulary and compares its digest with the published one: every token
// and rank is OpenAI's.
func TestVocabularyIsO200kBase(t *testing.T) {
	v := vocabulary()
	h := sha256.New()
	var line []byte
	longest := 0
	for r := range v.size() {
		tok := v.token(uint32(r))
		longest = max(longest, len(tok))
		line = base64.StdEncoding.AppendEncode(line[:0], []byte(tok))
		line = append(line, ' ')
		line = strconv.AppendInt(line, int64(r), 10)
		h.Write(append(line, '\n'))
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != o200kBaseSHA256 {
		t.Fatalf("o200k_base.tiktoken rebuilt from o200k_base.bin: SHA-256 %s, want %s", got, o200kBaseSHA256)
	}
	if v.size() != 199998 || longest != maxTokenLen {
		t.Fatalf("%d tokens, the longest %d bytes; o200k_base has 199,998, the longest %d", v.size(), longest, maxTokenLen)
	}
	for r := range v.size() {
		if got, ok := v.rank(v.token(uint32(r))); !ok || got != uint32(r) {
			t.Fatalf("rank(token %d) = %d, %v", r, got, ok)
		}
	}
	for _, s := range []string{"", "no such token here, surely", string(make([]byte, maxTokenLen+1))} {
		if r, ok := v.rank(s); ok {
			t.Errorf("rank(%q) = %d, want none", s, r)
		}
	}
}

// TestVocabularyMatchesLibrary compares the embedded vocabulary with
// tiktoken-go's, rank by rank; with -update it rewrites the file from it.
func TestVocabularyMatchesLibrary(t *testing.T) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for id := uint(0); ; id++ {
		s, err := c.Decode([]uint{id})
		if err != nil {
			break
		}
		toks = append(toks, s)
	}
	if *update {
		data := binary.LittleEndian.AppendUint32(nil, uint32(len(toks)))
		for _, s := range toks {
			if len(s) > 255 {
				t.Fatalf("token of %d bytes does not fit the format", len(s))
			}
			data = append(data, byte(len(s)))
		}
		for _, s := range toks {
			data = append(data, s...)
		}
		if err := os.WriteFile("o200k_base.bin", data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote o200k_base.bin: %d tokens, %d bytes; rebuild the test binary to check it", len(toks), len(data))
		return
	}
	v := vocabulary()
	if len(toks) != v.size() {
		t.Fatalf("tiktoken-go has %d tokens, o200k_base.bin %d", len(toks), v.size())
	}
	for r, s := range toks {
		if v.token(uint32(r)) != s {
			t.Fatalf("token %d: %q, tiktoken-go %q", r, v.token(uint32(r)), s)
		}
	}
}
