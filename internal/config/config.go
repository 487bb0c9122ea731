// Package config reads the gateway's YAML configuration (SPEC.md §10).
// Secrets are never written in the file, only the names of the environment
// variables that hold them; Load resolves them.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of the zero-config gateway.
const (
	DefaultListen       = "127.0.0.1:8080"
	DefaultStore        = "sqlite:ttfx.db"
	DefaultRetention    = 30 * 24 * time.Hour
	DefaultMaxBodyBytes = 32 << 20
	DefaultDrainTimeout = 30 * time.Second
)

// Default per-channel timeouts: generous, because reasoning models can take
// minutes before their first output.
var DefaultTimeouts = Timeouts{
	Headers:     Duration(30 * time.Second),
	FirstOutput: Duration(120 * time.Second),
	Idle:        Duration(60 * time.Second),
	Total:       Duration(10 * time.Minute),
}

// Config is the whole configuration file.
type Config struct {
	Listen    string   `yaml:"listen"`
	Store     string   `yaml:"store"`     // sqlite:FILE, postgres://… or clickhouse://…
	Retention Duration `yaml:"retention"` // records older than this are deleted; 0 = default

	Keys     []Key     `yaml:"keys"`
	Channels []Channel `yaml:"channels"`

	// Diagnosis holds the thresholds of SPEC.md §4; the diagnose package
	// interprets it.
	Diagnosis Diagnosis `yaml:"diagnosis"`

	// MaxBodyBytes bounds a client's request body; 0 = DefaultMaxBodyBytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// BodyReadTimeout bounds reading a client's request body (a slow
	// upload gets 408); 0 = 60s.
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
	// DrainTimeout bounds how long shutdown waits for in-flight streams.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// UserHashKeyEnv names the variable holding the key of the keyed hash
	// of client-sent user ids; empty: a key kept beside the store.
	UserHashKeyEnv string `yaml:"user_hash_key_env"`
	// UserHashKey is resolved from UserHashKeyEnv by Load.
	UserHashKey string `yaml:"-"`

	Log       Log       `yaml:"log"`
	Metrics   Metrics   `yaml:"metrics"`
	Telemetry Telemetry `yaml:"telemetry"`
}

// Key is one API key of the gateway.
type Key struct {
	Name   string `yaml:"name"`
	Role   string `yaml:"role"`    // admin | viewer | client
	Group  string `yaml:"group"`   // for viewer and client keys
	KeyEnv string `yaml:"key_env"` // the variable that holds the key
	// Secret is the key, resolved from KeyEnv by Load; never in the file.
	Secret string `yaml:"-"`
}

// Channel is one upstream.
type Channel struct {
	Name     string   `yaml:"name"`
	Protocol string   `yaml:"protocol"` // openai | anthropic | gemini
	BaseURL  string   `yaml:"base_url"`
	KeyEnv   string   `yaml:"key_env"`
	Models   []string `yaml:"models"` // exact names or globs (path.Match); empty = all
	Groups   []string `yaml:"groups"` // client groups allowed; empty = all
	Region   string   `yaml:"region"`
	Priority int      `yaml:"priority"` // lower is tried first
	Weight   int      `yaml:"weight"`   // share among channels of equal priority; 0 = 1
	Timeouts Timeouts `yaml:"timeouts"`
	// StreamUsage, when false, keeps the gateway from adding
	// stream_options.include_usage to OpenAI streams on this channel (for
	// upstreams that refuse the field). Default true.
	StreamUsage *bool `yaml:"stream_usage"`
	// Secret is the channel's upstream key, resolved from KeyEnv by Load.
	Secret string `yaml:"-"`
}

// Timeouts of one channel. Zero fields take DefaultTimeouts.
type Timeouts struct {
	Headers     Duration `yaml:"headers"`      // upstream start to headers
	FirstOutput Duration `yaml:"first_output"` // upstream start to first effective output (t4)
	Idle        Duration `yaml:"idle"`         // between two stream events
	Total       Duration `yaml:"total"`        // whole request, from receipt
}

