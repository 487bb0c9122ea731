package relay_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

// TestAzureEntraID: an OpenAI client relayed to an azure channel that
// authenticates with Entra ID tokens (client credentials at the
// simulator's Entra ID endpoint) instead of the api-key, streaming and
// not, across several token lifetimes: every request succeeds, tokens are
// renewed before they expire, and no request after the first waited.
func TestAzureEntraID(t *testing.T) {
	t.Parallel()
	const life = 3 * time.Second
	s := sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: "resource-key-unused",
		Identity: &sim.Identity{EntraClients: map[string]string{"app-1": "secret-1"}, TokenLifetime: life}})
	up := httptest.NewServer(s)
	t.Cleanup(up.Close)
	ch := channel("az", "azure", up.URL, fastTimeouts)
	ch.Key = ""
	var err error
	ch.Hooks, err = wire.LookupKind("azure").Open(wire.ChannelConfig{Name: "az", Base: ch.BaseURL,
		Settings: map[string]string{"tenant_id": "tenant-1", "client_id": "app-1", "client_secret_env": "AZ_SECRET", "authority_host": up.URL},
		Env:      map[string]string{"client_secret_env": "secret-1"}})
	if err != nil {
		t.Fatal(err)
	}
	gw, recs := gateway(t, ch)
	start := time.Now()
	for n := 0; time.Since(start) < 3*life; n++ {
		stream := n%2 == 0
		resp, body := do(t, gw.URL, clientKey, call{"chat", "fast", stream})
		if resp.StatusCode != 200 || stream && !strings.Contains(string(body), "[DONE]") {
			t.Fatalf("request %d after %v: %d %s", n, time.Since(start), resp.StatusCode, body)
		}
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if rec.Status != record.StatusOK {
			t.Errorf("request %d: %s", n, rec.Status)
		}
		if w, ok := rec.UpstreamAuthMs.Get(); ok && n > 0 {
			t.Errorf("request %d after %v waited %v for a token", n, time.Since(start), w)
		}
	}
	if got := s.TokensIssued(); len(got) < 3 || got[0].Grant != "client_credentials" {
		t.Errorf("tokens issued over %v of %v tokens: %+v", 3*life, life, got)
	}
}
