package anthropic

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
)

// ErrorBody renders e as Anthropic writes its errors:
// {"type":"error","error":{"type","message"}}, the type derived from the
// status.
func ErrorBody(e protocol.ErrorResponse) []byte {
	type aerr struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error aerr   `json:"error"`
	}{"error", aerr{ErrorType(e.Status), e.Message}})
	return b
}

// ErrorType maps a status to Anthropic's error types.
func ErrorType(status int) string {
	switch status {
	case 400, 405, 408, 422:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
