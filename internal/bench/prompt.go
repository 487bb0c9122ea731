package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/ttfx/ttfx/internal/tokens"
)

// PromptGenerator names how prompts are made, for the conditions.
const PromptGenerator = "ttfx-words-v1: an instruction to write at length, then uniformly random common English words " +
	"(each one o200k_base token), drawn per request index from the seed, so that every request's prompt differs " +
	"(no provider prefix cache can serve one from another) and a run can be repeated exactly"

// instruction opens every prompt long enough to hold it, so that a model
// writes until the output cap rather than answering in a line.
const instruction = "Write a long, detailed story that uses every one of the following words, and do not stop early:"

// promptWords are common English words that o200k_base encodes as one
// token each with their leading space, so that n words are n tokens (the
// tokenizer's pre-split keeps them apart). TestPromptWords checks it.
var promptWords = strings.Fields(`time year people way day man thing woman life child world school state family
student group country problem hand part place case week company system program question work government number
night point home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community name president
team minute idea kid body information back parent face others level office door health person art war history
party result change morning reason research girl guy moment air teacher force education river garden mountain
window table paper music light color stone field forest ocean bridge market village island valley summer winter
spring autumn`)

// Prompts makes the synthetic prompts of a run: request i gets a prompt
// whose length in o200k_base tokens is drawn from a normal distribution of
// the given mean and standard deviation (rounded, at least 1), measured
// with the real tokenizer.
type Prompts struct {
	mean, sd float64
	seed     int64
	instr    int // tokens of the instruction
}

// NewPrompts returns the prompt source of a run.
func NewPrompts(mean, sd float64, seed int64) (*Prompts, error) {
	if math.IsNaN(mean) || math.IsInf(mean, 0) || mean < 1 {
		return nil, fmt.Errorf("input tokens: mean must be at least 1 (got %v)", mean)
	}
	if math.IsNaN(sd) || math.IsInf(sd, 0) || sd < 0 {
		return nil, fmt.Errorf("input tokens: standard deviation must be ≥ 0 (got %v)", sd)
	}
	if mean > 2_000_000 {
		return nil, fmt.Errorf("input tokens: mean %v is beyond any context window", mean)
	}
	return &Prompts{mean: mean, sd: sd, seed: seed, instr: tokens.Count(instruction)}, nil
}

// Prompt returns request i's prompt and its length in tokens, as the
// tokenizer counts it. The same i always gives the same prompt.
func (p *Prompts) Prompt(i int) (string, int) {
	rng := rand.New(rand.NewPCG(uint64(p.seed), uint64(i)))
	want := int(math.Round(p.mean + p.sd*rng.NormFloat64()))
	want = max(want, 1)
	var b strings.Builder
	n := want
	if want > p.instr {
		b.WriteString(instruction)
		n -= p.instr
	}
	for j := 0; j < n; j++ {
		if j > 0 || b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(promptWords[rng.IntN(len(promptWords))])
	}
	text := b.String()
	return text, tokens.Count(text)
}
