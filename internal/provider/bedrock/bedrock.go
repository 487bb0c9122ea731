// Package bedrock is the unit of Amazon Bedrock: the Converse API as a
// client-facing API (bedrock.converse: POST /model/{modelId}/converse-stream
// and /converse, streams in AWS's binary event stream) and the bedrock
// provider kind, whose channels reach Bedrock's runtime endpoint.
package bedrock

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/provider/anthropic"
	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
	"github.com/ttfx/ttfx/internal/wire"
)

// Family is the protocol family of the Converse API and the name of its kind.
const Family = "bedrock"

// API is the record's name of the Converse API.
const API protocol.API = "bedrock.converse"

// ContentType is the media type of Bedrock's streams.
const ContentType = "application/vnd.amazon.eventstream"

// The Converse methods, the last segment of their paths.
const (
	methodConverse       = "converse"
	methodConverseStream = "converse-stream"
)

func init() {
	// Converse streams are not SSE: Framing's reader yields each frame as
	// a piece whose Event is its :event-type and payload (classify.go).
	protocol.Register(API, &protocol.Classifier{Event: converseEvent, Response: converseResponse, Exception: exception})
	wire.RegisterAPI(&wire.API{
		Name: string(API), Family: Family,
		Endpoints: []wire.Endpoint{
			{Pattern: "POST /model/{target}/" + methodConverseStream, HasBody: true, Target: target(true)},
			{Pattern: "POST /model/{target}/" + methodConverse, HasBody: true, Target: target(false)},
		},
		Stream: API, Response: API,
		// The AWS SDKs send a Bedrock API key as a bearer token; a client
		// of the gateway sends its ttfx key the same way.
		KeyHeader: "Authorization: Bearer KEY",
		Claim: func(r *http.Request) int {
			if strings.HasPrefix(r.URL.Path, "/model/") {
				return 2
			}
			return 0
		},
		ErrorBody:    ErrorBody,
		ErrorHeaders: func(h http.Header, status int) { h.Set("X-Amzn-Errortype", ExceptionType(status)) },
		StreamError:  streamError,
		Framing: &wire.Framing{
			ContentType: ContentType,
			NewReader: func(r io.Reader, maxBytes int) wire.PieceReader {
				return eventstream.NewPieces(r, maxBytes)
			},
			Sniff: func(b []byte) bool { frames, chunks := eventstream.Sniff(b); return frames && !chunks },
		},
		GenAIOperation: "chat", GenAIProvider: "aws.bedrock",
	})
	wire.RegisterKind(&wire.Kind{
		Name: Family, Families: []string{Family, anthropic.Family}, ZeroConfig: true, GenAIProvider: "aws.bedrock",
		Authorize: func(h http.Header, key string) {
			// A Bedrock API key is a bearer token; a signed channel
			// has none (its Upstream's SigV4 authorizes).
			if key != "" {
				h.Set("Authorization", "Bearer "+key)
			}
		},
		URL:            upstreamURL,
		Settings:       settings,
		DefaultBaseURL: defaultBaseURL,
		Open:           open,
		// Converse serves every model family on Bedrock; Anthropic
		// clients reach Claude through InvokeModel. The ids are Bedrock's
		// (a cross-region inference profile's among them).
		Example: wire.Example{Host: "bedrock-runtime.us-east-1.amazonaws.com", Models: map[string][]string{
			Family:           {"amazon.nova-lite-v1:0", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "meta.llama3-3-70b-instruct-v1:0"},
			anthropic.Family: {"anthropic.claude-haiku-4-5-20251001-v1:0", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
		}},
		Framings: map[string]*wire.Framing{
			// InvokeModelWithResponseStream: each chunk carries one
			// Anthropic stream event, which the client gets as SSE.
			anthropic.Family: {
				ContentType: ContentType,
				NewReader: func(r io.Reader, maxBytes int) wire.PieceReader {
					return eventstream.NewSSEPieces(r, maxBytes)
				},
				Sniff:        func(b []byte) bool { frames, chunks := eventstream.Sniff(b); return frames && chunks },
				ErrorMessage: errorMessage,
			},
		},
	})
}

// target is the Target splitter of a Converse endpoint: the {target} path
// segment is the model id (an inference profile id or an ARN, escaped).
func target(stream bool) func(string) (string, bool, error) {
	return func(t string) (string, bool, error) {
		if t == "" {
			return "", false, &wire.TargetError{Code: http.StatusBadRequest, Msg: "the path names no model id: want /model/{modelId}/converse-stream"}
		}
		return t, stream, nil
	}
}

// upstreamURL builds a Bedrock runtime URL: the channel's base and
// /model/{modelId}/{method}, with the model the channel serves (an alias
// may have renamed it), escaped as the AWS SDKs escape it. A Converse
// client's method is its own; an Anthropic client's request is an
// InvokeModel (with response stream when it streams), its query (the
// SDKs' ?beta=true) left behind.
func upstreamURL(t wire.Target) *url.URL {
	if t.Family == anthropic.Family {
		method := "invoke"
		if t.Stream {
			method = "invoke-with-response-stream"
		}
		return ModelURL(t.Base, t.Model, method, "")
	}
	method := t.Path[strings.LastIndexByte(t.Path, '/')+1:]
	if !strings.HasPrefix(t.Path, "/model/") || t.Model == "" {
		return wire.JoinURL(t.Base, t.Path, t.Query)
	}
	return ModelURL(t.Base, t.Model, method, t.Query)
}

// ModelURL returns base + /model/{model}/{method}, the model escaped as
// one path segment (":" and "/" of an ARN included).
func ModelURL(base *url.URL, model, method, query string) *url.URL {
	u := new(url.URL)
	*u = *base
	u.Path = strings.TrimSuffix(base.Path, "/") + "/model/" + model + "/" + method
	u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + "/model/" + escapeSegment(model) + "/" + method
	u.RawQuery = query
	return u
}

// escapeSegment escapes a path segment the way AWS's SigV4 canonical URI
// and the AWS SDKs do: every byte but the unreserved characters.
func escapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// ExceptionType is Bedrock's exception for an HTTP status (the
// x-amzn-ErrorType of an error response, which the AWS SDKs turn into
// their typed errors).
func ExceptionType(status int) string {
	switch status {
	case 400, 413, 422:
		return "ValidationException"
	case 401, 403:
		return "AccessDeniedException"
	case 404:
		return "ResourceNotFoundException"
	case 408, 504:
		return "ModelTimeoutException"
	case 424, 502:
		return "ModelErrorException"
	case 429:
		return "ThrottlingException"
	case 503, 529:
		return "ServiceUnavailableException"
	}
	return "InternalServerException"
}

// ErrorBody renders an error as Bedrock does: {"message":"…"}, the type in
// the x-amzn-ErrorType header (ErrorHeaders).
func ErrorBody(e protocol.ErrorResponse) []byte {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{e.Message})
	return b
}

