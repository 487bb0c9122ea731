package protocol

import (
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/sse"
)

// step is one dispatched event and the kinds it must carry.
type step struct {
	typ, data string
	want      Kind
}

// run feeds the steps to a fresh Stream and checks every Result.
func run(t *testing.T, api API, steps ...step) *Stream {
	t.Helper()
	s := NewStream(api)
	for i, st := range steps {
		r := s.Event(&sse.Event{Type: []byte(st.typ), Data: []byte(st.data)})
		if r.Kinds != st.want {
			t.Errorf("event %d %s: kinds %s, want %s", i, st.data, r.Kinds, st.want)
		}
		if want := strings.TrimSpace(st.data) != ""; r.Event != want {
			t.Errorf("event %d: Event = %v, want %v", i, r.Event, want)
		}
		if want := st.want&(Text|Reasoning|Tool) != 0; r.Effective != want {
			t.Errorf("event %d: Effective = %v, want %v", i, r.Effective, want)
		}
		if want := st.want&Text != 0; r.Visible != want {
			t.Errorf("event %d: Visible = %v, want %v", i, r.Visible, want)
		}
		if want := st.want&(Done|Error) != 0; r.Terminal != want {
			t.Errorf("event %d: Terminal = %v, want %v", i, r.Terminal, want)
		}
	}
	return s
}

