package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/store"
)

func TestReviewShutdownCutStreamRecord(t *testing.T) {
	profiles := sim.Builtin()
	profiles["long"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(30), VisibleTokens: 200, TPS: 50}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles}))
	defer up.Close()
	dir := t.TempDir()
	y := fmt.Sprintf(`
store: %q
drain_timeout: 300ms
keys:
  - {name: team-a, role: client, group: team-a, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q}
`, "sqlite:"+filepath.Join(dir, "t.db"), up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return "client-key-123" })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Options{Config: cfg, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	got := make(chan string, 1)
	go func() {
		resp, _ := chat(t, srv.URL(), "client-key-123", "long", true, "")
		got <- resp.Header.Get("X-Request-Id")
	}()
	time.Sleep(500 * time.Millisecond)
	w := srv.Writer()
	cancel()
	err = <-served
	id := <-got
	t.Logf("serve: %v; writer stats %+v", err, w.Stats())
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Get(context.Background(), id)
	t.Logf("record of cut stream %s: err=%v status=%s", id, err, rec.Status)
	if err != nil {
		t.Errorf("the record of the stream cut at shutdown was not stored: %v", err)
	}
}
