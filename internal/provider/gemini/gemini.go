// Package gemini is the unit of Google's Gemini API (generateContent and
// streamGenerateContent) and of the gemini provider kind (the Gemini
// Developer API, keyed by x-goog-api-key).
package gemini

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/wire"
)

// Family is the protocol family of the Gemini API and the name of its kind.
const Family = "gemini"

// API is the Gemini API's name (the record's api) and its classifier's.
const API protocol.API = "gemini"

func init() {
	// A non-streaming response is one GenerateContentResponse, as each
	// event of a stream is.
	protocol.Register(API, &protocol.Classifier{
		Event:    func(c *protocol.Content, e *protocol.Event, _, data []byte) bool { return geminiEvent(c, e, data) },
		Response: geminiEvent,
		Detect:   detect,
	})
	wire.RegisterAPI(&wire.API{
		Name: string(API), Family: Family,
		// Gemini puts the model and the method in one path segment
		// ("gemini-2.5-flash:streamGenerateContent"), which a ServeMux
		// wildcard cannot split; target does.
		// Both API versions: Google's SDKs call /v1beta by default, and
		// google.golang.org/genai with default settings calls /v1.
		Endpoints: []wire.Endpoint{
			{Pattern: "POST /v1beta/models/{target}", HasBody: true, Target: target},
			{Pattern: "POST /v1/models/{target}", HasBody: true, Target: target},
		},
		Stream: API, Response: API,
		// Google's SDKs may send the key as ?key= (and Google documents it).
		KeyInURL:  true,
		KeyHeader: "x-goog-api-key: KEY",
		Claim: func(r *http.Request) int {
			p := r.URL.Path
			if strings.HasPrefix(p, "/v1beta/") || strings.HasPrefix(p, "/v1/models/") && strings.Contains(p, ":") {
				return 2
			}
			return 0
		},
		ErrorBody:      ErrorBody,
		StreamError:    streamError,
		GenAIOperation: "generate_content", GenAIProvider: "gcp.gemini",
	})
	wire.RegisterKind(&wire.Kind{
		Name: Family, Families: []string{Family}, ZeroConfig: true,
		Authorize:      func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
		ForwardHeaders: []string{"X-Goog-Api-Client"},
		URL:            upstreamURL,
		Example:        wire.Example{Host: "generativelanguage.googleapis.com", Models: map[string][]string{Family: {"gemini-2.5-flash", "gemini-2.5-pro"}}},
	})
}

// upstreamURL joins the client's path to the channel's base. A base that
// names an API version ("…/v1beta") keeps it: a client's /v1/models/… then
// goes to …/v1beta/models/… rather than …/v1beta/v1/models/…, so that a
// channel configured as SDKs are configured serves clients of either
// version.
func upstreamURL(t wire.Target) *url.URL {
	path := t.Path
	b := strings.TrimSuffix(t.Base.Path, "/")
	for _, v := range versions {
		if strings.HasSuffix(b, v) {
			for _, w := range versions {
				if strings.HasPrefix(path, w+"/") {
					path = v + strings.TrimPrefix(path, w)
					break
				}
			}
			break
		}
	}
	return wire.JoinURL(t.Base, path, t.Query)
}

var versions = []string{"/v1beta", "/v1"}

// target splits "model:method".
func target(t string) (model string, stream bool, err error) {
	model, method, ok := strings.Cut(t, ":")
	if !ok || model == "" {
		return "", false, &wire.TargetError{Code: http.StatusBadRequest, Msg: "the path must be /v1beta/models/{model}:generateContent or :streamGenerateContent (or /v1/models/…)"}
	}
	switch method {
	case "streamGenerateContent":
		return model, true, nil
	case "generateContent":
		return model, false, nil
	}
	return "", false, &wire.TargetError{Code: http.StatusNotFound, Msg: "unknown method " + wire.Echo(method) + " (want generateContent or streamGenerateContent)"}
}

// streamError is the error Google sends mid-stream: its code paired with
// the matching status, 504 DEADLINE_EXCEEDED for the gateway's timeouts and
// 503 UNAVAILABLE otherwise.
func streamError(f wire.Failure) []byte {
	code, status := http.StatusServiceUnavailable, "UNAVAILABLE"
	if f.Code == http.StatusGatewayTimeout {
		code, status = http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": f.Msg, "status": status}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}
