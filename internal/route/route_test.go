package route

import "testing"

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
