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
		{"unknown field", "listne: x", "field listne not found"},
		{"missing secret", "keys: [{name: a, role: admin, key_env: NOPE}]", "NOPE is empty or unset"},
		{"secret in file", "keys: [{name: a, role: admin}]", "key_env is required"},
		{"bad role", "keys: [{name: a, role: boss, key_env: TTFX_ADMIN_KEY}]", `role "boss"`},
		{"viewer without group", "keys: [{name: a, role: viewer, key_env: TTFX_ADMIN_KEY}]", "needs a group"},
		{"bad protocol", "channels: [{name: c, protocol: grpc, base_url: http://x}]", `protocol "grpc"`},
		{"bad url", "channels: [{name: c, protocol: openai, base_url: x}]", "not an http(s) URL"},
		{"bad duration", "retention: forever", "invalid duration"},
		{"bad store", "store: mysql://x", "want sqlite:FILE"},
		{"negative timeout", "channels: [{name: c, protocol: openai, base_url: http://x, timeouts: {idle: -1s}}]", "timeouts.idle must not be negative"},
		{"duplicate channel", "channels: [{name: c, protocol: openai, base_url: http://x}, {name: c, protocol: openai, base_url: http://y}]", "defined twice"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), func(k string) string { return env[k] })
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}
