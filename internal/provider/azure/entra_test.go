package azure_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/ttfx/ttfx/internal/provider/azure"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

func entraChannel(t *testing.T, authority, secret string) (*wire.Upstream, error) {
	t.Helper()
	base, _ := url.Parse(authority)
	return wire.LookupKind("azure").Open(wire.ChannelConfig{Name: "az", Base: base,
		Settings: map[string]string{"tenant_id": "tenant-1", "client_id": "app-1", "client_secret_env": "AZ_SECRET", "authority_host": authority},
		Env:      map[string]string{"client_secret_env": secret}})
}

// TestEntraID: a channel with a tenant_id gets a token from the
// client-credentials grant at the simulator's Entra ID endpoint, which the
// simulator's Azure side accepts instead of an api-key; a token that
// expired is refused there, and the channel has a new one before that; a
// wrong secret fails as a credential error naming the endpoint.
func TestEntraID(t *testing.T) {
	s := sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: "resource-key",
		Identity: &sim.Identity{EntraClients: map[string]string{"app-1": "secret-1"}, TokenLifetime: 2 * time.Second}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	up, err := entraChannel(t, srv.URL, "secret-1")
	if err != nil || up == nil || up.Credentials == nil {
		t.Fatalf("open: %v %+v", err, up)
	}
	call := func(auth string) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/openai/deployments/fast/chat/completions?api-version=2024-10-21",
			strings.NewReader(`{"messages":[{"role":"user","content":"Say hello."}]}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	header := func() string {
		req := &http.Request{Header: http.Header{}}
		if _, err := up.Credentials.Authorize(t.Context(), req, nil); err != nil {
			t.Fatal(err)
		}
		return req.Header.Get("Authorization")
	}
	first := header()
	if code, body := call(first); code != 200 || !strings.Contains(body, `"choices"`) {
		t.Fatalf("with the Entra ID token: %d %s", code, body)
	}
	if code, _ := call("Bearer forged"); code != 401 {
		t.Errorf("a forged token: %d, want 401", code)
	}
	// The token lives 2 s and is refreshed at half its life: after 2.5 s
	// the old one is refused, the channel's current one is not.
	time.Sleep(2500 * time.Millisecond)
	if code, body := call(first); code != 401 || !strings.Contains(body, "expired") {
		t.Errorf("the expired token: %d %s", code, body)
	}
	if now := header(); now == first {
		t.Error("the channel still has its first token")
	} else if code, body := call(now); code != 200 {
		t.Errorf("the refreshed token: %d %s", code, body)
	}
	if got := s.TokensIssued(); len(got) < 2 || got[0].Grant != "client_credentials" || got[0].Subject != "app-1" {
		t.Errorf("issued %+v", got)
	}

	bad, err := entraChannel(t, srv.URL, "wrong")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = bad.Credentials.Authorize(ctx, &http.Request{Header: http.Header{}}, nil)
	var ce *wire.CredentialError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), "/tenant-1/oauth2/v2.0/token") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("a wrong secret: %v", err)
	}
}

// TestEntraSettings: the settings a tenant_id needs, and none without it.
func TestEntraSettings(t *testing.T) {
	base, _ := url.Parse("https://r.openai.azure.com")
	k := wire.LookupKind("azure")
	if up, err := k.Open(wire.ChannelConfig{Name: "c", Base: base, Key: "k"}); err != nil || up != nil {
		t.Errorf("an api-key channel: %+v %v", up, err)
	}
	for name, c := range map[string]wire.ChannelConfig{
		"key and tenant":  {Key: "k", Settings: map[string]string{"tenant_id": "t", "client_id": "c", "client_secret_env": "S"}, Env: map[string]string{"client_secret_env": "s"}},
		"no client_id":    {Settings: map[string]string{"tenant_id": "t", "client_secret_env": "S"}, Env: map[string]string{"client_secret_env": "s"}},
		"no secret":       {Settings: map[string]string{"tenant_id": "t", "client_id": "c"}},
		"client_id alone": {Key: "k", Settings: map[string]string{"client_id": "c"}},
		"bad tenant":      {Settings: map[string]string{"tenant_id": "t/../x", "client_id": "c", "client_secret_env": "S"}, Env: map[string]string{"client_secret_env": "s"}},
	} {
		c.Name, c.Base = "c", base
		if _, err := k.Open(c); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
}
