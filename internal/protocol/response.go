package protocol

import "fmt"

// ResponseInfo is what a complete, non-streaming response body carried.
type ResponseInfo struct {
	// Kinds holds Text, Reasoning and Tool for the content the body had
	// (non-whitespace only), Done when it gave a finish/stop reason or a
	// completed status, Error for an error object or a failed status, and
	// Metadata for a usage report.
	Kinds Kind
	// Text is set when the body had non-whitespace visible text.
	Text bool
	// Effective is set when it had text, reasoning or a tool call with
	// arguments.
	Effective bool
	// Usage is the provider's usage report; FinishReason its finish/stop
	// reason (or a Responses status).
	Usage        Usage
	FinishReason string
	// Error is set for an error body or a failed response; ErrorCode is its
	// type or code (never its message).
	Error     bool
	ErrorCode string
	// Tokens are the §3 counts, visible tokens from the usage or estimated
	// over the body's visible text.
	Tokens Tokens
	// ProviderLatencyMs is the provider's own latency figure (Bedrock's
	// metrics.latencyMs), when HasProviderLatency.
	ProviderLatencyMs  int
	HasProviderLatency bool
}

// ParseResponse reads a complete JSON response body of api (whatever its
// classifier's Response hook reads: a chat.completion, a message, …) or the
// API's error body. It fails for an API no unit registered a reader for,
// and for a body that is not a JSON object of that API.
func ParseResponse(api API, body []byte) (ResponseInfo, error) {
	cl := classifiers[api]
	if cl == nil || cl.Response == nil {
		return ResponseInfo{}, fmt.Errorf("parse response: unknown api %q", api)
	}
	var c Content
	var e Event
	ok := cl.Response(&c, &e, body)
	if !ok {
		return ResponseInfo{}, fmt.Errorf("parse %s response: not valid JSON (%d bytes)", api, len(body))
	}
	if e.Kinds&Unknown != 0 {
		return ResponseInfo{}, fmt.Errorf("parse %s response: not a %s response body", api, api)
	}
	c.usage.merge(e.usage)
	c.SawText = e.Kinds&Text != 0
	c.SawReasoning = e.Kinds&Reasoning != 0
	c.SawTool = e.Kinds&Tool != 0
	return ResponseInfo{
		Kinds:        e.Kinds,
		Text:         e.Kinds&Text != 0,
		Effective:    e.Kinds&(Text|Reasoning|Tool) != 0,
		Usage:        c.usage,
		FinishReason: string(unescape(nil, e.Finish)),
		Error:        e.Kinds&Error != 0,
		ErrorCode:    string(unescape(nil, e.ErrCode)),
		Tokens:       c.tokens(true),

		ProviderLatencyMs: e.LatencyMs, HasProviderLatency: e.HasLatency,
	}, nil
}