func TestChatCases(t *testing.T) {
	tests := []struct {
		name     string
		steps    []step
		terminal Terminal
		visible  string
	}{
		{"azure prompt_filter_results with empty choices", []step{
			{"", `{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`, Metadata},
			{"", `{"choices":[{"content_filter_results":{},"delta":{"content":"Hi","role":"assistant"},"finish_reason":null,"index":0}],"created":1,"id":"x","model":"gpt-4o","object":"chat.completion.chunk"}`, Text},
			{"", `{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0}],"id":"x","object":"chat.completion.chunk"}`, Done},
		}, TerminalDone, "Hi"},
		{"[DONE] variants", []step{
			{"", `[DONE]`, Done},
			{"", "[DONE]   ", Done},
			{"", " [DONE]", Done},
			{"", `[DONE]x`, Unknown},
			{"", `[done]`, Unknown},
		}, TerminalDone, ""},
		{"legacy function_call", []step{
			{"", `{"choices":[{"delta":{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":""}},"index":0}]}`, Metadata},
			{"", `{"choices":[{"delta":{"function_call":{"arguments":"{\"city\""}},"index":0}]}`, Tool},
			{"", `{"choices":[{"delta":{},"finish_reason":"function_call","index":0}]}`, Done},
		}, TerminalDone, ""},
		{"refusal is visible text", []step{
			{"", `{"choices":[{"delta":{"role":"assistant","content":null,"refusal":""}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"refusal":"I can't help with that."}}]}`, Text},
		}, TerminalTruncated, "I can't help with that."},
		{"reasoning fields", []step{
			{"", `{"choices":[{"delta":{"reasoning_content":"think"}}]}`, Reasoning},
			{"", `{"choices":[{"delta":{"reasoning":"more"}}]}`, Reasoning},
			{"", `{"choices":[{"delta":{"reasoning":"  "}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":"step 1","format":"anthropic-claude-v1","index":0}]}}]}`, Reasoning},
			{"", `{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.summary","summary":"sum"}]}}]}`, Reasoning},
			{"", `{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAB"}]}}]}`, Reasoning},
			{"", `{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","text":""}]}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"reasoning":"so","content":"Answer"}}]}`, Text | Reasoning},
		}, TerminalTruncated, "Answer"},
		{"whitespace-only deltas are metadata", []step{
			{"", `{"choices":[{"delta":{"content":" "}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"content":"\n\n\t"}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"content":"\u00a0\u3000"}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"content":""}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"content":"\u0041"}}]}`, Text},
		}, TerminalTruncated, " \n\n\t\u00a0\u3000A"},
		{"invalid JSON is unknown and leaves no trace", []step{
			{"", `{"choices":[{"delta":{"content":"lost"}}]`, Unknown},
			{"", `{"choices":[{"delta":{"content":"lost"}}],}`, Unknown},
			{"", `{"choices":[{"delta":{"content":"lost","finish_reason":"stop"}}]} x`, Unknown},
			{"", `not json`, Unknown},
			{"", `{"foo":1}`, Unknown},
			{"", `"a string"`, Unknown},
			{"", `[1,2]`, Unknown},
		}, TerminalTruncated, ""},
		{"error objects", []step{
			{"", `{"choices":[{"delta":{"content":"par"}}]}`, Text},
			{"", `{"error":{"message":"upstream overloaded","type":"server_error","code":"overloaded"}}`, Error},
			{"", `[DONE]`, Done},
		}, TerminalError, "par"},
		{"vllm error object", []step{
			{"", `{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}`, Error},
		}, TerminalError, ""},
		{"legacy completions", []step{
			{"", `{"id":"cmpl-1","object":"text_completion","created":1,"choices":[{"text":"Once","index":0,"logprobs":null,"finish_reason":null}],"model":"gpt-3.5-turbo-instruct"}`, Text},
			{"", `{"id":"cmpl-1","object":"text_completion","created":1,"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"model":"gpt-3.5-turbo-instruct"}`, Done},
		}, TerminalDone, "Once"},
		{"mistral typed content parts", []step{
			{"", `{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":" by 2 is"}]}]},"finish_reason":null}]}`, Reasoning},
			{"", `{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":" "}]}]}}]}`, Metadata},
			{"", `{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"Four"}]}}]}`, Text},
			{"", `{"choices":[{"index":0,"delta":{"content":[{"text":"x","type":"image_url"}]}}]}`, Metadata},
		}, TerminalTruncated, "Four"},
		{"tool arguments as an object", []step{
			{"", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}}]}`, Metadata},
			{"", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":{"city":"Paris"}}}]},"finish_reason":"tool_calls"}]}`, Tool | Done},
			{"", `{"choices":[{"index":0,"delta":{"function_call":{"name":"g","arguments":{"q":1}}}}]}`, Tool},
		}, TerminalDone, ""},
		{"custom tool input", []step{
			{"", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"custom","custom":{"name":"shell","input":""}}]}}]}`, Metadata},
			{"", `{"choices":[{"delta":{"tool_calls":[{"index":0,"custom":{"input":"ls -la"}}]}}]}`, Tool},
		}, TerminalTruncated, ""},
		{"text with finish reason and usage in one chunk", []step{
			{"", `{"choices":[{"delta":{"content":"end."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`, Text | Done | Metadata},
		}, TerminalDone, "end."},
		{"empty data is a heartbeat", []step{
			{"", ``, Heartbeat},
			{"", "  ", Heartbeat},
		}, TerminalTruncated, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := run(t, OpenAIChat, tt.steps...)
			if got := s.Terminal(); got != tt.terminal {
				t.Errorf("terminal %s, want %s", got, tt.terminal)
			}
			if got := s.VisibleText(); got != tt.visible {
				t.Errorf("visible %q, want %q", got, tt.visible)
			}
		})
	}
}

// TestStringErrors: an in-stream error given as a string ({"error":"…"},
// Hugging Face TGI and other compatible servers) is error in every API;
// its code is error_type (or a sibling type/code), never the message.
func TestStringErrors(t *testing.T) {
	for _, tt := range []struct {
		api       API
		typ, data string
		code      string
	}{
		{OpenAIChat, "", `{"error":"upstream connection reset"}`, "error"},
		{OpenAIChat, "", `{"error":"Request failed during generation: CUDA out of memory","error_type":"generation"}`, "generation"},
		{OpenAIChat, "", `{"error":"bad","type":"invalid_request_error"}`, "invalid_request_error"},
		{OpenAIResponses, "", `{"error":"upstream connection reset"}`, "error"},
		{OpenAIResponses, "", `{"error":"overloaded","error_type":"overloaded"}`, "overloaded"},
		{OpenAIResponses, "", `{"error":{"message":"x","type":"server_error"}}`, "server_error"},
		{OpenAIResponses, "error", `{"type":"error","error":{"type":"invalid_request_error","code":"context_length_exceeded","message":"x"},"sequence_number":0}`, "context_length_exceeded"},
		{Anthropic, "", `{"error":"upstream connection reset"}`, "error"},
		{Anthropic, "", `{"error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error"},
		{Anthropic, "error", `{"type":"error","error":"Overloaded","error_type":"overloaded"}`, "overloaded"},
		{Gemini, "", `{"error":"upstream connection reset"}`, "error"},
		{Gemini, "", `{"error":"x","error_type":"validation"}`, "validation"},
	} {
		s := run(t, tt.api, step{tt.typ, tt.data, Error})
		if s.Terminal() != TerminalError || s.ErrorCode() != tt.code {
			t.Errorf("%s %s: terminal %s code %q, want error %q", tt.api, tt.data, s.Terminal(), s.ErrorCode(), tt.code)
		}
	}
	// An empty string or null is no error.
	for _, api := range APIs() {
		for _, data := range []string{`{"error":""}`, `{"error":null}`} {
			if r := NewStream(api).Event(&sse.Event{Data: []byte(data)}); r.Kinds&Error != 0 {
				t.Errorf("%s %s: %s", api, data, r.Kinds)
			}
		}
	}
}

// TestDoneMarkerEveryAPI: `data: [DONE]` ends a stream of any API
// (compatible proxies add it to Responses, Messages and Gemini streams).
func TestDoneMarkerEveryAPI(t *testing.T) {
	for _, tt := range []struct {
		api       API
		typ, text string
	}{
		{OpenAIChat, "", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`},
		{OpenAIResponses, "response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`},
		{Anthropic, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`},
		{Gemini, "", `{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}`},
	} {
		t.Run(string(tt.api), func(t *testing.T) {
			s := run(t, tt.api,
				step{tt.typ, tt.text, Text},
				step{"", ` [DONE] `, Done},
				step{"", `[DONE]x`, Unknown},
			)
			if s.Terminal() != TerminalDone || s.VisibleText() != "Hi" {
				t.Errorf("terminal %s visible %q", s.Terminal(), s.VisibleText())
			}
			if c := s.Counts(); c.Done != 1 || c.Unknown != 1 {
				t.Errorf("counts %+v", c)
			}
		})
	}
}

// TestChatChoices: with n > 1 a chat stream is done when every choice it
// showed has a finish_reason (or at [DONE]), and the finish reason kept is
// choice 0's.
func TestChatChoices(t *testing.T) {
	for _, tt := range []struct {
		name     string
		steps    []step
		terminal Terminal
		finish   string
	}{
		{"choice 1 still streaming when choice 0 finished", []step{
			{"", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}},{"index":1,"delta":{"role":"assistant","content":""}}]}`, Metadata},
			{"", `{"choices":[{"index":1,"delta":{"content":"B"}}]}`, Text},
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, Done},
			{"", `{"choices":[{"index":1,"delta":{"content":"more"},"finish_reason":null}]}`, Text},
		}, TerminalTruncated, "stop"},
		{"every choice finished, choice 0's reason kept", []step{
			{"", `{"choices":[{"index":0,"delta":{"content":"A"}},{"index":1,"delta":{"content":"B"}}]}`, Text},
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, Done},
			{"", `{"choices":[{"index":1,"delta":{},"finish_reason":"length"}]}`, Done},
		}, TerminalDone, "stop"},
		{"choice 1 finishes first", []step{
			{"", `{"choices":[{"index":1,"delta":{"content":"B"},"finish_reason":"length"},{"index":0,"delta":{"content":"A"}}]}`, Text | Done},
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, Done},
		}, TerminalDone, "stop"},
		{"both finish in one chunk", []step{
			{"", `{"choices":[{"index":1,"delta":{},"finish_reason":"length"},{"index":0,"delta":{},"finish_reason":"stop"}]}`, Done},
		}, TerminalDone, "stop"},
		{"an unfinished choice, then [DONE]", []step{
			{"", `{"choices":[{"index":0,"delta":{"content":"A"},"finish_reason":"stop"},{"index":1,"delta":{"content":"B"}}]}`, Text | Done},
			{"", `[DONE]`, Done},
		}, TerminalDone, "stop"},
		{"choices without an index are choice 0", []step{
			{"", `{"choices":[{"delta":{"content":"A"}}]}`, Text},
			{"", `{"choices":[{"delta":{},"finish_reason":"stop"}]}`, Done},
		}, TerminalDone, "stop"},
		{"a malformed chunk shows no choice", []step{
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, Done},
			{"", `{"choices":[{"index":1,"delta":{"content":"B"}}]`, Unknown},
		}, TerminalDone, "stop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := run(t, OpenAIChat, tt.steps...)
			if s.Terminal() != tt.terminal || s.FinishReason() != tt.finish {
				t.Errorf("terminal %s finish %q, want %s %q", s.Terminal(), s.FinishReason(), tt.terminal, tt.finish)
			}
		})
	}
}