// WithDefaults fills zero fields from DefaultTimeouts.
func (t Timeouts) WithDefaults() Timeouts {
	if t.Headers == 0 {
		t.Headers = DefaultTimeouts.Headers
	}
	if t.FirstOutput == 0 {
		t.FirstOutput = DefaultTimeouts.FirstOutput
	}
	if t.Idle == 0 {
		t.Idle = DefaultTimeouts.Idle
	}
	if t.Total == 0 {
		t.Total = DefaultTimeouts.Total
	}
	return t
}

// Thresholds are the diagnosis thresholds of SPEC.md §4 in milliseconds
// (and tokens per second for generation speed). A nil field inherits.
type Thresholds struct {
	UpstreamHeadersSlowMs *float64 `yaml:"upstream_headers_slow_ms"`
	FirstResponseSlowMs   *float64 `yaml:"first_response_slow_ms"`
	EventToResponseGapMs  *float64 `yaml:"event_to_response_gap_ms"`
	ResponseToTextGapMs   *float64 `yaml:"response_to_text_gap_ms"`
	GenerationSlowTPS     *float64 `yaml:"generation_slow_tps"`
	GenerationMinTokens   *float64 `yaml:"generation_min_tokens"`
	LocalOverheadMs       *float64 `yaml:"local_overhead_ms"`
}

// Diagnosis is the global thresholds with overrides per model and channel.
type Diagnosis struct {
	Thresholds `yaml:",inline"`
	Models     map[string]Thresholds `yaml:"models"`
	Channels   map[string]Thresholds `yaml:"channels"`
}

// Log configures the structured logs.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error; default info
	Format string `yaml:"format"` // text | json; default text
}

// Metrics configures GET /metrics.
type Metrics struct {
	KeyEnv string `yaml:"key_env"` // when set, /metrics requires this bearer key
	// Key is resolved from KeyEnv by Load.
	Key string `yaml:"-"`
	// MaxModels bounds the distinct model label values; others are "other".
	MaxModels int `yaml:"max_models"`
}

// Telemetry configures the optional OpenTelemetry export.
type Telemetry struct {
	OTLPEndpoint string   `yaml:"otlp_endpoint"` // OTLP/HTTP base URL; empty = off
	Interval     Duration `yaml:"interval"`      // metric export interval
}

// Duration is a time.Duration written as "30s", "720h", "10m" in YAML.
type Duration time.Duration

// D returns the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration like 30s: %w", n.Line, err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// Load reads the file at path, resolves secrets from the environment
// (getenv, usually os.Getenv) and checks it.
func Load(path string, getenv func(string) string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(b, getenv)
}

// Parse reads a configuration from YAML bytes. Unknown fields are errors,
// so a typo does not silently fall back to a default.
func Parse(b []byte, getenv func(string) string) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	// An empty file is all defaults: the decoder reports io.EOF for it.
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	c.applyDefaults()
	if err := c.resolve(getenv); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Store == "" {
		c.Store = DefaultStore
	}
	if c.Retention == 0 {
		c.Retention = Duration(DefaultRetention)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = Duration(DefaultDrainTimeout)
	}
	for i := range c.Channels {
		ch := &c.Channels[i]
		if ch.Weight == 0 {
			ch.Weight = 1
		}
		ch.Timeouts = ch.Timeouts.WithDefaults()
	}
}

