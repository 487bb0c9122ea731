package bench

import (
	"math"
	"testing"

	"github.com/ttfx/ttfx/internal/tokens"
)

func TestPromptWords(t *testing.T) {
	for _, w := range promptWords {
		if n := tokens.Count(" " + w); n != 1 {
			t.Errorf("%q is %d tokens with its leading space, want 1", w, n)
		}
	}
}

func TestPromptLengths(t *testing.T) {
	p, err := NewPrompts(300, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		text, n := p.Prompt(i)
		if n != 300 || tokens.Count(text) != 300 {
			t.Errorf("prompt %d: %d tokens (counted again: %d), want 300", i, n, tokens.Count(text))
		}
		if seen[text] {
			t.Errorf("prompt %d repeats an earlier one", i)
		}
		seen[text] = true
	}
	again, _ := p.Prompt(3)
	first, _ := p.Prompt(3)
	if again != first {
		t.Error("the same index gave two prompts")
	}
	// Shorter than the instruction: words only, still exact.
	short, _ := NewPrompts(5, 0, 1)
	if text, n := short.Prompt(0); n != 5 {
		t.Errorf("5-token prompt %q has %d tokens", text, n)
	}
}

func TestPromptDistribution(t *testing.T) {
	p, _ := NewPrompts(400, 50, 3)
	const n = 400
	var sum, sq float64
	for i := 0; i < n; i++ {
		_, k := p.Prompt(i)
		sum += float64(k)
		sq += float64(k) * float64(k)
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	// The standard error of the mean is 50/√400 = 2.5; allow 4 of them.
	if math.Abs(mean-400) > 10 {
		t.Errorf("mean %v, want 400 ± 10", mean)
	}
	if math.Abs(sd-50) > 8 {
		t.Errorf("sd %v, want 50 ± 8", sd)
	}
}

func TestPromptErrors(t *testing.T) {
	for _, c := range []struct{ mean, sd float64 }{{0, 0}, {-5, 1}, {100, -1}, {math.NaN(), 0}, {10, math.Inf(1)}, {3e6, 0}} {
		if _, err := NewPrompts(c.mean, c.sd, 1); err == nil {
			t.Errorf("NewPrompts(%v, %v) accepted", c.mean, c.sd)
		}
	}
}
