package sim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The simulator's identity providers: the token endpoints that issue the
// OAuth2 access tokens the vertex kind (Google) and the azure kind's Entra
// ID credentials send, and the bearer check of the routes that need them.
//
//   - Google: POST /token, the JWT-bearer grant (RFC 7523) that a service
//     account's key signs, as https://oauth2.googleapis.com/token takes it:
//     grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT,
//     the JWT RS256-signed by a key Identity.ServiceAccounts holds, issued
//     by that account, for the token endpoint, with a scope, and at most an
//     hour long;
//   - Entra ID: POST /{tenant}/oauth2/v2.0/token, the client-credentials
//     grant with client_id, client_secret and a scope ending in /.default.
//
// Both answer {"access_token", "expires_in", "token_type": "Bearer"} with a
// token that lives Identity.TokenLifetime; a bearer check refuses a token
// the simulator did not issue or one that expired (Google's
// UNAUTHENTICATED, Azure's 401).

// Identity configures the simulator's token endpoints.
type Identity struct {
	// ServiceAccounts are the Google service accounts whose signed JWTs
	// the token endpoint accepts, by client_email (NewServiceAccount makes
	// one).
	ServiceAccounts map[string]*rsa.PublicKey
	// EntraClients are the Entra ID applications the client-credentials
	// grant accepts: client_id → client_secret.
	EntraClients map[string]string
	// TokenLifetime is how long an issued token is valid; 0: one hour,
	// as Google and Entra ID issue them.
	TokenLifetime time.Duration
}

// TokenIssued describes one token the simulator issued, for tests.
type TokenIssued struct {
	Grant   string // "jwt-bearer" or "client_credentials"
	Subject string // the service account or the client_id
	Expiry  time.Time
}

// googleTokenURL is Google's token endpoint: a JWT is signed for it.
const googleTokenURL = "https://oauth2.googleapis.com/token"

// maxAssertion bounds a JWT the token endpoint reads.
const maxAssertion = 16 << 10

// issued are the access tokens the simulator issued.
type issued struct {
	mu     sync.Mutex
	expiry map[string]time.Time // guarded by mu
	issued []TokenIssued        // guarded by mu
}

func (t *issued) issue(now time.Time, life time.Duration, grant, subject string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := "sim." + base64.RawURLEncoding.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.expiry == nil {
		t.expiry = map[string]time.Time{}
	}
	for k, e := range t.expiry { // expired tokens are forgotten as new ones come
		if now.Sub(e) > time.Minute {
			delete(t.expiry, k)
		}
	}
	t.expiry[tok] = now.Add(life)
	t.issued = append(t.issued, TokenIssued{Grant: grant, Subject: subject, Expiry: now.Add(life)})
	return tok, nil
}

// check reports whether tok was issued and is valid at now.
func (t *issued) check(tok string, now time.Time) (known, valid bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.expiry[tok]
	return ok, ok && now.Before(e)
}

// TokensIssued returns the tokens the simulator issued, oldest first.
func (s *Server) TokensIssued() []TokenIssued {
	s.issued.mu.Lock()
	defer s.issued.mu.Unlock()
	return append([]TokenIssued(nil), s.issued.issued...)
}

func (s *Server) tokenLifetime() time.Duration {
	if id := s.opts.Identity; id != nil && id.TokenLifetime > 0 {
		return id.TokenLifetime
	}
	return time.Hour
}

// oauthError writes an OAuth2 error response (RFC 6749 §5.2), as both
// Google's and Microsoft's token endpoints shape them.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

func (s *Server) writeToken(w http.ResponseWriter, grant, subject string) {
	life := s.tokenLifetime()
	tok, err := s.issued.issue(s.now(), life, grant, subject)
	if err != nil {
		oauthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	secs := int(life.Round(time.Second) / time.Second)
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "expires_in": secs, "ext_expires_in": secs, "token_type": "Bearer"})
}

// googleToken serves POST /token: the JWT-bearer grant.
func (s *Server) googleToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "use POST")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxAssertion+1024)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "the body is not a form")
		return
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "Invalid grant_type: "+clip(g))
		return
	}
	var accounts map[string]*rsa.PublicKey
	if s.opts.Identity != nil {
		accounts = s.opts.Identity.ServiceAccounts
	}
	aud := []string{googleTokenURL, "http://" + r.Host + "/token", "https://" + r.Host + "/token"}
	sub, err := verifyJWT(r.PostForm.Get("assertion"), accounts, aud, s.now())
	if err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return
	}
	s.writeToken(w, "jwt-bearer", sub)
}

