package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// key_file reads a secret from a file (relative to the configuration's
// directory), without its trailing newline; a missing or empty file and a
// key given both ways are errors naming the field.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "up.key"), []byte("sk-upstream\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "admin.key"), []byte("admin-secret"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty.key"), []byte("\n"), 0o600)
	write := func(body string) string {
		p := filepath.Join(dir, "ttfx.yaml")
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	c, err := Load(write(`
keys:
  - {name: admin, role: admin, key_file: admin.key}
channels:
  - {name: up, protocol: openai, base_url: "http://127.0.0.1:1", key_file: `+filepath.Join(dir, "up.key")+`}
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Keys[0].Secret != "admin-secret" || c.Channels[0].Secret != "sk-upstream" {
		t.Errorf("secrets %q %q", c.Keys[0].Secret, c.Channels[0].Secret)
	}
	_, err = Load(write(`
keys:
  - {name: admin, role: admin, key_file: missing.key}
  - {name: v, role: viewer, group: g, key_env: V, key_file: admin.key}
channels:
  - {name: up, protocol: openai, base_url: "http://127.0.0.1:1", key_file: empty.key}
`), func(string) string { return "x" })
	for _, want := range []string{`keys[0].key_file of "admin"`, "missing.key", `keys[1] "v": give key_env or key_file, not both`, `channels[0].key_file of "up"`, "empty.key is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}
