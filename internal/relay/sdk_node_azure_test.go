package relay_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestNodeAzureSDK: the openai package's AzureOpenAI client accepts the
// simulator's Azure side as an Azure OpenAI resource: deployment URLs with
// api-version and api-key, a streamed answer and tool call, a plain
// answer, and a 401 for a wrong key.
func TestNodeAzureSDK(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	const key = "azure-test-key"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: key}))
	t.Cleanup(up.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "azure.mjs", up.URL, key)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node azure.mjs: %v\n%s", err, stderr.String())
	}
	var got struct {
		Stream, Tool struct{ Text, Tool, Finish string }
		Plain        struct{ Text, Finish string }
		WrongKey     *struct {
			Status  int
			Message string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	if got.Stream.Text == "" || got.Stream.Finish != "stop" {
		t.Errorf("stream: %+v", got.Stream)
	}
	if got.Tool.Tool == "" || got.Tool.Finish != "tool_calls" {
		t.Errorf("tool call: %+v", got.Tool)
	}
	if got.Plain.Text != got.Stream.Text || got.Plain.Finish != "stop" {
		t.Errorf("plain: %+v, stream text %q", got.Plain, got.Stream.Text)
	}
	if got.WrongKey == nil || got.WrongKey.Status != 401 || !strings.Contains(got.WrongKey.Message, "Access denied") {
		t.Errorf("wrong key: %+v", got.WrongKey)
	}
}
