package relay_test

import (
	"bytes"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestAzureTimeline: through a channel of kind azure, whose simulator side
// sends Azure's content-filter chunks (one before the first choice, one
// after the answer), the filter chunks reach the client as sent and are
// metadata (SPEC §2): the marks of SPEC §4's traces A, B and C and of the
// fast profile match the simulator's schedule as they do for an openai
// channel, and no event is unknown. Azure's error bodies are relayed as
// sent and classified: its content filter's 400 as upstream_http_error,
// its 429 as rate_limited, a 500 as upstream_http_error, a cut stream as
// upstream_stream_error.
func TestAzureTimeline(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the traces take 20 s of real time")
	}
	profiles := sim.Builtin()
	profiles["filtered"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:400"}
	profiles["status-500"] = sim.Profile{HeadersMs: 20, TextMs: sim.Ms(40), VisibleTokens: 20, TPS: 100, Fault: "status:500"}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles, APIKey: "upstream-key-az"}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, channel("az", "azure", up.URL+"?api-version=2024-10-21", fastTimeouts))

	// The fast profile: the filter chunks are in the stream and counted
	// as metadata; the marks are the simulator's.
	resp, body := do(t, gw.URL, clientKey, call{"chat", "fast", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte(`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":`)) ||
		!bytes.Contains(body, []byte(`"content_filter_offsets"`)) || !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("the stream through azure lacks Azure's filter chunks: %d %.400s", resp.StatusCode, body)
	}
	if rec.Status != record.StatusOK || rec.Terminal != "done" || rec.Events.Unknown != 0 || rec.Events.Metadata < 3 {
		t.Errorf("fast through azure: status %s terminal %s events %+v", rec.Status, rec.Terminal, rec.Events)
	}
	near(t, rec, "fast upstream_headers_ms", rec.UpstreamHeadersMs, 50)
	near(t, rec, "fast first_text_delta_ms", rec.FirstTextDeltaMs, 120)
	near(t, rec, "fast upstream_done_ms", rec.UpstreamDoneMs, 420)
	if rec.Tokens.Visible == nil || *rec.Tokens.Visible != 60 || rec.Tokens.Source != "usage" {
		t.Errorf("fast through azure: visible tokens %v (source %s), want 60 from usage", rec.Tokens.Visible, rec.Tokens.Source)
	}

	// Traces A, B and C, at once, with TestSeedTraces' expectations.
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
			if rec.Status != record.StatusOK || rec.Channel != "az" || rec.Events.Unknown != 0 {
				t.Errorf("%s: status %s channel %s events %+v", name, rec.Status, rec.Channel, rec.Events)
			}
			near(t, rec, name+" upstream_headers_ms", rec.UpstreamHeadersMs, w.headers)
			near(t, rec, name+" first_response_ms", rec.FirstResponseMs, w.response)
			near(t, rec, name+" first_text_delta_ms", rec.FirstTextDeltaMs, w.text)
			near(t, rec, name+" total_handler_ms", rec.TotalHandlerMs, w.total)
			// TPS is measured over first text → done: a mark this
			// process's timers delivered late shortens or lengthens that
			// window, by as much as they were seen to slip (three times
			// over, as near allows).
			tps, ok := rec.VisibleOutputTPS.Get()
			window := (w.total - w.text) / 1000
			slip := 3 * testenv.Slip(time.Duration(w.total)*time.Millisecond+time.Second).Seconds()
			lo, hi := 0.95*w.tps*window/(window+slip), math.Inf(1)
			if window > slip {
				hi = 1.05 * w.tps * window / (window - slip)
			}
			if !ok || tps < lo || tps > hi {
				t.Errorf("%s visible_output_tps = %v (%v), want %v ± 5%% (%.1f–%.1f with the timers' slip)", name, tps, ok, w.tps, lo, hi)
			}
		}()
	}
	wg.Wait()

	// Azure's errors.
	for _, tt := range []struct {
		model  string
		stream bool
		code   int
		status string
		body   string // in what the client gets
	}{
		{"filtered", false, 400, record.StatusUpstreamHTTPError, `"code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation"`},
		{"status-429", true, 429, record.StatusRateLimited, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation`},
		{"status-500", false, 500, record.StatusUpstreamHTTPError, `Simulated upstream error 500`},
		{"flaky", true, 200, record.StatusUpstreamStreamError, `prompt_filter_results`},
	} {
		resp, body := do(t, gw.URL, clientKey, call{"chat", tt.model, tt.stream})
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.body) || rec.Status != tt.status {
			t.Errorf("%s: %d %.300s; record %s (%s), want %d with %s and %s", tt.model, resp.StatusCode, body, rec.Status, rec.Error, tt.code, tt.body, tt.status)
		}
		if tt.code != 200 && rec.HTTPStatus != tt.code {
			t.Errorf("%s: record http_status %d, want %d", tt.model, rec.HTTPStatus, tt.code)
		}
	}
}