// TestFinishReasonText: finish reasons and error codes are recorded
// unescaped, and a key given twice counts with its last value (as
// encoding/json reads it).
func TestFinishReasonText(t *testing.T) {
	for _, tt := range []struct {
		name   string
		api    API
		steps  []step
		finish string
		code   string
	}{
		{"escaped chat finish", OpenAIChat, []step{
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"\u0073top"}]}`, Done}}, "stop", ""},
		{"escaped unknown finish", OpenAIChat, []step{
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":"eos\/x\u00e9"}]}`, Done}}, "eos/xé", ""},
		{"duplicate finish_reason, null last", OpenAIChat, []step{
			{"", `{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop","finish_reason":null}]}`, Text}}, "", ""},
		{"duplicate finish_reason, value last", OpenAIChat, []step{
			{"", `{"choices":[{"index":0,"delta":{},"finish_reason":null,"finish_reason":"length"}]}`, Done}}, "length", ""},
		{"escaped error code", OpenAIChat, []step{
			{"", `{"error":{"message":"x","code":"rate\u005flimit"}}`, Error}}, "", "rate_limit"},
		{"escaped anthropic stop_reason, last one", Anthropic, []step{
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_reason":"end\u005fturn"}}`, Done | Metadata}}, "end_turn", ""},
		{"anthropic stop_reason null last", Anthropic, []step{
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_reason":null}}`, Metadata}}, "", ""},
		{"escaped gemini finishReason, last one", Gemini, []step{
			{"", `{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"OTHER","finishReason":"\u0053TOP"}]}`, Text | Done}}, "STOP", ""},
		{"gemini blockReason, last promptFeedback", Gemini, []step{
			{"", `{"promptFeedback":{"blockReason":"SAFETY"},"promptFeedback":{"blockReason":"OTHER"}}`, Done}}, "OTHER", ""},
		{"escaped responses status", OpenAIResponses, []step{
			{"", `{"type":"response.completed","response":{"status":"c\u006fmpleted"}}`, Done}}, "completed", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := run(t, tt.api, tt.steps...)
			if s.FinishReason() != tt.finish || s.ErrorCode() != tt.code {
				t.Errorf("finish %q code %q, want %q %q", s.FinishReason(), s.ErrorCode(), tt.finish, tt.code)
			}
		})
	}
	info, err := ParseResponse(Anthropic, []byte(`{"type":"message","content":[],"stop_reason":"end\u005fturn","stop_reason":"tool\u005fuse"}`))
	if err != nil || info.FinishReason != "tool_use" {
		t.Errorf("ParseResponse finish %q, %v", info.FinishReason, err)
	}
	// An escaped common reason is interned: recording it does not allocate.
	s := NewStream(OpenAIChat)
	ev := &sse.Event{Data: []byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"\u0073top"}]}`)}
	if n := testing.AllocsPerRun(100, func() { s.Event(ev) }); n != 0 {
		t.Errorf("%v allocations per escaped finish reason", n)
	}
}

func TestChatFinishAndErrorCode(t *testing.T) {
	s := run(t, OpenAIChat,
		step{"", `{"choices":[{"delta":{},"finish_reason":"content_filter"}]}`, Done},
		step{"", `{"error":{"message":"x","type":"server_error","code":null}}`, Error},
	)
	if s.FinishReason() != "content_filter" || s.ErrorCode() != "server_error" {
		t.Errorf("finish %q code %q", s.FinishReason(), s.ErrorCode())
	}
}

func TestChatUsage(t *testing.T) {
	s := NewStream(OpenAIChat)
	ev := func(data string) Result { return s.Event(&sse.Event{Data: []byte(data)}) }
	// Usage on every chunk, cumulative: the last report wins.
	ev(`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`)
	ev(`{"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`)
	if r := ev(`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":7}}}`); !r.UsageOnly || r.Kinds != Metadata {
		t.Errorf("usage-only chunk: %+v", r)
	}
	u := s.Usage()
	if u != (Usage{Input: 5, Output: 9, Reasoning: 7, HasInput: true, HasOutput: true, HasReasoning: true}) {
		t.Errorf("usage %+v", u)
	}
	// Reasoning broken out: visible = output − reasoning.
	if tk := s.Tokens(); tk.Visible != 2 || tk.Source != SourceUsage {
		t.Errorf("tokens %+v", tk)
	}
	// OpenRouter's usage after stop has a choice with an empty delta: not
	// the include_usage chunk a relay strips. It is the last complete
	// report, and replaces the one before whole.
	if r := ev(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":5,"completion_tokens":9}}`); r.UsageOnly {
		t.Errorf("usage with choices reported as usage-only")
	}
	if u := s.Usage(); u != (Usage{Input: 5, Output: 9, HasInput: true, HasOutput: true}) {
		t.Errorf("usage after the last report %+v", u)
	}

	// A later report replaces an earlier one whole: a reasoning count it
	// does not repeat is not kept from the earlier report.
	r := NewStream(OpenAIChat)
	r.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{"content":"Hello"}}],"usage":{"prompt_tokens":3,"completion_tokens":50,"reasoning_tokens":45}}`)})
	r.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{"content":" world"}}],"usage":{"completion_tokens":60}}`)})
	if u := r.Usage(); u != (Usage{Output: 60, HasOutput: true}) {
		t.Errorf("later report mixed with an earlier one: %+v", u)
	}
	// A usage object with no count at all is no report: it keeps the last.
	r.Event(&sse.Event{Data: []byte(`{"choices":[],"usage":{"total_tokens":60}}`)})
	if u := r.Usage(); u != (Usage{Output: 60, HasOutput: true}) {
		t.Errorf("empty report replaced the last: %+v", u)
	}

	// Groq: x_groq.usage when there is no top-level usage.
	g := NewStream(OpenAIChat)
	g.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{},"finish_reason":"stop"}],"x_groq":{"id":"req","usage":{"prompt_tokens":10,"completion_tokens":4}}}`)})
	if u := g.Usage(); u.Input != 10 || u.Output != 4 || u.HasReasoning {
		t.Errorf("groq usage %+v", u)
	}
	// Moonshot (Kimi): usage inside the finishing choice, when the chunk
	// has no top-level usage; a top-level usage wins.
	m := NewStream(OpenAIChat)
	if r := m.Event(&sse.Event{Data: []byte(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":8,"completion_tokens":3,"total_tokens":11}}]}`)}); r.Kinds != Done|Metadata || r.UsageOnly {
		t.Errorf("moonshot choice usage: %+v", r)
	}
	if u := m.Usage(); u.Input != 8 || u.Output != 3 || !u.HasOutput {
		t.Errorf("moonshot usage %+v", u)
	}
	m.Event(&sse.Event{Data: []byte(`{"choices":[{"index":0,"delta":{},"usage":{"prompt_tokens":1,"completion_tokens":1}}],"usage":{"prompt_tokens":8,"completion_tokens":4}}`)})
	if u := m.Usage(); u.Input != 8 || u.Output != 4 {
		t.Errorf("top-level usage beside a choice's: %+v", u)
	}
	m.Event(&sse.Event{Data: []byte(`{"choices":[{"index":0,"delta":{},"usage":{"prompt_tokens":8,"completion_tokens":5}}],"usage":null}`)})
	if u := m.Usage(); u.Output != 5 {
		t.Errorf("choice usage beside usage null: %+v", u)
	}
	if info, err := ParseResponse(OpenAIChat, []byte(`{"object":"chat.completion","choices":[{"index":0,"message":{"content":"Hi"},"finish_reason":"stop","usage":{"prompt_tokens":2,"completion_tokens":1}}]}`)); err != nil || info.Usage.Output != 1 {
		t.Errorf("choice usage in a body: %+v %v", info.Usage, err)
	}
	// usage: null is no report.
	n := NewStream(OpenAIChat)
	if r := n.Event(&sse.Event{Data: []byte(`{"choices":[{"delta":{"content":"x"}}],"usage":null}`)}); r.Kinds != Text || r.UsageOnly {
		t.Errorf("usage null: %+v", r)
	}
	if n.Usage().Any() {
		t.Errorf("usage null reported %+v", n.Usage())
	}
}

