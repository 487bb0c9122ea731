package protocol

import (
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/tokens"
)

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name     string
		api      API
		body     string
		kinds    Kind
		finish   string
		usage    Usage
		errCode  string
		visible  int // visible tokens
		source   string
		failWith string // non-empty: ParseResponse must fail with this in the message
	}{
		{name: "chat completion", api: OpenAIChat,
			body:  `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, friend.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14,"completion_tokens_details":{"reasoning_tokens":0}}}`,
			kinds: Text | Done | Metadata, finish: "stop",
			usage:  Usage{Input: 9, Output: 5, Reasoning: 0, HasInput: true, HasOutput: true, HasReasoning: true},
			source: SourceUsage, visible: 5},
		{name: "chat completion with tool calls and reasoning", api: OpenAIChat,
			body:  `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"need weather","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":30}}`,
			kinds: Tool | Reasoning | Done | Metadata, finish: "tool_calls",
			usage:  Usage{Input: 20, Output: 30, HasInput: true, HasOutput: true},
			source: SourceEstimate, visible: 0},
		{name: "legacy completion", api: OpenAIChat,
			body:  `{"id":"cmpl-1","object":"text_completion","choices":[{"text":" and then","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}`,
			kinds: Text | Done | Metadata, finish: "length",
			usage:  Usage{Input: 4, Output: 3, HasInput: true, HasOutput: true},
			source: SourceUsage, visible: 3},
		{name: "embeddings", api: OpenAIChat,
			body:   `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023064255,-0.009327292,1e-3]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
			kinds:  Metadata,
			usage:  Usage{Input: 8, HasInput: true},
			source: SourceEstimate, visible: 0},
		{name: "openai error body", api: OpenAIChat,
			body:  `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			kinds: Error, errCode: "invalid_api_key",
			source: SourceEstimate, visible: 0},
		{name: "responses object", api: OpenAIResponses,
			body: `{"id":"resp_1","object":"response","status":"completed","error":null,"incomplete_details":null,"output":[` +
				`{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Thinking about it"}]},` +
				`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Forty-two.","annotations":[]}]}],` +
				`"usage":{"input_tokens":11,"output_tokens":40,"output_tokens_details":{"reasoning_tokens":36},"total_tokens":51}}`,
			kinds: Reasoning | Text | Done | Metadata, finish: "completed",
			usage:  Usage{Input: 11, Output: 40, Reasoning: 36, HasInput: true, HasOutput: true, HasReasoning: true},
			source: SourceUsage, visible: 4},
		{name: "responses function call, incomplete", api: OpenAIResponses,
			body:  `{"object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"function_call","name":"f","call_id":"c","arguments":"{\"x\":"}],"usage":{"input_tokens":3,"output_tokens":16}}`,
			kinds: Tool | Done | Metadata, finish: "max_output_tokens",
			usage:  Usage{Input: 3, Output: 16, HasInput: true, HasOutput: true},
			source: SourceEstimate, visible: 0},
		{name: "responses refusal", api: OpenAIResponses,
			body:  `{"object":"response","status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"I can't."}]}]}`,
			kinds: Text | Done, finish: "completed",
			source: SourceEstimate, visible: tokens.Count("I can't.")},
		{name: "responses failed", api: OpenAIResponses,
			body:  `{"object":"response","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`,
			kinds: Error, finish: "failed", errCode: "server_error",
			source: SourceEstimate, visible: 0},
		{name: "responses error body", api: OpenAIResponses,
			body:  `{"error":{"message":"No such model","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			kinds: Error, errCode: "model_not_found",
			source: SourceEstimate, visible: 0},
		{name: "anthropic message", api: Anthropic,
			body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
				`{"type":"thinking","thinking":"Simple sum.","signature":"Eq"},{"type":"text","text":"It is 4."},` +
				`{"type":"tool_use","id":"toolu_1","name":"calc","input":{"expr":"2+2"}}],` +
				`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":44}}`,
			kinds: Reasoning | Text | Tool | Done | Metadata, finish: "tool_use",
			usage:  Usage{Input: 25, Output: 44, HasInput: true, HasOutput: true},
			source: SourceEstimate, visible: tokens.Count("It is 4.")},
		// No visible text: 0 visible tokens, though the usage counts the
		// call's 2 tokens.
		{name: "anthropic tool call without input is not an action", api: Anthropic,
			body:  `{"type":"message","content":[{"type":"tool_use","id":"t","name":"now","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2}}`,
			kinds: Done | Metadata, finish: "tool_use",
			usage:  Usage{Input: 1, Output: 2, HasInput: true, HasOutput: true},
			source: SourceUsage, visible: 0},
		{name: "anthropic error", api: Anthropic,
			body:  `{"type":"error","error":{"type":"not_found_error","message":"model: nope"},"request_id":"req_1"}`,
			kinds: Error, errCode: "not_found_error",
			source: SourceEstimate, visible: 0},
		{name: "gemini response", api: Gemini,
			body:  `{"candidates":[{"content":{"parts":[{"text":"Let me think","thought":true},{"text":"Paris."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":2,"thoughtsTokenCount":30,"totalTokenCount":39},"modelVersion":"gemini-2.5-flash"}`,
			kinds: Reasoning | Text | Done | Metadata, finish: "STOP",
			usage:  Usage{Input: 7, Output: 32, Reasoning: 30, HasInput: true, HasOutput: true, HasReasoning: true},
			source: SourceUsage, visible: 2},
		{name: "gemini error", api: Gemini,
			body:  `{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}`,
			kinds: Error, errCode: "INVALID_ARGUMENT",
			source: SourceEstimate, visible: 0},
		{name: "string error body", api: OpenAIChat, body: `{"error":"Model is overloaded","error_type":"overloaded"}`,
			kinds: Error, errCode: "overloaded", source: SourceEstimate, visible: 0},
		{name: "string error body, responses", api: OpenAIResponses, body: `{"error":"upstream connection reset"}`,
			kinds: Error, errCode: "error", source: SourceEstimate, visible: 0},
		{name: "string error body, anthropic", api: Anthropic, body: `{"type":"error","error":"Overloaded"}`,
			kinds: Error, errCode: "error", source: SourceEstimate, visible: 0},
		{name: "string error body without a type, anthropic", api: Anthropic, body: `{"error":"bad gateway","error_type":"upstream"}`,
			kinds: Error, errCode: "upstream", source: SourceEstimate, visible: 0},
		{name: "string error body, gemini", api: Gemini, body: `{"error":"Model is overloaded"}`,
			kinds: Error, errCode: "error", source: SourceEstimate, visible: 0},
		{name: "invalid JSON", api: OpenAIChat, body: `{"choices":[`, failWith: "not valid JSON"},
		{name: "a stream's end marker is not a body", api: OpenAIChat, body: `[DONE]`, failWith: "not valid JSON"},
		{name: "empty body", api: Gemini, body: ``, failWith: "not valid JSON"},
		{name: "another API's body", api: Gemini, body: `{"type":"message","content":[]}`, failWith: "not a gemini response"},
		{name: "an empty object is not a Responses body", api: OpenAIResponses, body: `{}`, failWith: "not a openai.responses response"},
		{name: "a chat completion is not a Responses body", api: OpenAIResponses,
			body:     `{"object":"chat.completion","choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			failWith: "not a openai.responses response"},
		{name: "a usage alone is not a Responses body", api: OpenAIResponses, body: `{"usage":{"input_tokens":1},"status":"completed","error":null}`, failWith: "not a openai.responses response"},
		{name: "responses output without the object name", api: OpenAIResponses,
			body:  `{"id":"resp_2","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}]}`,
			kinds: Text | Done, finish: "completed",
			source: SourceEstimate, visible: 1},
		{name: "not an object", api: Anthropic, body: `[1]`, failWith: "not valid"},
		{name: "unknown api", api: "openai", body: `{}`, failWith: "unknown api"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := ParseResponse(tt.api, []byte(tt.body))
			if tt.failWith != "" {
				if err == nil || !strings.Contains(err.Error(), tt.failWith) {
					t.Fatalf("error %v, want one with %q", err, tt.failWith)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if info.Kinds != tt.kinds {
				t.Errorf("kinds %s, want %s", info.Kinds, tt.kinds)
			}
			if info.Text != (tt.kinds&Text != 0) || info.Effective != (tt.kinds&(Text|Reasoning|Tool) != 0) || info.Error != (tt.kinds&Error != 0) {
				t.Errorf("flags text %v effective %v error %v", info.Text, info.Effective, info.Error)
			}
			if info.FinishReason != tt.finish || info.ErrorCode != tt.errCode {
				t.Errorf("finish %q code %q, want %q %q", info.FinishReason, info.ErrorCode, tt.finish, tt.errCode)
			}
			if info.Usage != tt.usage {
				t.Errorf("usage %+v, want %+v", info.Usage, tt.usage)
			}
			if info.Tokens.Source != tt.source || info.Tokens.Visible != tt.visible || !info.Tokens.HasVisible {
				t.Errorf("tokens %+v, want visible %d from %s", info.Tokens, tt.visible, tt.source)
			}
		})
	}
}
