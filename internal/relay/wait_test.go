package relay_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestRequestWait: request_wait_ms is the time from the request's first
// byte read on its connection to t0. A client that sends half a request
// line and the rest later makes the gateway wait that long before t0: the
// record must show it, on a new connection (timed from accept), on a
// kept-alive one (timed from the first byte of that request, not from the
// end of the previous one), and on one opened before its request was sent
// (timed from the first byte, not from accept).
func TestRequestWait(t *testing.T) {
	up, _ := upstream(t, nil)
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("sim-openai", "openai", up.URL, fastTimeouts)}, 1), Keys: keys, Recorder: recs})
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = relay.TimeConns(srv.Config, srv.Listener)
	srv.Start()
	t.Cleanup(srv.Close)

	var conn net.Conn
	var br *bufio.Reader
	dial := func() {
		t.Helper()
		if conn != nil {
			conn.Close()
		}
		var err error
		conn, err = net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		br = bufio.NewReader(conn)
	}
	dial()
	defer func() { conn.Close() }()
	body := `{"model":"fast","stream":false,"messages":[{"role":"user","content":"hi"}]}`
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", clientKey, len(body), body)
	// send writes the request in two parts, pause apart, and returns the
	// record of its answer.
	send := func(pause time.Duration) (wait float64, ok bool) {
		t.Helper()
		cut := strings.Index(req, "\r\n") // within the request line
		if _, err := io.WriteString(conn, req[:cut]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause)
		if _, err := io.WriteString(conn, req[cut:]); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		local, _ := rec.LocalMs().Ms()
		wait, ok = rec.RequestWaitMs.Ms()
		t.Logf("paused %v: request_wait_ms %.2f, local phases %.2f ms", pause, wait, local)
		if ok && local < wait {
			t.Errorf("local phases %.1f ms do not include request_wait_ms %.1f", local, wait)
		}
		return wait, ok
	}

	const pause = 150 * time.Millisecond
	// The gateway reads the first part a little after the client wrote it
	// (its goroutine is scheduled later), so the wait it sees may be a
	// little under the client's pause: allow 10 % under, 100 % over.
	// Over by more only as far as this process's timers were seen to
	// slip meanwhile, twice (the client's pause and the gateway's read).
	const lo = 0.9 * 150
	hi := func() float64 { return 2*150 + 2*float64(testenv.Slip(2*time.Second))/1e6 }
	prompt := func() float64 { return 100 + 2*float64(testenv.Slip(2*time.Second))/1e6 }
	// The first request on a new connection: from accept.
	wait, ok := send(pause)
	if !ok || wait < lo || wait > hi() {
		t.Errorf("new connection: request_wait_ms %.1f (present %v), want about 150", wait, ok)
	}
	// A kept-alive connection idle for a while: the idle time is not
	// waiting; only the time since this request's first byte is.
	time.Sleep(300 * time.Millisecond)
	wait, ok = send(pause)
	if !ok || wait < lo || wait > hi() {
		t.Errorf("kept-alive connection: request_wait_ms %.1f (present %v), want about 150 (not the 300 ms idle before)", wait, ok)
	}
	// And a request sent at once waits only for the gateway.
	wait, ok = send(0)
	if !ok || wait > prompt() {
		t.Errorf("prompt request: request_wait_ms %.1f (present %v), want a few ms", wait, ok)
	}
	// A connection opened early and used later (a browser's preconnect, a
	// warmed-up pool): the time before its first byte is not waiting.
	dial()
	time.Sleep(300 * time.Millisecond)
	wait, ok = send(pause)
	if !ok || wait < lo || wait > hi() {
		t.Errorf("connection opened 300 ms before its request: request_wait_ms %.1f (present %v), want about 150 (not from accept)", wait, ok)
	}
	dial()
	time.Sleep(300 * time.Millisecond)
	wait, ok = send(0)
	if !ok || wait > prompt() {
		t.Errorf("connection opened 300 ms before a prompt request: request_wait_ms %.1f (present %v), want a few ms", wait, ok)
	}
}