func (c *Config) resolve(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	for i := range c.Keys {
		k := &c.Keys[i]
		if k.KeyEnv == "" {
			return fmt.Errorf("key %q: key_env is required (keys are never written in the file)", k.Name)
		}
		k.Secret = getenv(k.KeyEnv)
		if k.Secret == "" {
			return fmt.Errorf("key %q: environment variable %s is empty or unset", k.Name, k.KeyEnv)
		}
	}
	if c.Metrics.KeyEnv != "" {
		if c.Metrics.Key = getenv(c.Metrics.KeyEnv); c.Metrics.Key == "" {
			return fmt.Errorf("metrics.key_env: environment variable %s is empty or unset", c.Metrics.KeyEnv)
		}
	}
	if c.UserHashKeyEnv != "" {
		c.UserHashKey = getenv(c.UserHashKeyEnv)
		if len(c.UserHashKey) < 16 {
			return fmt.Errorf("user_hash_key_env: %s must hold at least 16 bytes", c.UserHashKeyEnv)
		}
	}
	for i := range c.Channels {
		ch := &c.Channels[i]
		if ch.KeyEnv != "" {
			ch.Secret = getenv(ch.KeyEnv)
			if ch.Secret == "" {
				return fmt.Errorf("channel %q: environment variable %s is empty or unset", ch.Name, ch.KeyEnv)
			}
		}
	}
	return nil
}

// Validate checks the configuration for mistakes a gateway should refuse to
// start with.
func (c *Config) Validate() error {
	var errs []error
	names := map[string]bool{}
	secrets := map[string]string{}
	for _, k := range c.Keys {
		switch k.Role {
		case "admin", "viewer", "client":
		default:
			errs = append(errs, fmt.Errorf("key %q: role %q is not admin, viewer or client", k.Name, k.Role))
		}
		if k.Name == "" {
			errs = append(errs, errors.New("a key has no name"))
		}
		if names["key:"+k.Name] {
			errs = append(errs, fmt.Errorf("key %q is defined twice", k.Name))
		}
		names["key:"+k.Name] = true
		if k.Role == "viewer" && k.Group == "" {
			errs = append(errs, fmt.Errorf("key %q: a viewer key needs a group (use an admin key to read everything)", k.Name))
		}
		if other, ok := secrets[k.Secret]; ok && k.Secret != "" {
			errs = append(errs, fmt.Errorf("keys %q and %q have the same secret", other, k.Name))
		}
		secrets[k.Secret] = k.Name
	}
	for _, ch := range c.Channels {
		if ch.Name == "" {
			errs = append(errs, errors.New("a channel has no name"))
		}
		if names["channel:"+ch.Name] {
			errs = append(errs, fmt.Errorf("channel %q is defined twice", ch.Name))
		}
		names["channel:"+ch.Name] = true
		switch ch.Protocol {
		case "openai", "anthropic", "gemini":
		default:
			errs = append(errs, fmt.Errorf("channel %q: protocol %q is not openai, anthropic or gemini", ch.Name, ch.Protocol))
		}
		if u, err := url.Parse(ch.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("channel %q: base_url %q is not an http(s) URL", ch.Name, ch.BaseURL))
		}
		if ch.Weight < 0 {
			errs = append(errs, fmt.Errorf("channel %q: weight must not be negative", ch.Name))
		}
		for name, d := range map[string]Duration{"headers": ch.Timeouts.Headers, "first_output": ch.Timeouts.FirstOutput, "idle": ch.Timeouts.Idle, "total": ch.Timeouts.Total} {
			if d < 0 {
				errs = append(errs, fmt.Errorf("channel %q: timeouts.%s must not be negative", ch.Name, name))
			}
		}
		for _, m := range ch.Models {
			if strings.TrimSpace(m) == "" {
				errs = append(errs, fmt.Errorf("channel %q: empty model pattern", ch.Name))
			}
		}
	}
	if !strings.HasPrefix(c.Store, "sqlite:") && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") &&
		!strings.HasPrefix(c.Store, "clickhouse://") {
		errs = append(errs, fmt.Errorf("store %q: want sqlite:FILE, postgres://… or clickhouse://…", c.Store))
	}
	if c.Retention < 0 {
		errs = append(errs, errors.New("retention must not be negative"))
	}
	if c.BodyReadTimeout < 0 {
		errs = append(errs, errors.New("body_read_timeout must not be negative"))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, errors.New("drain_timeout must not be negative"))
	}
	return errors.Join(errs...)
}
