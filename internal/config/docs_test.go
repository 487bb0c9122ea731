package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ttfx/ttfx/internal/wire"
)

// referencePath is the configuration reference users read.
const referencePath = "../../docs/configuration.md"

// keyPaths lists every key of the configuration file that holds a value, as the
// reference names them: "channels[].timeouts.idle" ([] an element of a
// list), "diagnosis.models.<name>" (a map whose keys the user chooses; its
// values are not walked further — the reference says which keys they take).
func keyPaths(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		*out = append(*out, prefix) // a value that reads itself (Duration, HedgeAfter)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for name, ft := range yamlFields(t) {
			keyPaths(ft, join(prefix, name), out)
		}
		return
	case reflect.Slice:
		if e := t.Elem(); e.Kind() == reflect.Struct {
			keyPaths(e, prefix+"[]", out)
		} else {
			*out = append(*out, prefix) // a list of values (models, groups)
		}
	case reflect.Map:
		*out = append(*out, prefix+".<name>")
	default:
		*out = append(*out, prefix)
	}
}

// TestConfigurationReferenceNamesEveryKey: docs/configuration.md names
// every key of the file by its path, and names no key that does not exist.
// A key added to Config fails here until the reference describes it.
func TestConfigurationReferenceNamesEveryKey(t *testing.T) {
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var paths []string
	keyPaths(reflect.TypeFor[Config](), "", &paths)
	// A channel's kind settings (wire.Kind.Settings) sit flat in its entry.
	for _, k := range wire.Kinds() {
		for _, s := range k.Settings {
			if p := "channels[]." + s.Name; !slices.Contains(paths, p) {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	if len(paths) < 55 {
		t.Fatalf("only %d key paths found: the walk is broken", len(paths))
	}
	for _, p := range paths {
		if !strings.Contains(doc, "| `"+p+"` |") {
			t.Errorf("docs/configuration.md has no row for the key `%s`: add one (| `%s` | default | meaning |) to its tables", p, p)
		}
	}
	// The other way round: every row names a real key (a value or a
	// section, such as routes[].hedge).
	known := map[string]bool{}
	for _, p := range paths {
		for q := p; q != ""; {
			known[q] = true
			i := strings.LastIndexAny(q, ".[")
			if i < 0 {
				break
			}
			q = q[:i]
		}
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_.<>\\[\\]]+)` \\|")
	rows := row.FindAllStringSubmatch(doc, -1)
	for _, m := range rows {
		if !known[m[1]] {
			t.Errorf("docs/configuration.md has a row for `%s`, which is no key of the configuration", m[1])
		}
	}
	t.Logf("%d keys, %d rows", len(paths), len(rows))
}

// TestConfigurationReferenceExamplesParse: every YAML example of the
// reference is read by the same strict parser as a real file (unknown
// fields, types, validation), with each variable it names set.
func TestConfigurationReferenceExamplesParse(t *testing.T) {
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 2 {
		t.Fatalf("%d yaml blocks in docs/configuration.md, want the example and the routes", len(blocks))
	}
	getenv := func(name string) string { return "secret-of-" + name + "-0123456789" }
	for i, m := range blocks {
		y := m[1]
		if !strings.Contains(y, "channels:") {
			// A fragment (routes): give it channels its patterns can match.
			y = "channels:\n  - {name: a, protocol: openai, base_url: \"http://127.0.0.1:1\"}\n  - {name: b, protocol: openai, base_url: \"http://127.0.0.1:2\"}\n" + y
		}
		c, err := Parse([]byte(y), getenv)
		if err != nil {
			t.Errorf("yaml example %d of docs/configuration.md: %v\n%s", i+1, err, m[1])
			continue
		}
		if err := c.Validate(); err != nil {
			t.Errorf("yaml example %d of docs/configuration.md does not validate: %v", i+1, err)
		}
	}
}

// TestConfigurationReferenceDefaults: the defaults the reference states for
// the gateway's own keys are the ones applyDefaults gives.
func TestConfigurationReferenceDefaults(t *testing.T) {
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for key, want := range map[string]string{
		"listen":                              "`" + DefaultListen + "`",
		"store":                               "`" + DefaultStore + "`",
		"retention":                           "`30d`",
		"max_body_bytes":                      "`33554432` (32 MiB)",
		"drain_timeout":                       "`30s`",
		"channels[].timeouts.headers":         "`30s`",
		"channels[].timeouts.first_output":    "`120s`",
		"channels[].timeouts.idle":            "`60s`",
		"channels[].timeouts.total":           "`10m`",
		"routes[].latency.explore":            "`0.05`",
		"routes[].eject.consecutive_failures": "`5`",
		"routes[].eject.base":                 "`30s`",
		"routes[].eject.max":                  "`5m`",
	} {
		if !strings.Contains(doc, "| `"+key+"` | "+want+" |") {
			t.Errorf("docs/configuration.md: the row of `%s` should give the default %s", key, want)
		}
	}
	// The figures behind those strings.
	if DefaultMaxBodyBytes != 33554432 || DefaultDrainTimeout.String() != "30s" || DefaultRetention.Hours() != 720 ||
		DefaultTimeouts.Headers.D().String() != "30s" || DefaultTimeouts.FirstOutput.D().String() != "2m0s" ||
		DefaultTimeouts.Idle.D().String() != "1m0s" || DefaultTimeouts.Total.D().String() != "10m0s" ||
		DefaultExplore != 0.05 || DefaultConsecutiveFailures != 5 || DefaultEjectBase.String() != "30s" || DefaultEjectMax.String() != "5m0s" {
		t.Errorf("a default changed: update docs/configuration.md and this test")
	}
}

// TestStoreEnv: the store's DSN can come from the environment, never with
// store as well, and a wrong one is reported without its value.
func TestStoreEnv(t *testing.T) {
	env := map[string]string{"DSN": "postgres://ttfx:s3cret@db:5432/ttfx", "BAD": "mysql://ttfx:s3cret@db/ttfx"}
	getenv := func(k string) string { return env[k] }
	c, err := Parse([]byte("store_env: DSN\n"), getenv)
	if err != nil || c.Store != env["DSN"] {
		t.Fatalf("store_env: %v, store %q", err, c.Store)
	}
	if _, err := Parse([]byte("store_env: NOPE\n"), getenv); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("unset store_env: %v", err)
	}
	if _, err := Parse([]byte("store_env: DSN\nstore: sqlite:x.db\n"), getenv); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("store and store_env: %v", err)
	}
	_, err = Parse([]byte("store_env: BAD\n"), getenv)
	if err == nil || !strings.Contains(err.Error(), "store_env: BAD") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a wrong DSN from the environment: %v", err)
	}
	// ttfx keys --config reads it too.
	t.Setenv("TTFX_TEST_STORE_DSN", env["DSN"])
	p := t.TempDir() + "/ttfx.yaml"
	os.WriteFile(p, []byte("store_env: TTFX_TEST_STORE_DSN\n"), 0o600)
	if c, err := LoadUnresolved(p); err != nil || c.Store != env["DSN"] {
		t.Errorf("LoadUnresolved: %v, store %q", err, c.Store)
	}
}
