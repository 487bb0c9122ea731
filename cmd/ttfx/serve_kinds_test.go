package main

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestServeTokenKinds runs `ttfx serve --config` as a process with a
// vertex channel (a service account's JSON key, its path in an environment
// variable) and an azure channel authenticated with Entra ID (client
// credentials, the secret in an environment variable), the simulator as
// Vertex AI, as the Azure resource and as both token endpoints, whose
// tokens come 1.5 s late. Gemini and Anthropic requests reach the vertex
// channel, OpenAI requests (on OpenAI's path and on Azure's deployment
// path) the azure one. A channel's first request has upstream_auth_ms
// when, and only when, its token arrived after the request began; the
// later ones never wait. /api/channels shows the two kinds.
func TestServeTokenKinds(t *testing.T) {
	t.Parallel()
	const account = "ttfx-serve@sim-project.iam.gserviceaccount.com"
	const tokenDelay = 1500 * time.Millisecond
	var (
		mu        sync.Mutex
		tokenDone = map[string]time.Time{} // token endpoint path → when its last answer went out
		simH      http.Handler
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" || strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token") {
			time.Sleep(tokenDelay)
			simH.ServeHTTP(w, r)
			mu.Lock()
			tokenDone[r.URL.Path] = time.Now()
			mu.Unlock()
			return
		}
		simH.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	key, pub, err := sim.NewServiceAccount(account, up.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Options{Profiles: sim.Builtin(), Identity: &sim.Identity{
		ServiceAccounts: map[string]*rsa.PublicKey{account: pub},
		EntraClients:    map[string]string{"app-serve": "entra-secret-1"},
	}})
	simH = s

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "ttfx.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, key_env: T_CLIENT}
channels:
  - name: vertex-1
    protocol: vertex
    base_url: %q
    project: sim-project
    location: us-east5
    credentials_env: T_VERTEX_KEY
  - name: azure-entra
    protocol: azure
    base_url: %q
    tenant_id: tenant-1
    client_id: app-serve
    client_secret_env: T_AZURE_SECRET
    authority_host: %q
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), up.URL, up.URL+"?api-version=2024-10-21", up.URL)), 0o644)
	env := []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1", "T_VERTEX_KEY=" + keyFile, "T_AZURE_SECRET=entra-secret-1"}
	p := serve(t, dir, env, "--config", cfg)

	send := func(path, hdr, body string) record.Record {
		t.Helper()
		req, _ := http.NewRequest("POST", p.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		v := "client-secret-1"
		if hdr == "Authorization" {
			v = "Bearer " + v
		}
		req.Header.Set(hdr, v)
		if hdr == "X-Api-Key" {
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %.300s", path, resp.StatusCode, b)
		}
		return readRecord(t, p.url, "admin-secret-1", resp.Header.Get("X-Request-Id"))
	}
	chat := `{"model":"fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	gemini := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	anthropic := `{"model":"fast","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	// The first request of each channel at once, together, while their
	// tokens may still be on their way.
	type firstReq struct {
		rec      record.Record
		endpoint string
	}
	firsts := make([]firstReq, 2)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		firsts[0] = firstReq{send("/v1beta/models/fast:streamGenerateContent?alt=sse", "X-Goog-Api-Key", gemini), "/token"}
	}()
	go func() {
		defer wg.Done()
		firsts[1] = firstReq{send("/openai/deployments/fast/chat/completions?api-version=2024-10-21", "Api-Key", chat), "/tenant-1/oauth2/v2.0/token"}
	}()
	wg.Wait()
	later := []record.Record{
		send("/v1/messages", "X-Api-Key", anthropic),
		send("/v1beta/models/fast:generateContent", "X-Goog-Api-Key", gemini),
		send("/v1/chat/completions", "Authorization", chat),
		send("/openai/deployments/fast/chat/completions", "Api-Key", strings.Replace(chat, `"stream":true`, `"stream":false`, 1)),
	}
	mu.Lock()
	done := map[string]time.Time{}
	for k, v := range tokenDone {
		done[k] = v
	}
	mu.Unlock()
	for _, f := range firsts {
		got, ok := done[f.endpoint]
		if !ok {
			t.Fatalf("no token from %s: %v", f.endpoint, done)
		}
		auth, waited := f.rec.UpstreamAuthMs.Get()
		onPath := got.After(f.rec.Timestamp)
		t.Logf("%s: token at %v, request at %v: on the path %v, upstream_auth_ms %v (%v)", f.rec.Channel,
			got.Format(time.StampMicro), f.rec.Timestamp.Local().Format(time.StampMicro), onPath, auth, waited)
		if onPath != waited {
			t.Errorf("%s: token arrived after the request began: %v; upstream_auth_ms recorded: %v", f.rec.Channel, onPath, waited)
		}
		if t1, ok := f.rec.UpstreamStartMs.Get(); waited && ok && auth > t1 {
			t.Errorf("%s: upstream_auth_ms %v past t1 %v", f.rec.Channel, auth, t1)
		}
	}
	wantChannel := []string{"vertex-1", "azure-entra"}
	for i, f := range firsts {
		if f.rec.Channel != wantChannel[i] || f.rec.Status != record.StatusOK {
			t.Errorf("first request %d: channel %q status %s (%s)", i, f.rec.Channel, f.rec.Status, f.rec.Error)
		}
	}
	for i, r := range later {
		want := "vertex-1"
		if i >= 2 {
			want = "azure-entra"
		}
		if r.Channel != want || r.Status != record.StatusOK {
			t.Errorf("request %s %s: channel %q status %s (%s)", r.API, r.Route, r.Channel, r.Status, r.Error)
		}
		if w, ok := r.UpstreamAuthMs.Get(); ok {
			t.Errorf("request %s %s waited %v for a token already cached", r.API, r.Route, w)
		}
	}
	if n := len(s.TokensIssued()); n != 2 {
		t.Errorf("%d tokens issued, want one per channel", n)
	}

	req, _ := http.NewRequest("GET", p.url+"/api/channels", nil)
	req.Header.Set("Authorization", "Bearer admin-secret-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var chans struct {
		Channels []struct{ Name, Protocol string }
	}
	err = json.NewDecoder(resp.Body).Decode(&chans)
	resp.Body.Close()
	kinds := map[string]string{}
	for _, c := range chans.Channels {
		kinds[c.Name] = c.Protocol
	}
	if err != nil || kinds["vertex-1"] != "vertex" || kinds["azure-entra"] != "azure" {
		t.Errorf("/api/channels: %v %+v", err, chans)
	}
	p.stop(t)
	// No secret reached the logs.
	for _, secret := range []string{"entra-secret-1", "client-secret-1", "PRIVATE KEY"} {
		if strings.Contains(p.out.String(), secret) {
			t.Errorf("%q in the output:\n%s", secret, p.out.String())
		}
	}
}
