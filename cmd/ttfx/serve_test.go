package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ttfxBinary builds the ttfx command once for the tests that run it as
// users do, as its own process.
func ttfxBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ttfx-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "ttfx")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is a running `ttfx serve`.
type process struct {
	cmd *exec.Cmd
	out *lockedBuffer
	url string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serve starts `ttfx serve` with args in dir and waits for /healthz.
func serve(t *testing.T, dir string, env []string, args ...string) *process {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(ttfxBinary(t), append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, out: out, url: "http://" + addr}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/healthz")
		// The start's output reaches out through a pipe and a goroutine
		// of os/exec, possibly after /healthz answers: wait for its last
		// line ("dashboard: …", printed just before serving).
		if err == nil && resp.StatusCode == 200 && strings.Contains(out.String(), "dashboard: ") {
			resp.Body.Close()
			return p
		}
		if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("ttfx serve did not become ready:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and checks a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ttfx serve exited with %v:\n%s", err, p.out.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("ttfx serve did not stop on SIGTERM:\n%s", p.out.String())
	}
	// It said what it was doing, and for how long at most.
	if out := p.out.String(); !strings.Contains(out, "ttfx serve: terminated signal received: draining: no new connections; streams in flight have up to ") ||
		!strings.Contains(out, " (drain_timeout) to finish") || !strings.HasSuffix(out, "ttfx serve: drained and stopped\n") {
		t.Errorf("ttfx serve on SIGTERM said:\n%s", out)
	}
}

func post(t *testing.T, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func readRecord(t *testing.T, url, key, id string) record.Record {
	t.Helper()
	// A wait for the record, not a measure: it returns once the record is
	// readable. Through ClickHouse beside two loaded test suites an insert
	// took over 10 s (loaded run 10, TestChannelStateAcrossReplicas).
	rec, err := (&api.Client{BaseURL: url, Key: key}).AwaitRequest(context.Background(), id, time.Minute)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return rec
}

// TestServeZeroConfig runs the README's gateway, `ttfx serve` with no
// configuration, as a process: keys printed once, the built-in simulator
// channels, a record read back, a clean stop on SIGTERM.
func TestServeZeroConfig(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, nil)
	keys := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^export TTFX_(ADMIN|CLIENT|VIEWER)_KEY=(ttfx-\S+)$`).FindAllStringSubmatch(p.out.String(), -1) {
		keys[strings.ToLower(m[1])] = m[2]
	}
	if len(keys) != 3 {
		t.Fatalf("keys not printed:\n%s", p.out.String())
	}
	resp, body := post(t, p.url, keys["client"], `{"model":"fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("%d %.200s", resp.StatusCode, body)
	}
	rec := readRecord(t, p.url, keys["admin"], resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusOK || rec.Channel != "sim-openai" || !rec.FirstTextDeltaMs.Valid() {
		t.Fatalf("record %+v", rec)
	}
	p.stop(t)
	for _, f := range []string{"ttfx.db", "ttfx.db.userkey"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	// A second start keeps the keys, prints none and says how to get a
	// working secret right there; the command it shows gives one.
	p = serve(t, dir, nil)
	hint := `eval "$(ttfx keys rotate client)"    # sets TTFX_CLIENT_KEY`
	if strings.Contains(p.out.String(), "new keys") || !strings.Contains(p.out.String(), "keys already in the store: admin, client, viewer") ||
		!strings.Contains(p.out.String(), hint) {
		t.Fatalf("second start:\n%s", p.out.String())
	}
	if resp, _ := post(t, p.url, keys["client"], `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("old key refused: %d", resp.StatusCode)
	}
	rotate := exec.Command(ttfxBinary(t), "keys", "rotate", "client")
	rotate.Dir = dir
	rotated, err := rotate.Output()
	m := regexp.MustCompile(`(?m)^export TTFX_CLIENT_KEY=(ttfx-\S+)$`).FindSubmatch(rotated)
	if err != nil || m == nil {
		t.Fatalf("the hint's command: %v\n%s", err, rotated)
	}
	// Gateways on the store see a new secret within seconds.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, _ := post(t, p.url, string(m[1]), `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the secret the hint's command printed: %d", resp.StatusCode)
		}
	}
	p.stop(t)
}

// TestServeTwoProcessesOnePostgres: two `ttfx serve --config` processes
// share one PostgreSQL database; a request relayed by one is readable, with
// its full record and in the stats, from the other (SPEC.md §7, issue 5).
func TestServeTwoProcessesOnePostgres(t *testing.T) {
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
  - {name: primary, protocol: openai, base_url: %q, key_env: T_UPSTREAM, region: eu}
`, dsn, up.URL)), 0o644)
	env := []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1", "T_UPSTREAM=upstream-secret-1"}
	a := serve(t, dir, env, "--config", cfg)
	b := serve(t, dir, env, "--config", cfg)
	resp, _ := post(t, a.url, "client-secret-1", `{"model":"reasoning","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	id := resp.Header.Get("X-Request-Id")
	rec := readRecord(t, b.url, "admin-secret-1", id)
	if rec.Status != record.StatusOK || rec.Channel != "primary" || rec.Region != "eu" || !rec.FirstResponseMs.Valid() || len(rec.Attempts) != 1 {
		t.Fatalf("record through the other process %+v", rec)
	}
	c := &api.Client{BaseURL: b.url, Key: "admin-secret-1"}
	st, err := c.Stats(context.Background(), map[string][]string{"group_by": {"model"}})
	if err != nil || len(st.Groups) != 1 || st.Groups[0].Count != 1 || st.Groups[0].Key["model"] != "reasoning" {
		t.Fatalf("stats through the other process: %v %+v", err, st)
	}
	a.stop(t)
	b.stop(t)
	// No secret from the environment reached the logs.
	for _, p := range []*process{a, b} {
		sc := bufio.NewScanner(strings.NewReader(p.out.String()))
		for sc.Scan() {
			if strings.Contains(sc.Text(), "secret-1") {
				t.Errorf("a key in the output: %s", sc.Text())
			}
		}
	}
}
