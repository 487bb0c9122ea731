package tokens

import (
	_ "embed"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync"
)

// o200kBase is the o200k_base vocabulary: a 4-byte little-endian count n,
// then the byte length of each token in rank order (n bytes; no token is
// longer than 128), then the tokens' bytes one after another. It is
// OpenAI's o200k_base.tiktoken in a smaller form; TestVocabularyIsO200kBase
// rebuilds that file from it and checks its published SHA-256.
//
//go:embed o200k_base.bin
var o200kBase string

// vocab finds a token's rank by its bytes and a rank's bytes. It holds no
// pointer the garbage collector must follow but its three slices: the
// tokens' bytes stay in the binary's read-only data, and the table and
// offsets are flat arrays of integers (1.8 MB together), so a collection
// does not walk 200,000 strings as it would a map of them.
//
// The table has 2^18 slots for 199,998 tokens (76 % full). A slot holds
// rank+1 in its low 18 bits and 14 more bits of the key's hash above them,
// so a probe past another key's slot almost never reads that key's bytes:
// a miss probes about 9 adjacent slots, a hit about 3. With twice the
// slots and no hash bits it was 2.9 MB and no faster (BenchmarkCount).
type vocab struct {
	text  string   // every token's bytes, in rank order
	off   []uint32 // rank r is text[off[r]:off[r+1]]
	table []uint32 // open addressing by hash: tag<<rankBits | rank+1, 0 when empty
	mask  uint32
	seed  maphash.Seed
}

// rankBits holds rank+1 of o200k_base's 199,998 tokens.
const rankBits = 18

var (
	vocabOnce sync.Once
	theVocab  *vocab
)

// vocabulary returns the vocabulary, building its table on first use
// (about 10 ms).
func vocabulary() *vocab {
	vocabOnce.Do(func() { theVocab = newVocab(o200kBase) })
	return theVocab
}

// newVocab indexes a vocabulary in o200kBase's format. The format is the
// binary's own, checked by the tests, so a malformed one panics.
func newVocab(data string) *vocab {
	n := int(binary.LittleEndian.Uint32([]byte(data[:4])))
	lengths, text := data[4:4+n], data[4+n:]
	v := &vocab{text: text, off: make([]uint32, n+1), seed: maphash.MakeSeed()}
	at := uint32(0)
	for r := range n {
		v.off[r] = at
		at += uint32(lengths[r])
	}
	v.off[n] = at
	if int(at) != len(text) {
		panic("tokens: vocabulary lengths do not add up to its text")
	}
	if n >= 1<<rankBits-1 {
		panic("tokens: vocabulary too large for its table")
	}
	// The smallest power of two above the tokens: 2^18 for o200k_base.
	size := 1 << bits.Len(uint(n))
	v.table, v.mask = make([]uint32, size), uint32(size-1)
	for r := range n {
		tok := v.token(uint32(r))
		i, tag := v.slot(tok)
		for v.table[i] != 0 {
			if v.token(v.table[i]&rankMask-1) == tok {
				panic("tokens: vocabulary has a token twice")
			}
			i = (i + 1) & v.mask
		}
		v.table[i] = tag | (uint32(r) + 1)
	}
	return v
}

const rankMask = 1<<rankBits - 1

// slot returns where s's probe starts and its tag: the hash's top bits,
// in place above a slot's rank.
func (v *vocab) slot(s string) (uint32, uint32) {
	h := maphash.String(v.seed, s)
	return uint32(h) & v.mask, uint32(h>>(64-(32-rankBits))) << rankBits
}

// token returns the bytes of rank r.
func (v *vocab) token(r uint32) string { return v.text[v.off[r]:v.off[r+1]] }

// size is the number of tokens.
func (v *vocab) size() int { return len(v.off) - 1 }

// rank returns the rank of the token s, if s is one.
func (v *vocab) rank(s string) (uint32, bool) {
	if len(s) == 0 || len(s) > maxTokenLen {
		return 0, false
	}
	i, tag := v.slot(s)
	for ; ; i = (i + 1) & v.mask {
		e := v.table[i]
		if e == 0 {
			return 0, false
		}
		if e&^rankMask == tag && v.token(e&rankMask-1) == s {
			return e&rankMask - 1, true
		}
	}
}

// maxTokenLen is the longest token's length in bytes: no longer string
// needs a lookup.
const maxTokenLen = 128
