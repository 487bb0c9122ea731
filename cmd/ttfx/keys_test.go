package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// ttfxRun runs the ttfx binary in dir and returns its stdout and stderr.
func ttfxRun(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(ttfxBinary(t), args...)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

var exportLine = regexp.MustCompile(`(?m)^export (TTFX_[A-Z0-9_]+_KEY)=(ttfx-\S+)$`)

// exported returns the one key an export line of out sets.
func exported(t *testing.T, out, env string) string {
	t.Helper()
	m := exportLine.FindAllStringSubmatch(out, -1)
	if len(m) != 1 || m[0][1] != env {
		t.Fatalf("want one export line of %s, got:\n%s", env, out)
	}
	return m[0][2]
}

// waitStatus polls a chat call with key on each gateway until it answers
// want, for up to 10 s, and returns how long that took.
func waitStatus(t *testing.T, key string, want int, urls ...string) time.Duration {
	t.Helper()
	start := time.Now()
	for _, u := range urls {
		for {
			resp, _ := post(t, u, key, `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode == want {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: %d after 10 s, want %d", u, resp.StatusCode, want)
			}
			// Not faster: a key not yet known fails authentication, and
			// more than 30 failures a minute from one address are
			// answered 429 (the gateway's flood limit).
			time.Sleep(250 * time.Millisecond)
		}
	}
	return time.Since(start)
}

// TestKeysCommandZeroConfig: `ttfx keys` on the zero-config gateway's
// directory while it runs: a new key works without a restart, a rotated
// one's old secret keeps working, a revoked one stops.
func TestKeysCommandZeroConfig(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, err := ttfxRun(t, dir, "keys", "list"); err == nil || !strings.Contains(stderr, "ttfx serve") {
		t.Fatalf("keys list with no store: %v %s", err, stderr)
	}
	p := serve(t, dir, nil)
	client := exported(t, exportLine.FindAllString(p.out.String(), -1)[1], "TTFX_CLIENT_KEY")

	out, stderr, err := ttfxRun(t, dir, "keys", "new", "--name", "team-b", "--role", "client", "--group", "b")
	if err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	teamB := exported(t, out, "TTFX_TEAM_B_KEY")
	if !strings.Contains(stderr, "shown this once") {
		t.Fatalf("keys new says: %s", stderr)
	}
	waitStatus(t, teamB, 200, p.url)

	out, stderr, err = ttfxRun(t, dir, "keys", "rotate", "client", "--grace", "1d")
	if err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	newClient := exported(t, out, "TTFX_CLIENT_KEY")
	if !strings.Contains(stderr, "grace period of 24h0m0s") {
		t.Fatalf("rotate does not name the grace period: %s", stderr)
	}
	waitStatus(t, newClient, 200, p.url)
	waitStatus(t, client, 200, p.url) // still inside the grace period

	list, _, err := ttfxRun(t, dir, "keys", "list")
	if err != nil || !regexp.MustCompile(`(?m)^client\s+client\s+default\s+store\s.*until .*\(rotated\)$`).MatchString(list) ||
		!regexp.MustCompile(`(?m)^team-b\s+client\s+b\s+store\s.*live$`).MatchString(list) {
		t.Fatalf("keys list: %v\n%s", err, list)
	}
	for _, s := range []string{client, newClient, teamB} {
		if strings.Contains(list, s) {
			t.Fatal("keys list shows a secret")
		}
	}

	if _, stderr, err := ttfxRun(t, dir, "keys", "revoke", "team-b"); err != nil || !strings.Contains(stderr, "revoked team-b") {
		t.Fatalf("revoke: %v %s", err, stderr)
	}
	waitStatus(t, teamB, 401, p.url)
	if _, stderr, err := ttfxRun(t, dir, "keys", "new", "--name", "x", "--role", "viewer"); err == nil || !strings.Contains(stderr, "needs a group") {
		t.Fatalf("a viewer key without a group: %v %s", err, stderr)
	}
	p.stop(t)
}

// TestKeysTwoReplicasOnePostgres: two `ttfx serve --config` processes on one
// PostgreSQL database see a key made, and then revoked, by `ttfx keys` on a
// third process within seconds, without a restart; the configuration's keys
// keep working throughout.
func TestKeysTwoReplicasOnePostgres(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ttfx.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
channels:
  - {name: primary, protocol: openai, base_url: %q}
`, dsn, up.URL)), 0o644)
	env := []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1"}
	a := serve(t, dir, env, "--config", cfg)
	b := serve(t, dir, env, "--config", cfg)

	// The command needs only the file: the gateways' secrets are not in
	// its environment.
	out, stderr, err := ttfxRun(t, dir, "keys", "new", "--config", cfg, "--name", "team-b", "--role", "client", "--group", "b")
	if err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	key := exported(t, out, "TTFX_TEAM_B_KEY")
	took := waitStatus(t, key, 200, a.url, b.url)
	t.Logf("both replicas accepted the new key %v after it was made", took)
	if took > 5*time.Second {
		t.Errorf("the replicas took %v to see a new key", took)
	}
	list, _, _ := ttfxRun(t, dir, "keys", "list", "--config", cfg)
	if !regexp.MustCompile(`(?m)^ops\s+admin\s+-\s+config\s`).MatchString(list) || !regexp.MustCompile(`(?m)^team-b\s+client\s+b\s+store\s`).MatchString(list) {
		t.Fatalf("keys list --config:\n%s", list)
	}
	if _, stderr, err := ttfxRun(t, dir, "keys", "new", "--config", cfg, "--name", "app", "--role", "client"); err == nil || !strings.Contains(stderr, "configuration file") {
		t.Fatalf("a stored key named like a configured one: %v %s", err, stderr)
	}

	if _, stderr, err := ttfxRun(t, dir, "keys", "revoke", "--config", cfg, "team-b"); err != nil {
		t.Fatalf("%v %s", err, stderr)
	}
	took = waitStatus(t, key, 401, a.url, b.url)
	t.Logf("both replicas refused the revoked key %v after it was revoked", took)
	if took > 5*time.Second {
		t.Errorf("the replicas took %v to see a revoked key", took)
	}
	waitStatus(t, "client-secret-1", 200, a.url, b.url)
	a.stop(t)
	b.stop(t)
}
