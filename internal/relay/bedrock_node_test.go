package relay_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
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

// nodeBedrock runs testdata/sdk-node/bedrock.mjs with args and decodes its
// output into v.
func nodeBedrock(t *testing.T, env []string, v any, args ...string) {
	t.Helper()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	for _, p := range []string{"@aws-sdk/client-bedrock-runtime", "@anthropic-ai/bedrock-sdk", "@ai-sdk/amazon-bedrock"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"bedrock.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node bedrock.mjs %s: %v\n%s", args[0], err, stderr.String())
	}
	t.Logf("%s", out)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
}

type nodeErr struct {
	Name    string
	Status  int
	Message string
}

// aiAnswer is what the Vercel AI SDK's stream gave: its error a string.
type aiAnswer struct{ Text, Finish, Error string }

type nodeAnswer struct {
	Text, Tool, Stop, Finish, First, Last string
	LatencyMs, OutputTokens               int
	FirstTextMs                           float64 // by the client's clock, from just before its call
	Error                                 *nodeErr
}

// TestNodeBedrockSDKs: the official Node clients of Bedrock against the
// simulator's Bedrock side directly with SigV4 (@aws-sdk/client-bedrock-runtime:
// ConverseStream, Converse, InvokeModelWithResponseStream, InvokeModel;
// @anthropic-ai/bedrock-sdk; @ai-sdk/amazon-bedrock), and through the
// gateway over HTTPS with the ttfx key as a Bedrock API key and an endpoint
// override (the AWS client's Converse and InvokeModel calls,
// @ai-sdk/amazon-bedrock, and @anthropic-ai/sdk to the bedrock channel):
// streams, plain answers, tool use, a 429 as ThrottlingException, a 500, a
// cut stream, each raised as the SDK's own error, and the records agree
// with what the clients read, the client's clock with the record's.
func TestNodeBedrockSDKs(t *testing.T) {
	t.Parallel()
	const key = "upstream-key-brkn"
	profiles := sim.Builtin()
	profiles["status-500"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:500"}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles, APIKey: key}))
	t.Cleanup(up.Close)

	var direct struct {
		ConverseStream, ConverseTool, Converse429, Converse500, ConverseCut, ConversePlain nodeAnswer
		InvokeStream, Invoke429, InvokeCut, InvokePlain                                    nodeAnswer
		AnthropicStream, AnthropicTool, Anthropic429, AnthropicPlain                       nodeAnswer
		AIStream, AIPlain                                                                  aiAnswer
	}
	nodeBedrock(t, nil, &direct, "direct", up.URL)
	if a := direct.ConverseStream; a.Error != nil || a.Text == "" || a.Stop != "end_turn" || a.LatencyMs <= 0 || a.OutputTokens <= 0 {
		t.Errorf("client-bedrock-runtime ConverseStream: %+v", a)
	}
	if a := direct.ConverseTool; a.Error != nil || a.Tool == "" || a.Stop != "tool_use" {
		t.Errorf("client-bedrock-runtime tool use: %+v", a)
	}
	if a := direct.Converse429; a.Error == nil || a.Error.Name != "ThrottlingException" || a.Error.Status != 429 {
		t.Errorf("client-bedrock-runtime status-429: %+v", a)
	}
	if a := direct.Converse500; a.Error == nil || a.Error.Status != 500 {
		t.Errorf("client-bedrock-runtime status-500: %+v %+v", a, a.Error)
	}
	if a := direct.ConverseCut; a.Error == nil || a.Text == "" {
		t.Errorf("client-bedrock-runtime cut stream: %+v", a)
	}
	if a := direct.ConversePlain; a.Error != nil || a.Text != direct.ConverseStream.Text || a.Stop != "end_turn" {
		t.Errorf("client-bedrock-runtime Converse: %+v", a)
	}
	if a := direct.InvokeStream; a.Error != nil || a.Text == "" || a.First != "message_start" || a.Last != "message_stop" {
		t.Errorf("client-bedrock-runtime InvokeModelWithResponseStream: %+v", a)
	}
	if a := direct.Invoke429; a.Error == nil || a.Error.Name != "ThrottlingException" || a.Error.Status != 429 {
		t.Errorf("client-bedrock-runtime InvokeModelWithResponseStream status-429: %+v %+v", a, a.Error)
	}
	if a := direct.InvokeCut; a.Error == nil || a.Text == "" {
		t.Errorf("client-bedrock-runtime InvokeModelWithResponseStream cut: %+v", a)
	}
	if a := direct.InvokePlain; a.Error != nil || a.Text != direct.InvokeStream.Text || a.Stop != "end_turn" {
		t.Errorf("client-bedrock-runtime InvokeModel: %+v", a)
	}
	if a := direct.AnthropicStream; a.Error != nil || a.Text == "" || a.Stop != "end_turn" {
		t.Errorf("@anthropic-ai/bedrock-sdk stream: %+v", a)
	}
	if a := direct.AnthropicTool; a.Error != nil || a.Tool == "" || a.Stop != "tool_use" {
		t.Errorf("@anthropic-ai/bedrock-sdk tool use: %+v", a)
	}
	if a := direct.Anthropic429; a.Error == nil || a.Error.Status != 429 {
		t.Errorf("@anthropic-ai/bedrock-sdk status-429: %+v", a)
	}
	if a := direct.AnthropicPlain; a.Error != nil || a.Text == "" || a.Stop != "end_turn" {
		t.Errorf("@anthropic-ai/bedrock-sdk plain: %+v", a)
	}
	if a := direct.AIStream; a.Error != "" || a.Text == "" || a.Finish != "stop" {
		t.Errorf("@ai-sdk/amazon-bedrock stream: %+v", a)
	}
	if a := direct.AIPlain; a.Error != "" || a.Text == "" || a.Finish != "stop" {
		t.Errorf("@ai-sdk/amazon-bedrock plain: %+v", a)
	}

	// Through the gateway, over HTTPS (Node trusts its test certificate).
	gw, recs := gatewayTLS(t, bedrockChannel(t, "brkn", up.URL, key))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gw.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	var via struct {
		ConverseStream, ConverseTool, Converse429, Converse500, ConverseCut, ConversePlain nodeAnswer
		InvokeStream, Invoke429, InvokeCut, InvokePlain                                    nodeAnswer
		AIStream, AI429                                                                    aiAnswer
		AnthropicStream, AnthropicTool, Anthropic429, AnthropicCut                         nodeAnswer
	}
	nodeBedrock(t, []string{"NODE_EXTRA_CA_CERTS=" + ca}, &via, "gateway", gw.URL, clientKey)
	if a := via.ConverseStream; a.Error != nil || a.Text != direct.ConverseStream.Text || a.Stop != "end_turn" || a.LatencyMs <= 0 {
		t.Errorf("client-bedrock-runtime ConverseStream through the gateway: %+v", a)
	}
	if a := via.ConverseTool; a.Error != nil || a.Tool == "" || a.Stop != "tool_use" {
		t.Errorf("client-bedrock-runtime tool use through the gateway: %+v", a)
	}
	if a := via.Converse429; a.Error == nil || a.Error.Name != "ThrottlingException" || a.Error.Status != 429 {
		t.Errorf("client-bedrock-runtime status-429 through the gateway: %+v %+v", a, a.Error)
	}
	if a := via.Converse500; a.Error == nil || a.Error.Status != 500 {
		t.Errorf("client-bedrock-runtime status-500 through the gateway: %+v %+v", a, a.Error)
	}
	if a := via.ConverseCut; a.Error == nil || a.Text == "" {
		t.Errorf("client-bedrock-runtime cut stream through the gateway: %+v", a)
	}
	if a := via.ConversePlain; a.Error != nil || a.Text != direct.ConverseStream.Text {
		t.Errorf("client-bedrock-runtime Converse through the gateway: %+v", a)
	}
	// InvokeModel through the gateway: the same events, Bedrock's
	// exceptions as the SDK's error types.
	if a := via.InvokeStream; a.Error != nil || a.Text != direct.InvokeStream.Text || a.First != "message_start" || a.Last != "message_stop" || a.LatencyMs <= 0 {
		t.Errorf("client-bedrock-runtime InvokeModelWithResponseStream through the gateway: %+v", a)
	}
	if a := via.Invoke429; a.Error == nil || a.Error.Name != "ThrottlingException" || a.Error.Status != 429 {
		t.Errorf("client-bedrock-runtime InvokeModelWithResponseStream status-429 through the gateway: %+v %+v", a, a.Error)
	}
	if a := via.InvokeCut; a.Error == nil || a.Error.Name != "ModelStreamErrorException" || a.Text == "" {
		t.Errorf("client-bedrock-runtime InvokeModelWithResponseStream cut through the gateway: %+v %+v", a, a.Error)
	}
	if a := via.InvokePlain; a.Error != nil || a.Text != direct.InvokeStream.Text || a.Stop != "end_turn" {
		t.Errorf("client-bedrock-runtime InvokeModel through the gateway: %+v", a)
	}
	if a := via.AIStream; a.Error != "" || a.Text == "" || a.Finish != "stop" {
		t.Errorf("@ai-sdk/amazon-bedrock stream through the gateway: %+v", a)
	}
	if a := via.AI429; a.Error == "" || a.Text != "" {
		t.Errorf("@ai-sdk/amazon-bedrock status-429 through the gateway: %+v", a)
	}
	if a := via.AnthropicStream; a.Error != nil || a.Text == "" || a.Stop != "end_turn" {
		t.Errorf("@anthropic-ai/sdk to a bedrock channel: %+v", a)
	}
	if a := via.AnthropicTool; a.Error != nil || a.Tool == "" || a.Stop != "tool_use" {
		t.Errorf("@anthropic-ai/sdk tool use to a bedrock channel: %+v", a)
	}
	if a := via.Anthropic429; a.Error == nil || a.Error.Status != 429 {
		t.Errorf("@anthropic-ai/sdk status-429 to a bedrock channel: %+v", a)
	}
	if a := via.AnthropicCut; a.Error == nil || a.Text == "" {
		t.Errorf("@anthropic-ai/sdk cut stream to a bedrock channel: %+v", a)
	}
	// The records agree with what the clients read.
	if rec := recs.lastOfAPI(t, "fast", "anthropic"); rec.Status != record.StatusOK || rec.Tokens.Output == nil || *rec.Tokens.Output <= 0 {
		t.Errorf("anthropic fast record: %s tokens %+v", rec.Status, rec.Tokens)
	}
	if rec := recs.lastStream(t, "fast", "bedrock.invoke", true); rec.Status != record.StatusOK || rec.Tokens.Output == nil || *rec.Tokens.Output != via.InvokeStream.OutputTokens {
		t.Errorf("invoke fast record: %s tokens %+v, the client read output %d", rec.Status, rec.Tokens, via.InvokeStream.OutputTokens)
	} else {
		if d, ok := rec.ProviderLatencyMs.Get(); !ok || d != time.Duration(via.InvokeStream.LatencyMs)*time.Millisecond {
			t.Errorf("invoke provider_latency_ms %v, the client read invocationLatency %d", rec.ProviderLatencyMs, via.InvokeStream.LatencyMs)
		}
		clientAgrees(t, "node invoke fast", rec, via.InvokeStream.FirstTextMs)
	}
	if rec := recs.lastStream(t, "fast", "bedrock.invoke", false); rec.Status != record.StatusOK || rec.Tokens.Output == nil || *rec.Tokens.Output != via.InvokePlain.OutputTokens {
		t.Errorf("InvokeModel fast record: %s tokens %+v, the client read output %d", rec.Status, rec.Tokens, via.InvokePlain.OutputTokens)
	}
	if rec := recs.lastOfAPI(t, "status-429", "bedrock.invoke"); rec.Status != record.StatusRateLimited {
		t.Errorf("invoke status-429 record: %s", rec.Status)
	}
	if rec := recs.lastOfAPI(t, "flaky", "bedrock.invoke"); rec.Status != record.StatusUpstreamStreamError {
		t.Errorf("invoke flaky record: %s", rec.Status)
	}
	if rec := recs.lastOfAPI(t, "status-429", "bedrock.converse"); rec.Status != record.StatusRateLimited {
		t.Errorf("converse status-429 record: %s", rec.Status)
	}
	if rec := recs.lastOfAPI(t, "flaky", "bedrock.converse"); rec.Status != record.StatusUpstreamStreamError {
		t.Errorf("converse flaky record: %s", rec.Status)
	}
}
