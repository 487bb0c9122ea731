package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/timeline"
)

const clientKey = "test-client-key"

// records collects what the gateway records.
type records struct {
	mu   sync.Mutex
	recs []record.Record
	cond *sync.Cond
}

func newRecords() *records {
	r := &records{}
	r.cond = sync.NewCond(&r.mu)
	return r
}

func (r *records) Record(rec *record.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, *rec)
	r.mu.Unlock()
	r.cond.Broadcast()
}

// get waits for the record of request id.
func (r *records) get(t testing.TB, id string) record.Record {
	t.Helper()
	return r.getWithin(t, id, 10*time.Second)
}

// getWithin waits up to d for the record of request id.
func (r *records) getWithin(t testing.TB, id string, d time.Duration) record.Record {
	t.Helper()
	deadline := time.Now().Add(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for _, rec := range r.recs {
			if rec.RequestID == id {
				return rec
			}
		}
		if time.Now().After(deadline) {
			// Errorf, not Fatalf: tests call this from their own goroutines.
			t.Errorf("no record for %s", id)
			return record.Record{}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		r.mu.Lock()
	}
}

type simInfos struct {
	mu    sync.Mutex
	infos []sim.Info
}

func (s *simInfos) add(i sim.Info) { s.mu.Lock(); s.infos = append(s.infos, i); s.mu.Unlock() }
func (s *simInfos) all() []sim.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sim.Info(nil), s.infos...)
}

// upstream starts a simulator over real loopback HTTP.
func upstream(t testing.TB, profiles map[string]sim.Profile) (*httptest.Server, *simInfos) {
	t.Helper()
	infos := &simInfos{}
	if profiles == nil {
		profiles = sim.Builtin()
	}
	srv := httptest.NewServer(sim.New(sim.Options{Profiles: profiles, OnRequest: infos.add}))
	t.Cleanup(srv.Close)
	return srv, infos
}

var fastTimeouts = route.Timeouts{Headers: 30 * time.Second, FirstOutput: 60 * time.Second, Idle: 30 * time.Second, Total: 2 * time.Minute}

func channel(name, proto, base string, to route.Timeouts) *route.Channel {
	u, _ := url.Parse(base)
	return &route.Channel{Name: name, Protocol: proto, BaseURL: u, Key: "upstream-key-" + name, Weight: 1, Provider: "sim", Region: "local", Timeouts: to}
}

// gateway starts a gateway over real loopback HTTP in front of chans.
func gateway(t *testing.T, chans ...*route.Channel) (*httptest.Server, *records) {
	t.Helper()
	return gatewayWith(t, nil, chans...)
}

// gatewayWith is gateway with the http.Server adjusted by tune.
func gatewayWith(t *testing.T, tune func(*http.Server), chans ...*route.Channel) (*httptest.Server, *records) {
	t.Helper()
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter(chans, 1), Keys: keys, Recorder: recs, UserHashKey: []byte("0123456789abcdef")})
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnContext = relay.ConnContext
	if tune != nil {
		tune(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, recs
}

// allProtocols is one gateway with a simulator channel per protocol.
func allProtocols(t *testing.T, profiles map[string]sim.Profile) (gw *httptest.Server, recs *records, up *httptest.Server, infos *simInfos) {
	up, infos = upstream(t, profiles)
	gw, recs = gateway(t,
		channel("sim-openai", "openai", up.URL, fastTimeouts),
		channel("sim-anthropic", "anthropic", up.URL, fastTimeouts),
		channel("sim-gemini", "gemini", up.URL, fastTimeouts))
	return gw, recs, up, infos
}

// call is one request of a given API to a base URL.
type call struct {
	api    string // chat, completions, responses, anthropic, gemini
	model  string
	stream bool
}

func (c call) request(ctx context.Context, base, key string) *http.Request {
	var path, body string
	switch c.api {
	case "chat":
		path = "/v1/chat/completions"
		body = fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"Say hello."}]}`, c.model, c.stream)
	case "completions":
		path = "/v1/completions"
		body = fmt.Sprintf(`{"model":%q,"stream":%v,"prompt":"Say hello."}`, c.model, c.stream)
	case "responses":
		path = "/v1/responses"
		body = fmt.Sprintf(`{"model":%q,"stream":%v,"input":"Say hello."}`, c.model, c.stream)
	case "anthropic":
		path = "/v1/messages"
		body = fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":256,"messages":[{"role":"user","content":"Say hello."}]}`, c.model, c.stream)
	case "gemini":
		method := "generateContent"
		if c.stream {
			method = "streamGenerateContent?alt=sse"
		}
		path = "/v1beta/models/" + c.model + ":" + method
		body = `{"contents":[{"role":"user","parts":[{"text":"Say hello."}]}]}`
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	switch c.api {
	case "anthropic":
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	case "gemini":
		req.Header.Set("X-Goog-Api-Key", key)
	default:
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// do sends c and returns the response with its whole body; on a transport
// error it marks the test failed and returns an empty response.
func do(t *testing.T, base, key string, c call) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(c.request(ctx, base, key))
	if err != nil {
		// Errorf, not Fatalf: tests call this from their own goroutines.
		t.Errorf("%+v: %v", c, err)
		return &http.Response{Header: http.Header{}}, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Logf("%+v: reading body: %v", c, err)
	}
	return resp, b
}