// jwtClaims are the claims of a service account's assertion.
type jwtClaims struct {
	Iss   string `json:"iss"`
	Scope string `json:"scope"`
	Aud   string `json:"aud"`
	Iat   int64  `json:"iat"`
	Exp   int64  `json:"exp"`
}

// verifyJWT checks a service account's assertion and returns its issuer.
// The messages are Google's where it has one.
func verifyJWT(assertion string, accounts map[string]*rsa.PublicKey, aud []string, now time.Time) (string, error) {
	if len(assertion) > maxAssertion {
		return "", errors.New("Invalid JWT: too long.")
	}
	head, rest, ok1 := strings.Cut(assertion, ".")
	body, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return "", errors.New("Invalid JWT: not three segments.")
	}
	var h struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	if err := decodeSegment(head, &h); err != nil {
		return "", errors.New("Invalid JWT: bad header.")
	}
	if h.Alg != "RS256" {
		return "", errors.New("Invalid JWT: alg must be RS256.")
	}
	var c jwtClaims
	if err := decodeSegment(body, &c); err != nil {
		return "", errors.New("Invalid JWT: bad claims.")
	}
	pub := accounts[c.Iss]
	if pub == nil {
		return "", errors.New("Invalid JWT: No valid verifier found for issuer.")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return "", errors.New("Invalid JWT Signature.")
	}
	sum := sha256.Sum256([]byte(assertion[:len(head)+1+len(body)]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], raw) != nil {
		return "", errors.New("Invalid JWT Signature.")
	}
	okAud := false
	for _, a := range aud {
		okAud = okAud || subtle.ConstantTimeCompare([]byte(a), []byte(c.Aud)) == 1
	}
	switch t := now.Unix(); {
	case !okAud:
		return "", fmt.Errorf("Invalid JWT: audience %q is not this token endpoint.", clip(c.Aud))
	case c.Scope == "":
		return "", errors.New("Invalid JWT: no scope.")
	case c.Exp <= t || c.Iat > t+60:
		return "", errors.New("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
	case c.Exp-c.Iat > 3600:
		return "", errors.New("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
	}
	return c.Iss, nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// entraToken serves POST /{tenant}/oauth2/v2.0/token: the
// client-credentials grant.
func (s *Server) entraToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request", "AADSTS900561: The endpoint only accepts POST requests.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must be a form.")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.")
		return
	}
	if !strings.HasSuffix(f.Get("scope"), "/.default") {
		oauthError(w, http.StatusBadRequest, "invalid_scope", "AADSTS1002012: The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.")
		return
	}
	id := f.Get("client_id")
	var want string
	var known bool
	if s.opts.Identity != nil {
		want, known = s.opts.Identity.EntraClients[id]
	}
	if !known {
		oauthError(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+clip(id)+"' was not found in the directory.")
		return
	}
	if subtle.ConstantTimeCompare([]byte(f.Get("client_secret")), []byte(want)) != 1 {
		oauthError(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
		return
	}
	s.writeToken(w, "client_credentials", id)
}

// bearer checks an issued token: "" when it is valid, else why not. With
// no Identity configured, any bearer token passes (as any key does without
// Options.APIKey).
func (s *Server) bearer(r *http.Request) string {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "missing"
	}
	if s.opts.Identity == nil {
		return ""
	}
	switch known, valid := s.issued.check(tok, s.now()); {
	case valid:
		return ""
	case known:
		return "expired"
	}
	return "invalid"
}

// clip bounds a client's string echoed in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// NewServiceAccount makes a service account for tests: its JSON key (the
// file Google Cloud's console downloads, with token_uri set to tokenURI)
// and the public key the simulator's Identity verifies its JWTs with.
func NewServiceAccount(email, tokenURI string) (key []byte, pub *rsa.PublicKey, err error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	_, domain, _ := strings.Cut(email, "@")
	project, _, _ := strings.Cut(domain, ".")
	key, err = json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  project,
		"private_key_id":              fmt.Sprintf("%x", sha256.Sum256(der))[:40],
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                email,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   tokenURI,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	return key, &k.PublicKey, err
}
