package record

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestHashUser(t *testing.T) {
	key := []byte("0123456789abcdef-deployment-key")
	h := HashUser(key, "user-42@example.com")
	// HMAC-SHA256 (RFC 2104) truncated to 128 bits, in hex.
	m := hmac.New(sha256.New, key)
	m.Write([]byte("user-42@example.com"))
	if want := hex.EncodeToString(m.Sum(nil))[:32]; h != want {
		t.Errorf("hash %s, want %s", h, want)
	}
	if h != HashUser(key, "user-42@example.com") {
		t.Error("not deterministic: replicas would disagree")
	}
	if h == HashUser([]byte("another-deployment-key-0123456"), "user-42@example.com") {
		t.Error("the key does not change the hash")
	}
	if h == HashUser(key, "user-43@example.com") {
		t.Error("two users share a hash")
	}
	if strings.Contains(h, "user") || len(h) != 32 {
		t.Errorf("hash %q", h)
	}
	if HashUser(key, "") != "" || HashUser(nil, "user-42") != "" {
		t.Error("no user id, or no key, must store nothing")
	}
}
