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
)

// azureClientsSeen is what azure-ai-sdk.mjs prints.
type azureClientsSeen struct {
	AIStream, AITool, AIResponses, AIFlaky struct {
		Text, Finish, ToolName string
		ToolInput              map[string]any
		Usage                  *int
		Errors                 []nodeError
		Thrown                 *nodeError
	}
	AIPlain, AICompletion struct{ Text, Finish string }
	AI429, AI500          struct{ Error *nodeError }
	AIEmbed               struct {
		Dims  int
		Error *nodeError
	}
	AZResponses, AZTool, AZFlaky struct {
		Text, Status string
		Call         *struct{ Name, Arguments string }
		Error        *nodeError
	}
	AZ429, AZ500                    *nodeError
	AZChat, AZChatTool, AZChatFlaky struct {
		Text, ToolName, Tool, Finish string
		Error                        *nodeError
	}
	AZChatPlain, AZCompletion struct{ Text, Finish string }
	AZChat429, AZChat500      *nodeError
	AZCompletionStream        struct{ Text string }
	AZEmbed                   struct{ N, Dims int }
}

type nodeError struct {
	Name    string
	Status  *int
	Message string
}

// TestNodeAzureClients: Azure OpenAI's official Node clients, @ai-sdk/azure
// and the openai package's AzureOpenAI, accept the simulator's Azure side
// as an Azure OpenAI resource (deployment URLs with api-version, the v1
// form, api-key) and work the same with the gateway as their endpoint (the
// gateway serves Azure's paths; the ttfx key in their api-key header) to a
// channel of kind azure: chat (streamed text, a streamed tool call, a
// plain answer), legacy completions, embeddings, Responses (text and a
// function call), and the errors they raise for a 429, a 500 and a stream
// cut mid-answer. The gateway's records of them are on the azure channel,
// on Azure's routes, with the statuses of SPEC §5.
func TestNodeAzureClients(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@ai-sdk", "azure")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	const key = "upstream-key-az" // what channel() gives channel "az"
	profiles := sim.Builtin()
	profiles["status-500"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:500"}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles, APIKey: key}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, channel("az", "azure", up.URL+"?api-version=2024-10-21", fastTimeouts))

	run := func(mode, url, key string) azureClientsSeen {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "azure-ai-sdk.mjs", mode, url, key)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node azure-ai-sdk.mjs %s: %v\n%s", mode, err, stderr.String())
		}
		var got azureClientsSeen
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s output: %v\n%s", mode, err, out)
		}
		return got
	}
	direct := run("direct", up.URL, key)
	through := run("gateway", gw.URL, clientKey)

	status := func(e *nodeError) int {
		if e == nil || e.Status == nil {
			return 0
		}
		return *e.Status
	}
	for _, c := range []struct {
		name string
		got  azureClientsSeen
	}{{"direct", direct}, {"gateway", through}} {
		g := c.got
		if g.AIStream.Text == "" || g.AIStream.Text != direct.AIStream.Text || g.AIStream.Finish != "stop" || g.AIStream.Usage == nil || *g.AIStream.Usage != 60 {
			t.Errorf("%s: @ai-sdk/azure stream %+v", c.name, g.AIStream)
		}
		if g.AITool.ToolName != "get_weather" || g.AITool.ToolInput["city"] == nil || g.AITool.Finish != "tool-calls" {
			t.Errorf("%s: @ai-sdk/azure tool call %+v", c.name, g.AITool)
		}
		if g.AIPlain.Text != direct.AIStream.Text || g.AIPlain.Finish != "stop" {
			t.Errorf("%s: @ai-sdk/azure plain %+v", c.name, g.AIPlain)
		}
		if g.AIResponses.Text != direct.AIStream.Text || g.AIResponses.Finish != "stop" {
			t.Errorf("%s: @ai-sdk/azure responses %+v", c.name, g.AIResponses)
		}
		if status(g.AI429.Error) != 429 || !strings.Contains(g.AI429.Error.Message, "exceeded token rate limit") {
			t.Errorf("%s: @ai-sdk/azure 429 %+v", c.name, g.AI429.Error)
		}
		if status(g.AI500.Error) != 500 {
			t.Errorf("%s: @ai-sdk/azure 500 %+v", c.name, g.AI500.Error)
		}
		// A cut stream raises (thrown or as an error part), after some text.
		if f := g.AIFlaky; f.Text == "" || f.Finish == "stop" || (f.Thrown == nil && len(f.Errors) == 0) {
			t.Errorf("%s: @ai-sdk/azure cut stream ended cleanly: %+v", c.name, f)
		}
		if g.AZResponses.Text != direct.AIStream.Text || g.AZResponses.Status != "completed" || g.AZResponses.Error != nil {
			t.Errorf("%s: AzureOpenAI responses %+v", c.name, g.AZResponses)
		}
		if g.AZTool.Call == nil || g.AZTool.Call.Name != "get_weather" || !strings.Contains(g.AZTool.Call.Arguments, "city") {
			t.Errorf("%s: AzureOpenAI function call %+v", c.name, g.AZTool)
		}
		if g.AZFlaky.Text == "" || g.AZFlaky.Status == "completed" || g.AZFlaky.Error == nil {
			t.Errorf("%s: AzureOpenAI cut stream ended cleanly: %+v", c.name, g.AZFlaky)
		}
		if status(g.AZ429) != 429 || status(g.AZ500) != 500 {
			t.Errorf("%s: AzureOpenAI errors 429 %+v 500 %+v", c.name, g.AZ429, g.AZ500)
		}
		if g.AICompletion.Text != direct.AIStream.Text || g.AIEmbed.Dims == 0 || g.AIEmbed.Error != nil {
			t.Errorf("%s: @ai-sdk/azure completion %+v, embedding %+v", c.name, g.AICompletion, g.AIEmbed)
		}
		if g.AZChat.Text != direct.AIStream.Text || g.AZChat.Finish != "stop" || g.AZChat.Error != nil {
			t.Errorf("%s: AzureOpenAI chat stream %+v", c.name, g.AZChat)
		}
		if g.AZChatTool.ToolName != "get_weather" || !strings.Contains(g.AZChatTool.Tool, "city") || g.AZChatTool.Finish != "tool_calls" {
			t.Errorf("%s: AzureOpenAI chat tool call %+v", c.name, g.AZChatTool)
		}
		if g.AZChatFlaky.Text == "" || g.AZChatFlaky.Finish == "stop" || g.AZChatFlaky.Error == nil {
			t.Errorf("%s: AzureOpenAI cut chat stream ended cleanly: %+v", c.name, g.AZChatFlaky)
		}
		if g.AZChatPlain.Text != direct.AIStream.Text || g.AZChatPlain.Finish != "stop" {
			t.Errorf("%s: AzureOpenAI chat plain %+v", c.name, g.AZChatPlain)
		}
		if status(g.AZChat429) != 429 || !strings.Contains(g.AZChat429.Message, "exceeded token rate limit") || status(g.AZChat500) != 500 {
			t.Errorf("%s: AzureOpenAI chat errors 429 %+v 500 %+v", c.name, g.AZChat429, g.AZChat500)
		}
		if g.AZCompletion.Text != direct.AIStream.Text || g.AZCompletionStream.Text != direct.AIStream.Text {
			t.Errorf("%s: AzureOpenAI completions %+v stream %+v", c.name, g.AZCompletion, g.AZCompletionStream)
		}
		if g.AZEmbed.N != 2 || g.AZEmbed.Dims == 0 {
			t.Errorf("%s: AzureOpenAI embeddings %+v", c.name, g.AZEmbed)
		}
	}

	// The gateway's records: every request on the azure channel; the
	// errors with their statuses.
	recs.mu.Lock()
	defer recs.mu.Unlock()
	// Keyed route/model/stream → status: each client's calls on the
	// route it used (every record has one key; a repeated call overwrites).
	const (
		dChat  = "POST /openai/deployments/{deployment}/chat/completions"
		dComp  = "POST /openai/deployments/{deployment}/completions"
		dEmbed = "POST /openai/deployments/{deployment}/embeddings"
		azResp = "POST /openai/responses"
		v1Resp = "POST /openai/v1/responses"
	)
	want := map[string]string{
		dChat + "/fast/true":         record.StatusOK,
		dChat + "/tool-call/true":    record.StatusOK,
		dChat + "/fast/false":        record.StatusOK,
		dChat + "/status-429/false":  record.StatusRateLimited,
		dChat + "/status-500/false":  record.StatusUpstreamHTTPError,
		dChat + "/flaky/true":        record.StatusUpstreamStreamError,
		dComp + "/fast/false":        record.StatusOK,
		dComp + "/fast/true":         record.StatusOK,
		dEmbed + "/fast/false":       record.StatusOK,
		v1Resp + "/fast/true":        record.StatusOK,
		azResp + "/fast/true":        record.StatusOK,
		azResp + "/tool-call/true":   record.StatusOK,
		azResp + "/flaky/true":       record.StatusUpstreamStreamError,
		azResp + "/status-429/false": record.StatusRateLimited,
		azResp + "/status-500/false": record.StatusUpstreamHTTPError,
	}
	apiOf := map[string]string{dChat: "openai.chat", dComp: "openai.completions", dEmbed: "openai.embeddings", azResp: "openai.responses", v1Resp: "openai.responses"}
	for _, r := range recs.recs {
		if r.Channel != "az" || r.KeyName != "client" {
			t.Errorf("record of %s %s on channel %q, key %q", r.API, r.Model, r.Channel, r.KeyName)
		}
		if api, ok := apiOf[r.Route]; !ok || r.API != api {
			t.Errorf("record of %s %s on route %q", r.API, r.Model, r.Route)
		}
		k := r.Route + "/" + r.Model + "/" + map[bool]string{true: "true", false: "false"}[r.Stream]
		if w, ok := want[k]; ok {
			if r.Status != w {
				t.Errorf("record %s: %s (%s), want %s", k, r.Status, r.Error, w)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("no record of %s", k)
	}
}