// StreamExceptionType is the exception message a Converse stream that
// failed with status ends with: the members of ConverseStream's output
// union, which the AWS SDKs raise as their typed errors.
func StreamExceptionType(status int) string {
	switch status {
	case 400, 413, 422:
		return "validationException"
	case 429:
		return "throttlingException"
	case 503, 529:
		return "serviceUnavailableException"
	case 500:
		return "internalServerException"
	}
	return "modelStreamErrorException"
}

// streamError ends a Converse stream that failed after frames were sent:
// an exception message, as Bedrock sends one.
func streamError(f wire.Failure) []byte {
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{f.Msg})
	return eventstream.AppendException(nil, StreamExceptionType(f.Code), b)
}

// AnthropicVersion is the anthropic_version Bedrock requires in the body of
// an Anthropic model's InvokeModel request.
const AnthropicVersion = "bedrock-2023-05-31"

// body is the body Bedrock gets: an Anthropic request without its model
// (the URL names it) and stream (the method says it), both of which
// Bedrock refuses, and with Bedrock's anthropic_version unless the client
// set one; a Converse request unchanged.
func body(t wire.Target, b []byte) ([]byte, error) {
	if t.Family != anthropic.Family {
		return b, nil
	}
	return jsonscan.EditObject(b, "anthropic_version", `"`+AnthropicVersion+`"`, "model", "stream")
}

// errorMessage reads a Bedrock error response ({"message":"…"}, the type
// in x-amzn-ErrorType) for a client of another API, which gets it in its
// own format: the type and the message, bounded.
func errorMessage(h http.Header, b []byte) string {
	var e struct {
		Message  string `json:"message"`
		MessageU string `json:"Message"`
	}
	json.Unmarshal(b, &e)
	msg := e.Message
	if msg == "" {
		msg = e.MessageU
	}
	typ := ErrorTypeOf(h)
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	if len(typ) > 64 {
		typ = typ[:64]
	}
	switch {
	case typ == "" && msg == "":
		return "Bedrock answered with an error"
	case typ == "":
		return msg
	case msg == "":
		return "Bedrock: " + typ
	}
	return typ + ": " + msg
}

// ErrorTypeOf is the exception type of a Bedrock error response: its
// x-amzn-ErrorType header up to the first colon (AWS may append the
// type's namespace: "ThrottlingException:http://internal.amazon.com/…").
func ErrorTypeOf(h http.Header) string {
	typ, _, _ := strings.Cut(h.Get("X-Amzn-Errortype"), ":")
	return strings.TrimSpace(typ)
}

// maxErrorMessage bounds the upstream message an error passes on.
const maxErrorMessage = 1024
