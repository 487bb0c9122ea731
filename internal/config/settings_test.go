package config

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/wire"
)

// A kind with its own channel keys, as Vertex (project, location,
// credentials) or Bedrock (profile) have.
func init() {
	wire.RegisterKind(&wire.Kind{
		Name: "keyed", Families: []string{"openai"},
		Authorize: func(http.Header, string) {},
		Settings: []wire.Setting{
			{Name: "project", Doc: "the project", Required: true},
			{Name: "location", Doc: "the region"},
			{Name: "credentials_env", Doc: "a variable naming a key file"},
			{Name: "credentials_file", Doc: "a key file"},
		},
		DefaultBaseURL: func(_ string, s map[string]string) string { return "https://" + s["location"] + ".keyed.example" },
	})
}

// A channel's kind settings sit flat in its entry: the ones its kind reads
// are kept (a *_env one resolved, a *_file one made absolute), a base_url
// the kind can derive is derived, and a key no kind reads, a missing
// required one and an unset variable are errors naming them.
func TestKindSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "ttfx.yaml")
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	env := map[string]string{"SA_KEY": "/secrets/sa.json"}
	getenv := func(k string) string { return env[k] }
	c, err := Load(write(`
channels:
  - name: k
    protocol: keyed
    project: p-1
    location: europe-west4
    credentials_env: SA_KEY
  - {name: f, protocol: keyed, project: p-2, credentials_file: sa.json, base_url: "http://127.0.0.1:1"}
`), getenv)
	if err != nil {
		t.Fatal(err)
	}
	k, f := c.Channels[0], c.Channels[1]
	if k.Settings["project"] != "p-1" || k.Settings["location"] != "europe-west4" || k.SettingsEnv["credentials_env"] != "/secrets/sa.json" {
		t.Errorf("settings %v env %v", k.Settings, k.SettingsEnv)
	}
	if k.BaseURL != "https://europe-west4.keyed.example" {
		t.Errorf("derived base_url %q", k.BaseURL)
	}
	if f.Settings["credentials_file"] != filepath.Join(dir, "sa.json") || f.BaseURL != "http://127.0.0.1:1" {
		t.Errorf("file %q base %q", f.Settings["credentials_file"], f.BaseURL)
	}

	_, err = Load(write(`
channels:
  - {name: a, protocol: keyed, projet: p-1}
  - {name: b, protocol: openai, base_url: "http://127.0.0.1:1", project: p-1}
`), getenv)
	for _, want := range []string{
		`line 3: unknown field "projet" in channels[0]; did you mean "project"?`,
		`line 4: unknown field "project" in channels[1]`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to say %q", err, want)
		}
	}
	_, err = Load(write(`
channels:
  - {name: a, protocol: keyed, location: x}
  - {name: c, protocol: keyed, project: p, credentials_env: UNSET_SA}
`), getenv)
	for _, want := range []string{
		`UNSET_SA is empty or unset (channels[1].credentials_env of "c")`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to say %q", err, want)
		}
	}
	env["UNSET_SA"] = "x"
	_, err = Load(write(`
channels:
  - {name: a, protocol: keyed, location: x}
  - {name: c, protocol: keyed, project: p, credentials_env: UNSET_SA}
`), getenv)
	for _, want := range []string{
		`channel "a": a channel of kind keyed needs project (the project)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to say %q", err, want)
		}
	}
}
