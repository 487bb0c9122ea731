package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
)

// bigEvents is an upstream that streams n events of size bytes as fast as
// it can, then [DONE].
func bigEvents(t *testing.T, n, size int, gap time.Duration) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		text := strings.Repeat("x", size)
		for i := 0; i < n; i++ {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", text); err != nil {
				return
			}
			rc.Flush()
			if gap > 0 {
				time.Sleep(gap)
			}
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	return up
}

// TestClientThatStopsReading: a client that accepts no bytes cannot hold the
// handler: it is cut after the idle timeout, recorded, the channel's
// inflight count is released, and the client's connection is reset (a FIN
// would wait forever behind the bytes it does not read).
func TestClientThatStopsReading(t *testing.T) {
	up := bigEvents(t, 200, 60<<10, 0)
	to := fastTimeouts
	to.Idle = 400 * time.Millisecond
	c := channel("c", "openai", up.URL, to)
	// Small socket buffers on the gateway's side too, so that its writes
	// block after tens of KB rather than megabytes: parsing megabytes
	// under -race on a loaded machine once took longer than the bound.
	gw, recs := gatewayWith(t, func(s *http.Server) {
		s.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			c.(*net.TCPConn).SetWriteBuffer(8 << 10)
			return relay.ConnContext(ctx, c)
		}
	}, c)
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	body := `{"model":"m","stream":true,"messages":[]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", clientKey, len(body), body)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	// Read nothing more: the gateway must give up on its own. The wait is
	// as long as the gateway could take at worst (the total timeout); how
	// long it did take is judged below from its own measure.
	rec := recs.getWithin(t, id, to.Total)
	if rec.Status != record.StatusClientCancelled || !strings.Contains(rec.Error, "stopped reading") {
		t.Fatalf("status %s %q, want client_cancelled for a client that stopped reading", rec.Status, rec.Error)
	}
	// The bound is the gateway's own measure, not the wall clock (a loaded
	// machine under -race once took 5.74 s to get here): the handler ended
	// after at least the idle limit, and long before the upstream's total
	// timeout, which is what would end it if the idle cut did not.
	total, _ := rec.TotalHandlerMs.Ms()
	t.Logf("cut after %.0f ms (idle limit %v)", total, to.Idle)
	if total < float64(to.Idle.Milliseconds()) || total > float64(to.Total.Milliseconds())/4 {
		t.Fatalf("handler took %.0f ms, want between the idle limit %v and a quarter of the total timeout %v", total, to.Idle, to.Total)
	}
	if c.Inflight() != 0 {
		t.Fatalf("channel inflight %d after the request ended", c.Inflight())
	}
	// The client's socket learns the connection is over without reading.
	if _, ok := tcpState(conn); ok {
		deadline := time.Now().Add(5 * time.Second)
		for {
			st, _ := tcpState(conn)
			if st != tcpEstablished {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the client's connection is still established 5 s after the gateway cut it: no reset or FIN reached it")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestSlowReaderIsNotIdleUpstream: time spent writing to a slow client is
// not upstream idleness.
func TestSlowReaderIsNotIdleUpstream(t *testing.T) {
	up := bigEvents(t, 60, 60<<10, 0)
	to := fastTimeouts
	// Pauses of 250 ms under an idle timeout of 600: the gap is room
	// for a loaded machine's scheduling, the pauses still fill every
	// buffer on the way.
	to.Idle = 600 * time.Millisecond
	gw, recs := gateway(t, channel("c", "openai", up.URL, to))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(call{"chat", "m", true}.request(ctx, gw.URL, clientKey))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	total := 0
	var longest time.Duration // the client's own longest pause, for the message
	last := time.Now()
	for {
		// A reader that takes 1 MB bursts with pauses shorter than the
		// idle timeout but long enough to fill every buffer on the way.
		n, err := io.ReadFull(resp.Body, buf)
		total += n
		if err != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
		longest = max(longest, time.Since(last))
		last = time.Now()
	}
	resp.Body.Close()
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusOK {
		t.Fatalf("status %s (%s) after %d bytes, want ok: the upstream was never idle (the client's longest pause between bursts %v)", rec.Status, rec.Error, total, longest)
	}
}

// TestSilenceBeforeFirstEvent: before the first event the first-output
// timeout applies, not the idle timeout.
func TestSilenceBeforeFirstEvent(t *testing.T) {
	profiles := map[string]sim.Profile{"late": {HeadersMs: 10, FirstEventMs: 600, TextMs: sim.Ms(620), VisibleTokens: 10, TPS: 100}}
	up, _ := upstream(t, profiles)
	to := fastTimeouts
	to.Idle = 200 * time.Millisecond
	to.FirstOutput = 2 * time.Second
	gw, recs := gateway(t, channel("c", "openai", up.URL, to))
	resp, _ := do(t, gw.URL, clientKey, call{"chat", "late", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusOK {
		t.Fatalf("status %s (%s), want ok: 600 ms of silence before the first event is within first_output", rec.Status, rec.Error)
	}
}

// TestEmptyStreamFallsBack: a 200 with an empty event stream moves on to
// the next channel; with none left (the headers went out at t2) the stream
// ends with an error event in the protocol's format.
func TestEmptyStreamFallsBack(t *testing.T) {
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	defer empty.Close()
	good, _ := upstream(t, nil)
	c1 := channel("empty", "openai", empty.URL, fastTimeouts)
	c2 := channel("good", "openai", good.URL, fastTimeouts)
	c2.Priority = 1
	gw, recs := gateway(t, c1, c2)
	resp, body := do(t, gw.URL, clientKey, call{"chat", "fast", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("[DONE]")) || len(rec.Attempts) != 2 || rec.Channel != "good" {
		t.Fatalf("%d %.100q, attempts %+v", resp.StatusCode, body, rec.Attempts)
	}
	gw2, recs2 := gateway(t, channel("empty", "openai", empty.URL, fastTimeouts))
	resp, body = do(t, gw2.URL, clientKey, call{"chat", "fast", true})
	rec = recs2.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 200 || !bytes.HasPrefix(body, []byte("data: {\"error\"")) || rec.Status != record.StatusUpstreamStreamError {
		t.Fatalf("%d %s, record %s", resp.StatusCode, body, rec.Status)
	}
}

// TestNonSSEStreamNotCutByFirstOutput: Gemini's streamGenerateContent
// without alt=sse sends a JSON array piece by piece; its first bytes end
// the first-output wait.
func TestNonSSEStreamNotCutByFirstOutput(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		rc := http.NewResponseController(w)
		fmt.Fprint(w, "[")
		for i := 0; i < 8; i++ {
			if i > 0 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"candidates":[{"content":{"parts":[{"text":"t%d"}]}}]}`, i)
			rc.Flush()
			time.Sleep(100 * time.Millisecond)
		}
		fmt.Fprint(w, "]")
	}))
	defer up.Close()
	to := fastTimeouts
	to.FirstOutput = 300 * time.Millisecond
	gw, recs := gateway(t, channel("g", "gemini", up.URL, to))
	req, _ := http.NewRequest("POST", gw.URL+"/v1beta/models/m:streamGenerateContent", strings.NewReader(`{"contents":[]}`))
	req.Header.Set("X-Goog-Api-Key", clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if err != nil || !bytes.HasSuffix(body, []byte("]")) || rec.Status != record.StatusOK {
		t.Fatalf("err %v, body %q, status %s (%s)", err, body, rec.Status, rec.Error)
	}
}

