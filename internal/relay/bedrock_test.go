package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/auth/bearer"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// gatewayTLS is gateway over TLS: the AWS SDKs send a bearer token (a
// Bedrock API key, here the client's ttfx key) only over HTTPS.
func gatewayTLS(t *testing.T, chans ...*route.Channel) (*httptest.Server, *records) {
	t.Helper()
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter(chans, 1), Keys: keys, Recorder: recs, UserHashKey: []byte("0123456789abcdef")})
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnContext = relay.ConnContext
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, recs
}

// bedrockSDK is aws-sdk-go-v2's Bedrock runtime client of srv with a
// bearer token and an endpoint override, as a Bedrock API key is used.
func bedrockSDK(srv *httptest.Server, token string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		HTTPClient:       srv.Client(),
		RetryMaxAttempts: 1,
		BearerAuthTokenProvider: bearer.TokenProviderFunc(func(context.Context) (bearer.Token, error) {
			return bearer.Token{Value: token}, nil
		}),
		AuthSchemePreference: []string{"httpBearerAuth"},
	})
}

// converseText streams a Converse answer with the SDK and returns its text
// and the events it saw.
func converseText(ctx context.Context, c *bedrockruntime.Client, model string) (text string, stop types.StopReason, usage *types.TokenUsage, latencyMs int64, err error) {
	out, err := c.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String(model),
		Messages: []types.Message{{Role: types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Say hello."}}}},
	})
	if err != nil {
		return "", "", nil, 0, err
	}
	st := out.GetStream()
	defer st.Close()
	var b strings.Builder
	for ev := range st.Events() {
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			if d, ok := v.Value.Delta.(*types.ContentBlockDeltaMemberText); ok {
				b.WriteString(d.Value)
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stop = v.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			usage = v.Value.Usage
			if v.Value.Metrics != nil {
				latencyMs = aws.ToInt64(v.Value.Metrics.LatencyMs)
			}
		}
	}
	return b.String(), stop, usage, latencyMs, st.Err()
}

// at is an offset's duration (0 when absent).
func at(o timeline.Offset) time.Duration { d, _ := o.Get(); return d }

// lastOf waits for the latest record of model.
func (r *records) lastOf(t *testing.T, model string) record.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for i := len(r.recs) - 1; i >= 0; i-- {
			if r.recs[i].Model == model {
				return r.recs[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s", model)
		}
		r.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		r.mu.Lock()
	}
}

