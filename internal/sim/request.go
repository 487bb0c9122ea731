package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// request is what the simulator reads from a request body. Only what
// selects a profile or shapes the response is kept; the prompt's text is
// collected for the input-token count and nothing else (it never changes
// the timing).
type request struct {
	model        string
	stream       bool
	includeUsage bool
	prompt       []string // text strings of the prompt, for usage
	embedInputs  []string // /v1/embeddings: one text per vector
	dimensions   int      // /v1/embeddings: vector length; 0: default
	base64       bool     // /v1/embeddings: encoding_format "base64"
}

// parseRequest reads body for api. pathModel is the model named in a
// Gemini URL. Errors are 400s in the protocol's words.
func parseRequest(api API, body []byte, pathModel string) (request, *apiError) {
	var req request
	if len(bytes.TrimSpace(body)) == 0 {
		return req, errorf(http.StatusBadRequest, "The request body is empty; send a JSON object.")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return req, jsonError(err)
	}
	if fields == nil {
		return req, errorf(http.StatusBadRequest, "The request body must be a JSON object, not null.")
	}
	str := func(name string) (string, *apiError) {
		raw, ok := fields[name]
		if !ok || isNull(raw) {
			return "", nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", fieldError(name, "must be a string")
		}
		return s, nil
	}
	boolean := func(name string) (bool, *apiError) {
		raw, ok := fields[name]
		if !ok || isNull(raw) {
			return false, nil
		}
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return false, fieldError(name, "must be a boolean")
		}
		return b, nil
	}
	required := func(name string) *apiError {
		if raw, ok := fields[name]; !ok || isNull(raw) {
			return missing(api, name)
		}
		return nil
	}
	var e *apiError
	if api == APIGemini || api == APIConverse || api == APIBedrockInvoke {
		req.model = pathModel
	} else {
		if req.model, e = str("model"); e != nil {
			return req, e
		}
		if pathModel != "" {
			// An Azure deployment URL names the model; the body's, if
			// any, is not read.
			req.model = pathModel
		}
		if req.model == "" {
			return req, missing(api, "model")
		}
		if req.stream, e = boolean("stream"); e != nil {
			return req, e
		}
	}
	if api == APIChat || api == APICompletions {
		if raw, ok := fields["stream_options"]; ok && !isNull(raw) {
			var so struct {
				IncludeUsage *bool `json:"include_usage"`
			}
			if json.Unmarshal(raw, &so) != nil {
				return req, fieldError("stream_options", "must be an object with a boolean include_usage")
			}
			req.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
		}
	}
	// The fields that carry the prompt, per API, and the ones a provider
	// rejects the request without.
	var promptFields []string
	switch api {
	case APIChat:
		if e = arrayField(fields, "messages", true); e != nil {
			return req, e
		}
		promptFields = []string{"messages"}
	case APICompletions:
		if e = required("prompt"); e != nil {
			return req, e
		}
		promptFields = []string{"prompt", "suffix"}
	case APIResponses:
		if e = required("input"); e != nil {
			return req, e
		}
		promptFields = []string{"input", "instructions"}
	case APIAnthropic:
		if e = arrayField(fields, "messages", true); e != nil {
			return req, e
		}
		raw, ok := fields["max_tokens"]
		var n int
		if !ok || isNull(raw) {
			return req, missing(api, "max_tokens")
		}
		if json.Unmarshal(raw, &n) != nil || n < 1 {
			return req, fieldError("max_tokens", "must be an integer ≥ 1")
		}
		promptFields = []string{"system", "messages"}
	case APIGemini:
		if e = arrayField(fields, "contents", true); e != nil {
			return req, e
		}
		promptFields = []string{"systemInstruction", "system_instruction", "contents"}
	case APIConverse, APIBedrockInvoke:
		if e = parseBedrockRequest(api, fields, &req); e != nil {
			return req, e
		}
		promptFields = []string{"system", "messages"}
	case APIEmbeddings:
		if e = required("input"); e != nil {
			return req, e
		}
		if e = req.parseEmbeddings(fields); e != nil {
			return req, e
		}
		promptFields = []string{"input"}
	}
	for _, name := range promptFields {
		if raw, ok := fields[name]; ok {
			var v any
			if json.Unmarshal(raw, &v) == nil {
				collectText(v, true, &req.prompt)
			}
		}
	}
	return req, nil
}