// TestUsageCountForms: a count is any JSON number whose value is a
// non-negative integer (up to 2^53); fractions and negatives are no count.
func TestUsageCountForms(t *testing.T) {
	for _, tt := range []struct {
		api   API
		data  string
		usage Usage
	}{
		{OpenAIChat, `{"choices":[],"usage":{"prompt_tokens":3.0,"completion_tokens":1e1,"completion_tokens_details":{"reasoning_tokens":1.5e2}}}`,
			Usage{Input: 3, Output: 10, Reasoning: 150, HasInput: true, HasOutput: true, HasReasoning: true}},
		{OpenAIChat, `{"choices":[],"usage":{"prompt_tokens":2.5,"completion_tokens":-1,"completion_tokens_details":{"reasoning_tokens":1e-1}}}`,
			Usage{}},
		{OpenAIChat, `{"choices":[],"usage":{"prompt_tokens":9007199254740992,"completion_tokens":9007199254740993}}`,
			Usage{Input: 1 << 53, HasInput: true}},
		{OpenAIResponses, `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":4E0,"output_tokens":20.000}}}`,
			Usage{Input: 4, Output: 20, HasInput: true, HasOutput: true}},
		{Anthropic, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4.2e1}}`,
			Usage{Output: 42, HasOutput: true}},
		{Gemini, `{"usageMetadata":{"promptTokenCount":5.0,"candidatesTokenCount":2e0,"thoughtsTokenCount":1e1,"totalTokenCount":17.0}}`,
			Usage{Input: 5, Output: 12, Reasoning: 10, HasInput: true, HasOutput: true, HasReasoning: true}},
	} {
		s := NewStream(tt.api)
		s.Event(&sse.Event{Data: []byte(tt.data)})
		if got := s.Usage(); got != tt.usage {
			t.Errorf("%s %s: usage %+v, want %+v", tt.api, tt.data, got, tt.usage)
		}
	}
}

func TestResponsesCases(t *testing.T) {
	s := run(t, OpenAIResponses,
		step{"response.created", `{"type":"response.created","response":{"id":"r","status":"in_progress","error":null,"usage":null},"sequence_number":0}`, Metadata},
		step{"keepalive", `{"type":"keepalive","sequence_number":1}`, Heartbeat},
		step{"response.output_item.added", `{"type":"response.output_item.added","item":{"id":"rs","type":"reasoning","summary":[]},"output_index":0,"sequence_number":2}`, Metadata},
		step{"response.reasoning_summary_part.added", `{"type":"response.reasoning_summary_part.added","part":{"type":"summary_text","text":""},"sequence_number":3}`, Metadata},
		step{"response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","delta":"**Plan**","sequence_number":4}`, Reasoning},
		step{"response.reasoning_text.delta", `{"type":"response.reasoning_text.delta","delta":"raw thought","sequence_number":5}`, Reasoning},
		step{"response.output_item.added", `{"type":"response.output_item.added","item":{"id":"fc","type":"function_call","arguments":"","call_id":"c","name":"f"},"sequence_number":6}`, Metadata},
		step{"response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","delta":"{\"a\":1}","sequence_number":7}`, Tool},
		step{"response.custom_tool_call_input.delta", `{"type":"response.custom_tool_call_input.delta","delta":"print(1)","sequence_number":8}`, Tool},
		step{"response.mcp_call_arguments.delta", `{"type":"response.mcp_call_arguments.delta","delta":"{}","sequence_number":9}`, Tool},
		step{"response.output_text.delta", `{"type":"response.output_text.delta","delta":" ","sequence_number":10}`, Metadata},
		step{"response.refusal.delta", `{"type":"response.refusal.delta","delta":"No.","sequence_number":11}`, Text},
		// The event type only in the SSE field.
		step{"response.output_text.delta", `{"delta":"Yes","sequence_number":12}`, Text},
		step{"response.output_text.done", `{"type":"response.output_text.done","text":" No.Yes","sequence_number":13}`, Metadata},
		step{"", `{"type":"something.else"}`, Unknown},
		step{"response.incomplete", `{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":8,"output_tokens":64,"output_tokens_details":{"reasoning_tokens":60}}},"sequence_number":14}`, Done | Metadata},
	)
	if s.Terminal() != TerminalDone || s.FinishReason() != "max_output_tokens" {
		t.Errorf("terminal %s finish %q", s.Terminal(), s.FinishReason())
	}
	if u := s.Usage(); u.Input != 8 || u.Output != 64 || u.Reasoning != 60 {
		t.Errorf("usage %+v", u)
	}
	if got := s.VisibleText(); got != " No.Yes" {
		t.Errorf("visible %q", got)
	}
}

