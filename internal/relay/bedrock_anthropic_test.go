package relay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

// bedrockChannel is a channel of kind bedrock with a Bedrock API key,
// opened as the server opens it.
func bedrockChannel(t testing.TB, name, base, key string) *route.Channel {
	t.Helper()
	ch := channel(name, "bedrock", base, fastTimeouts)
	ch.Key = key
	up, err := wire.LookupKind("bedrock").Open(wire.ChannelConfig{Name: name, Base: ch.BaseURL, Key: key, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	ch.Hooks = up
	return ch
}

// TestBedrockAnthropic: anthropic-sdk-go, pointed at the gateway, relayed
// to a channel of kind bedrock: InvokeModelWithResponseStream and
// InvokeModel on the simulator's Bedrock side, which refuses a body with
// a model or stream or without anthropic_version bedrock-2023-05-31. The
// client reads an Anthropic stream (each chunk's event as SSE, the moment
// its frame is complete), the record's marks are the simulator's
// schedule, and errors (a 429, a 500, a cut stream, an in-stream
// throttlingException) raise the SDK's own error types in Anthropic's
// format.
func TestBedrockAnthropic(t *testing.T) {
	t.Parallel()
	const key = "upstream-key-brka"
	profiles := sim.Builtin()
	profiles["status-500"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:500"}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles, APIKey: key}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, bedrockChannel(t, "brka", up.URL, key))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var mu sync.Mutex
	var contentTypes []string
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil {
			mu.Lock()
			contentTypes = append(contentTypes, resp.Header.Get("Content-Type"))
			mu.Unlock()
		}
		return resp, err
	})}
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc))
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

	m, err := streamMsg("fast")
	if err != nil || len(m.Content) == 0 || m.Content[0].Text == "" || m.StopReason != "end_turn" || m.Usage.OutputTokens == 0 {
		t.Fatalf("anthropic stream through bedrock: %v %+v", err, m)
	}
	if len(contentTypes) != 1 || !strings.HasPrefix(contentTypes[0], "text/event-stream") {
		t.Errorf("the client got Content-Type %q, want text/event-stream", contentTypes)
	}
	rec := recs.lastOf(t, "fast")
	if rec.API != "anthropic" || rec.Channel != "brka" || rec.Status != record.StatusOK || rec.Terminal != "done" || rec.FinishReason != "end_turn" || rec.Events.Unknown != 0 {
		t.Errorf("record: api %s channel %s status %s (%s) terminal %s finish %s events %+v", rec.API, rec.Channel, rec.Status, rec.Error, rec.Terminal, rec.FinishReason, rec.Events)
	}
	if rec.Tokens.Output == nil || *rec.Tokens.Output != int(m.Usage.OutputTokens) || rec.Tokens.Source != record.TokensUsage {
		t.Errorf("tokens %+v, the SDK read output %d", rec.Tokens, m.Usage.OutputTokens)
	}
	// The simulator's schedule for fast: headers at 50 ms, first text at
	// 120, done at 420 (as TestAzureTimeline reads it through azure).
	near(t, rec, "fast upstream_headers_ms", rec.UpstreamHeadersMs, 50)
	near(t, rec, "fast first_text_delta_ms", rec.FirstTextDeltaMs, 120)
	near(t, rec, "fast upstream_done_ms", rec.UpstreamDoneMs, 420)

	if m, err := ac.Messages.New(ctx, params("fast")); err != nil || len(m.Content) == 0 || m.Content[0].Text == "" || m.Usage.OutputTokens == 0 {
		t.Errorf("anthropic through bedrock (InvokeModel): %v %+v", err, m)
	}
	if m, err := streamMsg("tool-call"); err != nil || m.StopReason != "tool_use" || len(m.Content) == 0 || m.Content[len(m.Content)-1].Type != "tool_use" {
		t.Errorf("anthropic tool call through bedrock: %v %+v", err, m)
	}
	if m, err := streamMsg("reasoning"); err != nil || len(m.Content) < 2 || m.Content[0].Type != "thinking" {
		t.Errorf("anthropic reasoning through bedrock: %v %+v", err, m)
	} else if rec := recs.lastOf(t, "reasoning"); rec.Events.Reasoning == 0 || !rec.FirstResponseMs.Valid() || at(rec.FirstResponseMs) > at(rec.FirstTextDeltaMs) {
		t.Errorf("reasoning record: events %+v first response %v first text %v", rec.Events, rec.FirstResponseMs, rec.FirstTextDeltaMs)
	}

	// Bedrock's errors, in Anthropic's format for the Anthropic client.
	for model, want := range map[string]struct {
		code int
		typ  string
	}{"status-429": {429, "rate_limit_error"}, "status-500": {500, "api_error"}} {
		for _, stream := range []bool{false, true} {
			var err error
			if stream {
				_, err = streamMsg(model)
			} else {
				_, err = ac.Messages.New(ctx, params(model))
			}
			var aerr *anthropic.Error
			if !errors.As(err, &aerr) || aerr.StatusCode != want.code || !strings.Contains(aerr.RawJSON(), `"type":"`+want.typ+`"`) {
				t.Errorf("%s (stream %v) through bedrock: %v, want %d %s in Anthropic's format", model, stream, err, want.code, want.typ)
			}
		}
	}
	if rec := recs.lastOf(t, "status-429"); rec.Status != record.StatusRateLimited || rec.HTTPStatus != 429 {
		t.Errorf("status-429 record: %s %d", rec.Status, rec.HTTPStatus)
	}
	// Mid-stream: the in-stream throttlingException is Anthropic's error
	// event; a stream cut mid-answer ends with the gateway's.
	for _, model := range []string{"error-event", "flaky"} {
		if m, err := streamMsg(model); err == nil || len(m.Content) == 0 {
			t.Errorf("%s through bedrock: %v after %+v, want text then an error", model, err, m)
		}
		if rec := recs.lastOf(t, model); rec.Status != record.StatusUpstreamStreamError || !rec.FirstTextDeltaMs.Valid() {
			t.Errorf("%s record: %s (%s)", model, rec.Status, rec.Error)
		}
	}
}

