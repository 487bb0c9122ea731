package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// invokeBody is an Anthropic request as InvokeModel takes it.
const invokeBody = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":256,"messages":[{"role":"user","content":"Say hello."}]}`

// invokeAnswer is what aws-sdk-go-v2 read from an
// InvokeModelWithResponseStream of an Anthropic model.
type invokeAnswer struct {
	text, stop, first, last string
	tool, reasoning         bool
	outputTokens            int
	latencyMs               int     // amazon-bedrock-invocationMetrics' invocationLatency
	firstTextMs             float64 // when the SDK yielded the first text, from just before the call
	endMs                   float64 // when the stream ended, from the same start
}

// invokeStream streams an InvokeModelWithResponseStream answer with the
// SDK, decoding each chunk's Anthropic event.
func invokeStream(ctx context.Context, c *bedrockruntime.Client, model string) (a invokeAnswer, err error) {
	start := time.Now()
	out, err := c.InvokeModelWithResponseStream(ctx, &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String(model), ContentType: aws.String("application/json"), Body: []byte(invokeBody),
	})
	if err != nil {
		return a, err
	}
	st := out.GetStream()
	defer st.Close()
	for ev := range st.Events() {
		ch, ok := ev.(*types.ResponseStreamMemberChunk)
		if !ok {
			continue
		}
		var e struct {
			Type  string
			Delta struct {
				Type, Text string
				StopReason string `json:"stop_reason"`
			}
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			}
			Metrics struct {
				InvocationLatency int
			} `json:"amazon-bedrock-invocationMetrics"`
		}
		if err := json.Unmarshal(ch.Value.Bytes, &e); err != nil {
			return a, err
		}
		if a.first == "" {
			a.first = e.Type
		}
		a.last = e.Type
		switch {
		case e.Type == "content_block_delta" && e.Delta.Type == "text_delta":
			if a.text == "" {
				a.firstTextMs = float64(time.Since(start)) / 1e6
			}
			a.text += e.Delta.Text
		case e.Type == "content_block_delta" && e.Delta.Type == "input_json_delta":
			a.tool = true
		case e.Type == "content_block_delta" && e.Delta.Type == "thinking_delta":
			a.reasoning = true
		case e.Type == "message_delta":
			a.stop, a.outputTokens = e.Delta.StopReason, e.Usage.OutputTokens
		case e.Type == "message_stop":
			a.latencyMs = e.Metrics.InvocationLatency
		}
	}
	a.endMs = float64(time.Since(start)) / 1e6
	return a, st.Err()
}

// clientAgrees checks that a client's clock, started just before its call,
// agrees with the record's: it saw the first text after the gateway
// flushed it (the client's clock starts before t0, so it can only be
// later), and by little more than the timers slipped.
func clientAgrees(t *testing.T, name string, rec record.Record, clientFirstText float64) {
	t.Helper()
	sent, ok := rec.FirstTextSentMs.Ms()
	if !ok {
		t.Errorf("%s: first_text_sent_ms absent", name)
		return
	}
	slip := float64(testenv.Slip(time.Since(rec.Timestamp)+time.Second)) / 1e6
	t.Logf("%s: the client read the first text at %.1f ms, the record flushed it at %.1f ms (timers slipped up to %.1f ms)", name, clientFirstText, sent, slip)
	if late := 50 + 3*slip; clientFirstText < sent-1 || clientFirstText > sent+late {
		t.Errorf("%s: the client read the first text at %.1f ms, the record flushed it at %.1f ms (want within −1/+%.0f)", name, clientFirstText, sent, late)
	}
}