// TestResponsesDoneWithoutDeltas covers a server that sends the .done
// events only: they stand in for the missing deltas, once.
func TestResponsesDoneWithoutDeltas(t *testing.T) {
	s := run(t, OpenAIResponses,
		step{"", `{"type":"response.function_call_arguments.done","arguments":"{\"a\":1}","item_id":"fc"}`, Tool},
		step{"", `{"type":"response.output_text.done","text":"Hello"}`, Text},
		step{"", `{"type":"response.output_text.done","text":"Hello again"}`, Metadata},
		step{"", `{"type":"response.function_call_arguments.done","arguments":"{}"}`, Metadata},
	)
	if s.VisibleText() != "Hello" {
		t.Errorf("visible %q", s.VisibleText())
	}
	// The other .done events of text and tool content, each alone.
	for _, tt := range []step{
		{"", `{"type":"response.refusal.done","refusal":"I can't help with that.","item_id":"m"}`, Text},
		{"response.refusal.done", `{"refusal":"No."}`, Text},
		{"", `{"type":"response.custom_tool_call_input.done","input":"ls -la","item_id":"ct"}`, Tool},
		{"", `{"type":"response.mcp_call_arguments.done","arguments":"{\"q\":1}"}`, Tool},
		{"", `{"type":"response.code_interpreter_call_code.done","code":"print(1)"}`, Tool},
		{"", `{"type":"response.custom_tool_call_input.done","input":"  "}`, Metadata},
	} {
		run(t, OpenAIResponses, tt)
	}
	// After deltas they are repeats: metadata.
	run(t, OpenAIResponses,
		step{"", `{"type":"response.refusal.delta","delta":"No."}`, Text},
		step{"", `{"type":"response.refusal.done","refusal":"No."}`, Metadata},
		step{"", `{"type":"response.custom_tool_call_input.delta","delta":"ls"}`, Tool},
		step{"", `{"type":"response.custom_tool_call_input.done","input":"ls"}`, Metadata},
	)
}

