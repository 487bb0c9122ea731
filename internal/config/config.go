// Package config reads the gateway's YAML configuration (SPEC.md §10).
// Secrets are never written in the file, only the names of the environment
// variables that hold them; Load resolves them.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ttfx/ttfx/internal/wire"
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
	Listen string `yaml:"listen"`
	Store  string `yaml:"store"` // sqlite:FILE, postgres://… or clickhouse://…
	// StoreEnv names the variable holding the store's DSN instead, for a
	// DSN with a password (from a Kubernetes Secret, say); not with Store.
	StoreEnv  string   `yaml:"store_env"`
	Retention Duration `yaml:"retention"` // records older than this are deleted; 0 = default

	Keys     []Key     `yaml:"keys"`
	Channels []Channel `yaml:"channels"`
	// Routes order, eject and hedge the channels of the models they match
	// (first match wins); see routes.go.
	Routes []Route `yaml:"routes"`

	// Diagnosis holds the thresholds of SPEC.md §4; the diagnose package
	// interprets it.
	Diagnosis Diagnosis `yaml:"diagnosis"`

	// MaxBodyBytes bounds a client's request body; 0 = DefaultMaxBodyBytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// BodyBudgetBytes bounds the request-body bytes held in memory at once
	// over every request; 0 = a quarter of GOMEMLIMIT when set, at most
	// 256 MiB. BodyBudgetPerKeyBytes is one key's share; 0 = half.
	// A body that finds no room within a second is answered 503.
	BodyBudgetBytes       int64 `yaml:"body_budget_bytes"`
	BodyBudgetPerKeyBytes int64 `yaml:"body_budget_per_key_bytes"`
	// BodyReadTimeout bounds reading a client's request body (a slow
	// upload gets 408); 0 = 60s.
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
	// DrainTimeout bounds how long shutdown waits for in-flight streams.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// UpstreamIdleTimeout is how long an idle upstream connection is kept
	// for reuse; 0 = 5m (relay.DefaultUpstreamIdleTimeout).
	UpstreamIdleTimeout Duration `yaml:"upstream_idle_timeout"`
	// ReadTimeout is the deadline of one read of the read API (and of the
	// dashboard's reads), waiting for its turn included; 0 = 10s.
	ReadTimeout Duration `yaml:"read_timeout"`
	// ReadConcurrency is how many reads run at once; 0 = a quarter of the
	// cores, at least one.
	ReadConcurrency int `yaml:"read_concurrency"`
	// MaxAnswerValues bounds one /api/stats answer: groups × buckets ×
	// fields; 0 = 16,000 (store.DefaultMaxAnswerValues).
	MaxAnswerValues int `yaml:"max_answer_values"`
	// ReadCPUShare is the share of the cores reads may take at full tilt
	// (each read's slot rests in proportion after it); 0 = 0.1.
	ReadCPUShare float64 `yaml:"read_cpu_share"`
	// AuthFailuresPerMinute is how many failed authentications one source
	// address may make in a minute before it is answered 429; 0 = 30.
	AuthFailuresPerMinute int `yaml:"auth_failures_per_minute"`
	// AuthFailureRecordsPerMinute bounds the failed authentications
	// recorded (and logged) in a minute over every source together; the
	// rest are counted in ttfx_auth_failures_unrecorded_total; 0 = 100.
	AuthFailureRecordsPerMinute int `yaml:"auth_failure_records_per_minute"`
	// UserHashKeyEnv names the variable holding the key of the keyed hash
	// of client-sent user ids; empty: a key kept beside the store.
	UserHashKeyEnv string `yaml:"user_hash_key_env"`
	// UserHashKey is resolved from UserHashKeyEnv by Load.
	UserHashKey string `yaml:"-"`

	// TLS, when set, serves HTTPS (HTTP/2 and HTTP/1.1) on the listener.
	TLS TLS `yaml:"tls"`

	Log       Log       `yaml:"log"`
	Metrics   Metrics   `yaml:"metrics"`
	Telemetry Telemetry `yaml:"telemetry"`
	// Limits configures admission: limits per key, group and model
	// (limits.go); none by default.
	Limits Limits `yaml:"limits"`
}

