package sim

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/auth"
)

const testAccount = "ttfx-test@sim-project.iam.gserviceaccount.com"

// testTokenURL is the token endpoint the JWTs of TestVerifyJWTClaims are
// signed for.
const testTokenURL = "https://oauth2.googleapis.com/token"

// identityServer is a simulator with a test service account and an Entra
// ID application, issuing tokens that live life.
func identityServer(t *testing.T, life time.Duration) (*httptest.Server, *Server, []byte) {
	t.Helper()
	var cur atomic.Pointer[Server] // set once the URL is known
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { cur.Load().ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	key, pub, err := NewServiceAccount(testAccount, srv.URL+"/token")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Identity: &Identity{
		ServiceAccounts: map[string]*rsa.PublicKey{testAccount: pub},
		EntraClients:    map[string]string{"app-1": "secret-1"},
		TokenLifetime:   life,
	}})
	cur.Store(s)
	return srv, s, key
}

// twoLegged is cloud.google.com/go/auth's service-account flow over key.
func twoLegged(t *testing.T, key []byte) auth.TokenProvider {
	t.Helper()
	var k struct {
		ClientEmail, PrivateKey, PrivateKeyID, TokenURI string
	}
	var raw map[string]string
	if err := json.Unmarshal(key, &raw); err != nil {
		t.Fatal(err)
	}
	k.ClientEmail, k.PrivateKey, k.PrivateKeyID, k.TokenURI = raw["client_email"], raw["private_key"], raw["private_key_id"], raw["token_uri"]
	tp, err := auth.New2LOTokenProvider(&auth.Options2LO{Email: k.ClientEmail, PrivateKey: []byte(k.PrivateKey), PrivateKeyID: k.PrivateKeyID,
		Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}, TokenURL: k.TokenURI})
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// signJWT signs claims as a service account's assertion with k.
func signJWT(t *testing.T, k *rsa.PrivateKey, alg string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	s := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sum := sha256.Sum256([]byte(s))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return s + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func postForm(t *testing.T, u string, f url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(u, f)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// TestGoogleTokenEndpoint: Google's own Go library gets a token for the
// test service account; assertions that are not that account's, or not
// well-formed, are refused.
func TestGoogleTokenEndpoint(t *testing.T) {
	srv, s, key := identityServer(t, 90*time.Second)
	tok, err := twoLegged(t, key).Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(tok.Expiry); left < 80*time.Second || left > 91*time.Second || !strings.HasPrefix(tok.Value, "sim.") {
		t.Errorf("token %q expires in %v, want ~90 s", tok.Value, left)
	}
	if got := s.TokensIssued(); len(got) != 1 || got[0].Subject != testAccount || got[0].Grant != "jwt-bearer" {
		t.Errorf("issued %+v", got)
	}

	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now().Unix()
	good := map[string]any{"iss": testAccount, "scope": "https://www.googleapis.com/auth/cloud-platform", "aud": srv.URL + "/token", "iat": now, "exp": now + 3600}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	for name, assertion := range map[string]string{
		"another key":     signJWT(t, other, "RS256", good),
		"unknown account": signJWT(t, other, "RS256", with("iss", "x@y.iam.gserviceaccount.com")),
		"alg none":        strings.Join(strings.Split(signJWT(t, other, "none", good), ".")[:2], ".") + ".",
		"two segments":    "a.b",
		"garbage":         "!!!.???.###",
	} {
		code, body := postForm(t, srv.URL+"/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}})
		if code != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Errorf("%s: %d %v", name, code, body)
		}
	}
	code, body := postForm(t, srv.URL+"/token", url.Values{"grant_type": {"client_credentials"}})
	if code != http.StatusBadRequest || body["error"] != "unsupported_grant_type" {
		t.Errorf("wrong grant: %d %v", code, body)
	}
	if n := len(s.TokensIssued()); n != 1 {
		t.Errorf("%d tokens issued, want 1", n)
	}
}

// TestVerifyJWTClaims: each claim a token endpoint checks, signed with the
// account's own key.
func TestVerifyJWTClaims(t *testing.T) {
	k, _ := rsa.GenerateKey(rand.Reader, 2048)
	accounts := map[string]*rsa.PublicKey{testAccount: &k.PublicKey}
	now := time.Unix(1_800_000_000, 0)
	aud := []string{testTokenURL}
	base := func() map[string]any {
		return map[string]any{"iss": testAccount, "scope": "s", "aud": testTokenURL, "iat": now.Unix(), "exp": now.Unix() + 3600}
	}
	if sub, err := VerifyJWT(signJWT(t, k, "RS256", base()), accounts, aud, now); err != nil || sub != testAccount {
		t.Fatalf("good assertion: %q %v", sub, err)
	}
	for name, edit := range map[string]func(m map[string]any){
		"expired":         func(m map[string]any) { m["iat"], m["exp"] = now.Unix()-7200, now.Unix()-3600 },
		"from the future": func(m map[string]any) { m["iat"], m["exp"] = now.Unix()+600, now.Unix()+1200 },
		"too long":        func(m map[string]any) { m["exp"] = now.Unix() + 7200 },
		"other audience":  func(m map[string]any) { m["aud"] = "https://example.com/token" },
		"no scope":        func(m map[string]any) { delete(m, "scope") },
	} {
		m := base()
		edit(m)
		if _, err := VerifyJWT(signJWT(t, k, "RS256", m), accounts, aud, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzVerifyJWT: no assertion crashes the token endpoint, and none but
// the account's signed ones pass.
func FuzzVerifyJWT(f *testing.F) {
	k, _ := rsa.GenerateKey(rand.Reader, 1024)
	accounts := map[string]*rsa.PublicKey{testAccount: &k.PublicKey}
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ0dGZ4LXRlc3RAc2ltLXByb2plY3QuaWFtLmdzZXJ2aWNlYWNjb3VudC5jb20ifQ.c2ln")
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, a string) {
		if _, err := VerifyJWT(a, accounts, []string{testTokenURL}, time.Now()); err == nil {
			t.Fatalf("accepted %q", a)
		}
	})
}

// TestEntraToken: the client-credentials grant for the configured
// application only.
func TestEntraToken(t *testing.T) {
	srv, s, _ := identityServer(t, time.Hour)
	u := srv.URL + "/tenant-1/oauth2/v2.0/token"
	ok := url.Values{"grant_type": {"client_credentials"}, "client_id": {"app-1"}, "client_secret": {"secret-1"}, "scope": {"https://cognitiveservices.azure.com/.default"}}
	code, body := postForm(t, u, ok)
	if code != 200 || body["token_type"] != "Bearer" || body["expires_in"] != float64(3600) || body["access_token"] == "" {
		t.Fatalf("%d %v", code, body)
	}
	for name, tt := range map[string]struct {
		k, v  string
		code  int
		error string
	}{
		"wrong secret": {"client_secret", "nope", 401, "invalid_client"},
		"unknown app":  {"client_id", "app-2", 400, "unauthorized_client"},
		"bad scope":    {"scope", "https://cognitiveservices.azure.com", 400, "invalid_scope"},
		"wrong grant":  {"grant_type", "password", 400, "unsupported_grant_type"},
	} {
		f := url.Values{}
		for k, v := range ok {
			f[k] = v
		}
		f.Set(tt.k, tt.v)
		if code, body := postForm(t, u, f); code != tt.code || body["error"] != tt.error {
			t.Errorf("%s: %d %v", name, code, body)
		}
	}
	if got := s.TokensIssued(); len(got) != 1 || got[0].Subject != "app-1" {
		t.Errorf("issued %+v", got)
	}
}

// vertexCall posts body to a Vertex model URL with tok.
func vertexCall(t *testing.T, base, publisher, target, tok, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/projects/sim-project/locations/us-east5/publishers/"+publisher+"/models/"+target, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const (
	geminiBody    = `{"contents":[{"role":"user","parts":[{"text":"Say hello."}]}]}`
	anthropicBody = `{"anthropic_version":"vertex-2023-10-16","max_tokens":64,"stream":%v,"messages":[{"role":"user","content":"Say hello."}]}`
)

// TestVertexRoutes: both model families, streaming and not, with a token
// from the token endpoint; Vertex's body rules for Anthropic models; a
// missing, unknown or expired token refused with Google's 401; a fault
// profile's status on this kind too.
func TestVertexRoutes(t *testing.T) {
	srv, _, key := identityServer(t, 5*time.Second)
	tok, err := twoLegged(t, key).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		publisher, target, body, want string
	}{
		{"google", "fast:streamGenerateContent?alt=sse", geminiBody, `"finishReason"`},
		{"google", "fast:generateContent", geminiBody, `"candidates"`},
		{"anthropic", "fast:streamRawPredict", fmt.Sprintf(anthropicBody, true), "event: message_stop"},
		{"anthropic", "fast:rawPredict", fmt.Sprintf(anthropicBody, false), `"stop_reason"`},
	} {
		resp, body := vertexCall(t, srv.URL, tt.publisher, tt.target, tok.Value, tt.body)
		if resp.StatusCode != 200 || !strings.Contains(body, tt.want) {
			t.Errorf("%s %s: %d %.300s", tt.publisher, tt.target, resp.StatusCode, body)
		}
	}
	for name, body := range map[string]string{
		"model in the body":    `{"model":"fast","anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		"no anthropic_version": `{"max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		"not a version":        `{"anthropic_version":"latest","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
	} {
		resp, b := vertexCall(t, srv.URL, "anthropic", "fast:rawPredict", tok.Value, body)
		if resp.StatusCode != 400 || !strings.Contains(b, `"invalid_request_error"`) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	resp, b := vertexCall(t, srv.URL, "google", "status-429:generateContent", tok.Value, geminiBody)
	if resp.StatusCode != 429 || !strings.Contains(b, `"RESOURCE_EXHAUSTED"`) {
		t.Errorf("fault status:429: %d %s", resp.StatusCode, b)
	}
	for name, tk := range map[string]string{"no token": "", "unknown token": "sim.forged"} {
		resp, b := vertexCall(t, srv.URL, "google", "fast:generateContent", tk, geminiBody)
		if resp.StatusCode != 401 || !strings.Contains(b, `"UNAUTHENTICATED"`) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	time.Sleep(time.Until(tok.Expiry) + 50*time.Millisecond)
	resp, b = vertexCall(t, srv.URL, "anthropic", "fast:rawPredict", tok.Value, fmt.Sprintf(anthropicBody, false))
	if resp.StatusCode != 401 || !strings.Contains(b, "ACCESS_TOKEN_EXPIRED") {
		t.Errorf("expired token: %d %s", resp.StatusCode, b)
	}
}
