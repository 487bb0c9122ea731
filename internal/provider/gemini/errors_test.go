package gemini

import (
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
)

func TestErrorBody(t *testing.T) {
	for _, tt := range []struct {
		e    protocol.ErrorResponse
		want string
	}{
		{protocol.ErrorResponse{Status: 429, Message: "slow down"}, `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`},
		{protocol.ErrorResponse{Status: 408, Message: "body"}, `{"error":{"code":408,"message":"body","status":"DEADLINE_EXCEEDED"}}`},
	} {
		if got := string(ErrorBody(tt.e)); got != tt.want {
			t.Errorf("ErrorBody(%+v) =\n%s\nwant\n%s", tt.e, got, tt.want)
		}
	}
}