// TLS names the listener's certificate and key (PEM files). Both are read
// again when either file changes, so a renewed certificate is served
// without a restart.
type TLS struct {
	CertFile string `yaml:"cert_file"` // the certificate chain, leaf first
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Key is one API key of the gateway.
type Key struct {
	Name   string `yaml:"name"`
	Role   string `yaml:"role"`    // admin | viewer | client
	Group  string `yaml:"group"`   // for viewer and client keys
	KeyEnv string `yaml:"key_env"` // the variable that holds the key
	// KeyFile is a file that holds the key (a mounted secret), read at
	// start and at every reload; instead of KeyEnv.
	KeyFile string `yaml:"key_file"`
	// Secret is the key, resolved from KeyEnv or KeyFile by Load; never in
	// the file.
	Secret string `yaml:"-"`
}

// Channel is one upstream.
type Channel struct {
	Name     string `yaml:"name"`
	Protocol string `yaml:"protocol"` // the provider kind (internal/wire: a registered unit)
	// Families, when set, are the API families of the kind's that the
	// channel serves (the zero-config gateway's channels: each its own
	// kind's family); not a configuration key.
	Families []string `yaml:"-"`
	BaseURL  string   `yaml:"base_url"`
	KeyEnv   string   `yaml:"key_env"`
	// KeyFile is a file holding the upstream key (a mounted secret),
	// read at start and at every reload; instead of KeyEnv.
	KeyFile string `yaml:"key_file"`
	// Models are the names served, maybe mapped to the provider's names
	// (see Models); empty = all.
	Models   Models   `yaml:"models"`
	Groups   []string `yaml:"groups"` // client groups allowed; empty = all
	Region   string   `yaml:"region"`
	Priority int      `yaml:"priority"` // lower is tried first
	Weight   int      `yaml:"weight"`   // share among channels of equal priority; 0 = 1
	Timeouts Timeouts `yaml:"timeouts"`
	// StreamUsage, when false, keeps the gateway from adding
	// stream_options.include_usage to OpenAI streams on this channel (for
	// upstreams that refuse the field). Default true.
	StreamUsage *bool `yaml:"stream_usage"`
	// Secret is the channel's upstream key, resolved from KeyEnv or
	// KeyFile by Load.
	Secret string `yaml:"-"`
	// Settings are the keys of the channel's provider kind (Vertex's
	// project and location, Entra ID's tenant_id, …: wire.Kind.Settings),
	// flat in the channel's entry like the keys above. Validate refuses a
	// key the kind does not read. Load resolves the *_env ones into
	// SettingsEnv and makes *_file paths absolute.
	Settings map[string]string `yaml:",inline"`
	// SettingsEnv holds the values of the variables the *_env settings
	// name, by setting; resolved by Load.
	SettingsEnv map[string]string `yaml:"-"`
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
	GenerationStalledMs   *float64 `yaml:"generation_stalled_ms"`
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
	// Public leaves /metrics open without key_env on a listener that is
	// not loopback; by default such a listener requires an admin key.
	Public bool `yaml:"public"`
}

// Telemetry configures the optional OpenTelemetry export.
type Telemetry struct {
	OTLPEndpoint string   `yaml:"otlp_endpoint"` // OTLP/HTTP base URL; empty = off
	Interval     Duration `yaml:"interval"`      // metric export interval
	// TraceURL links a request's trace id to a tracing UI from the
	// dashboard's request detail: a URL with {trace_id} where the id goes,
	// e.g. http://127.0.0.1:16686/trace/{trace_id} (Jaeger). Empty: no link.
	TraceURL string `yaml:"trace_url"`
}

// Duration is a time.Duration written as "30s", "720h", "10m" in YAML.
type Duration time.Duration

// D returns the duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// UnmarshalYAML reads a duration as ParseDuration does ("30s", "720h",
// "30d").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: want a duration like 30s or 30d: %w", n.Line, err)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads a Go duration ("90s", "1h30m") that may start with a
// number of days ("30d", "1d12h"): retention and time windows are thought of
// in days, and time.ParseDuration has no unit for them. The configuration,
// the command line and the read API all read durations with it.
func ParseDuration(s string) (time.Duration, error) {
	rest, sign := s, time.Duration(1)
	if r, ok := strings.CutPrefix(rest, "-"); ok {
		rest, sign = r, -1
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i == len(rest) || rest[i] != 'd' {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q (want e.g. 90s, 15m, 12h, 30d)", s)
		}
		return d, nil
	}
	days, err := strconv.Atoi(rest[:i])
	if err != nil || days > 106751 { // time.Duration's range: about 292 years
		return 0, fmt.Errorf("invalid duration %q: too many days", s)
	}
	d := time.Duration(days) * 24 * time.Hour
	if rest = rest[i+1:]; rest != "" {
		more, err := time.ParseDuration(rest)
		if err != nil || more < 0 {
			return 0, fmt.Errorf("invalid duration %q (want e.g. 90s, 15m, 12h, 30d, 1d12h)", s)
		}
		if more > math.MaxInt64-d {
			return 0, fmt.Errorf("invalid duration %q: too long", s)
		}
		d += more
	}
	return sign * d, nil
}

// Load reads the file at path, resolves secrets from the environment
// (getenv, usually os.Getenv) and checks it.
func Load(path string, getenv func(string) string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(b, getenv, filepath.Dir(path))
}

// LoadUnresolved reads the file at path without resolving its environment
// variables or validating it: for commands that need only where the store is
// and what the keys are named (`ttfx keys`), on a machine that may not hold
// the gateway's secrets.
func LoadUnresolved(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := decode(b)
	if err != nil {
		return nil, err
	}
	c.applyDefaults()
	if c.StoreEnv != "" && c.Store == "" {
		// Where the store is, the one secret such commands need.
		if c.Store = os.Getenv(c.StoreEnv); c.Store == "" {
			return nil, fmt.Errorf("environment variable %s is empty or unset (store_env)", c.StoreEnv)
		}
	}
	return c, nil
}

// Parse reads a configuration from YAML bytes. Unknown fields are errors,
// so a typo does not silently fall back to a default.
func Parse(b []byte, getenv func(string) string) (*Config, error) {
	return parse(b, getenv, "")
}

// parse is Parse with relative key_file paths taken from dir (the
// configuration file's directory).
func parse(b []byte, getenv func(string) string, dir string) (*Config, error) {
	c, err := decode(b)
	if err != nil {
		return nil, err
	}
	c.applyDefaults()
	if err := c.resolve(getenv, dir); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decode reads the YAML. Unknown fields are errors, all of them reported at
// once by their place in the file (see unknownFields).
func decode(b []byte) (*Config, error) {
	var c Config
	var doc yaml.Node
	// An empty file is all defaults: the decoder reports io.EOF for it.
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); errors.Is(err, io.EOF) {
		return &c, nil
	} else if err != nil {
		// The parser names the line where the enclosing block began;
		// a line indented wrong is the usual cause, and its own line is
		// the one to show.
		if line, msg, ok := misindented(b); ok {
			return nil, fmt.Errorf("parse config: line %d: %s (the YAML parser says: %w)", line, msg, err)
		}
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if errs := unknownFields(&doc, reflect.TypeFor[Config]()); len(errs) > 0 {
		return nil, fmt.Errorf("parse config: %w", errors.Join(errs...))
	}
	if err := doc.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse config: %s", yamlTypes.Replace(err.Error()))
	}
	return &c, nil
}

// yamlTypes names in the YAML decoder's messages what a value should have
// been, instead of the Go type it was to fill.
var yamlTypes = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "",
	"into int64", "into a whole number", "into int", "into a whole number",
	"into float64", "into a number", "into *float64", "into a number",
	"into bool", "into true or false", "into *bool", "into true or false",
	"into string", "into a string", "into []string", "into a list of strings",
	"into []config.Key", "into a list of keys", "into []config.Channel", "into a list of channels",
	"into map[string]config.Thresholds", "into a map of names to thresholds",
	"into config.", "into a section: ",
)

