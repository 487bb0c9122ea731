package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

func intp(v int) *int { return &v }

// slowSim is a simulator whose model "slow" streams for about six seconds
// and "quick" answers at once.
func slowSim() *sim.Server {
	return sim.New(sim.Options{Profiles: map[string]sim.Profile{
		"slow":  {HeadersMs: 20, TextMs: intp(100), VisibleTokens: 60, TPS: 10, TokensPerEvent: 2},
		"quick": {HeadersMs: 1, TextMs: intp(2), VisibleTokens: 4, TPS: 2000},
	}})
}

// keyedUpstream serves sim behind a set of accepted upstream keys that the
// test changes, and counts the requests made with each.
type keyedUpstream struct {
	mu   sync.Mutex
	keys map[string]int // accepted key → requests made with it
	bad  atomic.Int64
	h    http.Handler
}

func (u *keyedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	u.mu.Lock()
	_, ok := u.keys[k]
	if ok {
		u.keys[k]++
	}
	u.mu.Unlock()
	if !ok {
		u.bad.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"message":"invalid api key","type":"invalid_request_error"}}`))
		return
	}
	u.h.ServeHTTP(w, r)
}

func (u *keyedUpstream) accept(keys ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := map[string]int{}
	for _, k := range keys {
		m[k] = u.keys[k]
	}
	u.keys = m
}

func (u *keyedUpstream) count(k string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.keys[k]
}

// stream makes one streaming chat request and reads it to its end; it
// returns the request id and an error unless the stream ended with [DONE].
func stream(url, key, model string) (string, error) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return id, err
	}
	if resp.StatusCode != 200 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		return id, fmt.Errorf("%s: %d %.300s", id, resp.StatusCode, b)
	}
	return id, nil
}

func adminPost(t *testing.T, url, key, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func metric(t *testing.T, url, key, name string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// TestReloadUnderLoad: 200 streams are in flight through `ttfx serve` when
// a reload changes every reloadable field; then an invalid file is
// reloaded. No stream fails, every one has its record, on the channel it
// started on; every request after the swap goes by the new configuration;
// the invalid file changes nothing and is reported with its line and a
// suggestion, by the call, in the log and in the metrics.
func TestReloadUnderLoad(t *testing.T) {
	upA := httptest.NewServer(slowSim())
	defer upA.Close()
	upB := httptest.NewServer(slowSim())
	defer upB.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "admin.key"), []byte("admin-secret-1\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "b.key"), []byte("upstream-b\n"), 0o600)
	cfg := filepath.Join(dir, "ttfx.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1 := fmt.Sprintf(`
store: %q
retention: 30d
keys:
  - {name: ops, role: admin, key_file: admin.key}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
channels:
  - {name: old-a, protocol: openai, base_url: %q, key_env: T_UPSTREAM, models: [slow, quick], timeouts: {total: 60s}}
routes:
  - {models: [slow], strategy: priority}
diagnosis:
  first_response_slow_ms: 5000
