package openai

import (
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
)

func TestErrorBody(t *testing.T) {
	for _, tt := range []struct {
		e    protocol.ErrorResponse
		want string
	}{
		{protocol.ErrorResponse{Status: 400, Message: "bad"}, `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`},
		{protocol.ErrorResponse{Status: 404, Message: "no"}, `{"error":{"message":"no","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
		{protocol.ErrorResponse{Status: 504, Message: "late", Type: "timeout_error"}, `{"error":{"message":"late","type":"timeout_error","param":null,"code":"timeout"}}`},
		{protocol.ErrorResponse{Status: 400, Message: "m", Param: "messages", Code: "missing_required_parameter"}, `{"error":{"message":"m","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}`},
	} {
		if got := string(ErrorBody(tt.e)); got != tt.want {
			t.Errorf("ErrorBody(%+v) =\n%s\nwant\n%s", tt.e, got, tt.want)
		}
	}
}