func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Store == "" && c.StoreEnv == "" {
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
		if k := wire.LookupKind(ch.Protocol); ch.BaseURL == "" && k != nil && k.DefaultBaseURL != nil {
			ch.BaseURL = k.DefaultBaseURL(ch.Region, ch.Settings)
		}
		ch.Timeouts = ch.Timeouts.WithDefaults()
	}
	for i := range c.Routes {
		c.Routes[i].applyDefaults()
	}
}

func (c *Config) resolve(getenv func(string) string, dir string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	// Every unset variable is reported at once: a first start should not
	// take one attempt per missing secret.
	var unset, wheres []string
	var errs []error
	lookup := func(name, where string) string {
		v := getenv(name)
		if v == "" {
			unset, wheres = append(unset, name), append(wheres, where)
		}
		return v
	}
	if c.StoreEnv != "" {
		if c.Store != "" {
			errs = append(errs, fmt.Errorf("store and store_env are both set: give the DSN in one of them"))
		} else {
			c.Store = lookup(c.StoreEnv, "store_env")
		}
	}
	// A key file holds one secret; its trailing newline (how files are
	// written, and how Kubernetes mounts a secret's value) is not part of it.
	readKey := func(file, where string) string {
		if !filepath.IsAbs(file) && dir != "" {
			file = filepath.Join(dir, file)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			return ""
		}
		v := strings.TrimSpace(string(b))
		if v == "" {
			errs = append(errs, fmt.Errorf("%s: %s is empty", where, file))
		}
		return v
	}
	for i := range c.Keys {
		k := &c.Keys[i]
		switch {
		case k.KeyEnv != "" && k.KeyFile != "":
			errs = append(errs, fmt.Errorf("keys[%d] %q: give key_env or key_file, not both", i, k.Name))
		case k.KeyFile != "":
			k.Secret = readKey(k.KeyFile, fmt.Sprintf("keys[%d].key_file of %q", i, k.Name))
		case k.KeyEnv == "":
			errs = append(errs, fmt.Errorf("keys[%d] %q: key_env is required, or key_file (keys are never written in the file)", i, k.Name))
		default:
			k.Secret = lookup(k.KeyEnv, fmt.Sprintf("keys[%d].key_env of %q", i, k.Name))
		}
	}
	if c.Metrics.KeyEnv != "" {
		c.Metrics.Key = lookup(c.Metrics.KeyEnv, "metrics.key_env")
	}
	if c.Limits.PasswordEnv != "" {
		c.Limits.Password = lookup(c.Limits.PasswordEnv, "limits.password_env")
	}
	if c.UserHashKeyEnv != "" {
		c.UserHashKey = lookup(c.UserHashKeyEnv, "user_hash_key_env")
		if c.UserHashKey != "" && len(c.UserHashKey) < 16 {
			errs = append(errs, fmt.Errorf("user_hash_key_env: %s must hold at least 16 bytes", c.UserHashKeyEnv))
		}
	}
	for i := range c.Channels {
		ch := &c.Channels[i]
		switch {
		case ch.KeyEnv != "" && ch.KeyFile != "":
			errs = append(errs, fmt.Errorf("channels[%d] %q: give key_env or key_file, not both", i, ch.Name))
		case ch.KeyFile != "":
			ch.Secret = readKey(ch.KeyFile, fmt.Sprintf("channels[%d].key_file of %q", i, ch.Name))
		case ch.KeyEnv != "":
			ch.Secret = lookup(ch.KeyEnv, fmt.Sprintf("channels[%d].key_env of %q", i, ch.Name))
		}
		for _, name := range slices.Sorted(maps.Keys(ch.Settings)) {
			v := ch.Settings[name]
			switch {
			case v == "":
			case strings.HasSuffix(name, "_env"):
				if ch.SettingsEnv == nil {
					ch.SettingsEnv = map[string]string{}
				}
				ch.SettingsEnv[name] = lookup(v, fmt.Sprintf("channels[%d].%s of %q", i, name, ch.Name))
			case strings.HasSuffix(name, "_file") && !filepath.IsAbs(v) && dir != "":
				ch.Settings[name] = filepath.Join(dir, v)
			}
		}
	}
	switch len(unset) {
	case 0:
	case 1:
		errs = append(errs, fmt.Errorf("environment variable %s is empty or unset (%s)", unset[0], wheres[0]))
	default:
		for i := range unset {
			unset[i] += " (" + wheres[i] + ")"
		}
		errs = append(errs, fmt.Errorf("%d environment variables are empty or unset: %s", len(unset), strings.Join(unset, ", ")))
	}
	return errors.Join(errs...)
}

