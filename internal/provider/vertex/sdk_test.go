package vertex_test

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/auth/credentials"
	"google.golang.org/genai"

	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

const account = "ttfx-test@sim-project.iam.gserviceaccount.com"

// vertexSim is a simulator speaking Vertex AI with a test service account;
// it returns its URL, the account's JSON key and its file.
func vertexSim(t *testing.T) (*sim.Server, string, []byte, string) {
	t.Helper()
	var cur atomic.Pointer[sim.Server]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	key, pub, err := sim.NewServiceAccount(account, srv.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(file, key, 0o600); err != nil {
		t.Fatal(err)
	}
	s := sim.New(sim.Options{Profiles: sim.Builtin(), Identity: &sim.Identity{ServiceAccounts: map[string]*rsa.PublicKey{account: pub}}})
	cur.Store(s)
	return s, srv.URL, key, file
}

// TestGenaiVertex: google.golang.org/genai with Vertex settings (project,
// location, credentials from the service account's key through
// cloud.google.com/go/auth) accepts the simulator as Vertex AI: a stream,
// a plain answer, a tool call and a 429.
func TestGenaiVertex(t *testing.T) {
	t.Parallel()
	s, base, key, _ := vertexSim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	creds, err := credentials.DetectDefault(&credentials.DetectOptions{CredentialsJSON: key, Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := genai.NewClient(ctx, &genai.ClientConfig{Backend: genai.BackendVertexAI, Project: "sim-project", Location: "us-east5",
		Credentials: creds, HTTPOptions: genai.HTTPOptions{BaseURL: base}})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for resp, err := range gc.Models.GenerateContentStream(ctx, "fast", genai.Text("Say hello."), nil) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		text += resp.Text()
	}
	if text == "" {
		t.Error("stream: no text")
	}
	if r, err := gc.Models.GenerateContent(ctx, "fast", genai.Text("Say hello."), nil); err != nil || r.Text() != text {
		t.Errorf("plain: %v, text differs from the stream's", err)
	}
	calls := 0
	for resp, err := range gc.Models.GenerateContentStream(ctx, "tool-call", genai.Text("Say hello."), nil) {
		if err != nil {
			t.Fatalf("tool call: %v", err)
		}
		calls += len(resp.FunctionCalls())
	}
	if calls == 0 {
		t.Error("tool call: none")
	}
	var apiErr genai.APIError
	if _, err := gc.Models.GenerateContent(ctx, "status-429", genai.Text("x"), nil); !errors.As(err, &apiErr) || apiErr.Code != 429 {
		t.Errorf("status-429: %v", err)
	}
	if got := s.TokensIssued(); len(got) != 1 || got[0].Subject != account {
		t.Errorf("tokens issued: %+v, want one for %s", got, account)
	}
}

// TestNodeVertexSDKs: @anthropic-ai/vertex-sdk and @ai-sdk/google-vertex
// (testdata/sdk-node/vertex.mjs) sign in as the test service account and
// are served by the simulator's Vertex side.
func TestNodeVertexSDKs(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@anthropic-ai", "vertex-sdk")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	s, base, _, file := vertexSim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "vertex.mjs", base, file)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node vertex.mjs: %v\n%s", err, stderr.String())
	}
	type answer struct{ Text, Tool, Stop, Finish, Error string }
	var got struct {
		AnthropicStream, AnthropicTool, AnthropicPlain answer
		Anthropic429                                   *struct{ Status int }
		GeminiStream, GeminiPlain, AIAnthropicStream   answer
		TokenRequests                                  int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	if a := got.AnthropicStream; a.Text == "" || a.Stop != "end_turn" {
		t.Errorf("@anthropic-ai/vertex-sdk stream: %+v", a)
	}
	if a := got.AnthropicTool; a.Tool == "" || a.Stop != "tool_use" {
		t.Errorf("@anthropic-ai/vertex-sdk tool call: %+v", a)
	}
	if a := got.AnthropicPlain; a.Text != got.AnthropicStream.Text || a.Stop != "end_turn" {
		t.Errorf("@anthropic-ai/vertex-sdk plain: %+v", a)
	}
	if got.Anthropic429 == nil || got.Anthropic429.Status != 429 {
		t.Errorf("@anthropic-ai/vertex-sdk status-429: %+v", got.Anthropic429)
	}
	if a := got.GeminiStream; a.Text == "" || a.Finish != "stop" || a.Error != "" {
		t.Errorf("@ai-sdk/google-vertex gemini stream: %+v", a)
	}
	if a := got.GeminiPlain; a.Text != got.GeminiStream.Text || a.Finish != "stop" {
		t.Errorf("@ai-sdk/google-vertex gemini plain: %+v", a)
	}
	if a := got.AIAnthropicStream; a.Text == "" || a.Finish != "stop" || a.Error != "" {
		t.Errorf("@ai-sdk/google-vertex/anthropic stream: %+v", a)
	}
	// Every token the SDKs used was issued to the account for its signed JWT.
	if n := len(s.TokensIssued()); got.TokenRequests == 0 || n != got.TokenRequests {
		t.Errorf("%d token requests, %d tokens issued", got.TokenRequests, n)
	}
}
