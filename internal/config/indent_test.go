package config

import (
	"strings"
	"testing"
)

// TestIndentationErrorLine: a line indented wrong is named by its own line
// number, not by the line where its block began (where the YAML parser
// places the error).
func TestIndentationErrorLine(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"a key one space short in a list item",
			"listen: 127.0.0.1:8080\nkeys:\n  - name: ops\n    role: admin\n   key_env: X\nchannels: []\n",
			"line 5: indented 3 spaces, which lines up with no key above it (0, 2, 4 spaces)"},
		{"a key one space short in a map",
			"listen: 127.0.0.1:8080\ndiagnosis:\n  upstream_headers_slow_ms: 2000\n generation_stalled_ms: 5000\n",
			"line 4: indented 1 spaces"},
		{"a key too deep under a value",
			"# comment\nlisten: 127.0.0.1:8080\nchannels:\n  - name: a   # the first\n    protocol: openai\n      base_url: http://x\n",
			"line 6: indented 6 spaces, deeper than the line above, which opens no block"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), func(string) string { return "x" })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	// Well-indented files give no such finding, whatever else is wrong.
	for _, ok := range []string{
		"listen: a\nkeys:\n- name: x\n  role: admin\nchannels:\n  - name: a\n    timeouts: {headers: 1s}\n    models: [a, b]\n",
		"log:\n  level: info\n\n  format: json  # ok\nmetrics:\n  public: true\n",
		"a: |\n  text\n    more\nb: 1\n",
	} {
		if line, msg, found := misindented([]byte(ok)); found {
			t.Errorf("%q: line %d: %s, want nothing found", ok, line, msg)
		}
	}
}