// Warnings are what a configuration that starts may still get wrong: no
// keys (only keys made with `ttfx keys new` can call it) or no channels
// (every model request fails).
func (c *Config) Warnings() []string {
	var w []string
	if len(c.Keys) == 0 {
		w = append(w, "the configuration has no keys: only keys in the store (`ttfx keys new --config FILE …`) can call this gateway or read its records")
	}
	if len(c.Channels) == 0 {
		w = append(w, "the configuration has no channels: every model request will fail until one is added (see channels: in docs/configuration.md)")
	}
	return w
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
		if wire.LookupKind(ch.Protocol) == nil {
			errs = append(errs, fmt.Errorf("channel %q: protocol %q is not a provider kind (want %s)", ch.Name, ch.Protocol, wire.KindList()))
		}
		errs = append(errs, checkSettings(ch)...)
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
		errs = append(errs, ch.Models.validate(ch.Name)...)
	}
	errs = append(errs, c.validateRoutes()...)
	errs = append(errs, c.validateLimits()...)
	if !strings.HasPrefix(c.Store, "sqlite:") && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") &&
		!strings.HasPrefix(c.Store, "clickhouse://") {
		if c.StoreEnv != "" {
			// The value may hold a password: it is not repeated.
			errs = append(errs, fmt.Errorf("store_env: %s does not hold sqlite:FILE, postgres://… or clickhouse://…", c.StoreEnv))
		} else {
			errs = append(errs, fmt.Errorf("store %q: want sqlite:FILE, postgres://… or clickhouse://…", c.Store))
		}
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
	if c.TLS.Enabled() && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: set both cert_file and key_file (PEM files), or neither for plain HTTP"))
	}
	if c.UpstreamIdleTimeout < 0 {
		errs = append(errs, errors.New("upstream_idle_timeout must not be negative"))
	}
	if c.ReadCPUShare < 0 || c.ReadCPUShare > 1 {
		errs = append(errs, errors.New("read_cpu_share must be between 0 and 1 (0 = the default, 0.1)"))
	}
	if c.MaxAnswerValues < 0 {
		errs = append(errs, errors.New("max_answer_values must not be negative"))
	}
	if c.BodyBudgetBytes < 0 || c.BodyBudgetPerKeyBytes < 0 {
		errs = append(errs, errors.New("body_budget_bytes and body_budget_per_key_bytes must not be negative"))
	}
	return errors.Join(errs...)
}
