package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/tokens"
)

// Tolerances for real-time checks over loopback: nothing may arrive early
// (beyond clock granularity between the client's and the server's origin),
// and lateness is bounded generously: the tests run beside other packages'
// tests on a shared 2-core machine, where BenchmarkTimerFloor1000 has seen
// bare runtime timers wake tens of milliseconds late. The simulator's own
// punctuality is measured by BenchmarkSchedule1000Streams, not here.
const (
	early = 2 * time.Millisecond
	late  = 100 * time.Millisecond
)

func TestTextIsWholeTokens(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		for _, n := range []int{1, 2, 3, 7, 40, 118, 196, 500} {
			pieces := wordTokens(seed, streamText, n)
			if len(pieces) != n {
				t.Fatalf("seed %d: %d pieces, want %d", seed, len(pieces), n)
			}
			text := strings.Join(pieces, "")
			if got := tokens.Count(text); got != n {
				t.Fatalf("seed %d n %d: tokens.Count = %d: %q", seed, n, got, text)
			}
			for i, p := range pieces {
				if strings.TrimSpace(p) == "" {
					t.Fatalf("seed %d: piece %d is whitespace only", seed, i)
				}
			}
		}
	}
	// Every built-in profile reports exactly its configured counts, and the
	// count is the tokenizer's over the text it sends.
	for name, p := range Builtin() {
		c := generate(p)
		if c.visibleTokens != p.VisibleTokens || tokens.Count(c.visibleText) != p.VisibleTokens {
			t.Errorf("%s: visible %d (text counts %d), want %d", name, c.visibleTokens, tokens.Count(c.visibleText), p.VisibleTokens)
		}
		if c.reasoningTokens != p.ReasoningTokens {
			t.Errorf("%s: reasoning %d, want %d", name, c.reasoningTokens, p.ReasoningTokens)
		}
		if p.ToolMs != nil && (c.toolTokens == 0 || tokens.Count(c.toolArgs) != c.toolTokens) {
			t.Errorf("%s: tool tokens %d, args %q count %d", name, c.toolTokens, c.toolArgs, tokens.Count(c.toolArgs))
		}
	}
}

// SPEC.md §4's table, for a client that talks to the simulator directly.
var traceTable = []struct {
	name                                         string
	headers, firstResponse, firstText, totalTime float64 // ms
	tps                                          float64
}{
	{"trace-a", 6100, 6350, 6400, 9200, 42},
	{"trace-b", 240, 2900, 8700, 10200, 55},
	{"trace-c", 260, 420, 430, 20430, 9.8},
}

func TestTraceSchedules(t *testing.T) {
	b := Builtin()
	for _, tr := range traceTable {
		t.Run(tr.name, func(t *testing.T) {
			s, err := b[tr.name].Schedule()
			if err != nil {
				t.Fatal(err)
			}
			const tol = time.Millisecond
			msd := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
			near(t, "headers", s.Headers, msd(tr.headers), 0, 0)
			near(t, "first event", offset(s.FirstEvent), msd(tr.headers), 0, tol) // right after the headers
			near(t, "first response", offset(s.FirstResponse), msd(tr.firstResponse), 0, tol)
			near(t, "first text", offset(s.FirstText), msd(tr.firstText), 0, tol)
			near(t, "end", offset(s.End), msd(tr.totalTime), 0, tol)
			tps, ok := s.TPS.Get()
			if !ok || math.Round(tps) != math.Round(tr.tps) && math.Abs(tps-tr.tps) > 0.05 {
				t.Errorf("TPS = %v, want %v (as the table rounds it)", s.TPS, tr.tps)
			}
			if s.Visible != b[tr.name].VisibleTokens {
				t.Errorf("visible = %d, want %d", s.Visible, b[tr.name].VisibleTokens)
			}
		})
	}
	// trace-b's first response is a tool call, not text or reasoning.
	s, _ := b["trace-b"].Schedule()
	for _, st := range s.Steps {
		if st.Kind == "tool" || st.Kind == "text" || st.Kind == "reasoning" {
			if st.Kind != "tool" {
				t.Errorf("trace-b: first content is %s, want tool", st.Kind)
			}
			break
		}
	}
	if s.Heartbeats == 0 {
		t.Error("trace-b: no heartbeats between the metadata event and the tool call")
	}
}

