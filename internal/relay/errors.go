package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// HTTPError is an error with what the client sees kept apart from what is
// only logged: Code and Msg go to the client in the protocol's error
// format; Err, if set, stays in logs and in the record's error summary.
type HTTPError struct {
	Code   int    // HTTP status sent to the client
	Type   string // OpenAI/Anthropic error type, e.g. invalid_request_error
	Msg    string // message the client sees
	Status string // terminal status of the record (record.Status…)
	Err    error  // cause, for logs
}

func (e *HTTPError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Msg)
}

func (e *HTTPError) Unwrap() error { return e.Err }

// Errors the gateway raises itself when a timer fires; they are the causes
// of the cancelled upstream context, so a failed read can say why it failed.
var (
	errHeaderTimeout      = errors.New("upstream headers timed out")
	errFirstOutputTimeout = errors.New("no output from upstream before the first-output timeout")
	errIdleTimeout        = errors.New("upstream stream idle for longer than the idle timeout")
	errTotalTimeout       = errors.New("request passed the total timeout")
	errShutdown           = errors.New("the gateway is shutting down")
)

// googleStatus maps an HTTP code to the google.rpc status name Gemini puts
// in its errors.
func googleStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 413:
		return "INVALID_ARGUMENT"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 502, 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

// errorBody renders an error in the protocol's own format:
// OpenAI {"error":{"message","type","param","code"}},
// Anthropic {"type":"error","error":{"type","message"}},
// Gemini {"error":{"code","message","status"}}.
func errorBody(proto string, code int, typ, msg string) []byte {
	var v any
	switch proto {
	case protoAnthropic:
		v = struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}{Type: "error", Error: struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}{anthropicType(code, typ), msg}}
	case protoGemini:
		v = map[string]any{"error": map[string]any{"code": code, "message": msg, "status": googleStatus(code)}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": openAICode(code, typ)}}
	}
	b, _ := json.Marshal(v)
	return b
}

// anthropicType maps to Anthropic's error types.
func anthropicType(code int, typ string) string {
	switch code {
	case 400, 413:
		if code == 413 {
			return "request_too_large"
		}
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 429:
		return "rate_limit_error"
	case 529, 503:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	if typ != "" && code < 500 {
		return typ
	}
	return "api_error"
}

func openAICode(code int, typ string) any {
	switch code {
	case 401:
		return "invalid_api_key"
	case 404:
		return "model_not_found"
	case 413:
		return "request_too_large"
	case 504:
		return "timeout"
	}
	return nil
}

// writeError sends e to the client in the protocol's format.
func writeError(w http.ResponseWriter, proto string, e *HTTPError) {
	body := errorBody(proto, e.Code, e.Type, e.Msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Code)
	w.Write(body)
	// Out now, so that t7 (taken next) is after the client has it.
	http.NewResponseController(w).Flush()
}

// streamErrorEvent is the in-band error event that ends a stream which
// failed after bytes were sent: the only way left to tell an SSE client.
func streamErrorEvent(api, code, msg string) []byte {
	switch api {
	case apiAnthropic:
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}})
		return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	case apiResponses:
		b, _ := json.Marshal(map[string]any{"type": "error", "code": code, "message": msg, "param": nil})
		return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	case apiGemini:
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 504, "message": msg, "status": "UNAVAILABLE"}})
		return append(append([]byte("data: "), b...), "\n\n"...)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": code}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}
