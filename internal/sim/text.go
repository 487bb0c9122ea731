package sim

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/ttfx/ttfx/internal/tokens"
)

// The simulator's text is made of whole o200k_base tokens (issue 3): every
// piece below is one token where it stands, so a stream of N pieces is N
// tokens by the same tokenizer the gateway estimates with
// (internal/tokens), and the usage the simulator reports agrees with the
// gateway's estimate of the text. The word lists are checked at first use:
// a word that is not a single token (in a future vocabulary) is dropped.
var (
	lowerWords = strings.Fields(`the of and to in is that for it as with was on be by this are at from
		or an have not but which all can their one has more will about would there when been so what
		some into only other time than then also its could these two may first any new like our over
		such after most where made through many before must well should good each those people very
		just because how long both great does work under part never same another know while last might
		use here need still world between three high own day right take place old later found give year
		around small every end help without think form again general set point large show case system
		group number fact water study light open line order often side result seem head view early turn
		speak move live try name leave answer reason model token stream event gateway latency signal`)
	capWords = strings.Fields(`The It This In For When After Some Many Each Most Every Our`)
	cities   = strings.Fields(`Paris Berlin Tokyo Lagos Lima Oslo Cairo Delhi Seoul Madrid Rome Vienna`)
)

var vocab = sync.OnceValue(func() (v struct{ lower, caps, capsSp []string }) {
	single := func(s string) bool { return len(tokens.Encode(s)) == 1 }
	for _, w := range lowerWords {
		if single(" " + w) {
			v.lower = append(v.lower, " "+w)
		}
	}
	for _, w := range capWords {
		if single(w) && single(" "+w) {
			v.caps = append(v.caps, w)
			v.capsSp = append(v.capsSp, " "+w)
		}
	}
	if len(v.lower) < 50 || len(v.caps) < 3 || !single(".") || !single(",") {
		panic("sim: the tokenizer no longer has the simulator's single-token words")
	}
	return v
})

// wordTokens returns n token pieces of English-looking prose, the same for
// the same seed and stream. Sentences start with a capital word and end
// with a full stop; the text never has whitespace-only pieces, so every
// delta is "effective" in SPEC.md §1's sense.
func wordTokens(seed, stream uint64, n int) []string {
	v := vocab()
	rng := rand.New(rand.NewPCG(seed, stream))
	out := make([]string, 0, n)
	sentence := 0 // words in the current sentence; 0: at a sentence start
	length := 6 + rng.IntN(9)
	for len(out) < n {
		switch {
		case sentence == 0:
			caps := v.capsSp
			if len(out) == 0 {
				caps = v.caps
			}
			out = append(out, caps[rng.IntN(len(caps))])
			sentence = 1
		case sentence >= length:
			out = append(out, ".")
			sentence, length = 0, 6+rng.IntN(9)
		case sentence == 4 && rng.IntN(4) == 0:
			out = append(out, ",")
			sentence++
		default:
			out = append(out, v.lower[rng.IntN(len(v.lower))])
			sentence++
		}
	}
	// End on a full stop, after a word.
	if n >= 3 {
		if p := out[n-2]; p == "." || p == "," || !strings.HasPrefix(p, " ") || p != strings.ToLower(p) {
			out[n-2] = v.lower[rng.IntN(len(v.lower))]
		}
		out[n-1] = "."
	}
	return out
}

// content is what a profile's responses say: the same for every request.
type content struct {
	reasoning []string // streamed reasoning, one token per piece
	text      []string // visible text, one token per piece
	toolName  string
	toolArgs  string   // JSON arguments of the tool call
	toolParts []string // toolArgs split into its tokens

	// Counts by the tokenizer over the whole texts: the truth of what a
	// complete response carries.
	visibleTokens   int
	reasoningTokens int // streamed or hidden
	toolTokens      int
	reasoningText   string
	visibleText     string
}

func (c *content) outputTokens() int { return c.visibleTokens + c.reasoningTokens + c.toolTokens }

// Stream constants keep the seed's random streams for different parts apart.
const (
	streamText uint64 = iota + 1
	streamReasoning
	streamTool
	streamIDs
)

func seedOf(p Profile) uint64 { return uint64(p.Seed) }

// generate builds the content of p.
func generate(p Profile) *content {
	c := &content{}
	if p.TextMs != nil && p.VisibleTokens > 0 {
		c.text = wordTokens(seedOf(p), streamText, p.VisibleTokens)
		c.visibleText = strings.Join(c.text, "")
		c.visibleTokens = tokens.Count(c.visibleText)
	}
	c.reasoningTokens = p.ReasoningTokens
	if p.ReasoningMs != nil && p.ReasoningTokens > 0 {
		c.reasoning = wordTokens(seedOf(p), streamReasoning, p.ReasoningTokens)
		c.reasoningText = strings.Join(c.reasoning, "")
		c.reasoningTokens = tokens.Count(c.reasoningText)
	}
	if p.ToolMs != nil {
		rng := rand.New(rand.NewPCG(seedOf(p), streamTool))
		args, _ := json.Marshal(struct {
			City string `json:"city"`
			Unit string `json:"unit"`
		}{cities[rng.IntN(len(cities))], []string{"celsius", "fahrenheit"}[rng.IntN(2)]})
		c.toolName, c.toolArgs = "get_weather", string(args)
		for _, id := range tokens.Encode(c.toolArgs) {
			c.toolParts = append(c.toolParts, tokens.Decode([]uint{id}))
		}
		c.toolTokens = len(c.toolParts)
	}
	return c
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func makeIDs(name string, seed int64) IDs {
	h := fnv.New64a()
	h.Write([]byte(name))
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(seed)^streamIDs))
	str := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	const hex = "0123456789abcdef"
	// The draws are made in this order (left to right): keep it, so that a
	// profile keeps its identifiers.
	return IDs{
		Chat:          "chatcmpl-" + str(29, alnum),
		Completion:    "cmpl-" + str(29, alnum),
		Response:      "resp_" + str(50, hex),
		Message:       "msg_" + str(50, hex),
		Msg01:         "msg_01" + str(22, alnum),
		Call:          "call_" + str(24, alnum),
		ToolUse:       "toolu_01" + str(22, alnum),
		ReasoningItem: "rs_" + str(50, hex),
		FunctionItem:  "fc_" + str(50, hex),
		Short:         str(22, alnum),
		Fingerprint:   "fp_" + str(10, hex),
		Signature:     "Er" + str(170, alnum+"+/") + "==",
	}
}
