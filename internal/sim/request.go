package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// parseRequest reads body for the API of u. pathModel is the model the
// URL names: a target path's (fromTarget: the body names neither the model
// nor streaming) or a kind's deployment (the body's model is not read).
// Only what selects a profile or shapes the response is kept; the prompt's
// text is collected for the input-token count and nothing else (it never
// changes the timing). Errors are 400s in the API's words.
func parseRequest(u *Unit, body []byte, pathModel string, fromTarget bool) (Request, *Error) {
	var req Request
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
	b := Body{fields: fields, u: u}
	var e *Error
	if fromTarget {
		req.Model = pathModel
	} else {
		if req.Model, e = b.Str("model"); e != nil {
			return req, e
		}
		if pathModel != "" {
			// A deployment URL names the model; the body's, if any, is
			// not read.
			req.Model = pathModel
		}
		if req.Model == "" {
			return req, b.Missing("model")
		}
		if req.Stream, e = b.Bool("stream"); e != nil {
			return req, e
		}
	}
	promptFields, e := u.Read(b, &req)
	if e != nil {
		return req, e
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

// ReadEmbeddings reads an embeddings request's input (a string, strings,
// or token arrays), dimensions and encoding_format into req.
func ReadEmbeddings(b Body, req *Request) *Error {
	if e := b.Required("input"); e != nil {
		return e
	}
	return req.parseEmbeddings(b.fields)
}

func (req *Request) parseEmbeddings(fields map[string]json.RawMessage) *Error {
	raw := fields["input"]
	var one string
	var many []string
	switch {
	case json.Unmarshal(raw, &one) == nil:
		req.EmbedInputs = []string{one}
	case json.Unmarshal(raw, &many) == nil:
		if len(many) == 0 {
			return fieldError("input", "must not be an empty array")
		}
		req.EmbedInputs = many
	default:
		// Token arrays ([1,2,3] or [[1,2],[3]]) are allowed by OpenAI;
		// each array is one input.
		var toks [][]int
		var flat []int
		switch {
		case json.Unmarshal(raw, &flat) == nil && len(flat) > 0:
			req.EmbedInputs = []string{string(raw)}
		case json.Unmarshal(raw, &toks) == nil && len(toks) > 0:
			for _, t := range toks {
				b, _ := json.Marshal(t)
				req.EmbedInputs = append(req.EmbedInputs, string(b))
			}
		default:
			return fieldError("input", "must be a string, an array of strings, or an array of token arrays")
		}
	}
	if raw, ok := fields["dimensions"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &req.Dimensions) != nil || req.Dimensions < 1 || req.Dimensions > 8192 {
			return fieldError("dimensions", "must be an integer from 1 to 8192")
		}
	}
	if raw, ok := fields["encoding_format"]; ok && !isNull(raw) {
		var f string
		if json.Unmarshal(raw, &f) != nil || (f != "float" && f != "base64") {
			return fieldError("encoding_format", `must be "float" or "base64"`)
		}
		req.Base64 = f == "base64"
	}
	return nil
}

// arrayField checks that fields[name] is a JSON array (non-empty when
// nonEmpty).
func arrayField(fields map[string]json.RawMessage, name string, nonEmpty bool) *Error {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return &Error{status: http.StatusBadRequest, msg: fmt.Sprintf("%s: field required", name), param: name, code: "missing_required_parameter"}
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

func fieldError(name, what string) *Error {
	return &Error{status: http.StatusBadRequest, msg: fmt.Sprintf("Invalid value for '%s': %s.", name, what), param: name, code: "invalid_value"}
}

// jsonError turns a decoding error into a 400 that says where the JSON
// went wrong.
func jsonError(err error) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	msg := "We could not parse the JSON body of your request: " + err.Error()
	switch {
	case errors.As(err, &se):
		msg = fmt.Sprintf("We could not parse the JSON body of your request: %s (at byte %d).", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.As(err, &te):
		msg = "We could not parse the JSON body of your request: the body must be a JSON object, not " + te.Value + "."
	}
	return &Error{status: http.StatusBadRequest, msg: msg, code: "invalid_json"}
}