// TestTraceRealTime runs a copy of each trace scaled to 1/10 over real
// HTTP in every protocol and checks that a client sees the scaled table.
//
// Its sixteen streams run at once, so on a loaded machine each mark waits
// behind many runnable goroutines, and a chain of such waits can outlast
// twice the slip one watcher saw; each stream is measured again (a bounded
// number of times) before its marks count as missed. Nothing may come
// early in any attempt.
func TestTraceRealTime(t *testing.T) {
	const f = 0.1
	profiles := map[string]Profile{}
	for _, tr := range traceTable {
		profiles[tr.name] = Builtin()[tr.name].Scale(f)
	}
	srv := testServer(t, Options{Profiles: profiles})
	for _, tr := range traceTable {
		for _, api := range []API{APIChat, APIResponses, APIAnthropic, APIGemini} {
			t.Run(tr.name+"/"+string(api), func(t *testing.T) {
				t.Parallel()
				s, err := profiles[tr.name].Schedule()
				if err != nil {
					t.Fatal(err)
				}
				testenv.Timed(t, func(t testing.TB) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					o := do(t, requestFor(ctx, srv.URL, api, tr.name, true, nil), api)
					if o.readErr != nil || o.status != 200 || !o.terminal {
						t.Fatalf("status %d, err %v, terminal %v", o.status, o.readErr, o.terminal)
					}
					near(t, "headers", o.headers, s.Headers, early, late)
					near(t, "first event", o.firstEvent, offset(s.FirstEvent), early, late)
					near(t, "first response", o.firstResponse, offset(s.FirstResponse), early, late)
					near(t, "first text", o.firstText, offset(s.FirstText), early, late)
					near(t, "end", o.end, offset(s.End), early, late)
					// TPS is the visible tokens over (end − first text), both
					// checked above; TestTraceSchedules checks it exactly.
					if n := tokens.Count(o.text.String()); n != s.Visible {
						t.Errorf("visible tokens = %d, want %d", n, s.Visible)
					}
					t.Logf("measured TPS (unscaled) %.2f", float64(s.Visible)/(o.end-o.firstText).Seconds()*f)
				})
			})
		}
	}
}

// mixed has every part: reasoning, a tool call and text, quickly.
var mixed = Profile{
	HeadersMs: 20, FirstEventMs: 30, ReasoningMs: Ms(50), ReasoningTokens: 12,
	ToolMs: Ms(100), TextMs: Ms(150), VisibleTokens: 30, TPS: 300, TokensPerEvent: 2, Seed: 7,
}

func TestProtocolsStreaming(t *testing.T) {
	srv := testServer(t, Options{Profiles: map[string]Profile{"mixed": mixed}})
	sched, err := mixed.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	c := generate(mixed)
	for _, api := range allAPIs {
		t.Run(string(api), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			o := do(t, requestFor(ctx, srv.URL, api, "mixed", true, map[string]any{"stream_options": map[string]any{"include_usage": true}}), api)
			if o.status != 200 || o.readErr != nil {
				t.Fatalf("status %d err %v", o.status, o.readErr)
			}
			if !o.terminal || o.streamError {
				t.Fatalf("terminal %v, error %v", o.terminal, o.streamError)
			}
			if got := o.text.String(); got != c.visibleText {
				t.Errorf("text = %q, want %q", got, c.visibleText)
			}
			if tokens.Count(o.text.String()) != mixed.VisibleTokens {
				t.Errorf("visible text counts %d tokens, want %d", tokens.Count(o.text.String()), mixed.VisibleTokens)
			}
			near(t, "headers", o.headers, sched.Headers, early, late)
			near(t, "first event", o.firstEvent, offset(sched.FirstEvent), early, late)
			near(t, "first text", o.firstText, offset(sched.FirstText), early, late)
			near(t, "end", o.end, offset(sched.End), early, late)
			if !o.hasUsage || o.usageIn == 0 {
				t.Fatalf("usage missing (in %d)", o.usageIn)
			}
			if api == APICompletions {
				// The legacy API has no reasoning or tools.
				near(t, "first response", o.firstResponse, offset(sched.FirstText), early, late)
				if o.usageOut != mixed.VisibleTokens || o.reasoning.Len()+o.toolArgs.Len() > 0 {
					t.Errorf("completions: output %d, reasoning %q, tool %q", o.usageOut, o.reasoning.String(), o.toolArgs.String())
				}
				return
			}
			near(t, "first response", o.firstResponse, offset(sched.FirstResponse), early, late)
			if got := o.reasoning.String(); got != c.reasoningText {
				t.Errorf("reasoning = %q, want %q", got, c.reasoningText)
			}
			var args, want any
			json.Unmarshal([]byte(o.toolArgs.String()), &args)
			json.Unmarshal([]byte(c.toolArgs), &want)
			if fmt.Sprint(args) != fmt.Sprint(want) {
				t.Errorf("tool args = %q, want %q", o.toolArgs.String(), c.toolArgs)
			}
			if wantOut := c.visibleTokens + c.reasoningTokens + c.toolTokens; o.usageOut != wantOut {
				t.Errorf("output tokens = %d, want %d (visible %d + reasoning %d + tool %d)", o.usageOut, wantOut, c.visibleTokens, c.reasoningTokens, c.toolTokens)
			}
			if api != APIAnthropic && o.usageReasoning != mixed.ReasoningTokens {
				t.Errorf("reasoning tokens = %d, want %d", o.usageReasoning, mixed.ReasoningTokens)
			}
			checkWire(t, api, o)
		})
	}
}

