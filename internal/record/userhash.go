package record

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// HashUser returns the value for Record.UserHash: a keyed hash
// (HMAC-SHA256, first 128 bits in hex) of a user id a client sent, so that
// requests of one user can be grouped without the id itself being stored
// (SPEC.md §7). The key is a secret of the deployment, the same on every
// replica; without it a hash cannot be matched to a guessed id. It returns
// "" when there is no user id, and also when there is no key: an unkeyed
// hash of a user id can be reversed by guessing, so nothing is stored.
func HashUser(key []byte, userID string) string {
	if userID == "" || len(key) == 0 {
		return ""
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(userID))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
