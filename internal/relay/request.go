package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
)

// Channel protocols.
const (
	protoOpenAI    = "openai"
	protoAnthropic = "anthropic"
	protoGemini    = "gemini"
)

// Record API names.
const (
	apiChat        = "openai.chat"
	apiCompletions = "openai.completions"
	apiResponses   = "openai.responses"
	apiEmbeddings  = "openai.embeddings"
	apiModels      = "openai.models"
	apiAnthropic   = "anthropic"
	apiGemini      = "gemini"
)

// endpoint describes one route of the gateway.
type endpoint struct {
	pattern  string       // ServeMux pattern
	api      string       // record API name
	proto    string       // channel protocol
	classify protocol.API // classifier of its streams; "" when it has none
	hasBody  bool
}

var endpoints = []endpoint{
	{"POST /v1/chat/completions", apiChat, protoOpenAI, protocol.OpenAIChat, true},
	{"POST /v1/completions", apiCompletions, protoOpenAI, protocol.OpenAIChat, true},
	{"POST /v1/responses", apiResponses, protoOpenAI, protocol.OpenAIResponses, true},
	{"POST /v1/embeddings", apiEmbeddings, protoOpenAI, "", true},
	{"GET /v1/models", apiModels, protoOpenAI, "", false},
	{"POST /v1/messages", apiAnthropic, protoAnthropic, protocol.Anthropic, true},
	// Gemini puts the model and the method in one path segment
	// ("gemini-2.5-flash:streamGenerateContent"), which a ServeMux
	// wildcard cannot split; parseRequest does.
	{"POST /v1beta/models/{target}", apiGemini, protoGemini, protocol.Gemini, true},
}

// clientRequest is what the gateway reads from a client's request: only
// what routing and timing need. The prompt is never looked at beyond this.
type clientRequest struct {
	model       string
	stream      bool
	clientUsage bool   // the client asked for stream_options.include_usage itself
	user        string // a client-sent user id, to be hashed; never stored
	body        []byte // the client's body, sent upstream as it is
	usageBody   []byte // the body with stream_options.include_usage added; nil when not applicable
	upstreamURI string // path and query to request upstream
}

// parseRequest reads the fields the gateway needs from a client request
// body and prepares the upstream body. It returns an *HTTPError for bad input.
func parseRequest(ep endpoint, r *http.Request, body []byte) (*clientRequest, *HTTPError) {
	// The upstream request keeps the client's query (Gemini's alt=sse)
	// but never a key passed as ?key=: the channel's own key goes upstream.
	cr := &clientRequest{body: body, upstreamURI: r.URL.Path}
	if q := r.URL.Query(); len(q) > 0 {
		q.Del("key")
		if enc := q.Encode(); enc != "" {
			cr.upstreamURI += "?" + enc
		}
	}
	if ep.api == apiModels {
		return cr, nil
	}
	if ep.api == apiGemini {
		target := r.PathValue("target")
		model, method, ok := strings.Cut(target, ":")
		if !ok || model == "" {
			return nil, badRequest("the path must be /v1beta/models/{model}:generateContent or :streamGenerateContent")
		}
		switch method {
		case "streamGenerateContent":
			cr.stream = true
		case "generateContent":
		default:
			return nil, &HTTPError{Code: http.StatusNotFound, Type: "not_found_error", Msg: "unknown method " + echo(method) + " (want generateContent or streamGenerateContent)", Status: record.StatusBadRequest}
		}
		cr.model = model
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("the request body is empty; want a JSON object")
	}
	if herr := checkDuplicateKeys(body); herr != nil {
		return nil, herr
	}
	var fields struct {
		Model         string          `json:"model"`
		Stream        json.RawMessage `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		User     json.RawMessage `json:"user"`
		Metadata *struct {
			UserID json.RawMessage `json:"user_id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, badRequest("the request body is not valid JSON: " + jsonErrorText(err))
	}
	if ep.api != apiGemini {
		cr.model = fields.Model
		if cr.model == "" {
			return nil, badRequest("the request names no model")
		}
		switch s := string(fields.Stream); s {
		case "", "null", "false":
		case "true":
			cr.stream = true
		default:
			return nil, badRequest("stream must be true or false")
		}
	}
	if herr := checkModel(cr.model); herr != nil {
		return nil, herr
	}
	cr.user = jsonString(fields.User)
	if cr.user == "" && fields.Metadata != nil {
		cr.user = jsonString(fields.Metadata.UserID)
	}
	if fields.StreamOptions != nil {
		cr.clientUsage = fields.StreamOptions.IncludeUsage
	}
	// SPEC §3: ask OpenAI-compatible upstreams for the usage chunk, and
	// strip it again when the client did not ask for it.
	if cr.stream && !cr.clientUsage && (ep.api == apiChat || ep.api == apiCompletions) {
		if b, ok := withIncludeUsage(body); ok {
			cr.usageBody = b
		}
	}
	return cr, nil
}

// withIncludeUsage returns body with stream_options.include_usage set.
func withIncludeUsage(body []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, false
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, false
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	o, err := json.Marshal(opts)
	if err != nil {
		return nil, false
	}
	m["stream_options"] = o
	b, err := json.Marshal(m)
	return b, err == nil
}

func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// jsonErrorText describes a JSON error without echoing the client's bytes.
func jsonErrorText(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	case errors.As(err, &te):
		return "field " + te.Field + " has the wrong type"
	}
	return "cannot parse"
}

func badRequest(msg string) *HTTPError {
	return &HTTPError{Code: http.StatusBadRequest, Type: "invalid_request_error", Msg: msg, Status: record.StatusBadRequest}
}
