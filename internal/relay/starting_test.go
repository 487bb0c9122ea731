package relay_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestStartingCountsUntilFirstOutput: a request counts as being set up
// from t0 until its first effective output is relayed, not while the rest
// of its stream goes out, and a request refused before any upstream call
// stops counting when it ends. The simulator sends its first text at
// 800 ms and then streams for about 2 s.
func TestStartingCountsUntilFirstOutput(t *testing.T) {
	profiles := map[string]sim.Profile{"slow-first": {TextMs: sim.Ms(800), VisibleTokens: 200, TPS: 100}}
	up, _ := upstream(t, profiles)
	starting := new(relay.Starting)
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("only", "openai", up.URL, fastTimeouts)}, 1),
		Keys: keys, Recorder: recs, UserHashKey: []byte("0123456789abcdef"), Starting: starting})
	mux := http.NewServeMux()
	g.Register(mux)
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := http.DefaultClient.Do(call{"chat", "slow-first", true}.request(ctx, gw.URL, clientKey))
	if err != nil {
		t.Fatal(err)
	}
	// Headers are out; the first text is not (800 ms).
	if n := starting.Count(); n != 1 || !starting.Busy() {
		t.Errorf("waiting for the first output after %v: count %d, busy %v; want 1, true", time.Since(start).Round(time.Millisecond), n, starting.Busy())
	}
	// Read up to the first content; the count drops around then, while
	// the rest of the stream is still to come.
	buf := make([]byte, 64<<10)
	var got []byte
	for starting.Count() != 0 {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("stream ended (%v) with the request still counted as starting", err)
		}
	}
	firstOutput := time.Since(start)
	time.Sleep(2 * relay.StartingQuiet)
	if starting.Busy() {
		t.Errorf("busy %v after the only request's first output", 2*relay.StartingQuiet)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	total := time.Since(start)
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	t4, ok := rec.FirstResponseMs.Ms()
	if !ok {
		t.Fatal("no t4 on the record")
	}
	t.Logf("t4 %.1f ms; count 0 seen at %v; stream done at %v; %d bytes after", t4, firstOutput.Round(time.Millisecond), total.Round(time.Millisecond), len(rest))
	// Seen by the client no sooner than the gateway marked t4 (the
	// client's clock starts first), and well before the stream ended.
	if firstOutput < time.Duration(t4*float64(time.Millisecond)) {
		t.Errorf("count dropped at %v, before t4 %.1f ms", firstOutput, t4)
	}
	if len(rest) == 0 || total-firstOutput < (total-time.Duration(t4*float64(time.Millisecond)))/2 {
		t.Errorf("count dropped at %v of a %v stream (t4 %.1f ms): want at the first output, not near the end", firstOutput, total, t4)
	}

	// Refused before any upstream call: counted while served, then not.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer wrong-key")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: %d", resp.StatusCode)
	}
	// The client can read the refusal before the handler has returned
	// (CI saw count 1 just then): wait for the end, bounded, so a count
	// that never drops still fails.
	for deadline := time.Now().Add(5 * time.Second); starting.Count() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := starting.Count(); n != 0 {
		t.Errorf("5 s after a refused request: count %d, want 0", n)
	}
}
