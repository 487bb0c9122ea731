package gemini

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
)

// ErrorBody renders e as Google writes its errors (google.rpc.Status):
// {"error":{"code","message","status"}}.
func ErrorBody(e protocol.ErrorResponse) []byte {
	type gerr struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	b, _ := json.Marshal(struct {
		Error gerr `json:"error"`
	}{gerr{e.Status, e.Message, Status(e.Status)}})
	return b
}

// Status maps an HTTP status to the google.rpc.Code name Google puts in
// its errors.
func Status(status int) string {
	switch status {
	case 400, 405, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}
