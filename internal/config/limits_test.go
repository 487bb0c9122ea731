package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestLimits(t *testing.T) {
	c, err := Parse([]byte(`
limits:
  shared: redis://127.0.0.1:6379/0
  rules:
    - key: "*"
      requests_per_minute: 60
    - group: team-a
      tokens_per_minute: 200000
      queue: 2s
    - model: "gpt-4o*"
      concurrent: 50
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := c.Limits.Rules
	if c.Limits.Shared != "redis://127.0.0.1:6379/0" || len(r) != 3 || r[0].Key != "*" || r[0].RequestsPerMinute != 60 ||
		r[1].Queue.D() != 2*time.Second || r[2].Model != "gpt-4o*" || r[2].Concurrent != 50 {
		t.Errorf("limits %+v", c.Limits)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"limits:\n  rules:\n    - key: a\n      group: b\n      concurrent: 1\n", "exactly one of key, group or model"},
		{"limits:\n  rules:\n    - key: a\n", "set requests_per_minute"},
		{"limits:\n  rules:\n    - model: \"[\"\n      concurrent: 1\n", "model pattern"},
		{"limits:\n  rules:\n    - key: a\n      concurrent: -1\n", "negative"},
		{"limits:\n  rules:\n    - key: a\n      rpm: 3\n", "rpm"},
		{"limits:\n  shared: http://u:secret@x\n", "want redis://"},
	} {
		if _, err := Parse([]byte(bad.yaml), nil); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want an error with %q", bad.yaml, err, bad.want)
		}
	}
}

// TestLimitsStringHidesSecrets: the reload names changed limits in its
// reply and log; no Redis password may show.
func TestLimitsStringHidesSecrets(t *testing.T) {
	l := Limits{Shared: "redis://u:hunter2@10.0.0.5:6379/0", PasswordEnv: "P", Password: "s3cret", Rules: []Limit{{Key: "a", Concurrent: 1}}}
	got := fmt.Sprintf("%v", any(l))
	if strings.Contains(got, "hunter2") || strings.Contains(got, "s3cret") || !strings.Contains(got, "10.0.0.5") || !strings.Contains(got, "Concurrent:1") {
		t.Errorf("%s", got)
	}
}
