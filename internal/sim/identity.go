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

// The simulator's identity providers: the OAuth2 token endpoints that the
// kinds register (Kind.Endpoints) issue access tokens through IssueToken,
// and the routes that need them check the bearer token (Call.Bearer). A
// token lives Identity.TokenLifetime; a bearer check refuses a token the
// simulator did not issue or one that expired. VerifyJWT checks a service
// account's signed assertion (the JWT-bearer grant of RFC 7523).

// Identity configures the simulator's token endpoints.
type Identity struct {
	// ServiceAccounts are the service accounts whose signed JWTs the
	// JWT-bearer grant accepts, by client_email (NewServiceAccount makes
	// one).
	ServiceAccounts map[string]*rsa.PublicKey
	// EntraClients are the applications the client-credentials grant
	// accepts: client_id → client_secret.
	EntraClients map[string]string
	// TokenLifetime is how long an issued token is valid; 0: one hour,
	// as the identity providers issue them.
	TokenLifetime time.Duration
}

// TokenIssued describes one token the simulator issued, for tests.
type TokenIssued struct {
	Grant   string // "jwt-bearer" or "client_credentials"
	Subject string // the service account or the client_id
	Expiry  time.Time
}

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

// OAuthError writes an OAuth2 error response (RFC 6749 §5.2), as the
// identity providers' token endpoints shape them.
func OAuthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// Identity is the simulator's Options.Identity; nil when none is set.
func (s *Server) Identity() *Identity { return s.opts.Identity }

// Now is the simulator's clock.
func (s *Server) Now() time.Time { return s.now() }

// IssueToken answers a token request granted to subject: a new access
// token that lives Identity.TokenLifetime, as {"access_token",
// "expires_in", "token_type": "Bearer"}. grant names the grant in
// TokensIssued.
func (s *Server) IssueToken(w http.ResponseWriter, grant, subject string) {
	life := s.tokenLifetime()
	tok, err := s.issued.issue(s.now(), life, grant, subject)
	if err != nil {
		OAuthError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	secs := int(life.Round(time.Second) / time.Second)
	json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "expires_in": secs, "ext_expires_in": secs, "token_type": "Bearer"})
}

// jwtClaims are the claims of a service account's assertion.
type jwtClaims struct {
	Iss   string `json:"iss"`
	Scope string `json:"scope"`
	Aud   string `json:"aud"`
	Iat   int64  `json:"iat"`
	Exp   int64  `json:"exp"`
}

// VerifyJWT checks a service account's assertion, RS256-signed by a key
// of accounts, for one of the audiences aud, with a scope, and at most an
// hour long; it returns its issuer. The messages are those of the most
// used token endpoint where it has one.
func VerifyJWT(assertion string, accounts map[string]*rsa.PublicKey, aud []string, now time.Time) (string, error) {
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
// file a cloud console downloads, with token_uri set to tokenURI)
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
