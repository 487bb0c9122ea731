package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/auth/bearer"
)

// bedrockClient is the official Go SDK's client of the simulator, signing
// with SigV4 (secret) or sending a Bedrock API key (bearer; the SDK sends a
// bearer token over TLS only, hence the TLS server).
func bedrockClient(srv *httptest.Server, id, secret, bearerKey string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		HTTPClient:       srv.Client(),
		Credentials:      credentials.NewStaticCredentialsProvider(id, secret, ""),
		RetryMaxAttempts: 1,
	}, func(o *bedrockruntime.Options) {
		if bearerKey != "" {
			o.BearerAuthTokenProvider = bearer.TokenProviderFunc(func(context.Context) (bearer.Token, error) {
				return bearer.Token{Value: bearerKey}, nil
			})
			o.AuthSchemePreference = []string{"httpBearerAuth"}
		}
	})
}

func tlsServer(t testing.TB, opts Options) *httptest.Server {
	srv := httptest.NewTLSServer(New(opts))
	t.Cleanup(srv.Close)
	return srv
}

func converseInput(model string) *bedrockruntime.ConverseStreamInput {
	return &bedrockruntime.ConverseStreamInput{
		ModelId: aws.String(model),
		Messages: []types.Message{{Role: types.ConversationRoleUser,
			Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Say hello."}}}},
	}
}

// converseAll reads a ConverseStream to its end.
type converseResult struct {
	text, reasoning, toolInput strings.Builder
	toolName                   string
	stop                       types.StopReason
	usage                      *types.TokenUsage
	latencyMs                  int64
	events                     int
	firstText                  time.Duration
}

func converseAll(t *testing.T, c *bedrockruntime.Client, model string) (*converseResult, error) {
	t.Helper()
	start := time.Now()
	out, err := c.ConverseStream(context.Background(), converseInput(model))
	if err != nil {
		return nil, err
	}
	st := out.GetStream()
	defer st.Close()
	res := &converseResult{firstText: -1}
	for ev := range st.Events() {
		res.events++
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if tu, ok := v.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				res.toolName = aws.ToString(tu.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch d := v.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				if res.firstText < 0 && strings.TrimSpace(d.Value) != "" {
					res.firstText = time.Since(start)
				}
				res.text.WriteString(d.Value)
			case *types.ContentBlockDeltaMemberReasoningContent:
				if r, ok := d.Value.(*types.ReasoningContentBlockDeltaMemberText); ok {
					res.reasoning.WriteString(r.Value)
				}
			case *types.ContentBlockDeltaMemberToolUse:
				res.toolInput.WriteString(aws.ToString(d.Value.Input))
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			res.stop = v.Value.StopReason
		case *types.ConverseStreamOutputMemberMetadata:
			res.usage = v.Value.Usage
			if v.Value.Metrics != nil {
				res.latencyMs = aws.ToInt64(v.Value.Metrics.LatencyMs)
			}
		}
	}
	return res, st.Err()
}

func TestBedrockConverseWithGoSDK(t *testing.T) {
	srv := tlsServer(t, Options{APIKey: "brk-key"})
	profiles := Builtin()
	for name, c := range map[string]*bedrockruntime.Client{
		"sigv4":  bedrockClient(srv, DefaultAWSAccessKeyID, DefaultAWSSecretAccessKey, ""),
		"bearer": bedrockClient(srv, "", "", "brk-key"),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := converseAll(t, c, "fast")
			if err != nil {
				t.Fatal(err)
			}
			want := generate(profiles["fast"])
			if res.text.String() != want.visibleText {
				t.Errorf("text %q, want %q", res.text.String(), want.visibleText)
			}
			if res.stop != types.StopReasonEndTurn || res.usage == nil || aws.ToInt32(res.usage.OutputTokens) != int32(want.outputTokens()) {
				t.Errorf("stop %q usage %+v, want end_turn and %d output tokens", res.stop, res.usage, want.outputTokens())
			}
			if res.latencyMs <= 0 {
				t.Errorf("metrics.latencyMs = %d", res.latencyMs)
			}

			res, err = converseAll(t, c, "reasoning")
			if err != nil || res.reasoning.Len() == 0 || res.text.Len() == 0 {
				t.Errorf("reasoning: %v, %d reasoning bytes, %d text bytes", err, res.reasoning.Len(), res.text.Len())
			}
			res, err = converseAll(t, c, "tool-call")
			if err != nil || res.toolName == "" || !json.Valid([]byte(res.toolInput.String())) || res.stop != types.StopReasonToolUse {
				t.Errorf("tool call: %v, name %q, input %q, stop %q", err, res.toolName, res.toolInput.String(), res.stop)
			}

			// Non-streaming.
			out, err := c.Converse(context.Background(), &bedrockruntime.ConverseInput{
				ModelId:  aws.String("fast"),
				Messages: converseInput("fast").Messages,
			})
			if err != nil {
				t.Fatal(err)
			}
			msg := out.Output.(*types.ConverseOutputMemberMessage).Value
			if got := msg.Content[0].(*types.ContentBlockMemberText).Value; got != want.visibleText {
				t.Errorf("converse text %q", got)
			}
			if aws.ToInt64(out.Metrics.LatencyMs) <= 0 || out.StopReason != types.StopReasonEndTurn {
				t.Errorf("converse metrics %+v stop %q", out.Metrics, out.StopReason)
			}

			// Throttling: an HTTP 429, and an in-stream exception.
			_, err = converseAll(t, c, "status-429")
			var thr *types.ThrottlingException
			if !errors.As(err, &thr) {
				t.Errorf("status-429: %T %v, want *types.ThrottlingException", err, err)
			}
			res, err = converseAll(t, c, "error-event")
			if !errors.As(err, &thr) || res.text.Len() == 0 {
				t.Errorf("error-event: %T %v after %d text bytes, want an in-stream *types.ThrottlingException", err, err, res.text.Len())
			}
		})
	}
}

