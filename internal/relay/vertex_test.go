package relay_test

import (
	"context"
	"crypto/rsa"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"google.golang.org/genai"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

const vertexAccount = "ttfx-test@sim-project.iam.gserviceaccount.com"

// vertexSim is a simulator speaking Vertex AI, with a test service account
// whose tokens live life; it returns the simulator, its URL, the path of
// the account's JSON key and what the simulator served.
func vertexSim(t testing.TB, life time.Duration, profiles map[string]sim.Profile) (*sim.Server, string, string, *simInfos) {
	t.Helper()
	var cur atomic.Pointer[sim.Server]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	key, pub, err := sim.NewServiceAccount(vertexAccount, srv.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if profiles == nil {
		profiles = sim.Builtin()
	}
	infos := &simInfos{}
	s := sim.New(sim.Options{Profiles: profiles, OnRequest: infos.add, Identity: &sim.Identity{
		ServiceAccounts: map[string]*rsa.PublicKey{vertexAccount: pub}, TokenLifetime: life}})
	cur.Store(s)
	return s, srv.URL, keyFile, infos
}

// vertexChannel is a channel of kind vertex opened as the server opens it.
func vertexChannel(t testing.TB, name, base, keyFile string) *route.Channel {
	t.Helper()
	ch := channel(name, "vertex", base, fastTimeouts)
	ch.Key = ""
	up, err := wire.LookupKind("vertex").Open(wire.ChannelConfig{Name: name, Base: ch.BaseURL,
		Settings: map[string]string{"project": "sim-project", "location": "us-east5", "credentials_file": keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	ch.Hooks = up
	return ch
}

// TestVertexKind: Anthropic and Gemini clients of the gateway relayed to a
// channel of kind vertex, whose requests the simulator's Vertex side
// accepts (model URLs, anthropic_version, no model in the body, a token
// from the service account): streaming and not, tool calls, a 429, a 500
// and a stream cut mid-answer, each as the client's SDK reads it.
func TestVertexKind(t *testing.T) {
	t.Parallel()
	profiles := sim.Builtin()
	profiles["status-500"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:500"}
	s, base, keyFile, infos := vertexSim(t, time.Hour, profiles)
	gw, recs := gateway(t, vertexChannel(t, "vx", base, keyFile))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// anthropic-sdk-go, the gateway's Anthropic client.
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0))
	params := func(model string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 512,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))}}
	}
	streamMsg := func(model string) (anthropic.Message, error) {
		st := ac.Messages.NewStreaming(ctx, params(model))
		defer st.Close()
		var msg anthropic.Message
		for st.Next() {
			if err := msg.Accumulate(st.Current()); err != nil {
				return msg, err
			}
		}
		return msg, st.Err()
	}
	if m, err := streamMsg("fast"); err != nil || len(m.Content) == 0 || m.Content[0].Text == "" || m.StopReason != "end_turn" {
		t.Errorf("anthropic stream through vertex: %v %+v", err, m)
	}
	if m, err := ac.Messages.New(ctx, params("fast")); err != nil || len(m.Content) == 0 || m.Content[0].Text == "" || m.Usage.OutputTokens == 0 {
		t.Errorf("anthropic through vertex: %v %+v", err, m)
	}
	if m, err := streamMsg("tool-call"); err != nil || m.StopReason != "tool_use" || len(m.Content) == 0 || m.Content[len(m.Content)-1].Type != "tool_use" {
		t.Errorf("anthropic tool call through vertex: %v %+v", err, m)
	}
	var aerr *anthropic.Error
	for model, code := range map[string]int{"status-429": 429, "status-500": 500} {
		if _, err := ac.Messages.New(ctx, params(model)); !errors.As(err, &aerr) || aerr.StatusCode != code {
			t.Errorf("anthropic %s through vertex: %v, want %d", model, err, code)
		}
	}
	if _, err := streamMsg("flaky"); err == nil {
		t.Errorf("anthropic flaky through vertex: no error for a cut stream")
	}

	// genai, the gateway's Gemini client.
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: clientKey, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL}})
	if err != nil {
		t.Fatal(err)
	}
	streamGemini := func(model string) (text string, calls int, err error) {
		for resp, err := range gc.Models.GenerateContentStream(ctx, model, genai.Text("Say hello."), nil) {
			if err != nil {
				return text, calls, err
			}
			text += resp.Text()
			calls += len(resp.FunctionCalls())
		}
		return text, calls, nil
	}
	if text, _, err := streamGemini("fast"); err != nil || text == "" {
		t.Errorf("gemini stream through vertex: %q %v", text, err)
	}
	if r, err := gc.Models.GenerateContent(ctx, "fast", genai.Text("Say hello."), nil); err != nil || r.Text() == "" || r.UsageMetadata == nil || r.UsageMetadata.CandidatesTokenCount == 0 {
		t.Errorf("gemini through vertex: %v", err)
	}
	if _, calls, err := streamGemini("tool-call"); err != nil || calls == 0 {
		t.Errorf("gemini tool call through vertex: %d calls, %v", calls, err)
	}
	var gerr genai.APIError
	for model, code := range map[string]int{"status-429": 429, "status-500": 500} {
		if _, err := gc.Models.GenerateContent(ctx, model, genai.Text("x"), nil); !errors.As(err, &gerr) || gerr.Code != code {
			t.Errorf("gemini %s through vertex: %v, want %d", model, err, code)
		}
	}
	if _, _, err := streamGemini("flaky"); err == nil {
		t.Errorf("gemini flaky through vertex: no error for a cut stream")
	}

	// What the simulator saw: Vertex's URLs only, one token for all.
	for _, in := range infos.all() {
		if !strings.HasPrefix(in.Path, "/v1/projects/sim-project/locations/us-east5/publishers/") {
			t.Errorf("the simulator served %s", in.Path)
		}
	}
	if n := len(s.TokensIssued()); n != 1 {
		t.Errorf("%d tokens issued, want 1 (cached)", n)
	}
	recs.mu.Lock()
	defer recs.mu.Unlock()
	byAPI := map[string]int{}
	for _, r := range recs.recs {
		if r.Channel != "vx" {
			t.Errorf("record %s on channel %q", r.RequestID, r.Channel)
		}
		if strings.HasPrefix(r.Model, "status-") || r.Model == "flaky" {
			if r.Status == record.StatusOK {
				t.Errorf("%s %s: status ok", r.API, r.Model)
			}
			continue
		}
		if r.Status != record.StatusOK {
			t.Errorf("%s %s stream=%v: %s", r.API, r.Model, r.Stream, r.Status)
		}
		byAPI[r.API]++
	}
	if byAPI["anthropic"] != 3 || byAPI["gemini"] != 3 {
		t.Errorf("ok records by API: %v", byAPI)
	}
}