func TestResponsesErrors(t *testing.T) {
	s := run(t, OpenAIResponses,
		step{"error", `{"type":"error","code":"ERR_SOMETHING","message":"Something went wrong","param":null,"sequence_number":1}`, Error},
	)
	if s.Terminal() != TerminalError || s.ErrorCode() != "ERR_SOMETHING" {
		t.Errorf("terminal %s code %q", s.Terminal(), s.ErrorCode())
	}
	f := run(t, OpenAIResponses,
		step{"response.output_text.delta", `{"type":"response.output_text.delta","delta":"Hi"}`, Text},
		step{"response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"The model failed"},"usage":null}}`, Error},
	)
	if f.Terminal() != TerminalError || f.ErrorCode() != "server_error" {
		t.Errorf("failed: terminal %s code %q", f.Terminal(), f.ErrorCode())
	}
}

func TestAnthropicCases(t *testing.T) {
	s := run(t, Anthropic,
		step{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":1}}}`, Metadata},
		step{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}}`, Reasoning},
		step{"ping", `{"type": "ping"}`, Heartbeat},
		step{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}`, Metadata},
		step{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"Let me"}}`, Reasoning},
		step{"content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQB"}}`, Metadata},
		step{"content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`, Metadata},
		step{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"\n"}}`, Metadata},
		step{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Done"}}`, Text},
		step{"content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x"}}}`, Metadata},
		step{"content_block_stop", `{"type":"content_block_stop","index":2}`, Metadata},
		step{"content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`, Metadata},
		step{"content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":""}}`, Metadata},
		step{"content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}`, Tool},
		// The type only in the SSE field.
		step{"content_block_stop", `{"index":3}`, Metadata},
		step{"", `{"type":"brand_new_event"}`, Unknown},
		step{"", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"lost"}`, Unknown},
	)
	if got := s.Terminal(); got != TerminalTruncated {
		t.Errorf("terminal %s, want truncated (no message_delta stop_reason, no message_stop)", got)
	}
	// Input is the three disjoint prompt parts; message_start's running
	// output count is not the output.
	if u := s.Usage(); u.Input != 1110 || u.HasOutput || u.HasReasoning {
		t.Errorf("usage %+v", u)
	}
	if got := s.VisibleText(); got != "\nDone" {
		t.Errorf("visible %q", got)
	}
	if tk := s.Tokens(); tk.Source != SourceEstimate || tk.Visible != 2 {
		t.Errorf("tokens %+v", tk)
	}

	e := run(t, Anthropic,
		step{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`, Metadata},
		step{"error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`, Error},
	)
	if e.Terminal() != TerminalError || e.ErrorCode() != "overloaded_error" {
		t.Errorf("error: terminal %s code %q", e.Terminal(), e.ErrorCode())
	}

	// Anthropic splits one report: input in message_start, output in
	// message_delta; both are kept.
	m := run(t, Anthropic,
		step{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":1}}}`, Metadata},
		step{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`, Done | Metadata},
	)
	if u := m.Usage(); u != (Usage{Input: 7, Output: 9, HasInput: true, HasOutput: true}) {
		t.Errorf("anthropic split usage: %+v", u)
	}

	d := run(t, Anthropic,
		step{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":7,"output_tokens":20}}`, Done | Metadata},
	)
	if u := d.Usage(); u.Input != 7 || u.Output != 20 || d.FinishReason() != "max_tokens" || d.Terminal() != TerminalDone {
		t.Errorf("message_delta: usage %+v finish %q", u, d.FinishReason())
	}
}