// TestBedrockConverse: aws-sdk-go-v2's Bedrock runtime client, with the
// client's ttfx key as its bearer token and the gateway as its endpoint,
// is relayed to a channel of kind bedrock (the simulator's Bedrock side,
// which checks the channel's API key): the frames arrive as the upstream
// sent them, the record has the stream's marks, usage and Bedrock's
// latencyMs, and errors (a 429, an in-stream throttlingException, a cut
// stream) raise the SDK's own error types.
func TestBedrockConverse(t *testing.T) {
	t.Parallel()
	const key = "upstream-key-brk"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: key}))
	t.Cleanup(up.Close)
	gw, recs := gatewayTLS(t, channel("brk", "bedrock", up.URL, fastTimeouts))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := bedrockSDK(gw, clientKey)

	text, stop, usage, latency, err := converseText(ctx, c, "fast")
	if err != nil || text == "" || stop != types.StopReasonEndTurn || usage == nil || latency <= 0 {
		t.Fatalf("ConverseStream through the gateway: %q %q %+v %d %v", text, stop, usage, latency, err)
	}
	rec := recs.lastOf(t, "fast")
	if rec.API != "bedrock.converse" || rec.Status != record.StatusOK || rec.Terminal != "done" || rec.FinishReason != "end_turn" || rec.Channel != "brk" {
		t.Errorf("record: api %s status %s (%s) terminal %s finish %s channel %s", rec.API, rec.Status, rec.Error, rec.Terminal, rec.FinishReason, rec.Channel)
	}
	if !rec.FirstSSEEventMs.Valid() || !rec.FirstResponseMs.Valid() || !rec.FirstTextDeltaMs.Valid() || at(rec.FirstTextDeltaMs) < at(rec.FirstSSEEventMs) {
		t.Errorf("marks: first event %v first response %v first text %v", rec.FirstSSEEventMs, rec.FirstResponseMs, rec.FirstTextDeltaMs)
	}
	if rec.Tokens.Source != record.TokensUsage || rec.Tokens.Output == nil || *rec.Tokens.Output != int(aws.ToInt32(usage.OutputTokens)) {
		t.Errorf("tokens %+v, the SDK saw %+v", rec.Tokens, usage)
	}
	if d, ok := rec.ProviderLatencyMs.Get(); !ok || d != time.Duration(latency)*time.Millisecond {
		t.Errorf("provider_latency_ms %v, the SDK saw latencyMs %d", rec.ProviderLatencyMs, latency)
	}
	if rec.Events.Text == 0 || rec.Events.Metadata == 0 || rec.Events.Done != 1 || rec.Events.Unknown != 0 {
		t.Errorf("events %+v", rec.Events)
	}

	// Byte for byte: the frames a raw client gets from the gateway are the
	// ones the simulator sends directly.
	raw := func(base, token string) []byte {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/model/fast/converse-stream", strings.NewReader(`{"messages":[{"role":"user","content":[{"text":"Say hello."}]}]}`))
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
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/vnd.amazon.eventstream" {
			t.Fatalf("%s: %d %s", base, resp.StatusCode, ct)
		}
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	if direct, via := raw(up.URL, key), raw(gw.URL, clientKey); !bytes.Equal(direct, via) || len(direct) == 0 {
		t.Errorf("the gateway's frames differ from the upstream's: %d bytes direct, %d through", len(direct), len(via))
	}

	// Reasoning before text, and a tool call.
	if _, _, _, _, err := converseText(ctx, c, "reasoning"); err != nil {
		t.Errorf("reasoning: %v", err)
	}
	rec = recs.lastOf(t, "reasoning")
	if rec.Events.Reasoning == 0 || rec.Tokens.Source != record.TokensEstimate || at(rec.FirstResponseMs) > at(rec.FirstTextDeltaMs) {
		t.Errorf("reasoning record: events %+v tokens %+v first response %v first text %v", rec.Events, rec.Tokens, rec.FirstResponseMs, rec.FirstTextDeltaMs)
	}
	if _, stop, _, _, err := converseText(ctx, c, "tool-call"); err != nil || stop != types.StopReasonToolUse {
		t.Errorf("tool call: %q %v", stop, err)
	}
	if rec := recs.lastOf(t, "tool-call"); rec.Events.Tool == 0 || rec.Status != record.StatusOK {
		t.Errorf("tool-call record: %s events %+v", rec.Status, rec.Events)
	}

	// Not streamed.
	out, err := c.Converse(ctx, &bedrockruntime.ConverseInput{ModelId: aws.String("fast"), Messages: []types.Message{{Role: types.ConversationRoleUser,
		Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Say hello."}}}}})
	if err != nil || out.Output.(*types.ConverseOutputMemberMessage).Value.Content[0].(*types.ContentBlockMemberText).Value != text {
		t.Errorf("Converse through the gateway: %v", err)
	}

	// Errors: the upstream's 429 is the SDK's ThrottlingException; an
	// in-stream throttlingException raises after the text; a stream the
	// upstream cut ends with the gateway's exception message.
	var thr *types.ThrottlingException
	if _, _, _, _, err := converseText(ctx, c, "status-429"); !errors.As(err, &thr) {
		t.Errorf("status-429: %T %v, want *types.ThrottlingException", err, err)
	}
	if rec := recs.lastOf(t, "status-429"); rec.Status != record.StatusRateLimited || rec.HTTPStatus != 429 {
		t.Errorf("status-429 record: %s %d", rec.Status, rec.HTTPStatus)
	}
	if txt, _, _, _, err := converseText(ctx, c, "error-event"); !errors.As(err, &thr) || txt == "" {
		t.Errorf("error-event: %q %T %v, want text then *types.ThrottlingException", txt, err, err)
	}
	if rec := recs.lastOf(t, "error-event"); rec.Status != record.StatusUpstreamStreamError || rec.Events.Error != 1 {
		t.Errorf("error-event record: %s events %+v", rec.Status, rec.Events)
	}
	var mse *types.ModelStreamErrorException
	if txt, _, _, _, err := converseText(ctx, c, "flaky"); !errors.As(err, &mse) || txt == "" {
		t.Errorf("flaky: %q %T %v, want text then *types.ModelStreamErrorException", txt, err, err)
	}
	if rec := recs.lastOf(t, "flaky"); rec.Status != record.StatusUpstreamStreamError {
		t.Errorf("flaky record: %s", rec.Status)
	}

	// A wrong client key is refused in Bedrock's shape.
	if _, _, _, _, err := converseText(ctx, bedrockSDK(gw, "wrong"), "fast"); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(err.Error(), "403") {
		t.Errorf("a wrong client key: %v", err)
	}
}

// A frame whose CRC does not match ends the relayed stream as
// upstream_stream_error, with the gateway's exception message after the
// frames before it; the SDK raises.
func TestBedrockBadCRC(t *testing.T) {
	t.Parallel()
	var frames []byte
	frames = eventstream.AppendEvent(frames, "messageStart", []byte(`{"role":"assistant"}`))
	frames = eventstream.AppendEvent(frames, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"Hello"}}`))
	bad := eventstream.AppendEvent(nil, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":" there"}}`))
	bad[len(bad)-1] ^= 0x55
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.Write(frames)
		w.(http.Flusher).Flush()
		w.Write(bad)
	}))
	t.Cleanup(up.Close)
	gw, recs := gatewayTLS(t, channel("brk", "bedrock", up.URL, fastTimeouts))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txt, _, _, _, err := converseText(ctx, bedrockSDK(gw, clientKey), "m")
	if err == nil || txt != "Hello" {
		t.Errorf("a bad CRC: %q %v, want the first text then an error", txt, err)
	}
	rec := recs.lastOf(t, "m")
	if rec.Status != record.StatusUpstreamStreamError || !rec.FirstTextDeltaMs.Valid() {
		t.Errorf("record: %s (%s)", rec.Status, rec.Error)
	}
}

