package anthropic

import (
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
)

func TestErrorBody(t *testing.T) {
	for _, tt := range []struct {
		e    protocol.ErrorResponse
		want string
	}{
		{protocol.ErrorResponse{Status: 401, Message: "key"}, `{"type":"error","error":{"type":"authentication_error","message":"key"}}`},
		{protocol.ErrorResponse{Status: 529, Message: "busy"}, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
	} {
		if got := string(ErrorBody(tt.e)); got != tt.want {
			t.Errorf("ErrorBody(%+v) =\n%s\nwant\n%s", tt.e, got, tt.want)
		}
	}
}