func TestBedrockAuthFailures(t *testing.T) {
	srv := tlsServer(t, Options{APIKey: "brk-key"})
	for _, c := range []struct {
		name   string
		client *bedrockruntime.Client
		code   string
	}{
		{"wrong secret", bedrockClient(srv, DefaultAWSAccessKeyID, "not-the-secret", ""), "InvalidSignatureException"},
		{"unknown key id", bedrockClient(srv, "AKIAUNKNOWN000000000", DefaultAWSSecretAccessKey, ""), "UnrecognizedClientException"},
		{"wrong bearer key", bedrockClient(srv, "", "", "nope"), "UnrecognizedClientException"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := converseAll(t, c.client, "fast")
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != c.code {
				t.Fatalf("err = %v, want %s", err, c.code)
			}
			var re interface{ HTTPStatusCode() int }
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
				t.Errorf("status is not 403: %v", err)
			}
		})
	}
	// No credentials at all.
	resp, err := srv.Client().Post(srv.URL+"/model/fast/converse", "application/json", strings.NewReader(`{"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || resp.Header.Get("X-Amzn-Errortype") != "MissingAuthenticationTokenException" {
		t.Errorf("no auth: %d %q", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"))
	}
}

// A body changed after signing, or a path other than the signed one, does
// not verify.
func TestSigV4Tampering(t *testing.T) {
	srv := testServer(t, Options{})
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	sign := func(path string, b []byte) *http.Request {
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		h := sha256.Sum256(b)
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: DefaultAWSAccessKeyID, SecretAccessKey: DefaultAWSSecretAccessKey},
			req, hex.EncodeToString(h[:]), "bedrock", "us-east-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	do := func(req *http.Request) (int, string) {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype")
	}
	// A model id with ':' (escaped by the SDKs, escaped again in the
	// canonical request).
	if code, typ := do(sign("/model/fast/converse", body)); code != 200 {
		t.Fatalf("signed request: %d %s", code, typ)
	}
	req := sign("/model/fast/converse", body)
	req.Body = io.NopCloser(bytes.NewReader(bytes.Replace(body, []byte("hi"), []byte("ho"), 1)))
	if code, typ := do(req); code != 403 || typ != "InvalidSignatureException" {
		t.Errorf("tampered body: %d %s", code, typ)
	}
	req = sign("/model/fast/converse", body)
	req.URL.Path = "/model/fast/converse-stream"
	if code, typ := do(req); code != 403 || typ != "InvalidSignatureException" {
		t.Errorf("other path: %d %s", code, typ)
	}
}

// InvokeModelWithResponseStream with an Anthropic body: chunk events whose
// base64 payloads are Anthropic's events.
func TestBedrockInvokeStream(t *testing.T) {
	srv := tlsServer(t, Options{})
	c := bedrockClient(srv, DefaultAWSAccessKeyID, DefaultAWSSecretAccessKey, "")
	body := []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
	out, err := c.InvokeModelWithResponseStream(context.Background(), &bedrockruntime.InvokeModelWithResponseStreamInput{
		ModelId: aws.String("reasoning"), Body: body, ContentType: aws.String("application/json"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var types_ []string
	var text strings.Builder
	var metrics bool
	for ev := range out.GetStream().Events() {
		ch, ok := ev.(*types.ResponseStreamMemberChunk)
		if !ok {
			t.Fatalf("event %T", ev)
		}
		var e struct {
			Type  string `json:"type"`
			Delta struct {
				Type, Text string
			} `json:"delta"`
			Metrics json.RawMessage `json:"amazon-bedrock-invocationMetrics"`
		}
		if err := json.Unmarshal(ch.Value.Bytes, &e); err != nil {
			t.Fatalf("chunk %q: %v", ch.Value.Bytes, err)
		}
		types_ = append(types_, e.Type)
		if e.Delta.Type == "text_delta" {
			text.WriteString(e.Delta.Text)
		}
		metrics = metrics || e.Metrics != nil
	}
	if err := out.GetStream().Err(); err != nil {
		t.Fatal(err)
	}
	want := generate(Builtin()["reasoning"])
	if text.String() != want.visibleText || types_[0] != "message_start" || types_[len(types_)-1] != "message_stop" || !metrics {
		t.Errorf("events %v, text %q, metrics %v", types_, text.String(), metrics)
	}
	for _, typ := range types_ {
		if typ == "ping" {
			t.Error("a ping was sent")
		}
	}

	// A body with a model, or without anthropic_version, is refused as
	// Bedrock refuses it.
	for _, bad := range []string{
		`{"anthropic_version":"bedrock-2023-05-31","model":"x","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		_, err := c.InvokeModel(context.Background(), &bedrockruntime.InvokeModelInput{ModelId: aws.String("fast"), Body: []byte(bad), ContentType: aws.String("application/json")})
		var ve *types.ValidationException
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v, want a ValidationException", bad, err)
		}
	}
}