// TestBedrockTraces: SPEC §4's three traces through a bedrock channel, to
// a Converse client (aws-sdk-go-v2) and an Anthropic one at once; the
// marks are the simulator's schedule, as TestSeedTraces reads them
// through the other kinds.
//
// Not parallel: its six 10–20 s streams would slow the timers of the
// package's other timing tests (TestSeedTraces' TPS) that run in parallel.
func TestBedrockTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("the traces take 20 s of real time")
	}
	const key = "upstream-key-brkt"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: key}))
	t.Cleanup(up.Close)
	ch := bedrockChannel(t, "brkt", up.URL, key)
	gw, recs := gatewayTLS(t, ch)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type want struct{ headers, response, text, total float64 }
	// TestSeedTraces' expectations.
	traces := map[string]want{
		"trace-a": {6100, 6350, 6400, 9200},
		"trace-b": {240, 2900, 8700, 10200},
		"trace-c": {260, 420, 430, 20430},
	}
	conv := bedrockSDK(gw, clientKey)
	ac := anthropic.NewClient(aoption.WithBaseURL(gw.URL), aoption.WithAPIKey(clientKey), aoption.WithMaxRetries(0), aoption.WithHTTPClient(gw.Client()))
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]string{} // api/trace → request id
	for name := range traces {
		for _, api := range []string{"bedrock.converse", "anthropic"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				var id string
				if api == "anthropic" {
					var resp *http.Response
					st := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(name), MaxTokens: 4096,
						Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me."))}}, aoption.WithResponseInto(&resp))
					for st.Next() {
					}
					err = st.Err()
					st.Close()
					if resp != nil {
						id = resp.Header.Get("X-Request-Id")
					}
				} else {
					_, _, _, _, err = converseText(ctx, conv, name)
				}
				if err != nil {
					t.Errorf("%s %s: %v", api, name, err)
				}
				mu.Lock()
				ids[api+"/"+name] = id
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for name, w := range traces {
		for _, api := range []string{"bedrock.converse", "anthropic"} {
			var rec record.Record
			if id := ids[api+"/"+name]; id != "" {
				rec = recs.get(t, id)
			} else {
				rec = recs.lastOfAPI(t, name, api)
			}
			label := api + " " + name
			if rec.Status != record.StatusOK || rec.Channel != "brkt" || rec.Events.Unknown != 0 || rec.API != api {
				t.Errorf("%s: api %s status %s (%s) channel %s events %+v", label, rec.API, rec.Status, rec.Error, rec.Channel, rec.Events)
			}
			near(t, rec, label+" upstream_headers_ms", rec.UpstreamHeadersMs, w.headers)
			near(t, rec, label+" first_response_ms", rec.FirstResponseMs, w.response)
			near(t, rec, label+" first_text_delta_ms", rec.FirstTextDeltaMs, w.text)
			near(t, rec, label+" total_handler_ms", rec.TotalHandlerMs, w.total)
		}
	}
}

// lastOfAPI waits for the latest record of model and api.
func (r *records) lastOfAPI(t *testing.T, model, api string) record.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		for i := len(r.recs) - 1; i >= 0; i-- {
			if r.recs[i].Model == model && r.recs[i].API == api {
				rec := r.recs[i]
				r.mu.Unlock()
				return rec
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s %s", api, model)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
