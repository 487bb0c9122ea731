package route

import (
	"net/http"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

func names(cs []*Channel) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestCandidates(t *testing.T) {
	chans := []*Channel{
		{Name: "backup", Protocol: "openai", Priority: 1, Weight: 1},
		{Name: "a", Protocol: "openai", Models: []string{"gpt-*"}, Weight: 3},
		{Name: "b", Protocol: "openai", Models: []string{"gpt-4o"}, Weight: 1},
		{Name: "claude", Protocol: "anthropic"},
		{Name: "team-b-only", Protocol: "openai", Groups: []string{"team-b"}},
	}
	r := NewRouter(chans, 1)
	first := map[string]int{}
	for i := 0; i < 4000; i++ {
		got := r.Candidates("openai", "gpt-4o", "team-a")
		if len(got) != 3 || got[2].Name != "backup" {
			t.Fatalf("candidates = %v", names(got))
		}
		first[got[0].Name]++
	}
	// Weight 3 against 1: a is first about 75% of the time.
	if share := float64(first["a"]) / 4000; share < 0.70 || share > 0.80 {
		t.Fatalf("a first %.2f of the time, want about 0.75 (%v)", share, first)
	}
	if got := names(r.Candidates("openai", "o3", "team-a")); len(got) != 1 || got[0] != "backup" {
		t.Fatalf("o3 candidates = %v", got)
	}
	if got := names(r.Candidates("openai", "o3", "team-b")); len(got) != 2 {
		t.Fatalf("team-b candidates = %v", got)
	}
	if got := r.Candidates("gemini", "x", ""); len(got) != 0 {
		t.Fatalf("gemini candidates = %v", names(got))
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, model string
		want           bool
	}{
		{"*", "gpt-4o", true},
		{"*", "meta-llama/Llama-3.1-8B", true},
		{"*", "", true},
		{"gpt-*", "gpt-4o", true},
		{"gpt-*", "openai/gpt-4o", false},
		{"*/gpt-*", "openai/gpt-4o", true},
		{"*llama*", "meta-llama/Llama-3.1-8B", true},
		{"claude-?-haiku", "claude-3-haiku", true},
		{"claude-?-haiku", "claude-35-haiku", false},
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"[abc]", "[abc]", true},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.model); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.model, got, tt.want)
		}
	}
	c := &Channel{Protocol: "openai", Models: []string{"gpt-4o"}}
	if !c.Serves("openai", "", "") {
		t.Error("GET /v1/models (no model) not served by a channel with exact models")
	}
}

// TestFamilies: a channel restricted to some of its kind's families (the
// zero-config gateway's) serves only those; unrestricted, all of them.
func TestFamilies(t *testing.T) {
	wire.RegisterKind(&wire.Kind{Name: "two-families", Families: []string{"fam-a", "fam-b"}, Authorize: func(http.Header, string) {}})
	all := &Channel{Name: "all", Protocol: "two-families", Weight: 1}
	own := &Channel{Name: "own", Protocol: "two-families", Families: []string{"fam-a"}, Weight: 1}
	r := NewRouter([]*Channel{all, own}, 1)
	if got := names(r.Candidates("fam-a", "m", "")); len(got) != 2 {
		t.Errorf("fam-a candidates = %v, want both", got)
	}
	if got := names(r.Candidates("fam-b", "m", "")); len(got) != 1 || got[0] != "all" {
		t.Errorf("fam-b candidates = %v, want [all]", got)
	}
	if own.Serves("fam-b", "", "") || own.Serves("fam-c", "m", "") || !own.Serves("fam-a", "", "") {
		t.Error("the restricted channel serves a family it was not given, or not its own")
	}
}