func ms(o interface{ Ms() (float64, bool) }) (float64, bool) { return o.Ms() }

// near checks a field of rec within 5 % or 50 ms of want, as issue 4 asks.
// Late by more is allowed only as far as this process's timers were seen
// to run late during the request, three times over (the simulator's timer,
// its write and the gateway's read each wait for their turn; twice was
// seen to fall 2 ms short beside stress-ng): on a loaded machine every
// mark comes late alike, never early. The request's span runs from its t0
// (rec.Timestamp) to now, not the mark's value back from now: a trace's
// headers are checked seconds after they came, once its stream has ended
// (TestAzureTimeline's trace-b headers read 626.6 ms beside stress-ng,
// while the last 1.6 s had seen timers only 46 ms late).
func near(t testing.TB, rec record.Record, name string, got interface{ Ms() (float64, bool) }, want float64) {
	t.Helper()
	v, ok := got.Ms()
	if !ok {
		t.Errorf("%s absent, want %.0f", name, want)
		return
	}
	tol := math.Max(0.05*want, 50)
	slip := testenv.Slip(time.Since(rec.Timestamp) + time.Second)
	if late := tol + 3*float64(slip)/float64(time.Millisecond); v < want-tol || v > want+late {
		t.Errorf("%s = %.1f, want %.0f (−%.0f/+%.0f: timers ran up to %v late meanwhile)", name, v, want, tol, late, slip.Round(time.Millisecond))
	}
}

// TestSeedTraces runs SPEC §4's three traces through the gateway.
func TestSeedTraces(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the traces take 20 s of real time")
	}
	gw, recs, _, _ := allProtocols(t, nil)
	type want struct{ headers, response, text, total, tps float64 }
	traces := map[string]want{
		"trace-a": {6100, 6350, 6400, 9200, 42},
		"trace-b": {240, 2900, 8700, 10200, 55},
		"trace-c": {260, 420, 430, 20430, 9.8},
	}
	var wg sync.WaitGroup
	for name, w := range traces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := do(t, gw.URL, clientKey, call{"chat", name, true})
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != record.StatusOK {
				t.Errorf("%s: status %s", name, rec.Status)
			}
			near(t, rec, name+" upstream_headers_ms", rec.UpstreamHeadersMs, w.headers)
			near(t, rec, name+" first_response_ms", rec.FirstResponseMs, w.response)
			near(t, rec, name+" first_text_delta_ms", rec.FirstTextDeltaMs, w.text)
			near(t, rec, name+" total_handler_ms", rec.TotalHandlerMs, w.total)
			tps, ok := rec.VisibleOutputTPS.Get()
			if !ok || math.Abs(tps-w.tps) > 0.05*w.tps {
				t.Errorf("%s visible_output_tps = %v (%v), want %v ± 5%%", name, tps, ok, w.tps)
			}
		}()
	}
	wg.Wait()
}

