package protocol

import "testing"

func TestErrorBody(t *testing.T) {
	tests := []struct {
		f    ErrorFamily
		e    ErrorResponse
		want string
	}{
		{FamilyOpenAI, ErrorResponse{Status: 400, Message: "bad"}, `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`},
		{FamilyOpenAI, ErrorResponse{Status: 404, Message: "no"}, `{"error":{"message":"no","type":"invalid_request_error","param":null,"code":"model_not_found"}}`},
		{FamilyOpenAI, ErrorResponse{Status: 504, Message: "late", Type: "timeout_error"}, `{"error":{"message":"late","type":"timeout_error","param":null,"code":"timeout"}}`},
		{FamilyOpenAI, ErrorResponse{Status: 400, Message: "m", Param: "messages", Code: "missing_required_parameter"}, `{"error":{"message":"m","type":"invalid_request_error","param":"messages","code":"missing_required_parameter"}}`},
		{FamilyAnthropic, ErrorResponse{Status: 401, Message: "key"}, `{"type":"error","error":{"type":"authentication_error","message":"key"}}`},
		{FamilyAnthropic, ErrorResponse{Status: 529, Message: "busy"}, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
		{FamilyGemini, ErrorResponse{Status: 429, Message: "slow down"}, `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}`},
		{FamilyGemini, ErrorResponse{Status: 408, Message: "body"}, `{"error":{"code":408,"message":"body","status":"DEADLINE_EXCEEDED"}}`},
	}
	for _, tt := range tests {
		if got := string(ErrorBody(tt.f, tt.e)); got != tt.want {
			t.Errorf("ErrorBody(%d, %+v) =\n%s\nwant\n%s", tt.f, tt.e, got, tt.want)
		}
	}
}