// lastStream waits for the latest record of model and api that streamed
// (or did not).
func (r *records) lastStream(t *testing.T, model, api string, stream bool) record.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		for i := len(r.recs) - 1; i >= 0; i-- {
			if rec := r.recs[i]; rec.Model == model && rec.API == api && rec.Stream == stream {
				r.mu.Unlock()
				return rec
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s %s (stream %v)", api, model, stream)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBedrockInvoke: aws-sdk-go-v2's InvokeModelWithResponseStream and
// InvokeModel, with the client's ttfx key as a Bedrock API key and the
// gateway as its endpoint, relayed to a channel of kind bedrock (the
// simulator's Bedrock side, serving an Anthropic model): the frames arrive
// as the upstream sent them, the record's marks are those of the Anthropic
// events inside (the simulator's schedule), its usage and provider latency
// are what the client read, the client's clock agrees with the record,
// and errors (a 429, an in-stream throttlingException, a cut stream) raise
// the SDK's own error types.
func TestBedrockInvoke(t *testing.T) {
	t.Parallel()
	const key = "upstream-key-brki"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: key}))
	t.Cleanup(up.Close)
	gw, recs := gatewayTLS(t, bedrockChannel(t, "brki", up.URL, key))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := bedrockSDK(gw, clientKey)

	a, err := invokeStream(ctx, c, "fast")
	if err != nil || a.text == "" || a.first != "message_start" || a.last != "message_stop" || a.stop != "end_turn" || a.outputTokens <= 0 || a.latencyMs <= 0 {
		t.Fatalf("InvokeModelWithResponseStream through the gateway: %+v %v", a, err)
	}
	rec := recs.lastOfAPI(t, "fast", "bedrock.invoke")
	if rec.Status != record.StatusOK || rec.Terminal != "done" || rec.FinishReason != "end_turn" || rec.Channel != "brki" || rec.HTTPStatus != 200 {
		t.Errorf("record: status %s (%s) terminal %s finish %s channel %s http %d", rec.Status, rec.Error, rec.Terminal, rec.FinishReason, rec.Channel, rec.HTTPStatus)
	}
	if rec.Events.Text == 0 || rec.Events.Metadata == 0 || rec.Events.Unknown != 0 || rec.Events.Error != 0 {
		t.Errorf("events %+v", rec.Events)
	}
	if rec.Tokens.Source != record.TokensUsage || rec.Tokens.Output == nil || *rec.Tokens.Output != a.outputTokens {
		t.Errorf("tokens %+v, the SDK read output %d", rec.Tokens, a.outputTokens)
	}
	if d, ok := rec.ProviderLatencyMs.Get(); !ok || d != time.Duration(a.latencyMs)*time.Millisecond {
		t.Errorf("provider_latency_ms %v, the SDK read invocationLatency %d", rec.ProviderLatencyMs, a.latencyMs)
	}
	// The simulator's schedule for fast: headers at 50 ms, first text at
	// 120, done at 420.
	near(t, rec, "fast upstream_headers_ms", rec.UpstreamHeadersMs, 50)
	near(t, rec, "fast first_text_delta_ms", rec.FirstTextDeltaMs, 120)
	near(t, rec, "fast upstream_done_ms", rec.UpstreamDoneMs, 420)
	clientAgrees(t, "fast", rec, a.firstTextMs)

	// Byte for byte: the frames a raw client gets from the gateway are the
	// ones the simulator sends directly, and so is the plain answer.
	raw := func(base, token, method string) ([]byte, string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/model/fast/"+method, strings.NewReader(invokeBody))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		cl := http.DefaultClient
		if strings.HasPrefix(base, "https:") {
			cl = gw.Client()
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", base, method, resp.StatusCode, b)
		}
		return b, resp.Header.Get("Content-Type")
	}
	direct, dct := raw(up.URL, key, "invoke-with-response-stream")
	via, vct := raw(gw.URL, clientKey, "invoke-with-response-stream")
	if !bytes.Equal(direct, via) || len(direct) == 0 || dct != vct || vct != "application/vnd.amazon.eventstream" {
		t.Errorf("the gateway's frames differ from the upstream's: %d bytes direct (%s), %d through (%s)", len(direct), dct, len(via), vct)
	}

	// Not streamed: InvokeModel's body is the model's answer.
	out, err := c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("fast"), ContentType: aws.String("application/json"), Body: []byte(invokeBody)})
	var m struct {
		Content []struct{ Text string }
		Usage   struct {
			OutputTokens int `json:"output_tokens"`
		}
	}
	if err != nil || json.Unmarshal(out.Body, &m) != nil || len(m.Content) == 0 || m.Content[0].Text != a.text {
		t.Fatalf("InvokeModel through the gateway: %v %+v", err, m)
	}
	if rec := recs.lastOfAPI(t, "fast", "bedrock.invoke"); rec.Status != record.StatusOK || rec.Tokens.Output == nil || *rec.Tokens.Output != m.Usage.OutputTokens || rec.FinishReason != "end_turn" {
		t.Errorf("InvokeModel record: %s tokens %+v finish %s", rec.Status, rec.Tokens, rec.FinishReason)
	}

	// Reasoning before text, and a tool call.
	if a, err := invokeStream(ctx, c, "reasoning"); err != nil || !a.reasoning || a.text == "" {
		t.Errorf("reasoning: %+v %v", a, err)
	} else if rec := recs.lastOfAPI(t, "reasoning", "bedrock.invoke"); rec.Events.Reasoning == 0 || !rec.FirstResponseMs.Valid() || at(rec.FirstResponseMs) > at(rec.FirstTextDeltaMs) {
		t.Errorf("reasoning record: events %+v first response %v first text %v", rec.Events, rec.FirstResponseMs, rec.FirstTextDeltaMs)
	}
	if a, err := invokeStream(ctx, c, "tool-call"); err != nil || !a.tool || a.stop != "tool_use" {
		t.Errorf("tool call: %+v %v", a, err)
	} else if rec := recs.lastOfAPI(t, "tool-call", "bedrock.invoke"); rec.Events.Tool == 0 || rec.FinishReason != "tool_use" {
		t.Errorf("tool-call record: events %+v finish %s", rec.Events, rec.FinishReason)
	}

	// Errors: the upstream's 429 is the SDK's ThrottlingException, streamed
	// or not; an in-stream throttlingException raises after the text; a
	// stream the upstream cut ends with the gateway's exception message.
	var thr *types.ThrottlingException
	if _, err := invokeStream(ctx, c, "status-429"); !errors.As(err, &thr) {
		t.Errorf("status-429 stream: %T %v, want *types.ThrottlingException", err, err)
	}
	if _, err := c.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{ModelId: aws.String("status-429"), ContentType: aws.String("application/json"), Body: []byte(invokeBody)}); !errors.As(err, &thr) {
		t.Errorf("status-429: %T %v, want *types.ThrottlingException", err, err)
	}
	if rec := recs.lastOfAPI(t, "status-429", "bedrock.invoke"); rec.Status != record.StatusRateLimited || rec.HTTPStatus != 429 {
		t.Errorf("status-429 record: %s %d", rec.Status, rec.HTTPStatus)
	}
	if a, err := invokeStream(ctx, c, "error-event"); !errors.As(err, &thr) || a.text == "" {
		t.Errorf("error-event: %+v %T %v, want text then *types.ThrottlingException", a, err, err)
	}
	if rec := recs.lastOfAPI(t, "error-event", "bedrock.invoke"); rec.Status != record.StatusUpstreamStreamError || rec.Events.Error != 1 {
		t.Errorf("error-event record: %s (%s) events %+v", rec.Status, rec.Error, rec.Events)
	}
	var mse *types.ModelStreamErrorException
	if a, err := invokeStream(ctx, c, "flaky"); !errors.As(err, &mse) || a.text == "" {
		t.Errorf("flaky: %+v %T %v, want text then *types.ModelStreamErrorException", a, err, err)
	}
	if rec := recs.lastOfAPI(t, "flaky", "bedrock.invoke"); rec.Status != record.StatusUpstreamStreamError || !rec.FirstTextDeltaMs.Valid() {
		t.Errorf("flaky record: %s", rec.Status)
	}
	// A wrong client key is refused in Bedrock's shape, as an error the
	// SDK types.
	var ade *types.AccessDeniedException
	if _, err := invokeStream(ctx, bedrockSDK(gw, "wrong"), "fast"); err == nil || !errors.As(err, &ade) && !strings.Contains(err.Error(), "401") {
		t.Errorf("a wrong client key: %T %v", err, err)
	}
}
