package route

import "testing"

// TestUpstreamModel: exact entries first, then the first glob in order; a
// * in the provider's name takes what the glob's * matched; names no
// entry maps go as asked.
func TestUpstreamModel(t *testing.T) {
	c := &Channel{
		Models: []string{"gpt-*", "gpt-4o", "claude-*", "o?-mini", "*-preview", "keep"},
		Upstream: map[string]string{
			"gpt-*": "azure-gpt", "gpt-4o": "prod-gpt4o", "claude-*": "eu.anthropic.claude-*",
			"o?-mini": "small", "*-preview": "*",
		},
	}
	for model, want := range map[string]string{
		"gpt-4o":             "prod-gpt4o", // exact before the earlier glob
		"gpt-4.1":            "azure-gpt",
		"claude-sonnet-4":    "eu.anthropic.claude-sonnet-4",
		"claude-":            "eu.anthropic.claude-",
		"o3-mini":            "small",
		"gemini-2.5-preview": "gemini-2.5",
		"keep":               "keep",
		"other":              "other",
		"":                   "",
		"gpt-*":              "azure-gpt", // a literal * is a name, not an entry
	} {
		if got := c.UpstreamModel(model); got != want {
			t.Errorf("UpstreamModel(%q) = %q, want %q", model, got, want)
		}
	}
	if got := (&Channel{Models: []string{"a"}}).UpstreamModel("a"); got != "a" {
		t.Errorf("a channel without aliases: %q", got)
	}
}
