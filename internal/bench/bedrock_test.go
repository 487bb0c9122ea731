package bench

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/bench/request"
)

// TestBedrockErrorCodes: Bedrock's error bodies carry only a message; the
// row's error_code is the exception type of x-amzn-ErrorType, as the AWS
// SDKs read it. An in-stream exception's code is its :exception-type.
func TestBedrockErrorCodes(t *testing.T) {
	srv := simServer(t, nil)
	// Without a key: the simulator answers as Bedrock does.
	o := opts(srv.URL, "fast", 1)
	o.API = "bedrock.converse"
	if r := run(t, o).Requests[0]; r.HTTPStatus != 403 || r.ErrorCode != "MissingAuthenticationTokenException" {
		t.Errorf("no key: HTTP %d, error_code %q", r.HTTPStatus, r.ErrorCode)
	}
	for model, want := range map[string]string{
		"status-429": "ThrottlingException",
		"status-503": "ServiceUnavailableException",
	} {
		o := opts(srv.URL, model, 1)
		o.API, o.Key = "bedrock.converse", "bedrock-api-key"
		r := run(t, o).Requests[0]
		if r.Status != StatusHTTPError || r.ErrorCode != want {
			t.Errorf("%s: status %s (HTTP %d), error_code %q, want %s", model, r.Status, r.HTTPStatus, r.ErrorCode, want)
		}
	}
	o = opts(srv.URL, "error-event", 1)
	o.API, o.Key = "bedrock.converse", "bedrock-api-key"
	if r := run(t, o).Requests[0]; r.Status != StatusResponseError || !strings.HasSuffix(r.ErrorCode, "Exception") {
		t.Errorf("in-stream exception: status %s, error_code %q", r.Status, r.ErrorCode)
	}
}

// TestHeaderErrorCode: a code read from a header is bounded and printable,
// and only an API that reads one gets one.
func TestHeaderErrorCode(t *testing.T) {
	w := &request.Wire{API: "bedrock.converse"}
	h := http.Header{}
	for in, want := range map[string]string{
		"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/": "ThrottlingException",
		"": "", "Bad Type": "", "ValidationException\x01": "",
		strings.Repeat("X", 300): strings.Repeat("X", 128),
	} {
		h.Set("X-Amzn-Errortype", in)
		if got := w.HeaderErrorCode(h); got != want {
			t.Errorf("x-amzn-ErrorType %.40q: %q, want %q", in, got, want)
		}
	}
	h.Set("X-Amzn-Errortype", "ThrottlingException")
	if got := (&request.Wire{API: "openai.chat"}).HeaderErrorCode(h); got != "" {
		t.Errorf("openai.chat read %q from x-amzn-ErrorType", got)
	}
}