// TestMilestones checks marks that must be absent, for every protocol.
func TestMilestones(t *testing.T) {
	t.Parallel()
	gw, recs, _, _ := allProtocols(t, nil)
	for _, api := range []string{"chat", "responses", "anthropic", "gemini"} {
		t.Run(api, func(t *testing.T) {
			resp, _ := do(t, gw.URL, clientKey, call{api, "tool-call", true})
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != record.StatusOK || rec.FirstTextDeltaMs.Valid() || !rec.FirstResponseMs.Valid() {
				t.Errorf("tool-call: status %s, first_text_delta_ms %v, first_response_ms %v", rec.Status, rec.FirstTextDeltaMs, rec.FirstResponseMs)
			}
			near(t, rec, "tool-call first_response_ms", rec.FirstResponseMs, 600)
			if rec.VisibleOutputTPS.Valid() {
				t.Errorf("tool-call: visible_output_tps %v, want absent", rec.VisibleOutputTPS)
			}
			if rec.Events.Tool == 0 {
				t.Errorf("tool-call: events %+v", rec.Events)
			}

			resp, _ = do(t, gw.URL, clientKey, call{api, "metadata-only", true})
			rec = recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.FirstResponseMs.Valid() || rec.FirstTextDeltaMs.Valid() || !rec.FirstSSEEventMs.Valid() {
				t.Errorf("metadata-only: first_response_ms %v, first_text_delta_ms %v, first_sse_event_ms %v", rec.FirstResponseMs, rec.FirstTextDeltaMs, rec.FirstSSEEventMs)
			}

			resp, _ = do(t, gw.URL, clientKey, call{api, "fast", true})
			rec = recs.get(t, resp.Header.Get("X-Request-Id"))
			near(t, rec, "fast upstream_headers_ms", rec.UpstreamHeadersMs, 50)
			near(t, rec, "fast first_text_delta_ms", rec.FirstTextDeltaMs, 120)
			near(t, rec, "fast upstream_done_ms", rec.UpstreamDoneMs, 420)
			if rec.Tokens.Visible == nil || *rec.Tokens.Visible != 60 {
				t.Errorf("fast: visible tokens %v (source %s), want 60", rec.Tokens.Visible, rec.Tokens.Source)
			}
			// The relay writes a piece as it reads it: 5 ms, plus what this
			// process's timers were seen to run late during the request
			// (a goroutine descheduled between the read and the write).
			lag, ok := rec.RelayLag().Get()
			if slip := testenv.Slip(time.Since(rec.Timestamp) + time.Second); !ok || lag < 0 || lag > 5*time.Millisecond+slip {
				t.Errorf("fast: relay lag %v %v, want 0…5 ms + %v (timers ran up to that late meanwhile)", lag, ok, slip)
			}
			if rec.Terminal != "done" || rec.Channel == "" || rec.KeyName != "client" || rec.Group != "g" {
				t.Errorf("fast: record %+v", rec)
			}
		})
	}
}

// TestByteExact compares what a client receives through the gateway with
// what it receives from the simulator directly, for every protocol,
// streaming and not, with text, reasoning and tool calls.
func TestByteExact(t *testing.T) {
	t.Parallel()
	profiles := sim.Builtin()
	profiles["quick-reasoning"] = sim.Profile{HeadersMs: 20, FirstEventMs: 20, ReasoningMs: sim.Ms(40), ReasoningTokens: 30, TextMs: sim.Ms(200), VisibleTokens: 40, TPS: 400, Seed: 3}
	profiles["quick-tool"] = sim.Profile{HeadersMs: 20, FirstEventMs: 20, ToolMs: sim.Ms(60), TPS: 400, Seed: 4}
	gw, _, up, _ := allProtocols(t, profiles)
	var cases []call
	for _, api := range []string{"chat", "completions", "responses", "anthropic", "gemini"} {
		for _, stream := range []bool{true, false} {
			for _, model := range []string{"fast", "quick-reasoning", "quick-tool"} {
				if api == "completions" && model != "fast" {
					continue
				}
				cases = append(cases, call{api, model, stream})
			}
		}
	}
	// The cases wait on real time, not on the CPU: run them all at once
	// (t.Parallel would run only GOMAXPROCS of them at a time).
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, direct := do(t, up.URL, "any", c)
			resp, relayed := do(t, gw.URL, clientKey, c)
			if resp.StatusCode != 200 {
				t.Errorf("%+v: status %d: %s", c, resp.StatusCode, relayed)
				return
			}
			if len(direct) == 0 || !bytes.Equal(direct, relayed) {
				t.Errorf("%+v: relayed %d bytes differ from direct %d bytes\nrelayed: %.300q\ndirect:  %.300q", c, len(relayed), len(direct), relayed, direct)
			}
		}()
	}
	wg.Wait()
}

