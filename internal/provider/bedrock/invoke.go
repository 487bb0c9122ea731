package bedrock

import (
	"io"
	"net/http"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/anthropic"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
	"github.com/ttfx/ttfx/internal/wire"
)

// InvokeAPI is the record's name of Bedrock's InvokeModel API as a
// client-facing API: POST /model/{modelId}/invoke-with-response-stream and
// /invoke, the model's own request and response bodies, relayed byte for
// byte to a bedrock channel.
const InvokeAPI protocol.API = "bedrock.invoke"

// The InvokeModel methods, the last segment of their paths.
const (
	methodInvoke       = "invoke"
	methodInvokeStream = "invoke-with-response-stream"
)

// anthropicClassifier classifies the Anthropic events inside chunks; the
// anthropic unit registered it first (this package imports it).
var anthropicClassifier = protocol.Lookup(anthropic.API)

func init() {
	protocol.Register(InvokeAPI, &protocol.Classifier{
		Event: invokeEvent, Response: invokeResponse, Exception: exception,
		// Anthropic's events split usage over message_start and
		// message_delta.
		SplitUsage: true,
	})
	wire.RegisterAPI(&wire.API{
		Name: string(InvokeAPI), Family: Family,
		Endpoints: []wire.Endpoint{
			{Pattern: "POST /model/{target}/" + methodInvokeStream, HasBody: true, Target: target(true)},
			{Pattern: "POST /model/{target}/" + methodInvoke, HasBody: true, Target: target(false)},
		},
		Stream: InvokeAPI, Response: InvokeAPI,
		// As for Converse: the ttfx key is sent as a Bedrock API key.
		// The Converse unit claims /model/ paths for the error format,
		// which is the same.
		KeyHeader:    "Authorization: Bearer KEY",
		ErrorBody:    ErrorBody,
		ErrorHeaders: func(h http.Header, status int) { h.Set("X-Amzn-Errortype", ExceptionType(status)) },
		// InvokeModelWithResponseStream's output union has the same
		// exception members as ConverseStream's.
		StreamError: streamError,
		Framing: &wire.Framing{
			ContentType: ContentType,
			NewReader: func(r io.Reader, maxBytes int) wire.PieceReader {
				return eventstream.NewChunkPieces(r, maxBytes)
			},
			// No Sniff: ttfx inspect reads a file of chunks as the
			// Anthropic events inside them (the kind's framing).
		},
		GenAIOperation: "chat", GenAIProvider: "aws.bedrock",
	})
}

// InvokeModel streams carry each model family's own events in `chunk`
// messages (eventstream.ChunkPieces decodes them). They are classified
// (SPEC §2) as:
//
//   - an event with a top-level "type" is Anthropic's (Claude models), and
//     classified exactly as the anthropic API's; Bedrock's
//     amazon-bedrock-invocationMetrics on message_stop gives the record's
//     provider latency (invocationLatency);
//   - Amazon Nova's events are Converse's, each wrapped in an object named
//     by its type ({"contentBlockDelta":{"delta":{"text":…}}}), and
//     classified as Converse's;
//   - Meta Llama's "generation", Amazon Titan's "outputText" and Mistral's
//     "outputs":[{"text"}] are visible text; their "stop_reason",
//     "completionReason" or outputs' "stop_reason", when not null, is the
//     finish reason and the terminal event;
//   - on any of these, amazon-bedrock-invocationMetrics ({"inputTokenCount",
//     "outputTokenCount","invocationLatency"}), which Bedrock adds to the
//     last chunk of every model, is the usage report (for the families
//     whose events carry none of their own) and the provider latency;
//   - anything else (Cohere, AI21, DeepSeek, … whose stream shapes are not
//     read) is an unknown event: it is relayed, counted as unknown, and
//     gives no mark, so such a stream's record has t3 and its end but no
//     first text. A reasoning or tool phase exists only for the Anthropic
//     and Nova shapes.
//
// An exception message is an error (the Exception hook, as for Converse).

// invokeEvent classifies the event inside a chunk.
func invokeEvent(c *protocol.Content, e *protocol.Event, typ, data []byte) bool {
	if len(typ) > 0 {
		if !anthropicClassifier.Event(c, e, typ, data) {
			return false
		}
		if string(typ) == "message_stop" {
			invocationMetrics(data, e, false)
		}
		return true
	}
	return modelEvent(c, e, data)
}

// invocationMetrics reads amazon-bedrock-invocationMetrics of an event's
// data: invocationLatency is the provider latency, and the token counts
// are the usage report when usage is set.
func invocationMetrics(data []byte, e *protocol.Event, usage bool) {
	d := jsonscan.New(data)
	if !d.Object() {
		return
	}
	for {
		k, ok := d.Key()
		if !ok {
			return
		}
		if string(k) != invocationMetricsKey || d.Peek() != jsonscan.Object {
			d.Skip()
			continue
		}
		readInvocationMetrics(&d, e, usage)
	}
}

const invocationMetricsKey = "amazon-bedrock-invocationMetrics"

// readInvocationMetrics reads the invocationMetrics object at d.
func readInvocationMetrics(d *jsonscan.Decoder, e *protocol.Event, usage bool) {
	var u protocol.Usage
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "inputTokenCount":
			u.Input, u.HasInput = protocol.Count(d)
		case "outputTokenCount":
			u.Output, u.HasOutput = protocol.Count(d)
		case "invocationLatency":
			if n, ok := protocol.Count(d); ok {
				e.LatencyMs, e.HasLatency = n, true
			}
		default:
			d.Skip()
		}
	}
	if usage {
		e.Report(u)
	}
}

