package relay_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
)

// steppedClock is a clock a test moves by hand, on top of real time (the
// timeline needs it to advance).
type steppedClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *steppedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *steppedClock) step(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// TestAuthFailureFlood: a flood of bad keys stays visible (a counter, the
// first five records per source and minute, and a later one that counts the
// rest) without a record per
// attempt, and past the limit it is answered 429 in the protocol's format;
// a valid key from the same address still works.
func TestAuthFailureFlood(t *testing.T) {
	up, _ := upstream(t, nil)
	recs := newRecords()
	clock := &steppedClock{}
	// Start near the beginning of a minute, so the flood fits in one.
	clock.step(time.Duration(60-time.Now().Second()%60) * time.Second)
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{
		channel("o", "openai", up.URL, fastTimeouts), channel("a", "anthropic", up.URL, fastTimeouts)}, 1),
		Keys: keys, Recorder: recs, Now: clock.now, MaxAuthFailures: 10})
	mux := http.NewServeMux()
	g.Register(mux)
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)

	const flood = 200
	codes := map[int]int{}
	var last []byte
	for i := range flood {
		path, hdr := "/v1/chat/completions", []string{"Authorization", "Bearer bogus"}
		if i%2 == 1 {
			path, hdr = "/v1/messages", []string{"X-Api-Key", "bogus"}
		}
		resp, b := post(t, gw.URL+path, `{"model":"fast","max_tokens":5,"messages":[]}`, hdr...)
		codes[resp.StatusCode]++
		if resp.StatusCode == 429 && i%2 == 1 {
			last = b
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		}
	}
	if codes[401] != 10 || codes[429] != flood-10 {
		t.Fatalf("answers %v, want 10 × 401 then 429", codes)
	}
	if !bytes.HasPrefix(last, []byte(`{"type":"error","error":{"type":"rate_limit_error"`)) || !bytes.Contains(last, []byte("failed authentication")) {
		t.Errorf("anthropic 429 body %s", last)
	}
	if got := g.AuthFailures(); got != flood {
		t.Errorf("counter %d, want %d", got, flood)
	}
	// A valid key from the flooding address is served.
	if resp, _ := do(t, gw.URL, clientKey, call{"chat", "fast", true}); resp.StatusCode != 200 {
		t.Fatalf("valid key answered %d during the flood", resp.StatusCode)
	}
	time.Sleep(50 * time.Millisecond)
	recs.mu.Lock()
	var failed []record.Record
	for _, r := range recs.recs {
		if r.Status == record.StatusAuthFailed {
			failed = append(failed, r)
		}
	}
	recs.mu.Unlock()
	if len(failed) != 5 {
		t.Fatalf("%d auth_failed records for one source and minute, want 5", len(failed))
	}

	// The next minute: the source starts over, and its first record
	// counts what was not recorded.
	clock.step(time.Minute)
	resp, _ := post(t, gw.URL+"/v1/chat/completions", `{"model":"fast"}`, "Authorization", "Bearer bogus")
	if resp.StatusCode != 401 {
		t.Fatalf("next minute answered %d, want 401", resp.StatusCode)
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusAuthFailed || !strings.Contains(rec.Error, "195 further failed attempts") {
		t.Fatalf("record %s %q, want it to count the 195 unrecorded failures", rec.Status, rec.Error)
	}
}

// TestAuthFailureFloodManySources: a flood from many addresses, each
// under its own few records, is bounded as a whole: at most
// MaxAuthFailureRecords records a minute over every source, and the rest
// counted (AuthFailuresUnrecorded) instead of written (issue 50: 2,000
// addresses × 6 requests wrote 10,000 records). Each source is a real
// address of its own: the loopback's 127.0.x.y.
func TestAuthFailureFloodManySources(t *testing.T) {
	up, _ := upstream(t, nil)
	recs := newRecords()
	clock := &steppedClock{}
	clock.step(time.Duration(60-time.Now().Second()%60) * time.Second)
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	const bound = 40
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("o", "openai", up.URL, fastTimeouts)}, 1),
		Keys: keys, Recorder: recs, Now: clock.now, MaxAuthFailureRecords: bound})
	mux := http.NewServeMux()
	g.Register(mux)
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)

	const sources, each = 200, 6
	for i := range sources {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, byte(1+i/250), byte(1+i%250))}
		c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: local}).DialContext}}
		for range each {
			req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(`{"model":"fast"}`))
			req.Header.Set("Authorization", "Bearer bogus")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 {
				t.Fatalf("source %d answered %d, want 401", i, resp.StatusCode)
			}
		}
		c.CloseIdleConnections()
	}
	time.Sleep(50 * time.Millisecond)
	recs.mu.Lock()
	n := len(recs.recs)
	recs.mu.Unlock()
	if n != bound {
		t.Errorf("%d records of %d failures from %d sources, want the bound %d", n, sources*each, sources, bound)
	}
	if got := g.AuthFailures(); got != sources*each {
		t.Errorf("counted %d failures, want %d", got, sources*each)
	}
	if got := g.AuthFailuresUnrecorded(); got != uint64(sources*each-bound) {
		t.Errorf("unrecorded %d, want %d", got, sources*each-bound)
	}
}