// TestIncludeUsageKept: a client that asks for usage gets the usage chunk.
func TestIncludeUsageKept(t *testing.T) {
	gw, recs, up, _ := allProtocols(t, nil)
	body := `{"model":"fast","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`
	get := func(base, key string) ([]byte, string) {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b, resp.Header.Get("X-Request-Id")
	}
	direct, _ := get(up.URL, "x")
	relayed, id := get(gw.URL, clientKey)
	if !bytes.Equal(direct, relayed) || !bytes.Contains(relayed, []byte(`"prompt_tokens"`)) {
		t.Fatalf("usage chunk not relayed as is:\n%s", relayed)
	}
	if rec := recs.get(t, id); rec.Tokens.Source != record.TokensUsage || rec.Tokens.Output == nil || *rec.Tokens.Output != 60 {
		t.Fatalf("tokens = %+v", rec.Tokens)
	}
}

// TestFaults checks that each fault yields its terminal status.
func TestFaults(t *testing.T) {
	profiles := sim.Builtin()
	profiles["stall-long"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 50, TPS: 200, Fault: "stall_after:10:5000"}
	up, _ := upstream(t, profiles)
	short := fastTimeouts
	short.Idle = 300 * time.Millisecond
	gw, recs := gateway(t, channel("sim-openai", "openai", up.URL, short), channel("sim-anthropic", "anthropic", up.URL, short))
	tests := []struct {
		api, model, status string
		http               int
	}{
		{"chat", "truncate", record.StatusTruncated, 200},
		{"chat", "error-event", record.StatusUpstreamStreamError, 200},
		{"chat", "flaky", record.StatusUpstreamStreamError, 200},
		{"chat", "stall-long", record.StatusIdleTimeout, 200},
		{"chat", "status-503", record.StatusUpstreamHTTPError, 503},
		{"chat", "status-429", record.StatusRateLimited, 429},
		{"anthropic", "truncate", record.StatusTruncated, 200},
		{"anthropic", "stall-long", record.StatusIdleTimeout, 200},
		{"anthropic", "status-503", record.StatusUpstreamHTTPError, 503},
	}
	for _, tt := range tests {
		t.Run(tt.api+"/"+tt.model, func(t *testing.T) {
			t.Parallel()
			resp, body := do(t, gw.URL, clientKey, call{tt.api, tt.model, true})
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != tt.status || resp.StatusCode != tt.http || rec.HTTPStatus != tt.http {
				t.Fatalf("status %s (http %d, recorded %d), want %s (%d); error %q", rec.Status, resp.StatusCode, rec.HTTPStatus, tt.status, tt.http, rec.Error)
			}
			if len(rec.Diagnosis) > 0 {
				t.Fatalf("diagnosis set without rules: %v", rec.Diagnosis)
			}
			switch tt.status {
			case record.StatusIdleTimeout:
				// The stream ended with an in-band error event, and the
				// timing up to the failure is kept.
				if !bytes.Contains(body, []byte("idle_timeout")) && !bytes.Contains(body, []byte("idle")) {
					t.Errorf("no in-band error event at the end: %.200q", body[max(0, len(body)-200):])
				}
				if !rec.FirstTextDeltaMs.Valid() || !rec.UpstreamDoneMs.Valid() {
					t.Errorf("timing lost: %+v", rec.Fields)
				}
				near(t, rec, "idle upstream_done_ms", rec.UpstreamDoneMs, 40+10*5+300)
			case record.StatusUpstreamHTTPError, record.StatusRateLimited:
				if rec.Attempts[0].HTTPStatus != tt.http || !bytes.Contains(body, []byte("error")) {
					t.Errorf("attempts %+v, body %s", rec.Attempts, body)
				}
			}
		})
	}
}

