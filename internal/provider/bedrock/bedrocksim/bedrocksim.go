// Package bedrocksim is the simulator's side of the bedrock provider kind,
// Amazon Bedrock's runtime API:
//
//   - POST /model/{modelId}/converse-stream and /converse: the Converse
//     API, streamed as AWS event-stream messages (messageStart,
//     contentBlockStart of a tool call, contentBlockDelta of text,
//     reasoningContent and toolUse input, contentBlockStop, messageStop,
//     metadata with usage and metrics.latencyMs);
//   - POST /model/{modelId}/invoke-with-response-stream and /invoke: an
//     Anthropic Messages body (anthropic_version "bedrock-2023-05-31", no
//     model: it is in the URL), answered with Anthropic's events, each the
//     base64 "bytes" of one `chunk` event-stream message, the last with
//     Bedrock's amazon-bedrock-invocationMetrics.
//
// Requests authenticate with a Bedrock API key (Authorization: Bearer;
// checked against sim.Options.APIKey when set) or with AWS Signature Version 4,
// verified as AWS verifies it against sim.Options.AWSCredentials: an unknown
// access key gets 403 UnrecognizedClientException, a signature that does
// not verify 403 InvalidSignatureException, a request without either 403
// MissingAuthenticationTokenException. Errors are Bedrock's: a JSON
// {"message"} with the exception in x-amzn-ErrorType (a 429 is a
// ThrottlingException); the error_event fault is an in-stream
// throttlingException, Bedrock's word for a model out of capacity.
package bedrocksim

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/provider/anthropic/anthropicsim"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/sse"
)

// The Bedrock APIs the simulator serves.
const (
	Converse sim.API = "bedrock.converse" // POST /model/{id}/converse-stream, /converse
	Invoke   sim.API = "bedrock.invoke"   // POST /model/{id}/invoke-with-response-stream, /invoke (Anthropic bodies)
)

// Kind is the name of the provider kind.
const Kind = "bedrock"

func init() {
	sim.Register(&sim.Unit{API: Converse, Read: readConverse, WriteError: writeBedrockError,
		NewEncoder: func(r *sim.Response) sim.Encoder { return newConverseEncoder(r) }})
	sim.Register(&sim.Unit{API: Invoke, Read: readInvoke, WriteError: writeBedrockError,
		NewEncoder: func(r *sim.Response) sim.Encoder { return newInvokeEncoder(r) }})
	route := func(path string, api sim.API, stream bool) sim.Route {
		return sim.Route{Path: path, API: api, Model: "model", Target: true, Stream: stream, Accept: bedrockAccept, Record: true}
	}
	sim.RegisterKind(&sim.Kind{Name: Kind, Routes: []sim.Route{
		route("/model/{model}/converse-stream", Converse, true),
		route("/model/{model}/converse", Converse, false),
		route("/model/{model}/invoke-with-response-stream", Invoke, true),
		route("/model/{model}/invoke", Invoke, false),
	}})
}

// AnthropicVersion is the anthropic_version Bedrock requires of an
// Anthropic body.
const AnthropicVersion = "bedrock-2023-05-31"

// bedrockContentType is the media type of Bedrock's streams.
const bedrockContentType = "application/vnd.amazon.eventstream"

// sigV4MaxSkew is how far a signature's time may be from the server's.
const sigV4MaxSkew = 15 * time.Minute

