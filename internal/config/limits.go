package config

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// Limits configures admission (docs/admission.md): limits per client key,
// group and model on requests and tokens per minute and concurrent
// streams, kept in memory or, with Shared, in Redis for every replica.
type Limits struct {
	// Shared is redis://[user:password@]host:port[/db] (or rediss://):
	// the replicas that name the same Redis share their counters. Empty:
	// each gateway counts alone. PasswordEnv, if set, names the variable
	// holding the password (better than one in the URL).
	Shared      string `yaml:"shared"`
	PasswordEnv string `yaml:"password_env"`
	// Password is resolved from PasswordEnv by Load.
	Password string  `yaml:"-"`
	Rules    []Limit `yaml:"rules"`
}

// Limit is one rule: exactly one of Key, Group and Model names what it
// counts. Key and Group take a name, or "*" for a counter of each key
// (group) of its own; Model takes an exact name or a glob, one counter
// for all the models it matches. Zero limits are not enforced.
type Limit struct {
	Key               string `yaml:"key"`
	Group             string `yaml:"group"`
	Model             string `yaml:"model"`
	RequestsPerMinute int    `yaml:"requests_per_minute"`
	// TokensPerMinute counts input and output tokens: the prompt is
	// estimated at admission and the count corrected by the answer's usage.
	TokensPerMinute int `yaml:"tokens_per_minute"`
	Concurrent      int `yaml:"concurrent"`
	// Queue is how long a request over the limit waits for it before it is
	// refused 429; 0 refuses at once.
	Queue Duration `yaml:"queue"`
}

func (c *Config) validateLimits() []error {
	var errs []error
	if s := c.Limits.Shared; s != "" {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			shown := "(unparsable)"
			if err == nil {
				shown = u.Redacted()
			}
			errs = append(errs, fmt.Errorf("limits.shared %s: want redis://host:port[/db]", shown))
		}
	}
	for i, l := range c.Limits.Rules {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("limits.rules[%d]: "+format, append([]any{i}, a...)...))
		}
		set := 0
		for _, s := range []string{l.Key, l.Group, l.Model} {
			if strings.TrimSpace(s) != "" {
				set++
			}
		}
		if set != 1 {
			bad("name exactly one of key, group or model")
		}
		if l.Model != "" {
			if _, err := path.Match(l.Model, ""); err != nil {
				bad("model pattern %q: %v", l.Model, err)
			}
		}
		if l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.Concurrent < 0 || l.Queue < 0 {
			bad("limits and queue must not be negative")
		}
		if l.RequestsPerMinute == 0 && l.TokensPerMinute == 0 && l.Concurrent == 0 {
			bad("set requests_per_minute, tokens_per_minute or concurrent")
		}
	}
	return errs
}

// String shows the limits without their secrets (the configuration
// reload names a changed value in its reply and log): the Redis URL's
// password is hidden and the resolved password never shown.
func (l Limits) String() string {
	var b strings.Builder
	b.WriteString("{shared: ")
	if l.Shared == "" {
		b.WriteString("none")
	} else if u, err := url.Parse(l.Shared); err == nil {
		b.WriteString(u.Redacted())
	} else {
		b.WriteString("(unparsable)")
	}
	if l.PasswordEnv != "" {
		b.WriteString(", password_env: " + l.PasswordEnv)
	}
	fmt.Fprintf(&b, ", rules: %+v}", l.Rules)
	return b.String()
}