// TestClientCancel: a client hanging up cancels the upstream at once.
func TestClientCancel(t *testing.T) {
	gw, recs, _, infos := allProtocols(t, nil)
	for _, api := range []string{"chat", "anthropic", "gemini"} {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := http.DefaultClient.Do(call{api, "trace-c", true}.request(ctx, gw.URL, clientKey))
		if err != nil {
			t.Fatal(err)
		}
		// Read until the first text arrives, then hang up.
		buf := make([]byte, 4096)
		var seen []byte
		for !bytes.Contains(seen, []byte("text")) && !bytes.Contains(seen, []byte("content")) {
			n, err := resp.Body.Read(buf)
			seen = append(seen, buf[:n]...)
			if err != nil {
				t.Fatal(err)
			}
		}
		hangUp := time.Now()
		cancel()
		resp.Body.Close()
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if rec.Status != record.StatusClientCancelled {
			t.Errorf("%s: status %s, want client_cancelled", api, rec.Status)
		}
		var info sim.Info
		deadline := time.Now().Add(2 * time.Second)
		for info.Model == "" && time.Now().Before(deadline) {
			for _, i := range infos.all() {
				if i.Cancelled && i.Received.After(hangUp.Add(-30*time.Second)) && i.API == sim.API(apiName(api)) {
					info = i
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !info.Cancelled {
			t.Fatalf("%s: simulator never saw the cancel", api)
		}
		// At once: 100 ms, plus twice what this process's timers were seen
		// to run late meanwhile (the gateway's and the simulator's
		// goroutines each wait their turn on a loaded machine).
		if d, slip := info.CancelledAt.Sub(hangUp), testenv.Slip(time.Since(hangUp)+time.Second); d > 100*time.Millisecond+2*slip {
			t.Errorf("%s: simulator saw the cancel %v after the client hung up, want < 100ms + %v (timers ran up to %v late meanwhile)", api, d, 2*slip, slip)
		}
	}
}

func apiName(api string) string {
	switch api {
	case "chat":
		return "openai.chat"
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gemini"
	}
	return api
}

// TestFallback: channel 1 answers 503 or times out on headers; channel 2
// serves. The record keeps both attempts and the client sees channel 2.
func TestFallback(t *testing.T) {
	bad := map[string]sim.Profile{"m": {HeadersMs: 30, TextMs: sim.Ms(40), VisibleTokens: 10, TPS: 100, Fault: "status:503"}}
	slow := map[string]sim.Profile{"m": {HeadersMs: 3000, TextMs: sim.Ms(3010), VisibleTokens: 10, TPS: 100}}
	good := map[string]sim.Profile{"m": {HeadersMs: 20, TextMs: sim.Ms(30), VisibleTokens: 10, TPS: 100, Seed: 7}}
	// Headers at once, then not a byte until 3 s: the first-output timeout
	// fires while nothing has reached the client.
	silent := map[string]sim.Profile{"m": {HeadersMs: 10, FirstEventMs: 3000, TextMs: sim.Ms(3000), VisibleTokens: 10, TPS: 100}}
	goodUp, _ := upstream(t, good)
	for name, first := range map[string]map[string]sim.Profile{"503": bad, "header timeout": slow, "first output timeout": silent} {
		t.Run(name, func(t *testing.T) {
			firstUp, _ := upstream(t, first)
			to := fastTimeouts
			to.Headers = 200 * time.Millisecond
			to.FirstOutput = 300 * time.Millisecond
			c1 := channel("one", "openai", firstUp.URL, to)
			c2 := channel("two", "openai", goodUp.URL, to)
			c2.Priority = 1
			gw, recs := gateway(t, c1, c2)
			resp, body := do(t, gw.URL, clientKey, call{"chat", "m", true})
			_, direct := do(t, goodUp.URL, "x", call{"chat", "m", true})
			if resp.StatusCode != 200 || !bytes.Equal(body, direct) {
				t.Fatalf("client saw %d %q, want channel two's stream", resp.StatusCode, body)
			}
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if len(rec.Attempts) != 2 || rec.Attempts[0].Channel != "one" || rec.Attempts[1].Channel != "two" || rec.Channel != "two" {
				t.Fatalf("attempts %+v, channel %s", rec.Attempts, rec.Channel)
			}
			a0, a1 := rec.Attempts[0], rec.Attempts[1]
			if name == "503" && (a0.Status != record.StatusUpstreamHTTPError || a0.HTTPStatus != 503) {
				t.Errorf("first attempt %+v", a0)
			}
			if name == "header timeout" {
				if a0.Status != record.StatusHeaderTimeout || a0.UpstreamHeadersMs.Valid() {
					t.Errorf("first attempt %+v", a0)
				}
			}
			s0, _ := a0.UpstreamStartMs.Get()
			s1, _ := a1.UpstreamStartMs.Get()
			if !(s1 > s0) || a1.Status != record.StatusOK || !a1.UpstreamHeadersMs.Valid() {
				t.Errorf("attempt timings %+v %+v", a0, a1)
			}
			// Request-level t1/t2 come from the relayed attempt; t3…
			// stay from the request's t0, time lost on attempt one included.
			if rec.UpstreamStartMs != a1.UpstreamStartMs || rec.UpstreamHeadersMs != a1.UpstreamHeadersMs {
				t.Errorf("request t1/t2 %v %v, relayed attempt %v %v", rec.UpstreamStartMs, rec.UpstreamHeadersMs, a1.UpstreamStartMs, a1.UpstreamHeadersMs)
			}
			if ft, _ := rec.FirstTextDeltaMs.Get(); ft < time.Duration(s1) {
				t.Errorf("first text %v before the relayed attempt started", ft)
			}
			if name == "header timeout" {
				near(t, rec, "fallback first_text_delta_ms", rec.FirstTextDeltaMs, 200+30)
			}
			if name == "first output timeout" {
				if a0.Status != record.StatusFirstOutputTimeout || !a0.UpstreamHeadersMs.Valid() {
					t.Errorf("first attempt %+v", a0)
				}
				// The marks are the relayed attempt's, measured from t0.
				near(t, rec, "fallback first_sse_event_ms", rec.FirstSSEEventMs, 300+20)
				near(t, rec, "fallback first_text_delta_ms", rec.FirstTextDeltaMs, 300+30)
				near(t, rec, "fallback upstream_done_ms", rec.UpstreamDoneMs, 300+30+100)
			}
		})
	}
}

// TestBadInput: each bad request gets the protocol's own error format and
// a record.
func TestBadInput(t *testing.T) {
	gw, recs, _, _ := allProtocols(t, nil)
	tests := []struct {
		name, path, body, key, auth string
		code                        int
		status, want                string
	}{
		{"invalid json", "/v1/chat/completions", `{"model":`, clientKey, "bearer", 400, record.StatusBadRequest, `"type":"invalid_request_error"`},
		{"no model", "/v1/chat/completions", `{"messages":[]}`, clientKey, "bearer", 400, record.StatusBadRequest, `no model`},
		{"unknown model", "/v1/chat/completions", `{"model":"nope","stream":true,"messages":[{"role":"user","content":"x"}]}`, clientKey, "bearer", 404, record.StatusUpstreamHTTPError, `"error"`},
		{"no key", "/v1/chat/completions", `{"model":"fast"}`, "", "bearer", 401, record.StatusAuthFailed, `missing API key`},
		{"wrong key", "/v1/messages", `{"model":"fast"}`, "wrong", "x-api-key", 401, record.StatusAuthFailed, `"type":"authentication_error"`},
		{"anthropic invalid json", "/v1/messages", `not json`, clientKey, "x-api-key", 400, record.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error"`},
		{"gemini invalid json", "/v1beta/models/fast:streamGenerateContent?alt=sse", `[`, clientKey, "goog", 400, record.StatusBadRequest, `"status":"INVALID_ARGUMENT"`},
		{"gemini bad method", "/v1beta/models/fast:countEverything", `{}`, clientKey, "goog", 404, record.StatusBadRequest, `"status":"NOT_FOUND"`},
		{"oversized", "/v1/chat/completions", `{"model":"fast","x":"` + strings.Repeat("a", 33<<20) + `"}`, clientKey, "bearer", 413, record.StatusBadRequest, `larger than`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", gw.URL+tt.path, strings.NewReader(tt.body))
			switch tt.auth {
			case "bearer":
				if tt.key != "" {
					req.Header.Set("Authorization", "Bearer "+tt.key)
				}
			case "x-api-key":
				req.Header.Set("X-Api-Key", tt.key)
			case "goog":
				req.Header.Set("X-Goog-Api-Key", tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !bytes.Contains(b, []byte(tt.want)) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, b, tt.code, tt.want)
			}
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			if rec.Status != tt.status || rec.HTTPStatus != tt.code {
				t.Fatalf("record status %s http %d, want %s %d", rec.Status, rec.HTTPStatus, tt.status, tt.code)
			}
			if !rec.TotalHandlerMs.Valid() || !rec.AuthMs.Valid() {
				t.Fatalf("record timing %+v", rec.Fields)
			}
		})
	}
}

// TestNoChannel: a model no channel serves is a no_channel record.
func TestNoChannel(t *testing.T) {
	up, _ := upstream(t, nil)
	c := channel("only-gpt", "openai", up.URL, fastTimeouts)
	c.Models = []string{"gpt-*"}
	gw, recs := gateway(t, c)
	resp, b := do(t, gw.URL, clientKey, call{"chat", "claude-x", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 404 || rec.Status != record.StatusNoChannel || !bytes.Contains(b, []byte("model_not_found")) {
		t.Fatalf("%d %s, record %s", resp.StatusCode, b, rec.Status)
	}
	if rec.UpstreamStartMs.Valid() || len(rec.Attempts) != 0 || !rec.DistributionMs.Valid() {
		t.Fatalf("record %+v", rec)
	}
}

// TestUpstreamSeesChannelKey: the channel's key goes upstream, never the
// client's.
func TestUpstreamSeesChannelKey(t *testing.T) {
	var got http.Header
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	defer up.Close()
	for _, proto := range []string{"openai", "anthropic", "gemini"} {
		gw, _ := gateway(t, channel("c", proto, up.URL, fastTimeouts))
		api := map[string]string{"openai": "chat", "anthropic": "anthropic", "gemini": "gemini"}[proto]
		do(t, gw.URL, clientKey, call{api, "m", false})
		mu.Lock()
		h := got
		mu.Unlock()
		all := fmt.Sprint(h)
		if strings.Contains(all, clientKey) {
			t.Errorf("%s: client key sent upstream: %v", proto, h)
		}
		if !strings.Contains(all, "upstream-key-c") {
			t.Errorf("%s: channel key not sent upstream: %v", proto, h)
		}
	}
}

// TestLargeRequestReachesUpstream: a request whose forwarded headers are
// larger than the transport's write buffer, with a body of a megabyte,
// reaches the upstream whole: the headers as the client sent them, the
// body byte for byte.
func TestLargeRequestReachesUpstream(t *testing.T) {
	type seen struct {
		beta string
		body []byte
	}
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream read: %v", err)
		}
		got <- seen{r.Header.Get("Anthropic-Beta"), b}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`))
	}))
	defer up.Close()
	gw, _ := gateway(t, channel("c", "anthropic", up.URL, fastTimeouts))

	beta := strings.Repeat("feature-2026-12-03,", 300) // 5.7 KB of one header
	prompt := make([]byte, 1<<20)
	for i := range prompt {
		prompt[i] = 'a' + byte(i%26)
	}
	body := []byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"` + string(prompt) + `"}]}`)
	req, _ := http.NewRequest("POST", gw.URL+"/v1/messages", bytes.NewReader(body))
	req.Header.Set("X-Api-Key", clientKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Anthropic-Beta", beta)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	s := <-got
	if s.beta != beta {
		t.Errorf("upstream got an Anthropic-Beta of %d bytes, want the client's %d", len(s.beta), len(beta))
	}
	if !bytes.Equal(s.body, body) {
		t.Errorf("upstream got a body of %d bytes, want the client's %d byte for byte", len(s.body), len(body))
	}
}

// TestRedirectNotFollowed: an upstream's redirect goes to the client as the
// upstream sent it; the gateway does not follow it with the channel's key.
func TestRedirectNotFollowed(t *testing.T) {
	var followed atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			return
		}
		w.Header().Set("Location", "/elsewhere")
		w.WriteHeader(http.StatusTemporaryRedirect)
		w.Write([]byte("moved"))
	}))
	defer up.Close()
	gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
	// A client that does not follow redirects either, to see what the
	// gateway answered.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(call{"chat", "m", true}.request(context.Background(), gw.URL, clientKey))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/elsewhere" || string(body) != "moved" {
		t.Errorf("client got %d, Location %q, body %q; want the upstream's 307 as it was", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if n := followed.Load(); n != 0 {
		t.Errorf("the gateway followed the redirect %d times", n)
	}
	if rec := recs.get(t, resp.Header.Get("X-Request-Id")); rec.HTTPStatus != http.StatusTemporaryRedirect {
		t.Errorf("record: http_status %d, want 307", rec.HTTPStatus)
	}
}

// TestServerTiming: non-streaming responses carry Server-Timing.
func TestServerTiming(t *testing.T) {
	gw, recs, _, _ := allProtocols(t, nil)
	resp, _ := do(t, gw.URL, clientKey, call{"chat", "fast", false})
	st := resp.Header.Get("Server-Timing")
	for _, want := range []string{"auth;dur=", "body_read;dur=", "upstream_headers;dur="} {
		if !strings.Contains(st, want) {
			t.Errorf("Server-Timing %q lacks %s", st, want)
		}
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Stream || rec.FirstSSEEventMs.Valid() || !rec.FirstTextDeltaMs.Valid() || rec.Tokens.Source != record.TokensUsage {
		t.Errorf("non-streaming record %+v", rec)
	}
	_ = timeline.T0
}

// TestIdleTimeoutRearms: a stream whose events come more often than the
// idle timeout is never cut, however long it lasts.
func TestIdleTimeoutRearms(t *testing.T) {
	profiles := map[string]sim.Profile{"steady": {HeadersMs: 10, TextMs: sim.Ms(20), VisibleTokens: 12, TPS: 5}}
	up, _ := upstream(t, profiles)
	to := fastTimeouts
	to.Idle = 450 * time.Millisecond
	gw, recs := gateway(t, channel("c", "openai", up.URL, to))
	resp, _ := do(t, gw.URL, clientKey, call{"chat", "steady", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusOK {
		t.Fatalf("status %s (%s), want ok: events 200 ms apart under a 450 ms idle timeout", rec.Status, rec.Error)
	}
	near(t, rec, "steady upstream_done_ms", rec.UpstreamDoneMs, 20+12*1000/5) // the simulator spreads 12 tokens over 12/5 s
}

// TestFirstOutputTimeoutLastChannel: with no channel left to try, the
// headers went to the client at t2 (issue 15), so a first-output timeout
// ends the stream with an error event in the protocol's format.
func TestFirstOutputTimeoutLastChannel(t *testing.T) {
	silent := map[string]sim.Profile{"m": {HeadersMs: 10, FirstEventMs: 3000, TextMs: sim.Ms(3000), VisibleTokens: 10, TPS: 100}}
	up, _ := upstream(t, silent)
	to := fastTimeouts
	to.FirstOutput = 200 * time.Millisecond
	gw, recs := gateway(t, channel("only", "anthropic", up.URL, to))
	resp, body := do(t, gw.URL, clientKey, call{"anthropic", "m", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("event: error\ndata: ")) || !bytes.Contains(body, []byte(`"type":"error"`)) || rec.Status != record.StatusFirstOutputTimeout || rec.HTTPStatus != 200 {
		t.Fatalf("%d %s; record %s %d", resp.StatusCode, body, rec.Status, rec.HTTPStatus)
	}
	near(t, rec, "first-output timeout upstream_done_ms", rec.UpstreamDoneMs, 200)
}

// TestUpstreamURL: a key passed as ?key= (Gemini's routes only) authenticates
// at the gateway but never goes upstream; a base URL's own query is kept;
// GET /v1/models is routed to a channel that lists exact models.
func TestUpstreamURL(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RequestURI())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	defer up.Close()
	c := channel("c", "openai", up.URL+"/openai?api-version=2024-10-01", fastTimeouts)
	c.Models = []string{"gpt-4o"}
	gc := channel("g", "gemini", up.URL+"/google", fastTimeouts)
	gw, _ := gateway(t, c, gc)
	for _, path := range []string{"/v1/models", "/v1/chat/completions?x=1", "/v1beta/models/gemini-x:generateContent?key=" + clientKey + "&x=2"} {
		method, body := "GET", ""
		if !strings.HasPrefix(path, "/v1/models") {
			method, body = "POST", `{"model":"gpt-4o","messages":[]}`
		}
		req, _ := http.NewRequest(method, gw.URL+path, strings.NewReader(body))
		if !strings.Contains(path, "key=") {
			req.Header.Set("Authorization", "Bearer "+clientKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/openai/v1/models?api-version=2024-10-01", "/openai/v1/chat/completions?api-version=2024-10-01&x=1", "/google/v1beta/models/gemini-x:generateContent?x=2"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %q, want %q", seen, want)
	}
}
