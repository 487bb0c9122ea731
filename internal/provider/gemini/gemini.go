// Package gemini is the unit of Google's Gemini API (generateContent and
// streamGenerateContent) and of the gemini provider kind (the Gemini
// Developer API, keyed by x-goog-api-key).
package gemini

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/wire"
)

// Family is the protocol family of the Gemini API and the name of its kind.
const Family = "gemini"

func init() {
	wire.RegisterAPI(&wire.API{
		Name: "gemini", Family: Family,
		// Gemini puts the model and the method in one path segment
		// ("gemini-2.5-flash:streamGenerateContent"), which a ServeMux
		// wildcard cannot split; target does.
		Endpoints: []wire.Endpoint{{Pattern: "POST /v1beta/models/{target}", HasBody: true, Target: target}},
		Stream:    protocol.Gemini, Response: protocol.Gemini,
		// Google's SDKs may send the key as ?key= (and Google documents it).
		KeyInURL:  true,
		KeyHeader: "x-goog-api-key: KEY",
		Claim: func(r *http.Request) int {
			if strings.HasPrefix(r.URL.Path, "/v1beta/") {
				return 2
			}
			return 0
		},
		ErrorBody:      func(e protocol.ErrorResponse) []byte { return protocol.ErrorBody(protocol.FamilyGemini, e) },
		StreamError:    streamError,
		GenAIOperation: "generate_content", GenAIProvider: "gcp.gemini",
	})
	wire.RegisterKind(&wire.Kind{
		Name: Family, Families: []string{Family},
		Authorize:      func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
		ForwardHeaders: []string{"X-Goog-Api-Client"},
	})
}

// target splits "model:method".
func target(t string) (model string, stream bool, err error) {
	model, method, ok := strings.Cut(t, ":")
	if !ok || model == "" {
		return "", false, &wire.TargetError{Code: http.StatusBadRequest, Msg: "the path must be /v1beta/models/{model}:generateContent or :streamGenerateContent"}
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