func (req *request) parseEmbeddings(fields map[string]json.RawMessage) *apiError {
	raw := fields["input"]
	var one string
	var many []string
	switch {
	case json.Unmarshal(raw, &one) == nil:
		req.embedInputs = []string{one}
	case json.Unmarshal(raw, &many) == nil:
		if len(many) == 0 {
			return fieldError("input", "must not be an empty array")
		}
		req.embedInputs = many
	default:
		// Token arrays ([1,2,3] or [[1,2],[3]]) are allowed by OpenAI;
		// each array is one input.
		var toks [][]int
		var flat []int
		switch {
		case json.Unmarshal(raw, &flat) == nil && len(flat) > 0:
			req.embedInputs = []string{string(raw)}
		case json.Unmarshal(raw, &toks) == nil && len(toks) > 0:
			for _, t := range toks {
				b, _ := json.Marshal(t)
				req.embedInputs = append(req.embedInputs, string(b))
			}
		default:
			return fieldError("input", "must be a string, an array of strings, or an array of token arrays")
		}
	}
	if raw, ok := fields["dimensions"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &req.dimensions) != nil || req.dimensions < 1 || req.dimensions > 8192 {
			return fieldError("dimensions", "must be an integer from 1 to 8192")
		}
	}
	if raw, ok := fields["encoding_format"]; ok && !isNull(raw) {
		var f string
		if json.Unmarshal(raw, &f) != nil || (f != "float" && f != "base64") {
			return fieldError("encoding_format", `must be "float" or "base64"`)
		}
		req.base64 = f == "base64"
	}
	return nil
}

// arrayField checks that fields[name] is a JSON array (non-empty when
// nonEmpty).
func arrayField(fields map[string]json.RawMessage, name string, nonEmpty bool) *apiError {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf("%s: field required", name), param: name, code: "missing_required_parameter"}
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) != nil {
		return fieldError(name, "must be an array")
	}
	if nonEmpty && len(arr) == 0 {
		return fieldError(name, "must not be empty")
	}
	return nil
}

// promptKeys are the object keys whose string values are prompt text.
var promptKeys = map[string]bool{
	"content": true, "text": true, "input": true, "prompt": true, "system": true,
	"instructions": true, "arguments": true, "parts": true, "contents": true,
	"messages": true, "systemInstruction": true, "system_instruction": true, "suffix": true,
}

// collectText appends the strings of v that are prompt text: strings in
// arrays and under promptKeys, not ids, roles, types or base64 data.
func collectText(v any, text bool, out *[]string) {
	switch x := v.(type) {
	case string:
		if text && x != "" {
			*out = append(*out, x)
		}
	case []any:
		for _, e := range x {
			collectText(e, text, out)
		}
	case map[string]any:
		for k, e := range x {
			collectText(e, promptKeys[k], out)
		}
	}
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func missing(api API, name string) *apiError {
	msg := fmt.Sprintf("Missing required parameter: '%s'.", name)
	switch api {
	case APIAnthropic:
		msg = name + ": Field required"
	case APIGemini:
		msg = "* GenerateContentRequest." + name + ": " + name + " is not specified"
	}
	return &apiError{status: http.StatusBadRequest, msg: msg, param: name, code: "missing_required_parameter"}
}

func fieldError(name, what string) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf("Invalid value for '%s': %s.", name, what), param: name, code: "invalid_value"}
}

// jsonError turns a decoding error into a 400 that says where the JSON
// went wrong.
func jsonError(err error) *apiError {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	msg := "We could not parse the JSON body of your request: " + err.Error()
	switch {
	case errors.As(err, &se):
		msg = fmt.Sprintf("We could not parse the JSON body of your request: %s (at byte %d).", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		msg = "We could not parse the JSON body of your request: the body must be a JSON object, not " + te.Value + "."
	}
	return &apiError{status: http.StatusBadRequest, msg: msg, code: "invalid_json"}
}
