package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// Records that tell the truth at the edges of a stream (issue 43).

// lateEnd holds replayed streams whose terminal event (or upstream error
// event) comes at 80 ms while the upstream closes the connection only at
// 600 ms: a client that stops at the terminal event hangs up long before the
// upstream's end of stream.
var lateEnd = map[string]string{
	"done-chat": `: headers=10
: t=20
data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}

: t=80
data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

: t=600
`,
	"err-chat": `: headers=10
: t=20
data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}

: t=80
data: {"error":{"message":"Overloaded","type":"server_error","param":null,"code":null}}

: t=600
`,
	"done-responses": `: headers=10
: t=20
event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello world"}

: t=80
event: response.completed
data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello world","annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":2,"total_tokens":5}}}

: t=600
`,
	"err-responses": `: headers=10
: t=20
event: response.created
data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"m","output":[]}}

event: response.output_text.delta
data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello"}

: t=80
event: error
data: {"type":"error","code":"server_error","message":"Overloaded","param":null,"sequence_number":2}

: t=600
`,
	"done-anthropic": `: headers=10
: t=20
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello world"}}

: t=80
event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}

event: message_stop
data: {"type":"message_stop"}

: t=600
`,
	"err-anthropic": `: headers=10
: t=20
event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}

: t=80
event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

: t=600
`,
	"done-gemini": `: headers=10
: t=20
data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"modelVersion":"m"}

: t=80
data: {"candidates":[{"content":{"parts":[{"text":" world"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5},"modelVersion":"m"}

: t=600
`,
	"err-gemini": `: headers=10
: t=20
data: {"candidates":[{"content":{"parts":[{"text":"Hello"}],"role":"model"},"index":0}],"modelVersion":"m"}

: t=80
data: {"error":{"code":503,"message":"Overloaded","status":"UNAVAILABLE"}}

: t=600
`,
	// The terminal event comes after the client has gone.
	"slow-chat": `: headers=10
: t=20
data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}

: t=400
data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

: t=600
`,
}

// lateEndGateway is a gateway over a simulator that replays lateEnd.
func lateEndGateway(t *testing.T) (*httptest.Server, *records) {
	t.Helper()
	dir := t.TempDir()
	profiles := sim.Builtin()
	for name, body := range lateEnd {
		path := filepath.Join(dir, name+".sse")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := sim.ReplayProfile(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		profiles[name] = p
	}
	gw, recs, _, _ := allProtocols(t, profiles)
	return gw, recs
}

// byModel waits for the record of the one request that asked for model.
func (r *records) byModel(t *testing.T, model string) record.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		for _, rec := range r.recs {
			if rec.Model == model {
				r.mu.Unlock()
				return rec
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Errorf("no record for model %s", model)
			return record.Record{}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClientHangUpAfterTerminal: a client that closes the stream as soon as
// it has the terminal event (openai-go on [DONE]; an application that stops
// at response.completed, message_stop or Gemini's finish reason) before the
// upstream's end of stream has not cancelled: the record says ok, for each
// API (SPEC.md §5). A client that hangs up before the terminal event has.
func TestClientHangUpAfterTerminal(t *testing.T) {
	t.Parallel()
	gw, recs := lateEndGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	oai := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))

	cs := oai.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "done-chat", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	var chatText string
	for cs.Next() { // openai-go stops reading at [DONE]
		for _, c := range cs.Current().Choices {
			chatText += c.Delta.Content
		}
	}
	if err := cs.Err(); err != nil || chatText != "Hello world" {
		t.Fatalf("openai-go chat: %q, %v", chatText, err)
	}
	cs.Close()

	rs := oai.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "done-responses", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
	})
	for rs.Next() {
		if rs.Current().Type == "response.completed" {
			break
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatalf("openai-go responses: %v", err)
	}
	rs.Close()

	ant := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0))
	as := ant.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "done-anthropic", MaxTokens: 64, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	})
	for as.Next() {
		if as.Current().Type == "message_stop" {
			break
		}
	}
	if err := as.Err(); err != nil {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	as.Close()

	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: clientKey, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: gw.URL, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	for resp, err := range gc.Models.GenerateContentStream(ctx, "done-gemini", genai.Text("Say hello."), nil) {
		if err != nil {
			t.Fatalf("genai: %v", err)
		}
		if len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != "" {
			break // the iterator closes the body
		}
	}

	for _, model := range []string{"done-chat", "done-responses", "done-anthropic", "done-gemini"} {
		rec := recs.byModel(t, model)
		if rec.Status != record.StatusOK || rec.Terminal != "done" {
			t.Errorf("%s: status %s, terminal %s, error %q; want ok after the terminal event", model, rec.Status, rec.Terminal, rec.Error)
		}
	}

	// Hanging up before the terminal event is a cancel.
	req := call{api: "chat", model: "slow-chat", stream: true}.request(ctx, gw.URL, clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if rec := recs.byModel(t, "slow-chat"); rec.Status != record.StatusClientCancelled {
		t.Errorf("a hang-up before the terminal event: status %s, terminal %s; want client_cancelled", rec.Status, rec.Terminal)
	}
}

// nodeEdges runs testdata/sdk-node/edges.mjs with cases against base and
// returns what each client saw.
func nodeEdges(t *testing.T, base string, cases []nodeCase) map[string]nodeSaw {
	t.Helper()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@langchain", "openai")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	js, _ := json.Marshal(cases)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "edges.mjs", base, clientKey, string(js))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node edges.mjs: %v\n%s", err, stderr.String())
	}
	var m map[string]nodeSaw
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("script output: %v\n%s", err, out)
	}
	return m
}