// checkWire checks the protocol details the fixtures show.
func checkWire(t *testing.T, api API, o *observed) {
	t.Helper()
	raw := string(o.raw)
	types := []string{}
	for _, ev := range o.events {
		types = append(types, ev.typ)
	}
	seq := strings.Join(types, " ")
	switch api {
	case APIChat:
		first := o.events[0].data
		if !strings.Contains(first, `"delta":{"role":"assistant","content":"","refusal":null}`) {
			t.Errorf("first chunk is not the role chunk: %s", first)
		}
		if !strings.Contains(raw, `"tool_calls":[{"index":0,"id":"call_`) || !strings.Contains(raw, `"arguments":""}`) {
			t.Error("no tool_calls header chunk with empty arguments")
		}
		n := len(o.events)
		if o.events[n-1].data != "[DONE]" || !strings.Contains(o.events[n-2].data, `"choices":[],"usage":{`) ||
			!strings.Contains(o.events[n-3].data, `"finish_reason":"tool_calls"`) {
			t.Errorf("stream does not end finish chunk, usage chunk, [DONE]: %s | %s | %s", o.events[n-3].data, o.events[n-2].data, o.events[n-1].data)
		}
	case APIResponses:
		for _, want := range []string{
			"response.created response.in_progress response.output_item.added response.reasoning_summary_part.added response.reasoning_summary_text.delta",
			"response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done response.output_item.added response.function_call_arguments.delta",
			"response.function_call_arguments.done response.output_item.done response.output_item.added response.content_part.added response.output_text.delta",
			"response.output_text.done response.content_part.done response.output_item.done response.completed",
		} {
			if !strings.Contains(seq, want) {
				t.Errorf("event sequence lacks %q:\n%s", want, seq)
			}
		}
		for i, ev := range o.events {
			if !strings.Contains(ev.data, fmt.Sprintf(`"sequence_number":%d`, i)) || !strings.HasPrefix(ev.data, `{"type":"`+ev.typ+`"`) {
				t.Fatalf("event %d: %s", i, ev.data)
			}
		}
	case APIAnthropic:
		for _, want := range []string{
			"message_start content_block_start ping content_block_delta",
			"content_block_delta content_block_stop content_block_start content_block_delta",
			"content_block_stop message_delta message_stop",
		} {
			if !strings.Contains(seq, want) {
				t.Errorf("event sequence lacks %q:\n%s", want, seq)
			}
		}
		for _, want := range []string{`"signature_delta"`, `"type":"tool_use"`, `"partial_json":""`, `"stop_reason":"tool_use"`} {
			if !strings.Contains(raw, want) {
				t.Errorf("stream lacks %s", want)
			}
		}
	case APIGemini:
		if strings.Count(raw, "\r\n\r\n") != len(o.events) || strings.Contains(strings.ReplaceAll(raw, "\r\n", ""), "\n") {
			t.Error("Gemini events are not CRLF framed")
		}
		if !strings.Contains(raw, `"functionCall":{"name":"get_weather","args":{`) || !strings.Contains(raw, `"thought":true`) ||
			!strings.Contains(o.events[len(o.events)-1].data, `"finishReason":"STOP"`) {
			t.Error("Gemini parts are not as the fixtures show")
		}
	}
}

