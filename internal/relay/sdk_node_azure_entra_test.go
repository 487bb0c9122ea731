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

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/wire"
)

// azureEntraSeen is what azure-entra.mjs prints.
type azureEntraSeen struct {
	Fetches    int
	Chat, Tool struct {
		Text, ToolName, Tool, Finish string
		Error                        *nodeError
	}
	Plain      struct{ Text, Finish string }
	Responses  struct{ Text, Status string }
	Embed      struct{ N, Dims int }
	WrongToken *nodeError
}

// TestNodeAzureEntraID: the openai package's AzureOpenAI client with an
// azureADTokenProvider (Entra ID bearer tokens) works against the
// simulator's Azure side with tokens it got from the simulator's Entra ID
// endpoint by the client-credentials grant, and the same client works
// through the gateway (its bearer token the ttfx key) to a channel of kind
// azure that authenticates with Entra ID itself (tenant_id, client_id,
// client_secret_env): chat streamed, a tool call, a plain answer,
// Responses, embeddings, and the 401 of a token nobody issued. The
// simulator issued a token to each of them, and only to them.
func TestNodeAzureEntraID(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	s := sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: "resource-key-unused",
		Identity: &sim.Identity{EntraClients: map[string]string{"app-node": "node-secret", "app-gw": "gw-secret"}, TokenLifetime: 10 * time.Minute}})
	up := httptest.NewServer(s)
	t.Cleanup(up.Close)
	ch := channel("az", "azure", up.URL+"?api-version=2024-10-21", fastTimeouts)
	ch.Key = ""
	ch.Hooks, err = wire.LookupKind("azure").Open(wire.ChannelConfig{Name: "az", Base: ch.BaseURL,
		Settings: map[string]string{"tenant_id": "tenant-1", "client_id": "app-gw", "client_secret_env": "AZ_SECRET", "authority_host": up.URL},
		Env:      map[string]string{"client_secret_env": "gw-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, recs := gateway(t, ch)

	run := func(args ...string) azureEntraSeen {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{"azure-entra.mjs"}, args...)...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node azure-entra.mjs %s: %v\n%s", args[0], err, stderr.String())
		}
		var got azureEntraSeen
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s output: %v\n%s", args[0], err, out)
		}
		return got
	}
	direct := run("entra", up.URL, up.URL, "tenant-1", "app-node", "node-secret")
	through := run("bearer", gw.URL, clientKey)

	if direct.Fetches != 1 {
		t.Errorf("the client fetched %d tokens for its calls, want 1 (cached)", direct.Fetches)
	}
	for _, c := range []struct {
		name string
		got  azureEntraSeen
	}{{"direct", direct}, {"gateway", through}} {
		g := c.got
		if g.Chat.Text == "" || g.Chat.Text != direct.Chat.Text || g.Chat.Finish != "stop" || g.Chat.Error != nil {
			t.Errorf("%s: chat stream %+v", c.name, g.Chat)
		}
		if g.Tool.ToolName != "get_weather" || !strings.Contains(g.Tool.Tool, "city") || g.Tool.Finish != "tool_calls" {
			t.Errorf("%s: tool call %+v", c.name, g.Tool)
		}
		if g.Plain.Text != direct.Chat.Text || g.Plain.Finish != "stop" {
			t.Errorf("%s: plain %+v", c.name, g.Plain)
		}
		if g.Responses.Text != direct.Chat.Text || g.Responses.Status != "completed" {
			t.Errorf("%s: responses %+v", c.name, g.Responses)
		}
		if g.Embed.N != 1 || g.Embed.Dims == 0 {
			t.Errorf("%s: embeddings %+v", c.name, g.Embed)
		}
		if g.WrongToken == nil || g.WrongToken.Status == nil || *g.WrongToken.Status != 401 {
			t.Errorf("%s: a token nobody issued: %+v, want 401", c.name, g.WrongToken)
		}
	}
	subjects := map[string]int{}
	for _, tok := range s.TokensIssued() {
		if tok.Grant != "client_credentials" {
			t.Errorf("token issued by grant %q", tok.Grant)
		}
		subjects[tok.Subject]++
	}
	if len(subjects) != 2 || subjects["app-node"] != 1 || subjects["app-gw"] != 1 {
		t.Errorf("tokens issued: %v, want one each to app-node and app-gw", subjects)
	}

	recs.mu.Lock()
	defer recs.mu.Unlock()
	ok, failed := 0, 0
	for _, r := range recs.recs {
		switch {
		case r.Status == record.StatusOK && r.Channel == "az" && r.KeyName == "client" && strings.HasPrefix(r.Route, "POST /openai/"):
			ok++
		case r.Status == record.StatusAuthFailed:
			failed++
		default:
			t.Errorf("record %s %s on %q route %q: %s (%s)", r.API, r.Model, r.Channel, r.Route, r.Status, r.Error)
		}
	}
	if ok != 5 || failed > 1 {
		t.Errorf("%d ok records (want 5: chat, tool, plain, responses, embeddings) and %d of the wrong token", ok, failed)
	}
}
