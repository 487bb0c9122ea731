package config

import (
	"strings"
	"testing"
	"time"
)

const specExample = `
listen: 127.0.0.1:8080
store: sqlite:ttfx.db
retention: 720h
keys:
  - name: ops
    role: admin
    key_env: TTFX_ADMIN_KEY
  - name: team-a
    role: client
    group: team-a
    key_env: TEAM_A_KEY
  - name: team-a-dashboard
    role: viewer
    group: team-a
    key_env: TEAM_A_VIEWER_KEY
channels:
  - name: openai-eu
    protocol: openai
    base_url: http://127.0.0.1:9001
    key_env: UPSTREAM_KEY
    models: ["*"]
    region: eu
    priority: 0
    weight: 1
    timeouts: {headers: 30s, first_output: 120s, idle: 60s, total: 10m}
diagnosis:
  upstream_headers_slow_ms: 2000
  models:
    slow-model: {upstream_headers_slow_ms: 9000}
`

var env = map[string]string{"TTFX_ADMIN_KEY": "a1", "TEAM_A_KEY": "c1", "TEAM_A_VIEWER_KEY": "v1", "UPSTREAM_KEY": "u1"}

func TestParseSpecExample(t *testing.T) {
	c, err := Parse([]byte(specExample), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Retention.D() != 720*time.Hour || len(c.Keys) != 3 || c.Keys[1].Secret != "c1" {
		t.Fatalf("config = %+v", c)
	}
	ch := c.Channels[0]
	if ch.Secret != "u1" || ch.Timeouts.FirstOutput.D() != 120*time.Second || ch.Region != "eu" {
		t.Fatalf("channel = %+v", ch)
	}
	if v := c.Diagnosis.UpstreamHeadersSlowMs; v == nil || *v != 2000 {
		t.Fatalf("diagnosis = %+v", c.Diagnosis)
	}
	if v := c.Diagnosis.Models["slow-model"].UpstreamHeadersSlowMs; v == nil || *v != 9000 {
		t.Fatalf("model override = %+v", c.Diagnosis.Models)
	}
}

func TestEmptyIsDefaults(t *testing.T) {
	c, err := Parse(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.Store != DefaultStore || c.Retention.D() != DefaultRetention {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown field", "listne: x", `line 1: unknown field "listne" at the top level; did you mean "listen"?`},
		{"unknown nested field", "channels:\n  - {name: c, protocol: openai, base_url: http://x, modles: [a]}", `line 2: unknown field "modles" in channels[0]; did you mean "models"?`},
		{"unknown field far from any", "log: {colour: red}", `unknown field "colour" in log (known: format, level)`},
		{"unknown map value field", "diagnosis:\n  models:\n    o3: {first_reponse_slow_ms: 1}", `line 3: unknown field "first_reponse_slow_ms" in diagnosis.models.o3; did you mean "first_response_slow_ms"?`},
		{"wrong type", "max_body_bytes: lots", "into a whole number"},
		{"missing secret", "keys: [{name: a, role: admin, key_env: NOPE}]", "NOPE is empty or unset"},
		{"secret in file", "keys: [{name: a, role: admin}]", "key_env is required"},
		{"bad role", "keys: [{name: a, role: boss, key_env: TTFX_ADMIN_KEY}]", `role "boss"`},
		{"viewer without group", "keys: [{name: a, role: viewer, key_env: TTFX_ADMIN_KEY}]", "needs a group"},
		{"bad protocol", "channels: [{name: c, protocol: grpc, base_url: http://x}]", `protocol "grpc"`},
		{"bad url", "channels: [{name: c, protocol: openai, base_url: x}]", "not an http(s) URL"},
		{"bad duration", "retention: forever", "invalid duration"},
		{"days are fine, minutes are not", "retention: 30dm", "invalid duration"},
		{"bad store", "store: mysql://x", "want sqlite:FILE"},
		{"negative timeout", "channels: [{name: c, protocol: openai, base_url: http://x, timeouts: {idle: -1s}}]", "timeouts.idle must not be negative"},
		{"negative upstream idle", "upstream_idle_timeout: -1s", "upstream_idle_timeout must not be negative"},
		{"read share past 1", "read_cpu_share: 1.5", "read_cpu_share must be between 0 and 1"},
		{"negative read share", "read_cpu_share: -0.1", "read_cpu_share must be between 0 and 1"},
		{"negative answer bound", "max_answer_values: -1", "max_answer_values must not be negative"},
		{"negative body budget", "body_budget_per_key_bytes: -1", "body_budget_per_key_bytes must not be negative"},
		{"duplicate channel", "channels: [{name: c, protocol: openai, base_url: http://x}, {name: c, protocol: openai, base_url: http://y}]", "defined twice"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "config.") {
			t.Errorf("%s: err = %v names a Go type", tt.name, err)
		}
	}
}

// TestAllErrorsAtOnce: every unknown field and every unset variable is
// reported by the first attempt, not one per attempt.
func TestAllErrorsAtOnce(t *testing.T) {
	_, err := Parse([]byte("listne: x\nstroe: y\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `"listne"`) || !strings.Contains(err.Error(), `"stroe" at the top level; did you mean "store"`) {
		t.Fatalf("unknown fields: %v", err)
	}
	y := `
keys: [{name: ops, role: admin, key_env: A_UNSET}]
channels: [{name: c, protocol: openai, base_url: http://x, key_env: B_UNSET}]
metrics: {key_env: C_UNSET}
`
	_, err = Parse([]byte(y), func(string) string { return "" })
	want := `3 environment variables are empty or unset: A_UNSET (keys[0].key_env of "ops"), C_UNSET (metrics.key_env), B_UNSET (channels[0].key_env of "c")`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("unset variables: %v\nwant %s", err, want)
	}
}

// TestDays: durations take days everywhere, in the file too.
func TestDays(t *testing.T) {
	c, err := Parse([]byte("retention: 30d\ndrain_timeout: 1d12h\nupstream_idle_timeout: 1d\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Retention.D() != 30*24*time.Hour || c.DrainTimeout.D() != 36*time.Hour || c.UpstreamIdleTimeout.D() != 24*time.Hour {
		t.Fatalf("retention %v, drain_timeout %v, upstream_idle_timeout %v", c.Retention.D(), c.DrainTimeout.D(), c.UpstreamIdleTimeout.D())
	}
	for s, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "90s": 90 * time.Second, "-1d": -24 * time.Hour, "0": 0} {
		if d, err := ParseDuration(s); err != nil || d != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, d, err, want)
		}
	}
	for _, s := range []string{"d", "7x", "1d-1h", "99999999d", ""} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) accepted", s)
		}
	}
}

// TestWarnings: a configuration that starts with no keys or no channels
// says so.
func TestWarnings(t *testing.T) {
	c, err := Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(c.Warnings(), "\n")
	if !strings.Contains(w, "no keys") || !strings.Contains(w, "no channels") {
		t.Fatalf("warnings of an empty configuration: %q", w)
	}
	c, err = Parse([]byte(specExample), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Fatalf("warnings of a full configuration: %q", w)
	}
}
