package protocol

import "encoding/json"

// ErrorFamily is how an API writes its error responses. The OpenAI APIs
// (chat, completions, Responses, embeddings, models) share one format.
type ErrorFamily uint8

const (
	FamilyOpenAI    ErrorFamily = iota // {"error":{"message","type","param","code"}}
	FamilyAnthropic                    // {"type":"error","error":{"type","message"}}
	FamilyGemini                       // {"error":{"code","message","status"}} (google.rpc.Status)
)

// ErrorResponse is an error response in a provider's own format: what the gateway
// answers for bad input or a failed upstream, and what the simulator sends
// as a provider would.
type ErrorResponse struct {
	Status  int    // HTTP status
	Message string // what the client reads
	Type    string // OpenAI error type; empty: derived from Status (Anthropic's is always derived)
	Param   string // OpenAI "param", when one field is at fault; empty: null
	Code    string // OpenAI "code"; empty: derived from Status (null when none fits)
}

// ErrorBody renders e in family f's format.
func ErrorBody(f ErrorFamily, e ErrorResponse) []byte {
	var v any
	switch f {
	case FamilyAnthropic:
		type aerr struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		v = struct {
			Type  string `json:"type"`
			Error aerr   `json:"error"`
		}{"error", aerr{AnthropicErrorType(e.Status), e.Message}}
	case FamilyGemini:
		type gerr struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		}
		v = struct {
			Error gerr `json:"error"`
		}{gerr{e.Status, e.Message, GoogleStatus(e.Status)}}
	default:
		type oerr struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		}
		o := oerr{Message: e.Message, Type: e.Type}
		if o.Type == "" {
			o.Type = OpenAIErrorType(e.Status)
		}
		if e.Param != "" {
			o.Param = &e.Param
		}
		code := e.Code
		if code == "" {
			code = OpenAIErrorCode(e.Status)
		}
		if code != "" {
			o.Code = &code
		}
		v = struct {
			Error oerr `json:"error"`
		}{o}
	}
	b, _ := json.Marshal(v)
	return b
}

// OpenAIErrorType maps a status to OpenAI's error types.
func OpenAIErrorType(status int) string {
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

// OpenAIErrorCode maps a status to OpenAI's error codes, or "" for none.
func OpenAIErrorCode(status int) string {
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

// AnthropicErrorType maps a status to Anthropic's error types.
func AnthropicErrorType(status int) string {
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

// GoogleStatus maps a status to the google.rpc.Code name Gemini puts in
// its errors.
func GoogleStatus(status int) string {
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