type nodeCase struct {
	Name        string `json:"name"`
	Client      string `json:"client"`
	Model       string `json:"model"`
	StopOnError bool   `json:"stopOnError"`
}

type nodeSaw struct {
	Text  string  `json:"text"`
	Error *string `json:"error"`
}

// TestClientAbortOnErrorEvent: the Node SDKs drop the connection as soon
// as an upstream's in-stream error arrives. The upstream's error decided
// the status (upstream_stream_error), not the client's hang-up, for each
// API.
func TestClientAbortOnErrorEvent(t *testing.T) {
	t.Parallel()
	gw, recs := lateEndGateway(t)
	saw := nodeEdges(t, gw.URL, []nodeCase{
		{Name: "chat", Client: "openai-chat", Model: "err-chat"},
		{Name: "responses", Client: "openai-responses", Model: "err-responses", StopOnError: true},
		{Name: "anthropic", Client: "anthropic", Model: "err-anthropic"},
		{Name: "gemini", Client: "genai", Model: "err-gemini"},
	})
	for name, s := range saw {
		if s.Error == nil || !strings.Contains(*s.Error, "Overloaded") {
			t.Errorf("%s: the client saw %+v, want the upstream's Overloaded error", name, s)
		}
	}
	for _, model := range []string{"err-chat", "err-responses", "err-anthropic", "err-gemini"} {
		rec := recs.byModel(t, model)
		if rec.Status != record.StatusUpstreamStreamError || rec.Terminal != "error" {
			t.Errorf("%s: status %s, terminal %s, error %q; want upstream_stream_error from the relayed error event", model, rec.Status, rec.Terminal, rec.Error)
		}
	}
}

// goClientsSee streams model through base with openai-go (chat and
// Responses), anthropic-sdk-go and genai, and returns, per client, the
// error it raised ("" when the stream ended as a clean answer).
func goClientsSee(t *testing.T, base, model string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	out := map[string]string{}
	oai := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	cs := oai.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello.")},
	})
	for cs.Next() {
	}
	out["openai-go chat"] = errText(cs.Err())
	cs.Close()

	rs := oai.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
	})
	for rs.Next() { // an error event is yielded as an ordinary event
	}
	out["openai-go responses"] = errText(rs.Err())
	rs.Close()

	ant := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0))
	as := ant.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: model, MaxTokens: 256, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello."))},
	})
	for as.Next() {
	}
	out["anthropic-sdk-go"] = errText(as.Err())
	as.Close()

	gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: clientKey, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	out["genai"] = ""
	for _, err := range gc.Models.GenerateContentStream(ctx, model, genai.Text("Say hello."), nil) {
		if err != nil {
			out["genai"] = err.Error()
			break
		}
	}
	return out
}

