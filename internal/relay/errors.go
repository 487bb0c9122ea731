package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ttfx/ttfx/internal/protocol"
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

// errNoResponse is the error of a transport that returned neither a
// response nor an error (net/http's Client reports the same).
var errNoResponse = errors.New("the transport returned no response and no error")

// family is the error format of a channel protocol.
func family(proto string) protocol.ErrorFamily {
	switch proto {
	case protoAnthropic:
		return protocol.FamilyAnthropic
	case protoGemini:
		return protocol.FamilyGemini
	}
	return protocol.FamilyOpenAI
}

// writeError sends e to the client in the protocol's format.
func writeError(w http.ResponseWriter, proto string, e *HTTPError) {
	body := protocol.ErrorBody(family(proto), protocol.ErrorResponse{Status: e.Code, Message: e.Msg, Type: e.Type})
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
// Each has the shape the protocol's own server sends and its official SDKs
// parse (TestStreamErrorEventShapes, TestNodeSDKErrors): a Responses error
// carries the sequence_number that comes next (seq, the data events relayed
// so far; OpenAI numbers them from 0), and a Gemini error pairs its code
// with the matching status as Google does (504 DEADLINE_EXCEEDED for the
// gateway's timeouts, 503 UNAVAILABLE otherwise).
func streamErrorEvent(api string, e *HTTPError, seq int) []byte {
	switch api {
	case apiAnthropic:
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": e.Msg}})
		return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	case apiResponses:
		b, _ := json.Marshal(map[string]any{"type": "error", "code": e.Status, "message": e.Msg, "param": nil, "sequence_number": seq})
		return append(append([]byte("event: error\ndata: "), b...), "\n\n"...)
	case apiGemini:
		code, status := http.StatusServiceUnavailable, "UNAVAILABLE"
		if e.Code == http.StatusGatewayTimeout {
			code, status = http.StatusGatewayTimeout, "DEADLINE_EXCEEDED"
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": e.Msg, "status": status}})
		return append(append([]byte("data: "), b...), "\n\n"...)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": e.Msg, "type": "server_error", "param": nil, "code": e.Status}})
	return append(append([]byte("data: "), b...), "\n\n"...)
}