func TestProtocolsNonStreaming(t *testing.T) {
	srv := testServer(t, Options{Profiles: map[string]Profile{"mixed": mixed}})
	sched, _ := mixed.Schedule()
	c := generate(mixed)
	for _, api := range allAPIs {
		t.Run(string(api), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			o := do(t, requestFor(ctx, srv.URL, api, "mixed", false, nil), api)
			if o.status != 200 || o.readErr != nil {
				t.Fatalf("status %d err %v body %s", o.status, o.readErr, o.body)
			}
			// The whole response comes when the stream would have ended.
			near(t, "headers", o.headers, offset(sched.End), early, late)
			var m map[string]any
			if err := json.Unmarshal(o.body, &m); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, o.body)
			}
			body := string(o.body)
			if !strings.Contains(body, c.visibleText) {
				t.Errorf("body lacks the text: %s", body)
			}
			var want []string
			switch api {
			case APIChat:
				want = []string{`"object":"chat.completion"`, `"finish_reason":"tool_calls"`, `"tool_calls":[{"id":"call_`,
					fmt.Sprintf(`"completion_tokens":%d`, c.outputTokens())}
			case APICompletions:
				want = []string{`"object":"text_completion"`, fmt.Sprintf(`"completion_tokens":%d`, c.visibleTokens)}
			case APIResponses:
				want = []string{`"object":"response"`, `"status":"completed"`, `"type":"reasoning"`, `"type":"function_call"`,
					fmt.Sprintf(`"output_tokens":%d`, c.outputTokens())}
			case APIAnthropic:
				want = []string{`"type":"message"`, `"type":"thinking"`, `"type":"tool_use"`, `"stop_reason":"tool_use"`,
					fmt.Sprintf(`"output_tokens":%d`, c.outputTokens())}
			case APIGemini:
				want = []string{`"finishReason":"STOP"`, `"thought":true`, `"functionCall"`,
					fmt.Sprintf(`"candidatesTokenCount":%d`, c.visibleTokens+c.toolTokens)}
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %s:\n%s", w, body)
				}
			}
		})
	}
}

func TestIncludeUsageOnlyWhenAsked(t *testing.T) {
	srv := testServer(t, Options{})
	for _, api := range []API{APIChat, APICompletions} {
		ctx := context.Background()
		o := do(t, requestFor(ctx, srv.URL, api, "fast", true, nil), api)
		if o.hasUsage || strings.Contains(string(o.raw), `"usage"`) {
			t.Errorf("%s: usage sent without stream_options.include_usage", api)
		}
		if !o.terminal {
			t.Errorf("%s: no [DONE]", api)
		}
		o = do(t, requestFor(ctx, srv.URL, api, "fast", true, map[string]any{"stream_options": map[string]any{"include_usage": true}}), api)
		if !o.hasUsage || o.usageOut != 60 {
			t.Errorf("%s: include_usage: usage %v out %d", api, o.hasUsage, o.usageOut)
		}
	}
}

func TestDeterministicBodies(t *testing.T) {
	srv := testServer(t, Options{Profiles: map[string]Profile{"mixed": mixed, "other": func() Profile { p := mixed; p.Seed = 8; return p }()}})
	for _, api := range allAPIs {
		a := do(t, requestFor(context.Background(), srv.URL, api, "mixed", true, nil), api)
		b := do(t, requestFor(context.Background(), srv.URL, api, "mixed", true, nil), api)
		if len(a.raw) == 0 || string(a.raw) != string(b.raw) {
			t.Errorf("%s: two requests of one profile differ", api)
		}
		c := do(t, requestFor(context.Background(), srv.URL, api, "other", true, nil), api)
		if c.text.String() == a.text.String() {
			t.Errorf("%s: another seed gives the same text", api)
		}
	}
}

