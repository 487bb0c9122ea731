package relay_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

// A provider kind added the way a real one is: one registration with
// internal/wire, nothing in the relay, the routing or the configuration
// names it. "toy" serves OpenAI's API family behind its own URL prefix and
// credential header.
func init() {
	wire.RegisterKind(&wire.Kind{
		Name: "toy", Families: []string{"openai"},
		Authorize: func(h http.Header, key string) { h.Set("Toy-Key", key) },
		URL: func(t wire.Target) *url.URL {
			return wire.JoinURL(t.Base, "/toy"+t.Path, t.Query)
		},
		ForwardHeaders: []string{"Toy-Trace"},
	})
}

// TestToyProviderKind: a channel of a kind the gateway's code never names
// relays a chat stream through the kind's URL and credentials, with the
// kind's forwarded headers and without the other kinds' ones.
func TestToyProviderKind(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Options{Profiles: sim.Builtin()})
	var seen atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Toy-Key") != "upstream-key-toy" || r.Header.Get("Authorization") != "" ||
			r.Header.Get("Toy-Trace") != "t-1" || r.Header.Get("Anthropic-Version") != "" {
			http.Error(w, "bad credentials or headers: "+r.Header.Get("Toy-Key"), http.StatusUnauthorized)
			return
		}
		p, ok := strings.CutPrefix(r.URL.Path, "/toy")
		if !ok {
			http.NotFound(w, r)
			return
		}
		seen.Add(1)
		r.URL.Path = p
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	gw, recs := gateway(t, channel("toy", "toy", up.URL, fastTimeouts))

	req := call{api: "chat", model: "fast", stream: true}.request(t.Context(), gw.URL, clientKey)
	req.Header.Set("Toy-Trace", "t-1")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("through the toy kind: %d %s", resp.StatusCode, body)
	}
	if seen.Load() != 1 {
		t.Errorf("the toy upstream served %d requests, want 1", seen.Load())
	}
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	if rec.Status != record.StatusOK || rec.Channel != "toy" || !rec.FirstTextDeltaMs.Valid() {
		t.Errorf("record: status %s channel %s first text %v", rec.Status, rec.Channel, rec.FirstTextDeltaMs)
	}

	// The kind serves the openai family only: an Anthropic client finds no
	// channel.
	resp, body = do(t, gw.URL, clientKey, call{api: "anthropic", model: "fast"})
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "no channel serves") {
		t.Errorf("an anthropic request with only a toy channel: %d %s", resp.StatusCode, body)
	}
}