// TestNonStreamingCutIsAnError: a non-streaming body the upstream cut after
// the headers went out reaches the client as a broken response, not as a
// clean, short 200.
func TestNonStreamingCutIsAnError(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","choices":[{"message":{"content":"hel`)
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer up.Close()
	gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
	req := call{"chat", "m", false}.request(context.Background(), gw.URL, clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		// Headers (and part of the body) may arrive; the end must not.
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("the client read a cut body to a clean end")
	}
	recs.mu.Lock()
	defer recs.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); len(recs.recs) == 0 && time.Now().Before(deadline); {
		recs.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		recs.mu.Lock()
	}
	if len(recs.recs) != 1 || recs.recs[0].Status != record.StatusUpstreamStreamError {
		t.Fatalf("records %+v", recs.recs)
	}
}

// TestRelayedErrorTiming: when the client gets an upstream's error, the
// request's t1/t2 are those of the attempt that sent it.
func TestRelayedErrorTiming(t *testing.T) {
	up, _ := upstream(t, map[string]sim.Profile{"limited": {HeadersMs: 150, TextMs: sim.Ms(160), VisibleTokens: 5, TPS: 100, Fault: "status:429"}})
	gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
	resp, _ := do(t, gw.URL, clientKey, call{"chat", "limited", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 429 || rec.Status != record.StatusRateLimited {
		t.Fatalf("%d %s", resp.StatusCode, rec.Status)
	}
	near(t, rec, "upstream_headers_ms of the relayed 429", rec.UpstreamHeadersMs, 150)
	if rec.UpstreamStartMs != rec.Attempts[0].UpstreamStartMs {
		t.Fatalf("t1 %v, attempt %v", rec.UpstreamStartMs, rec.Attempts[0].UpstreamStartMs)
	}
}

// TestSlowUpload: a request body that does not arrive is bounded.
func TestSlowUpload(t *testing.T) {
	up, _ := upstream(t, nil)
	recs := newRecords()
	gw := slowBodyGateway(t, up.URL, recs, 300*time.Millisecond)
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n{\"model\":", clientKey)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled upload: %v", err)
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if resp.StatusCode != 408 || rec.Status != record.StatusBadRequest {
		t.Fatalf("%d, record %s %q", resp.StatusCode, rec.Status, rec.Error)
	}
}

// TestOneEventNoSpeed: text that arrives in one event has no generation
// window, so no visible_output_tps.
func TestOneEventNoSpeed(t *testing.T) {
	up, _ := upstream(t, map[string]sim.Profile{"burst": {HeadersMs: 10, TextMs: sim.Ms(20), VisibleTokens: 19, TPS: 100, TokensPerEvent: 50}})
	gw, recs := gateway(t, channel("c", "openai", up.URL, fastTimeouts))
	resp, _ := do(t, gw.URL, clientKey, call{"chat", "burst", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Events.Text != 1 || rec.VisibleOutputTPS.Valid() || rec.Tokens.Visible == nil || *rec.Tokens.Visible != 19 {
		t.Fatalf("events %+v, tps %v, visible %v", rec.Events, rec.VisibleOutputTPS, rec.Tokens.Visible)
	}
}

// slowBodyGateway is gateway() with a short body read timeout.
func slowBodyGateway(t *testing.T, upURL string, recs *records, bodyTimeout time.Duration) *httptest.Server {
	t.Helper()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("c", "openai", upURL, fastTimeouts)}, 1),
		Keys: keys, Recorder: recs, BodyReadTimeout: bodyTimeout})
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}