// TestVertexTraces: SPEC §4's traces through a vertex channel, for both
// model families: the marks match the simulator's schedule as they do
// through the providers' own kinds (TestSeedTraces).
func TestVertexTraces(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the traces take 20 s of real time")
	}
	_, base, keyFile, _ := vertexSim(t, time.Hour, nil)
	gw, recs := gateway(t, vertexChannel(t, "vx", base, keyFile))
	type want struct{ headers, response, text, total float64 }
	traces := map[string]want{
		"trace-a": {6100, 6350, 6400, 9200},
		"trace-b": {240, 2900, 8700, 10200},
		"trace-c": {260, 420, 430, 20430},
	}
	var wg sync.WaitGroup
	for name, w := range traces {
		for _, api := range []string{"anthropic", "gemini"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _ := do(t, gw.URL, clientKey, call{api, name, true})
				rec := recs.get(t, resp.Header.Get("X-Request-Id"))
				if rec.Status != record.StatusOK {
					t.Errorf("%s %s: status %s", api, name, rec.Status)
				}
				near(t, rec, api+" "+name+" upstream_headers_ms", rec.UpstreamHeadersMs, w.headers)
				near(t, rec, api+" "+name+" first_response_ms", rec.FirstResponseMs, w.response)
				near(t, rec, api+" "+name+" first_text_delta_ms", rec.FirstTextDeltaMs, w.text)
				near(t, rec, api+" "+name+" total_handler_ms", rec.TotalHandlerMs, w.total)
			}()
		}
	}
	wg.Wait()
}

// TestVertexTokenRefresh: tokens that live 3 s are refreshed before they
// expire, off the request path: requests sent back to back for three
// lifetimes all succeed, several tokens are issued, and no request after
// the first waited for one (no upstream_auth_ms).
func TestVertexTokenRefresh(t *testing.T) {
	t.Parallel()
	const life = 3 * time.Second
	s, base, keyFile, _ := vertexSim(t, life, nil)
	ch := vertexChannel(t, "vx", base, keyFile)
	gw, recs := gateway(t, ch)
	start := time.Now()
	n := 0
	for time.Since(start) < 3*life {
		api := []string{"anthropic", "gemini"}[n%2]
		resp, body := do(t, gw.URL, clientKey, call{api, "fast", n%3 != 0})
		if resp.StatusCode != 200 {
			t.Fatalf("request %d after %v: %d %s", n, time.Since(start), resp.StatusCode, body)
		}
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if w, ok := rec.UpstreamAuthMs.Get(); ok && n > 0 {
			t.Errorf("request %d after %v waited %v for a token", n, time.Since(start), w)
		}
		n++
	}
	if got := len(s.TokensIssued()); got < 3 {
		t.Errorf("%d tokens issued over %v of %v tokens, want ≥ 3", got, 3*life, life)
	}
	t.Logf("%d requests, %d tokens issued", n, len(s.TokensIssued()))
}

// TestVertexSlowTokenEndpoint: a request that finds no token cached waits
// for the fetch, and the wait is its upstream_auth_ms, not upstream time.
func TestVertexSlowTokenEndpoint(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second // long enough that the request surely arrives before the warm-up fetch ends
	s, base, keyFile, _ := vertexSim(t, time.Hour, nil)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			time.Sleep(delay)
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	key, _ := os.ReadFile(keyFile)
	os.WriteFile(keyFile, []byte(strings.Replace(string(key), base+"/token", slow.URL+"/token", 1)), 0o600)
	gw, recs := gateway(t, vertexChannel(t, "vx", base, keyFile)) // the warm-up fetch starts here
	resp, body := do(t, gw.URL, clientKey, call{"gemini", "fast", true})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	w, ok := rec.UpstreamAuthMs.Get()
	t1, _ := rec.UpstreamStartMs.Get()
	if !ok || w > delay+time.Second || w > t1 {
		t.Errorf("upstream_auth_ms %v (%v), want a part of the %v fetch, inside t1 − t0 = %v", w, ok, delay, t1)
	}
	if h, _ := rec.UpstreamHeadersMs.Get(); h >= delay {
		t.Errorf("upstream_headers_ms %v holds the token wait", h)
	}
}