log: {level: warn}
metrics: {max_models: 50}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), upA.URL)
	write(v1)
	env := []string{"T_CLIENT=client-secret-1", "T_UPSTREAM=upstream-a"}
	p := serve(t, dir, env, "--config", cfg)
	const admin, client = "admin-secret-1", "client-secret-1"

	const n = 200
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { ids[i], errs[i] = stream(p.url, client, "slow") })
	}
	// All 200 are in flight on old-a before the reload.
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, p.url, admin, `ttfx_inflight_requests{channel="old-a"}`) != "200" {
		if time.Now().After(deadline) {
			t.Fatalf("the streams did not all start: inflight %s", metric(t, p.url, admin, `ttfx_inflight_requests{channel="old-a"}`))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// v2 changes every reloadable field: old-a removed, new-b added (key
	// from a file, other timeouts, priority, weight), the routes, the
	// thresholds, the keys, the log level and the metrics limit; and the
	// listen address and retention, which take a restart.
	write(fmt.Sprintf(`
store: %q
listen: 127.0.0.1:1
retention: 7d
keys:
  - {name: ops, role: admin, key_file: admin.key}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
  - {name: team-view, role: viewer, group: team-a, key_env: T_VIEWER}
channels:
  - {name: new-b, protocol: openai, base_url: %q, key_file: b.key, models: [slow, quick], priority: 1, weight: 3, timeouts: {total: 90s, first_output: 30s}}
routes:
  - {models: [slow, quick], strategy: latency, eject: {consecutive_failures: 3}}
diagnosis:
  first_response_slow_ms: 4000
log: {level: info}
metrics: {max_models: 80}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), upB.URL))
	// T_VIEWER is not in the process's environment: the reload is
	// refused, naming it, and nothing changes.
	code, res := adminPost(t, p.url, admin, "/api/admin/reload")
	if code != 422 || !strings.Contains(fmt.Sprint(res["errors"]), "T_VIEWER") {
		t.Fatalf("reload with an unset variable: %d %v", code, res)
	}
	beforeID, err := stream(p.url, client, "quick")
	if err != nil {
		t.Fatal(err)
	}
	// The viewer key from a file instead: now valid.
	os.WriteFile(filepath.Join(dir, "viewer.key"), []byte("viewer-secret-1"), 0o600)
	b, _ := os.ReadFile(cfg)
	write(strings.Replace(string(b), "key_env: T_VIEWER", "key_file: viewer.key", 1))
	code, res = adminPost(t, p.url, admin, "/api/admin/reload")
	if code != 200 || res["ok"] != true || res["by"] != "ops" {
		t.Fatalf("reload: %d %v", code, res)
	}
	changed := fmt.Sprint(res["changed"])
	for _, want := range []string{"channels added: new-b", "channels removed: old-a", "routes", "diagnosis thresholds", "keys", `log.level "warn" → "info"`, "metrics.max_models 50 → 80"} {
		if !strings.Contains(changed, want) {
			t.Errorf("changed %s: missing %q", changed, want)
		}
	}
	restart := fmt.Sprint(res["needs_restart"])
	if !strings.Contains(restart, "listen") || !strings.Contains(restart, "retention") {
		t.Errorf("needs_restart %s: want listen and retention", restart)
	}
	// Every request after the swap goes to new-b.
	var afterID string
	for range 10 {
		id, err := stream(p.url, client, "quick")
		if err != nil {
			t.Fatal(err)
		}
		afterID = id
		if rec := readRecord(t, p.url, admin, id); rec.Channel != "new-b" {
			t.Fatalf("a request after the reload went to %s", rec.Channel)
		}
	}
	// The new viewer key works, the new log level is in force.
	if c := (&api.Client{BaseURL: p.url, Key: "viewer-secret-1"}); true {
		if _, err := c.Requests(context.Background(), nil); err != nil {
			t.Errorf("the reloaded viewer key: %v", err)
		}
	}
	// An invalid file: a misspelt field. Refused with its line and a
	// suggestion, by the call and by SIGHUP, counted; nothing changes.
	b, _ = os.ReadFile(cfg)
	write(strings.Replace(string(b), "models: [slow, quick], priority", "modles: [slow, quick], priority", 1))
	code, res = adminPost(t, p.url, admin, "/api/admin/reload")
	errText := fmt.Sprint(res["errors"])
	if code != 422 || res["ok"] != false || !strings.Contains(errText, `unknown field "modles" in channels[0]; did you mean "models"?`) || !strings.Contains(errText, "line ") {
		t.Fatalf("invalid reload: %d %v", code, res)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline = time.Now().Add(10 * time.Second)
	for metric(t, p.url, admin, `ttfx_config_reloads_total{result="error"}`) != "3" {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP's failed reload not counted: %s", metric(t, p.url, admin, `ttfx_config_reloads_total{result="error"}`))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if v := metric(t, p.url, admin, "ttfx_config_last_reload_failed"); v != "1" {
		t.Errorf("ttfx_config_last_reload_failed %s", v)
	}
	id, err := stream(p.url, client, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if rec := readRecord(t, p.url, admin, id); rec.Channel != "new-b" {
		t.Fatalf("after the invalid reload a request went to %s", rec.Channel)
	}

	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("stream %d failed across the reload: %v", i, err)
		}
	}
	// Every stream's record, on the channel it started on.
	for _, id := range ids {
		rec := readRecord(t, p.url, admin, id)
		if rec.Status != record.StatusOK || rec.Channel != "old-a" {
			t.Fatalf("record %s: status %s channel %s", id, rec.Status, rec.Channel)
		}
	}
	p.stop(t)
	out := p.out.String()
	for _, want := range []string{"configuration reloaded", "configuration reload refused; nothing changed", `unknown field \"modles\"`, "trigger=sighup", "key_name=ops"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	// log.level went from warn to info: the request log (info) has the
	// requests after the reload, not the one before.
	if strings.Contains(out, "request_id="+beforeID) || !strings.Contains(out, "request_id="+afterID) {
		t.Errorf("the log level did not change at the reload")
	}
	if strings.Contains(out, "upstream-b") || strings.Contains(out, "admin-secret") {
		t.Errorf("a secret in the log")
	}
}

// kubeMount lays files out as Kubernetes mounts a ConfigMap or Secret:
// each name is a symlink through ..data to a timestamped directory, and an
// update swaps ..data in one rename.
type kubeMount struct {
	dir   string
	gen   int
	files map[string]string
}

// update writes a new version of the mount holding every file written so
// far, with files changed.
func (k *kubeMount) update(t *testing.T, changed map[string]string) {
	t.Helper()
	if k.files == nil {
		k.files = map[string]string{}
	}
	for name, body := range changed {
		k.files[name] = body
	}
	files := k.files
	k.gen++
	ts := fmt.Sprintf("..2026_12_07_%02d", k.gen)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		os.WriteFile(filepath.Join(k.dir, ts, name), []byte(body), 0o644)
		link := filepath.Join(k.dir, name)
		if _, err := os.Lstat(link); err != nil {
			os.Symlink(filepath.Join("..data", name), link)
		}
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// TestKeyRotationThroughKeyFile: a channel's key is a mounted secret
// (key_file, Kubernetes layout). The upstream accepts the old and the new
// key for the rotation; the secret is swapped, the gateway notices the
// change by itself, and the old key is revoked at the upstream once the
// new one is in use. Requests run the whole time and none fails.
func TestKeyRotationThroughKeyFile(t *testing.T) {
	up := &keyedUpstream{h: slowSim()}
	up.accept("upstream-1")
	srv := httptest.NewServer(up)
	defer srv.Close()
	dir := t.TempDir()
	m := &kubeMount{dir: filepath.Join(dir, "mount")}
	os.Mkdir(m.dir, 0o755)
	conf := func(extra string) string {
		return fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_file: upstream.key%s}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), srv.URL, extra)
	}
	m.update(t, map[string]string{"ttfx.yaml": conf(""), "upstream.key": "upstream-1\n"})
	p := serve(t, dir, []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1"}, "--config", filepath.Join(m.dir, "ttfx.yaml"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := stream(p.url, "client-secret-1", "quick"); err != nil {
					failed.Add(1)
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				} else {
					ok.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	up.accept("upstream-1", "upstream-2")
	m.update(t, map[string]string{"upstream.key": "upstream-2\n"})
	deadline := time.Now().Add(15 * time.Second)
	for {
		before := up.count("upstream-1")
		time.Sleep(300 * time.Millisecond)
		if up.count("upstream-2") > 0 && up.count("upstream-1") == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new key was not taken up: old %d new %d\n%s", up.count("upstream-1"), up.count("upstream-2"), p.out.String())
		}
	}
	up.accept("upstream-2")
	n := ok.Load()
	time.Sleep(time.Second)
	// A ConfigMap change too (the same layout): the channel's timeouts.
	m.update(t, map[string]string{"ttfx.yaml": conf(", timeouts: {total: 45s}")})
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() > 0 || up.bad.Load() > 0 {
		t.Fatalf("%d requests failed during the rotation (%d refused upstream): %v", failed.Load(), up.bad.Load(), firstErr)
	}
	if ok.Load()-n < 10 {
		t.Fatalf("too few requests after the old key was revoked: %d", ok.Load()-n)
	}
	p.stop(t)
	out := p.out.String()
	if c := strings.Count(out, "configuration reloaded"); c != 2 || !strings.Contains(out, "channels changed: up (key)") || !strings.Contains(out, "channels changed: up (timeouts)") || !strings.Contains(out, "trigger=file") {
		t.Errorf("want two reloads by the watcher (the key, then the timeouts); the log:\n%s", grepLines(out, "configuration"))
	}
	if strings.Contains(out, "upstream-2") {
		t.Errorf("the key reached the log")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(slices.Clip(out), "\n")
}
