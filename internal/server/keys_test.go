package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestBusyPortWritesNothing: a start that cannot bind its port leaves the
// directory as it found it — no database, no keys nobody saw, no user-hash
// key — so the next start makes the keys and prints them (issue 14).
func TestBusyPortWritesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	_, err = server.New(context.Background(), server.Options{Dir: dir, Listen: ln.Addr().String(), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("start on a busy port: %v", err)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		var names []string
		for _, f := range files {
			names = append(names, f.Name())
		}
		t.Fatalf("a failed start wrote %v", names)
	}
	// The next start makes the keys, and the directory if need be.
	srv := start(t, server.Options{Dir: filepath.Join(dir, "new")})
	if len(srv.Generated()) != 3 {
		t.Fatalf("the next start made %+v", srv.Generated())
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("after 5 s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// status is the HTTP status of a chat call with key.
func status(t *testing.T, base, key string) int {
	t.Helper()
	resp, _ := chat(t, base, key, "fast", false, "")
	return resp.StatusCode
}

// TestKeysWhileRunning: keys made, rotated and revoked in the store of a
// running gateway work or stop working without a restart; a rotated key
// works until its grace period ends; the configuration's keys keep working
// beside them.
func TestKeysWhileRunning(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	dir := t.TempDir()
	y := fmt.Sprintf(`
store: %q
keys: [{name: ops, role: admin, key_env: ADMIN}, {name: app, role: client, key_env: C}]
channels: [{name: up, protocol: openai, base_url: %q}]
`, "sqlite:"+filepath.Join(dir, "t.db"), up.URL)
	env := map[string]string{"ADMIN": "admin-k", "C": "client-k"}
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, KeyPoll: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if len(srv.Generated()) != 0 {
		t.Fatalf("a configured gateway made keys: %+v", srv.Generated())
	}
	ctx := context.Background()
	st := srv.Store()

	if _, err := server.NewKey(ctx, st, "app", "client", "", []string{"ops", "app"}); err == nil {
		t.Fatal("a stored key took the name of a configured one")
	}
	g, err := server.NewKey(ctx, st, "team-b", "client", "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.Export(), "export TTFX_TEAM_B_KEY=ttfx-client-") {
		t.Fatalf("export line %q", g.Export())
	}
	eventually(t, "the new key works", func() bool { return status(t, srv.URL(), g.Secret) == 200 })
	if status(t, srv.URL(), "client-k") != 200 {
		t.Fatal("the configured key stopped working")
	}

	const grace = 700 * time.Millisecond
	g2, err := server.RotateKey(ctx, st, "team-b", grace)
	if err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	eventually(t, "the rotated key works", func() bool { return status(t, srv.URL(), g2.Secret) == 200 })
	if time.Since(rotated) < grace/2 && status(t, srv.URL(), g.Secret) != 200 {
		t.Fatal("the old secret stopped working inside its grace period")
	}
	took := eventually(t, "the old secret ends with its grace period", func() bool { return status(t, srv.URL(), g.Secret) == 401 })
	if elapsed := time.Since(rotated); elapsed < grace {
		t.Fatalf("the old secret ended %v after the rotation, before its grace period of %v (%v)", elapsed, grace, took)
	}

	if n, err := server.RevokeKey(ctx, st, "team-b"); err != nil || n != 1 {
		t.Fatalf("revoke: %d %v", n, err)
	}
	eventually(t, "the revoked key is refused", func() bool { return status(t, srv.URL(), g2.Secret) == 401 })
	if _, err := server.RevokeKey(ctx, st, "ops"); err == nil || !strings.Contains(err.Error(), "configuration file") {
		t.Fatalf("revoking a configured key: %v", err)
	}
	if status(t, srv.URL(), "client-k") != 200 {
		t.Fatal("the configured key stopped working")
	}
}

// TestLegacyKeyFile: the keys of a ttfx.keys.json left by an earlier
// version go into the store on the first start after it, so they keep
// working, and nothing new is made.
func TestLegacyKeyFile(t *testing.T) {
	dir := t.TempDir()
	const secret = "ttfx-client-legacy-0123456789"
	legacy := fmt.Sprintf(`{"keys":[{"name":"client","role":"client","group":"default","sha256":%q}],"user_hash_key":"00112233445566778899aabbccddeeff"}`,
		auth.HashKey(secret).String())
	if err := os.WriteFile(filepath.Join(dir, "ttfx.keys.json"), []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Dir: dir})
	if len(srv.Generated()) != 0 || strings.Join(srv.StoredKeys(), ",") != "client" {
		t.Fatalf("made %+v, stored %v", srv.Generated(), srv.StoredKeys())
	}
	if status(t, srv.URL(), secret) != 200 {
		t.Fatal("the legacy key is refused")
	}
	if _, err := os.Stat(filepath.Join(dir, "ttfx.db.userkey")); err == nil {
		t.Fatal("a new user-hash key was made beside the legacy one")
	}
}