// modelEvent classifies a chunk's event of a model family other than
// Anthropic's (see above).
func modelEvent(c *protocol.Content, e *protocol.Event, data []byte) bool {
	d := jsonscan.New(data)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	known, metrics, usage := false, false, false
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata":
			// Nova: a Converse event wrapped in its type.
			raw, ok := d.SkipRaw()
			if !ok {
				return false
			}
			if !converseEvent(c, e, k, raw) {
				return false
			}
			known = true
			usage = usage || string(k) == "metadata"
		case "generation", "outputText":
			known = true
			protocol.Str(&d, c, e, protocol.Text)
			e.Kinds |= protocol.Metadata
		case "outputs":
			known = true
			mistralOutputs(&d, c, e)
			e.Kinds |= protocol.Metadata
		case "stop_reason", "completionReason":
			known = true
			if r := protocol.RawStr(&d); len(r) > 0 {
				e.SetFinish(0, r)
				e.Kinds |= protocol.Done
			}
		case invocationMetricsKey:
			if d.Peek() != jsonscan.Object {
				d.Skip()
				continue
			}
			metrics = true
			// Nova's own metadata usage wins over the metrics'.
			readInvocationMetrics(&d, e, !usage)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if !known && !metrics {
		return protocol.MarkUnknown(e)
	}
	if e.Kinds&(protocol.Text|protocol.Reasoning|protocol.Tool) != 0 {
		// Text beside the fields that carried it is not also metadata.
		e.Kinds &^= protocol.Metadata
	}
	if e.Kinds == 0 {
		e.Kinds = protocol.Metadata
	}
	return true
}

// mistralOutputs reads Mistral's "outputs":[{"text","stop_reason"}].
func mistralOutputs(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event) {
	if d.Peek() != jsonscan.Array {
		d.Skip()
		return
	}
	d.Array()
	for d.Elem() {
		if d.Peek() != jsonscan.Object {
			d.Skip()
			continue
		}
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			switch string(k) {
			case "text":
				protocol.Str(d, c, e, protocol.Text)
			case "stop_reason":
				if r := protocol.RawStr(d); len(r) > 0 {
					e.SetFinish(0, r)
					e.Kinds |= protocol.Done
				}
			default:
				d.Skip()
			}
		}
	}
}

// invokeResponse reads a non-streaming InvokeModel response: an Anthropic
// message ({"type":"message",…}, read as the anthropic API's), a Nova
// response (Converse's shape), Llama's {"generation","prompt_token_count",
// "generation_token_count","stop_reason"}, Titan's {"inputTextTokenCount",
// "results":[{"tokenCount","outputText","completionReason"}]}, Mistral's
// {"outputs":[{"text","stop_reason"}]}, or Bedrock's error body
// ({"message":…}). Other shapes are unknown.
func invokeResponse(c *protocol.Content, e *protocol.Event, body []byte) bool {
	if topType(body) != nil {
		return anthropicClassifier.Response(c, e, body)
	}
	d := jsonscan.New(body)
	if d.Peek() != jsonscan.Object {
		return d.Skip() && d.End() && protocol.MarkUnknown(e)
	}
	shaped, nova := false, false
	var msg []byte
	var u protocol.Usage
	d.Object()
	for {
		k, ok := d.Key()
		if !ok {
			break
		}
		switch string(k) {
		case "output", "stopReason":
			nova = true
			d.Skip()
		case "generation":
			shaped = true
			protocol.Str(&d, c, e, protocol.Text)
		case "outputs":
			shaped = true
			mistralOutputs(&d, c, e)
		case "results":
			shaped = true
			titanResults(&d, c, e, &u)
		case "stop_reason":
			if r := protocol.RawStr(&d); len(r) > 0 {
				e.SetFinish(0, r)
				e.Kinds |= protocol.Done
			}
		case "prompt_token_count", "inputTextTokenCount":
			u.Input, u.HasInput = protocol.Count(&d)
		case "generation_token_count":
			u.Output, u.HasOutput = protocol.Count(&d)
		case "message", "Message":
			msg = protocol.RawStr(&d)
		default:
			d.Skip()
		}
	}
	if !d.End() {
		return false
	}
	if nova {
		return converseResponse(c, e, body)
	}
	if !shaped {
		if msg != nil {
			e.Kinds |= protocol.Error
			return true
		}
		return protocol.MarkUnknown(e)
	}
	e.Report(u)
	return true
}

// titanResults reads Titan's "results":[{"tokenCount","outputText",
// "completionReason"}].
func titanResults(d *jsonscan.Decoder, c *protocol.Content, e *protocol.Event, u *protocol.Usage) {
	if d.Peek() != jsonscan.Array {
		d.Skip()
		return
	}
	d.Array()
	for d.Elem() {
		if d.Peek() != jsonscan.Object {
			d.Skip()
			continue
		}
		d.Object()
		for {
			k, ok := d.Key()
			if !ok {
				break
			}
			switch string(k) {
			case "outputText":
				protocol.Str(d, c, e, protocol.Text)
			case "tokenCount":
				if n, ok := protocol.Count(d); ok {
					u.Output += n
					u.HasOutput = true
				}
			case "completionReason":
				if r := protocol.RawStr(d); len(r) > 0 {
					e.SetFinish(0, r)
					e.Kinds |= protocol.Done
				}
			default:
				d.Skip()
			}
		}
	}
}

// topType returns the top-level "type" of a JSON object, or nil.
func topType(b []byte) []byte {
	d := jsonscan.New(b)
	if !d.Object() {
		return nil
	}
	for {
		k, ok := d.Key()
		if !ok {
			return nil
		}
		if string(k) == "type" {
			t, _ := d.Str()
			return t
		}
		if !d.Skip() {
			return nil
		}
	}
}