// TestBedrockSigV4: a channel of kind bedrock opened as the server opens
// it, with no key, signs its requests with SigV4 by credentials from AWS's
// default chain: here a shared config profile whose credential_process
// takes a while, as a role assumed through an external tool does. The
// simulator verifies every signature as AWS does. The first request,
// sent before the warm-up fetch ended, waits for it (upstream_auth_ms);
// the next ones sign with the held credentials and wait for nothing. A
// profile with the wrong secret gets Bedrock's 403, raised by the SDK.
func TestBedrockSigV4(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin()}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	const fetchDelay = 400 * time.Millisecond
	creds := func(secret string) string {
		exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		return fmt.Sprintf(`sh -c 'sleep %.1f; echo {\"Version\":1,\"AccessKeyId\":\"%s\",\"SecretAccessKey\":\"%s\",\"Expiration\":\"%s\"}'`,
			fetchDelay.Seconds(), sim.DefaultAWSAccessKeyID, secret, exp)
	}
	cfgFile := filepath.Join(dir, "config")
	conf := "[profile sim]\ncredential_process = " + creds(sim.DefaultAWSSecretAccessKey) + "\n" +
		"[profile wrong]\ncredential_process = " + creds("not-the-secret") + "\n"
	if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfgFile)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK"} {
		t.Setenv(k, "")
	}
	open := func(name, profile string) *route.Channel {
		ch := channel(name, "bedrock", up.URL, fastTimeouts)
		ch.Key = ""
		h, err := wire.LookupKind("bedrock").Open(wire.ChannelConfig{Name: name, Base: ch.BaseURL, Region: "us-east-1", Settings: map[string]string{"profile": profile}})
		if err != nil {
			t.Fatal(err)
		}
		ch.Hooks = h
		return ch
	}
	opened := time.Now()
	ch := open("brk-sig", "sim")
	gw, recs := gatewayTLS(t, ch)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := bedrockSDK(gw, clientKey)
	if text, _, _, _, err := converseText(ctx, c, "fast"); err != nil || text == "" {
		t.Fatalf("signed ConverseStream: %q %v", text, err)
	}
	sinceOpen := time.Since(opened)
	rec := recs.lastOf(t, "fast")
	wait, ok := rec.UpstreamAuthMs.Get()
	if !ok || rec.Status != record.StatusOK {
		t.Fatalf("first request: status %s (%s), upstream_auth_ms %v: want a wait for the warm-up fetch", rec.Status, rec.Error, rec.UpstreamAuthMs)
	}
	// It waited for the rest of the fetch: not longer than the fetch had
	// from the channel's opening to the request's end, and most of it.
	t.Logf("upstream_auth_ms %v, %v from opening the channel to the first answer", wait, sinceOpen)
	if wait > sinceOpen || wait < fetchDelay/4 {
		t.Errorf("upstream_auth_ms %v: want within (%v, %v]", wait, fetchDelay/4, sinceOpen)
	}
	out, err := c.Converse(ctx, &bedrockruntime.ConverseInput{ModelId: aws.String("reasoning"), Messages: []types.Message{{Role: types.ConversationRoleUser,
		Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Say hello."}}}}})
	if err != nil || out.Usage == nil {
		t.Fatalf("signed Converse: %v", err)
	}
	if rec := recs.lastOf(t, "reasoning"); rec.Status != record.StatusOK || rec.UpstreamAuthMs.Valid() {
		t.Errorf("second request: status %s (%s), upstream_auth_ms %v: want no wait", rec.Status, rec.Error, rec.UpstreamAuthMs)
	}

	// The wrong secret: the simulator refuses the signature with 403
	// InvalidSignatureException; the client gets a 403 it raises.
	bad := open("brk-bad", "wrong")
	gw2, recs2 := gatewayTLS(t, bad)
	_, _, _, _, err = converseText(ctx, bedrockSDK(gw2, clientKey), "fast")
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 403 {
		t.Errorf("wrong secret: %v, want an HTTP 403", err)
	}
	if rec := recs2.lastOf(t, "fast"); rec.HTTPStatus != 403 || rec.Status != record.StatusUpstreamHTTPError {
		t.Errorf("wrong secret record: %d %s", rec.HTTPStatus, rec.Status)
	}
}