func TestPromptDoesNotChangeTiming(t *testing.T) {
	srv := testServer(t, Options{Profiles: map[string]Profile{"mixed": mixed}})
	sched, _ := mixed.Schedule()
	long := strings.Repeat("A much longer prompt with many words in it. ", 2000)
	o := do(t, requestFor(context.Background(), srv.URL, APIChat, "mixed", true, map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": long}}}), APIChat)
	near(t, "first text", o.firstText, offset(sched.FirstText), early, late)
	near(t, "end", o.end, offset(sched.End), early, late)
	o = do(t, requestFor(context.Background(), srv.URL, APIChat, "mixed", false, map[string]any{
		"messages": []any{map[string]any{"role": "user", "content": long}}}), APIChat)
	if want := fmt.Sprintf(`"prompt_tokens":%d`, tokens.Count(long)); !strings.Contains(string(o.body), want) {
		t.Errorf("usage does not count the prompt (%s): %s", want, o.body)
	}
}

// TestHeartbeats: keep-alives are what each provider sends: Anthropic's
// `event: ping`; on OpenAI's APIs only the ": ping" comment a profile asks
// for (an OpenAI-compatible router's); on Gemini never anything but data.
func TestHeartbeats(t *testing.T) {
	p := Profile{HeadersMs: 10, FirstEventMs: 10, HeartbeatEveryMs: 30, TextMs: Ms(200), VisibleTokens: 5, TPS: 100}
	q := p
	q.HeartbeatComments = true
	srv := testServer(t, Options{Profiles: map[string]Profile{"hb": p, "hb-comments": q}})
	for _, api := range allAPIs {
		for _, model := range []string{"hb", "hb-comments"} {
			o := do(t, requestFor(context.Background(), srv.URL, api, model, true, nil), api)
			raw := string(o.raw)
			comments := strings.Count("\n"+raw, "\n: ping")
			switch {
			case api == APIAnthropic:
				// message_start's ping after the first block, plus the keep-alives.
				if n := strings.Count(raw, "event: ping\n"); n < 6 || comments > 0 {
					t.Errorf("anthropic %s: %d pings, %d comments; want ≥ 6 pings and no comment", model, n, comments)
				}
			case api == APIGemini || model == "hb":
				if comments > 0 || strings.Contains("\n"+raw, "\n:") {
					t.Errorf("%s %s: %d ping comments, want nothing but the provider's own events", api, model, comments)
				}
			default:
				// A late tick is a ping fewer: as many as the timers
				// slipped periods meanwhile.
				slip := testenv.Slip(o.end + time.Second)
				if comments < 5-int(2*slip/(30*time.Millisecond)) || comments > 8 {
					t.Errorf("%s %s: %d ping comments, want 5…8 over 10…250 ms every 30 ms (timers ran up to %v late meanwhile)", api, model, comments, slip)
				}
			}
		}
	}
}

func TestJitter(t *testing.T) {
	p := Profile{HeadersMs: 10, TextMs: Ms(20), VisibleTokens: 20, TPS: 200, JitterMs: 15}
	srv := testServer(t, Options{Profiles: map[string]Profile{"j": p}})
	a := do(t, requestFor(context.Background(), srv.URL, APIChat, "j", true, nil), APIChat)
	b := do(t, requestFor(context.Background(), srv.URL, APIChat, "j", true, nil), APIChat)
	if string(a.raw) != string(b.raw) {
		t.Error("jitter changed the bytes")
	}
	// Nothing arrives before its time; everything within the jitter.
	sched, _ := p.Schedule()
	near(t, "first text", a.firstText, offset(sched.FirstText), early, 15*time.Millisecond+late)
	near(t, "end", a.end, offset(sched.End), early, 15*time.Millisecond+late)
	if a.end == b.end && a.firstText == b.firstText && a.headers == b.headers {
		t.Error("two requests had the same timing to the nanosecond despite jitter")
	}
}

func TestCancelIsSeenAtOnce(t *testing.T) {
	infos := make(chan Info, 10)
	srv := testServer(t, Options{OnRequest: func(in Info) { infos <- in }})
	for _, api := range []API{APIChat, APIAnthropic} {
		ctx, cancel := context.WithCancel(context.Background())
		req := requestFor(ctx, srv.URL, api, "trace-c", true, nil)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		if _, err := resp.Body.Read(buf); err != nil { // the stream is under way
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		cancelled := time.Now()
		cancel()
		resp.Body.Close()
		select {
		case in := <-infos:
			if !in.Cancelled || in.Model != "trace-c" || in.API != api {
				t.Fatalf("info = %+v", in)
			}
			if lag := in.CancelledAt.Sub(cancelled); lag > 100*time.Millisecond {
				t.Errorf("%s: the simulator saw the cancel %v after it", api, lag)
			}
			if in.Ended.Sub(in.Received) > 2*time.Second {
				t.Errorf("%s: the handler ran on for %v", api, in.Ended.Sub(in.Received))
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: no OnRequest within 2 s of the cancel", api)
		}
	}
	// Cancel while waiting for the headers.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := http.DefaultTransport.RoundTrip(requestFor(ctx, srv.URL, APIGemini, "trace-a", true, nil))
	if err == nil {
		t.Fatal("no error for a cancelled request")
	}
	select {
	case in := <-infos:
		if !in.Cancelled || in.Status != 0 || in.Ended.Sub(in.Received) > time.Second {
			t.Errorf("cancel before headers: %+v", in)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no OnRequest after a cancel before headers")
	}
}

func TestModelsAndHealth(t *testing.T) {
	srv := testServer(t, Options{})
	get := func(path string, h map[string]string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz", nil); code != 200 || body != "ok\n" {
		t.Errorf("healthz: %d %q", code, body)
	}
	code, body := get("/v1/models", nil)
	var list struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	if json.Unmarshal([]byte(body), &list); code != 200 || list.Object != "list" || len(list.Data) != len(Builtin()) {
		t.Errorf("models: %d %s", code, body)
	}
	if code, body := get("/v1/models", map[string]string{"anthropic-version": "2023-06-01"}); code != 200 || !strings.Contains(body, `"type":"model","id":"error-event"`) {
		t.Errorf("anthropic models: %d %s", code, body)
	}
	if code, body := get("/v1beta/models", nil); code != 200 || !strings.Contains(body, `"name":"models/fast"`) {
		t.Errorf("gemini models: %d %s", code, body)
	}
	if code, body := get("/v1/models/trace-a", nil); code != 200 || !strings.Contains(body, `"id":"trace-a"`) {
		t.Errorf("model: %d %s", code, body)
	}
	if code, body := get("/v1/models/nope", nil); code != 404 || !strings.Contains(body, `"code":"model_not_found"`) {
		t.Errorf("unknown model: %d %s", code, body)
	}
}

func TestEmbeddings(t *testing.T) {
	srv := testServer(t, Options{})
	o := do(t, requestFor(context.Background(), srv.URL, APIEmbeddings, "fast", false, map[string]any{"input": []string{"a b c", "d"}, "dimensions": 8}), APIEmbeddings)
	var r struct {
		Object string
		Data   []struct {
			Index     int
			Embedding []float64
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	if err := json.Unmarshal(o.body, &r); err != nil || o.status != 200 {
		t.Fatalf("%d %v %s", o.status, err, o.body)
	}
	if r.Object != "list" || len(r.Data) != 2 || len(r.Data[0].Embedding) != 8 || r.Usage.PromptTokens != tokens.Count("a b c")+tokens.Count("d") {
		t.Fatalf("embeddings: %s", o.body)
	}
	var norm float64
	for _, f := range r.Data[0].Embedding {
		norm += f * f
	}
	if math.Abs(norm-1) > 1e-3 {
		t.Errorf("vector norm² = %v, want 1", norm)
	}
	o2 := do(t, requestFor(context.Background(), srv.URL, APIEmbeddings, "fast", false, map[string]any{"input": []string{"a b c", "d"}, "dimensions": 8}), APIEmbeddings)
	if string(o.body) != string(o2.body) {
		t.Error("embeddings are not deterministic")
	}
	o3 := do(t, requestFor(context.Background(), srv.URL, APIEmbeddings, "fast", false, map[string]any{"encoding_format": "base64", "dimensions": 4}), APIEmbeddings)
	if !strings.Contains(string(o3.body), `"embedding":"`) {
		t.Errorf("base64 embedding: %s", o3.body)
	}
}

func TestAPIKey(t *testing.T) {
	srv := testServer(t, Options{APIKey: "sk-upstream"})
	for _, api := range []API{APIChat, APIAnthropic, APIGemini} {
		o := do(t, requestFor(context.Background(), srv.URL, api, "fast", true, nil), api)
		if o.status != 401 {
			t.Errorf("%s without key: %d", api, o.status)
		}
		req := requestFor(context.Background(), srv.URL, api, "fast", true, nil)
		switch api {
		case APIAnthropic:
			req.Header.Set("x-api-key", "sk-upstream")
		case APIGemini:
			req.Header.Set("x-goog-api-key", "sk-upstream")
		default:
			req.Header.Set("Authorization", "Bearer sk-upstream")
		}
		if o := do(t, req, api); o.status != 200 || !o.terminal {
			t.Errorf("%s with key: %d", api, o.status)
		}
	}
}