// TestMidStreamFailureRaises: a failure the gateway detects after the
// stream began (the upstream cut, or an idle, first-output or total
// timeout) reaches every official SDK as an error, as the upstream's own
// cut would directly: the protocol's error event, then an abnormal end of
// the response. openai-node iterating a Responses stream, openai-go and
// LangChain's Responses client take the event for an ordinary one; the
// abnormal end is what makes them raise (SPEC.md §5).
func TestMidStreamFailureRaises(t *testing.T) {
	t.Parallel()
	profiles := sim.Builtin()
	// The first metadata event at 20 ms, text only at 5 s.
	profiles["late-output"] = sim.Profile{HeadersMs: 10, FirstEventMs: 20, TextMs: sim.Ms(5000), VisibleTokens: 10, TPS: 100}
	// 300 tokens at 50 t/s: 6 s of text.
	profiles["long"] = sim.Profile{HeadersMs: 10, FirstEventMs: 10, TextMs: sim.Ms(50), VisibleTokens: 300, TPS: 50}
	up, _ := upstream(t, profiles)
	cases := []struct {
		failure, model, status string
		tune                   func(*route.Timeouts)
	}{
		{"cut", "flaky", record.StatusUpstreamStreamError, func(*route.Timeouts) {}},
		// The idle timeout also bounds each write to the client, renewed
		// once half of it is gone: a gateway descheduled for longer than
		// that between a piece and its write reads as a client that
		// stopped reading (client_cancelled, seen at 300 ms beside
		// stress-ng --cpu 4). A second still ends the 6.5 s stall.
		{"idle", "stall", record.StatusIdleTimeout, func(to *route.Timeouts) { to.Idle = time.Second }},
		{"first output", "late-output", record.StatusFirstOutputTimeout, func(to *route.Timeouts) { to.FirstOutput = 400 * time.Millisecond }},
		{"total", "long", record.StatusTotalTimeout, func(to *route.Timeouts) { to.Total = 700 * time.Millisecond }},
	}
	for _, c := range cases {
		t.Run(c.failure, func(t *testing.T) {
			t.Parallel()
			to := fastTimeouts
			c.tune(&to)
			gw, recs := gateway(t,
				channel("sim-openai", "openai", up.URL, to),
				channel("sim-anthropic", "anthropic", up.URL, to),
				channel("sim-gemini", "gemini", up.URL, to))
			for client, err := range goClientsSee(t, gw.URL, c.model) {
				if err == "" {
					t.Errorf("%s: a clean end after the gateway's %s", client, c.failure)
				}
			}
			saw := nodeEdges(t, gw.URL, []nodeCase{
				{Name: "openai-node chat", Client: "openai-chat", Model: c.model},
				{Name: "openai-node responses (raw iteration)", Client: "openai-responses", Model: c.model},
				{Name: "@langchain/openai useResponsesApi", Client: "langchain-responses", Model: c.model},
				{Name: "@anthropic-ai/sdk", Client: "anthropic", Model: c.model},
				{Name: "@google/genai", Client: "genai", Model: c.model},
			})
			if len(saw) != 5 {
				t.Errorf("node clients: %+v", saw)
			}
			for client, s := range saw {
				if s.Error == nil {
					t.Errorf("%s: a clean end with %q after the gateway's %s", client, s.Text, c.failure)
				}
			}
			recs.mu.Lock()
			defer recs.mu.Unlock()
			if len(recs.recs) != 9 {
				t.Errorf("%d records, want 9", len(recs.recs))
			}
			for _, rec := range recs.recs {
				if rec.Status != c.status {
					t.Errorf("%s record: status %s (%s), want %s", rec.API, rec.Status, rec.Error, c.status)
				}
			}
		})
	}
}

// TestGenaiGoStreamsEveryProfile: google.golang.org/genai streams every
// built-in simulator profile without a fault, directly and through the
// gateway: the simulator sends Gemini nothing Gemini does not (issue 43:
// its ": ping" keep-alives made the SDK fail).
func TestGenaiGoStreamsEveryProfile(t *testing.T) {
	t.Parallel()
	profiles := map[string]sim.Profile{}
	for name, p := range sim.Builtin() {
		if p.Fault == "" {
			profiles[name] = p.Scale(0.2) // the traces run 6–20 s at full length
		}
	}
	gw, _, up, _ := allProtocols(t, profiles)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, base := range []string{up.URL, gw.URL} {
		gc, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: clientKey, Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: base, APIVersion: "v1beta"}})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for name := range profiles {
			wg.Go(func() {
				chunks := 0
				for _, err := range gc.Models.GenerateContentStream(ctx, name, genai.Text("Say hello."), nil) {
					if err != nil {
						t.Errorf("%s via %s: %v", name, base, err)
						return
					}
					chunks++
				}
				if chunks == 0 {
					t.Errorf("%s via %s: no chunk", name, base)
				}
			})
		}
		wg.Wait()
	}
}