func TestGeminiCases(t *testing.T) {
	s := run(t, Gemini,
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"text":"   ","thought":true}]}}]}`, Metadata},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","willContinue":true}}]}}]}`, Metadata},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.location","stringValue":"Bos","willContinue":true}],"willContinue":true}}]}}]}`, Tool},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.days","numberValue":3}],"willContinue":true}}]}}]}`, Tool},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{}}]}}]}`, Metadata},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"now"}}]}}]}`, Tool},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"executableCode":{"language":"PYTHON","code":"print(1)"}}]}}]}`, Tool},
		step{"", `{"candidates":[{"content":{"role":"model","parts":[{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"1"}}]}}]}`, Metadata},
		step{"", `{"candidates":[{"content":{"parts":[{"text":"A","thought":false}]}}]}`, Text},
		step{"", `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, Error},
		step{"", `{"candidates":[{"content":{"parts":[{"text":"B"}`, Unknown},
	)
	if s.Terminal() != TerminalError || s.ErrorCode() != "RESOURCE_EXHAUSTED" || s.VisibleText() != "A" {
		t.Errorf("terminal %s code %q visible %q", s.Terminal(), s.ErrorCode(), s.VisibleText())
	}
	// usageMetadata: an absent count is absent, except that a missing
	// candidatesTokenCount beside prompt and total is total − prompt −
	// thoughts (proto3 omits zeros); an empty usageMetadata is no report.
	for _, tt := range []struct {
		name  string
		usage []string // usageMetadata of successive chunks
		want  Usage
	}{
		{"no total: output not reported", []string{`{"promptTokenCount":5}`},
			Usage{Input: 5, HasInput: true}},
		{"candidates derived from the total", []string{`{"promptTokenCount":5}`, `{"promptTokenCount":5,"totalTokenCount":15}`},
			Usage{Input: 5, Output: 10, HasInput: true, HasOutput: true, HasReasoning: true}},
		{"derived beside thoughts and tool-use prompt", []string{`{"promptTokenCount":5,"toolUsePromptTokenCount":3,"thoughtsTokenCount":4,"totalTokenCount":20}`},
			Usage{Input: 8, Output: 12, Reasoning: 4, HasInput: true, HasOutput: true, HasReasoning: true}},
		{"prompt equals total: zero output", []string{`{"promptTokenCount":61,"totalTokenCount":61}`},
			Usage{Input: 61, Output: 0, HasInput: true, HasOutput: true, HasReasoning: true}},
		{"total below prompt + thoughts: not derived", []string{`{"promptTokenCount":5,"thoughtsTokenCount":9,"totalTokenCount":10}`},
			Usage{Input: 5, Reasoning: 9, HasInput: true, HasReasoning: true}},
		{"candidates without thoughts: thoughts 0", []string{`{"promptTokenCount":2,"candidatesTokenCount":7,"totalTokenCount":9}`},
			Usage{Input: 2, Output: 7, HasInput: true, HasOutput: true, HasReasoning: true}},
		{"empty usageMetadata does not replace", []string{`{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7}`, `{}`, `{"promptTokensDetails":[{"modality":"TEXT","tokenCount":5}]}`},
			Usage{Input: 5, Output: 2, HasInput: true, HasOutput: true, HasReasoning: true}},
		{"a later report replaces whole", []string{`{"promptTokenCount":5,"candidatesTokenCount":2,"thoughtsTokenCount":3}`, `{"promptTokenCount":5}`},
			Usage{Input: 5, HasInput: true}},
	} {
		s := NewStream(Gemini)
		for i, u := range tt.usage {
			data := `{"candidates":[{"content":{"parts":[{"text":"x"}]}}],"usageMetadata":` + u + `}`
			if i%2 == 1 {
				data = `{"usageMetadata":` + u + `}`
			}
			s.Event(&sse.Event{Data: []byte(data)})
		}
		if got := s.Usage(); got != tt.want {
			t.Errorf("%s: usage %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if info, err := ParseResponse(Gemini, []byte(`{"candidates":[{"content":{"parts":[{"text":"Paris."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":5}}`)); err != nil ||
		info.Usage != (Usage{Input: 3, Output: 2, HasInput: true, HasOutput: true, HasReasoning: true}) {
		t.Errorf("ParseResponse usage %+v, %v", info.Usage, err)
	}
	if info, err := ParseResponse(Gemini, []byte(`{"candidates":[{"content":{"parts":[{"text":"Paris."}]},"finishReason":"STOP"}],"usageMetadata":{}}`)); err != nil || info.Usage.Any() {
		t.Errorf("ParseResponse empty usageMetadata %+v, %v", info.Usage, err)
	}

	b := run(t, Gemini,
		step{"", `{"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`, Done | Metadata},
	)
	if b.Terminal() != TerminalDone || b.FinishReason() != "SAFETY" {
		t.Errorf("blocked: terminal %s finish %q", b.Terminal(), b.FinishReason())
	}
}

func TestPieces(t *testing.T) {
	in := "\xEF\xBB\xBF: first\n\n: OPENROUTER PROCESSING\n: two\n\ndata:\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\nevent: only\n\nretry: 3000\n\nid: 5\n\n\n\n"
	r := sse.NewReader(strings.NewReader(in), 64)
	s := NewStream(OpenAIChat)
	var got []Kind
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		got = append(got, s.Piece(p).Kinds)
	}
	// The comment lines arrive as one piece (three heartbeats), then the
	// empty-data event, the text event, three skipped blocks (event, retry,
	// id only: valid SSE that dispatches nothing), blank lines.
	want := []Kind{Heartbeat, Heartbeat, Text, 0, 0, 0, 0}
	if len(got) != len(want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("piece %d: %s, want %s", i, got[i], want[i])
		}
	}
	// Three comment lines and one empty-data event are heartbeats; the
	// skipped blocks are not counted at all.
	if c := s.Counts(); c.Heartbeat != 4 || c.Text != 1 || c.Unknown != 0 || c.Metadata != 0 {
		t.Errorf("counts %+v", c)
	}
	// A malformed (too long) block is unknown.
	long := "data: " + strings.Repeat("x", 100) + "\n\n"
	r = sse.NewReader(strings.NewReader(long), 64)
	m := NewStream(OpenAIChat)
	for {
		p, err := r.Next()
		if err != nil {
			break
		}
		if res := m.Piece(p); res.Kinds != Unknown || res.Event {
			t.Errorf("malformed piece: %+v", res)
		}
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		k       Kind
		primary Kind
		str     string
	}{
		{0, 0, "none"},
		{Tool | Done, Tool, "tool+done"},
		{Text | Reasoning | Metadata, Text, "text+reasoning+metadata"},
		{Error | Text, Error, "error+text"},
		{Reasoning | Tool, Tool, "tool+reasoning"},
		{Done | Metadata, Done, "done+metadata"},
		{Heartbeat | Unknown, Heartbeat, "heartbeat+unknown"},
		{Unknown, Unknown, "unknown"},
	}
	for _, tt := range tests {
		if got := tt.k.Primary(); got != tt.primary {
			t.Errorf("%s.Primary() = %s, want %s", tt.k, got, tt.primary)
		}
		if got := tt.k.String(); got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
	}
	if !(Text | Done).Has(Done) || (Text).Has(Done) || Text.Has(0) {
		t.Error("Has")
	}
}

func TestParseAPI(t *testing.T) {
	for _, a := range APIs() {
		if got, err := ParseAPI(string(a)); err != nil || got != a {
			t.Errorf("ParseAPI(%q) = %q, %v", a, got, err)
		}
	}
	if _, err := ParseAPI("openai"); err == nil || !strings.Contains(err.Error(), "openai.chat") {
		t.Errorf("ParseAPI(openai) error %v, want one that lists the names", err)
	}
}

func TestTerminalString(t *testing.T) {
	for term, want := range map[Terminal]string{TerminalDone: "done", TerminalTruncated: "truncated", TerminalError: "error"} {
		if got := term.String(); got != want {
			t.Errorf("%d: %q, want %q", term, got, want)
		}
	}
	if (&Stream{}).Terminal() != TerminalTruncated {
		t.Error("a stream with nothing is not truncated")
	}
}