// bedrockAccept checks a request's bearer key or SigV4 signature, as AWS
// does, before the simulation; a request of another method than POST is
// refused by the simulation (405).
func bedrockAccept(c *sim.Call) *sim.Error {
	if c.R.Method != http.MethodPost {
		return nil
	}
	body, e := c.Body()
	if e != nil {
		return e
	}
	authz := c.R.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(authz, "Bearer "):
		key := strings.TrimPrefix(authz, "Bearer ")
		if want := c.Options().APIKey; want != "" && subtle.ConstantTimeCompare([]byte(key), []byte(want)) != 1 {
			return sim.CodedError(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
		}
		return nil
	case strings.HasPrefix(authz, "AWS4-HMAC-SHA256 "):
		return verifySigV4(c, authz, body)
	}
	return sim.CodedError(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
}

// verifySigV4 verifies an AWS Signature Version 4 Authorization header:
// it rebuilds the canonical request from the signed headers, the path
// (escaped again, as for every service but S3), the query and the payload
// hash, and compares the signature derived from the access key's secret.
func verifySigV4(c *sim.Call, authz string, body []byte) *sim.Error {
	r := c.R
	var cred, signed, sig string
	for _, part := range strings.Split(strings.TrimPrefix(authz, "AWS4-HMAC-SHA256 "), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			sig = v
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || signed == "" || sig == "" {
		return sim.CodedError(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
	}
	secret, ok := awsSecret(c.Options().AWSCredentials, scope[0])
	if !ok {
		return sim.CodedError(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, scope[1]) {
		return sim.CodedError(http.StatusBadRequest, "IncompleteSignatureException", "Date must be in ISO-8601 'basic format'.")
	}
	if d := c.Now().Sub(at); d > sigV4MaxSkew || d < -sigV4MaxSkew {
		return sim.CodedError(http.StatusForbidden, "InvalidSignatureException", fmt.Sprintf("Signature expired: %s is now earlier than %s.", amzDate, c.Now().UTC().Add(-sigV4MaxSkew).Format("20060102T150405Z")))
	}
	payloadHash := r.Header.Get("X-Amz-Content-Sha256")
	if payloadHash == "" {
		h := sha256.Sum256(body)
		payloadHash = hex.EncodeToString(h[:])
	} else if h := sha256.Sum256(body); payloadHash != "UNSIGNED-PAYLOAD" && payloadHash != hex.EncodeToString(h[:]) {
		return sim.CodedError(http.StatusBadRequest, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	canonical := CanonicalRequest(r, signed, payloadHash)
	ch := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + strings.Join(scope[1:], "/") + "\n" + hex.EncodeToString(ch[:])
	key := hmacSHA256([]byte("AWS4"+secret), scope[1])
	for _, p := range scope[2:] {
		key = hmacSHA256(key, p)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if subtle.ConstantTimeCompare([]byte(want), []byte(sig)) != 1 {
		return sim.CodedError(http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return nil
}

func awsSecret(creds map[string]string, id string) (string, bool) {
	if len(creds) == 0 {
		return sim.DefaultAWSSecretAccessKey, id == sim.DefaultAWSAccessKeyID
	}
	sec, ok := creds[id]
	return sec, ok
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// CanonicalRequest is SigV4's canonical request of r for the signed
// headers (semicolon-separated, lower case) and the payload's hash.
func CanonicalRequest(r *http.Request, signedHeaders, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	// Every service but S3 escapes the already escaped path once more.
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(awsEscape(path, false))
	b.WriteByte('\n')
	q := r.URL.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	first := true
	for _, k := range keys {
		vs := append([]string(nil), q[k]...)
		sort.Strings(vs)
		for _, v := range vs {
			if !first {
				b.WriteByte('&')
			}
			first = false
			b.WriteString(awsEscape(k, true) + "=" + awsEscape(v, true))
		}
	}
	b.WriteByte('\n')
	for _, h := range strings.Split(signedHeaders, ";") {
		var vals []string
		switch h {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = []string{fmt.Sprint(r.ContentLength)}
		default:
			vals = r.Header.Values(h)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(h + ":" + strings.Join(vals, ",") + "\n")
	}
	b.WriteByte('\n')
	b.WriteString(signedHeaders)
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}

// awsEscape is SigV4's URI encoding: every byte but the unreserved
// characters, and '/' too when slash is set.
func awsEscape(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && !slash {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// writeBedrockError writes e in Bedrock's shape: {"message"} and the
// exception in x-amzn-ErrorType.
func writeBedrockError(w http.ResponseWriter, e *sim.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	typ := e.Code()
	if typ == "" {
		typ = bedrockException(e.Status())
	}
	h.Set("X-Amzn-Errortype", typ)
	if e.Status() == http.StatusTooManyRequests || e.Status() == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(e.Status())
	w.Write(sim.Marshal(struct {
		Message string `json:"message"`
	}{e.Message()}))
}

// bedrockException is Bedrock's exception type for an HTTP status.
func bedrockException(status int) string {
	switch status {
	case 400, 413, 422:
		return "ValidationException"
	case 401, 403:
		return "AccessDeniedException"
	case 404:
		return "ResourceNotFoundException"
	case 408, 504:
		return "ModelTimeoutException"
	case 424:
		return "ModelErrorException"
	case 429:
		return "ThrottlingException"
	case 503, 529:
		return "ServiceUnavailableException"
	}
	return "InternalServerException"
}

// bedrockInvokeEncoder is the sim.API whose events InvokeModel streams
// carry (step 1 of the move to the unit; the unit names it).
const bedrockInvokeEncoder sim.API = "anthropic"

// bedrockThrottled is the message of Bedrock's throttling, HTTP and in-stream.
const bedrockThrottled = "Too many tokens, please wait before trying again."

// converseEncoder writes the Converse sim.API. Text and reasoning blocks have
// no contentBlockStart (Bedrock sends one only for a toolUse block).
type converseEncoder struct {
	r     *sim.Response
	index int // the open block's index; -1 before the first
	open  sim.StepKind
}

func newConverseEncoder(r *sim.Response) *converseEncoder { return &converseEncoder{r: r, index: -1} }

func (e *converseEncoder) ContentType() string { return bedrockContentType }

func (e *converseEncoder) Events(b []byte) int { return countFrames(b) }

type cvDelta struct {
	Index int `json:"contentBlockIndex"`
	Delta any `json:"delta"`
}

func (e *converseEncoder) stopReason() string {
	if e.r.HasTool {
		return "tool_use"
	}
	return "end_turn"
}

func (e *converseEncoder) closeBlock(dst []byte) []byte {
	if e.open == 0 {
		return dst
	}
	if e.open == sim.StepReasoning {
		dst = eventstream.AppendEvent(dst, "contentBlockDelta", sim.Marshal(cvDelta{e.index, map[string]any{"reasoningContent": map[string]string{"signature": e.r.ID.Signature}}}))
	}
	dst = eventstream.AppendEvent(dst, "contentBlockStop", sim.Marshal(struct {
		Index int `json:"contentBlockIndex"`
	}{e.index}))
	e.open = 0
	return dst
}

func (e *converseEncoder) openBlock(dst []byte, kind sim.StepKind) []byte {
	dst = e.closeBlock(dst)
	e.index++
	e.open = kind
	if kind == sim.StepTool {
		dst = eventstream.AppendEvent(dst, "contentBlockStart", sim.Marshal(struct {
			Index int `json:"contentBlockIndex"`
			Start any `json:"start"`
		}{e.index, map[string]any{"toolUse": map[string]string{"toolUseId": e.r.ID.ToolUse, "name": e.r.ToolName}}}))
	}
	return dst
}

func (e *converseEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepStart:
		return eventstream.AppendEvent(dst, "messageStart", []byte(`{"role":"assistant"}`))
	case sim.StepToolStart:
		return e.openBlock(dst, sim.StepTool)
	case sim.StepReasoning, sim.StepTool, sim.StepText:
		if e.open != st.Kind {
			dst = e.openBlock(dst, st.Kind)
		}
		var d any
		switch st.Kind {
		case sim.StepReasoning:
			d = map[string]any{"reasoningContent": map[string]string{"text": st.Text}}
		case sim.StepTool:
			d = map[string]any{"toolUse": map[string]string{"input": st.Text}}
		default:
			d = map[string]string{"text": st.Text}
		}
		dst = eventstream.AppendEvent(dst, "contentBlockDelta", sim.Marshal(cvDelta{e.index, d}))
		if st.Last {
			dst = e.closeBlock(dst)
		}
		return dst
	case sim.StepFinish:
		dst = e.closeBlock(dst)
		dst = eventstream.AppendEvent(dst, "messageStop", sim.Marshal(struct {
			StopReason string `json:"stopReason"`
		}{e.stopReason()}))
		return eventstream.AppendEvent(dst, "metadata", sim.Marshal(e.metadata(st.At)))
	case sim.StepError:
		return eventstream.AppendException(dst, "throttlingException", sim.Marshal(struct {
			Message string `json:"message"`
		}{bedrockThrottled}))
	}
	return dst // heartbeats: Bedrock's streams have none
}

type cvUsage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
	TotalTokens  int `json:"totalTokens"`
}

type cvMetadata struct {
	Usage   cvUsage `json:"usage"`
	Metrics struct {
		LatencyMs int64 `json:"latencyMs"`
	} `json:"metrics"`
}

func (e *converseEncoder) metadata(at time.Duration) cvMetadata {
	out := e.r.OutputTokens()
	m := cvMetadata{Usage: cvUsage{e.r.Input, out, e.r.Input + out}}
	m.Metrics.LatencyMs = at.Milliseconds()
	return m
}

func (e *converseEncoder) Body() []byte {
	var content []any
	for _, k := range e.r.Order {
		switch k {
		case sim.StepReasoning:
			content = append(content, map[string]any{"reasoningContent": map[string]any{
				"reasoningText": map[string]string{"text": e.r.ReasoningText, "signature": e.r.ID.Signature}}})
		case sim.StepTool:
			content = append(content, map[string]any{"toolUse": map[string]any{
				"toolUseId": e.r.ID.ToolUse, "name": e.r.ToolName, "input": json.RawMessage(e.r.ToolArgs)}})
		default:
			content = append(content, map[string]string{"text": e.r.VisibleText})
		}
	}
	md := e.metadata(e.r.End)
	return sim.Marshal(struct {
		Output struct {
			Message struct {
				Role    string `json:"role"`
				Content []any  `json:"content"`
			} `json:"message"`
		} `json:"output"`
		StopReason string  `json:"stopReason"`
		Usage      cvUsage `json:"usage"`
		Metrics    any     `json:"metrics"`
	}{Output: struct {
		Message struct {
			Role    string `json:"role"`
			Content []any  `json:"content"`
		} `json:"message"`
	}{Message: struct {
		Role    string `json:"role"`
		Content []any  `json:"content"`
	}{"assistant", content}}, StopReason: e.stopReason(), Usage: md.Usage, Metrics: md.Metrics})
}

// invokeEncoder writes InvokeModelWithResponseStream for an Anthropic
// model: each event of the Messages stream becomes the base64 "bytes" of
// one chunk message; message_stop carries Bedrock's invocation metrics.
type invokeEncoder struct {
	anth sim.Encoder
	r    *sim.Response
	rd   *sse.Reader
	src  bytes.Reader
	sse  []byte
}

func newInvokeEncoder(r *sim.Response) *invokeEncoder {
	return &invokeEncoder{anth: anthropicsim.NewEncoder(r), r: r}
}

func (e *invokeEncoder) ContentType() string { return bedrockContentType }

func (e *invokeEncoder) Events(b []byte) int { return countFrames(b) }

func (e *invokeEncoder) Frame(dst []byte, st sim.Step) []byte {
	if st.Kind == sim.StepHeartbeat {
		return dst // Bedrock does not relay Anthropic's pings
	}
	if st.Kind == sim.StepError {
		return eventstream.AppendException(dst, "throttlingException", sim.Marshal(struct {
			Message string `json:"message"`
		}{bedrockThrottled}))
	}
	e.sse = e.anth.Frame(e.sse[:0], st)
	e.src.Reset(e.sse)
	rd := sse.NewReader(&e.src, 0)
	for {
		p, err := rd.Next()
		if err != nil {
			return dst
		}
		if p.Kind != sse.PieceEvent || len(p.Event.Data) == 0 {
			continue
		}
		data := p.Event.Data
		if string(p.Event.Type) == "ping" {
			continue
		}
		if string(p.Event.Type) == "message_stop" {
			data = e.invocationMetrics(data, st.At)
		}
		chunk := sim.Marshal(struct {
			Bytes string `json:"bytes"`
		}{base64.StdEncoding.EncodeToString(data)})
		dst = eventstream.Append(dst, []eventstream.Header{
			{Name: ":event-type", Value: "chunk"},
			{Name: ":content-type", Value: "application/json"},
			{Name: ":message-type", Value: "event"},
		}, chunk)
	}
}

// invocationMetrics adds Bedrock's amazon-bedrock-invocationMetrics to a
// message_stop event, as Bedrock does.
func (e *invokeEncoder) invocationMetrics(data []byte, at time.Duration) []byte {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	m["amazon-bedrock-invocationMetrics"] = map[string]int64{
		"inputTokenCount": int64(e.r.Input), "outputTokenCount": int64(e.r.OutputTokens()),
		"invocationLatency": at.Milliseconds(), "firstByteLatency": e.r.FirstByte.Milliseconds(),
	}
	return sim.Marshal(m)
}

func (e *invokeEncoder) Body() []byte { return e.anth.Body() }

// countFrames counts the event-stream messages in b.
func countFrames(b []byte) int {
	n := 0
	for len(b) >= 16 {
		total := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if total < 16 || total > len(b) {
			break
		}
		n++
		b = b[total:]
	}
	return n
}

// readConverse reads what the simulator needs of a Converse body; errors
// are Bedrock's ValidationExceptions.
func readConverse(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
	if e := b.Array("messages", true); e != nil {
		return nil, sim.Errorf(http.StatusBadRequest, "1 validation error detected: Value at 'messages' failed to satisfy constraint: Member must not be null")
	}
	return []string{"system", "messages"}, nil
}

// readInvoke reads an Anthropic body as Bedrock takes it: with its
// anthropic_version, and without model or stream (the path says them).
func readInvoke(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
	malformed := func(what string) *sim.Error {
		return sim.Errorf(http.StatusBadRequest, "Malformed input request: #: "+what+", please reformat your input and try again.")
	}
	var v string
	if raw, ok := b.Raw("anthropic_version"); !ok || json.Unmarshal(raw, &v) != nil || v != AnthropicVersion {
		return nil, malformed("required key [anthropic_version] not found or not " + AnthropicVersion)
	}
	if b.Has("model") {
		return nil, malformed("extraneous key [model] is not permitted")
	}
	if b.Has("stream") {
		return nil, malformed("extraneous key [stream] is not permitted")
	}
	if e := b.Array("messages", true); e != nil {
		return nil, malformed("required key [messages] not found")
	}
	raw, ok := b.Raw("max_tokens")
	var n int
	if !ok || json.Unmarshal(raw, &n) != nil || n < 1 {
		return nil, malformed("required key [max_tokens] not found")
	}
	return []string{"system", "messages"}, nil
}
