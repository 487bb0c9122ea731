// Package tokens counts tokens of text with a real BPE tokenizer (o200k_base),
// loaded from vocabularies embedded in the binary: nothing is downloaded at run
// time. The gateway and the benchmark use it to estimate visible output tokens
// when a provider reports no usable usage (SPEC.md §3); the simulator builds its
// text from whole tokens of the same tokenizer, so its reported usage and the
// estimate agree.
package tokens

import (
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Encoding names the tokenizer used for every estimate.
const Encoding = "o200k_base"

var (
	loadOnce sync.Once
	codec    tokenizer.Codec
	loadErr  error
)

func load() (tokenizer.Codec, error) {
	loadOnce.Do(func() {
		codec, loadErr = tokenizer.Get(tokenizer.O200kBase)
	})
	return codec, loadErr
}

// Count returns the number of o200k_base tokens in text. Invalid UTF-8 is
// counted as the tokenizer sees it; it never fails on any input.
func Count(text string) int {
	if text == "" {
		return 0
	}
	c, err := load()
	if err != nil {
		// The vocabulary is compiled in; failing to build it is a
		// programming error, not a runtime condition.
		panic("tokens: load " + Encoding + ": " + err.Error())
	}
	n, err := c.Count(text)
	if err != nil {
		// Only ErrorModeStrict reports errors; the default mode does not.
		panic("tokens: count: " + err.Error())
	}
	return n
}

// Encode returns the token ids of text.
func Encode(text string) []uint {
	c, err := load()
	if err != nil {
		panic("tokens: load " + Encoding + ": " + err.Error())
	}
	ids, _, _ := c.Encode(text)
	return ids
}

// Decode returns the text of token ids.
func Decode(ids []uint) string {
	c, err := load()
	if err != nil {
		panic("tokens: load " + Encoding + ": " + err.Error())
	}
	s, _ := c.Decode(ids)
	return s
}
