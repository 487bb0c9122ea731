// Package auth identifies the caller of a request by its key. Keys are kept
// only as SHA-256 hashes and compared in constant time (SPEC.md §5, §7).
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// Role is what a key may do.
type Role string

const (
	RoleAdmin  Role = "admin"  // reads all metadata
	RoleViewer Role = "viewer" // reads the metadata of its group
	RoleClient Role = "client" // calls the model APIs; reads only its own requests by id
)

// ParseRole checks a role name from the configuration.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleViewer, RoleClient:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want admin, viewer or client)", s)
}

// Principal is the identity a key resolves to.
type Principal struct {
	Name  string // the key's configured name
	Role  Role
	Group string // empty: no group
}

// Hash is the SHA-256 of a key. API keys are long random strings, so a fast
// unsalted hash is enough to keep them from being recovered from storage.
type Hash [sha256.Size]byte

// HashKey hashes a key.
func HashKey(key string) Hash { return sha256.Sum256([]byte(key)) }

// String returns the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads a hash written by String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("invalid key hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// Entry is one known key.
type Entry struct {
	Principal
	Hash Hash
}

// Keyring holds the known keys. It is safe for concurrent use: Set replaces
// the whole set at once (keys made or revoked while the gateway runs), and a
// Lookup sees either the old set or the new one, never a mix.
type Keyring struct {
	entries atomic.Pointer[[]Entry]
}

// NewKeyring returns a keyring of the given entries.
func NewKeyring(entries []Entry) *Keyring {
	k := &Keyring{}
	k.Set(entries)
	return k
}

// Set replaces the keyring's entries.
func (k *Keyring) Set(entries []Entry) {
	e := append([]Entry(nil), entries...)
	k.entries.Store(&e)
}

// Lookup returns the principal of key. It compares the key's hash with every
// entry's in constant time and does not stop at a match, so the time it takes
// says nothing about which key, or how much of one, matched.
func (k *Keyring) Lookup(key string) (Principal, bool) {
	if key == "" {
		return Principal{}, false
	}
	h := HashKey(key)
	entries := *k.entries.Load()
	found := -1
	for i := range entries {
		if subtle.ConstantTimeCompare(h[:], entries[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return entries[found].Principal, true
}

// Entries returns the keyring's entries (hashes only).
func (k *Keyring) Entries() []Entry { return append([]Entry(nil), *k.entries.Load()...) }

// FromRequest returns the key a client presented: `Authorization: Bearer`,
// `x-api-key`, `x-goog-api-key`, `api-key` (some providers' SDKs send
// the key there: an application moved behind the gateway keeps its client
// and sends its ttfx key where it sent its provider's) or the `key` query parameter, in that order (the headers
// and the query the providers' SDKs send keys in). It returns "" when
// there is none.
func FromRequest(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, token, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token)
		}
	}
	if h := r.Header.Get("X-Api-Key"); h != "" {
		return h
	}
	if h := r.Header.Get("X-Goog-Api-Key"); h != "" {
		return h
	}
	if h := r.Header.Get("Api-Key"); h != "" {
		return h
	}
	return r.URL.Query().Get("key")
}

// FromHeaders returns the key a caller presented in the headers the read
// API and the dashboard accept: `Authorization: Bearer`, then `x-api-key`.
// Unlike FromRequest it never reads the `key` query parameter: an admin or
// viewer key in a URL ends up in access logs, proxies' logs and Referer
// headers. It returns "" when there is none.
func FromHeaders(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, token, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token)
		}
	}
	return r.Header.Get("X-Api-Key")
}

// NewKey returns a new random key with the given prefix ("ttfx-admin-…").
func NewKey(prefix string) string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("auth: crypto/rand: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}
