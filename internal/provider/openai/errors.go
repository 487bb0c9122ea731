package openai

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
)

// ErrorBody renders e as OpenAI writes its errors (every OpenAI API, and
// the servers compatible with them): {"error":{"message","type","param",
// "code"}}.
func ErrorBody(e protocol.ErrorResponse) []byte {
	type oerr struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	o := oerr{Message: e.Message, Type: e.Type}
	if o.Type == "" {
		o.Type = ErrorType(e.Status)
	}
	if e.Param != "" {
		o.Param = &e.Param
	}
	code := e.Code
	if code == "" {
		code = ErrorCode(e.Status)
	}
	if code != "" {
		o.Code = &code
	}
	b, _ := json.Marshal(struct {
		Error oerr `json:"error"`
	}{o})
	return b
}

// ErrorType maps a status to OpenAI's error types.
func ErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// ErrorCode maps a status to OpenAI's error codes, or "" for none.
func ErrorCode(status int) string {
	switch status {
	case 401:
		return "invalid_api_key"
	case 404:
		return "model_not_found"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_exceeded"
	case 504:
		return "timeout"
	}
	return ""
}
