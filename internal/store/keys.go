package store

import (
	"context"
	"errors"
	"time"
)

// KeyRow is one API key as the store keeps it (migrations/0005_keys.sql):
// its hash, never the key.
type KeyRow struct {
	Hash    string // SHA-256 of the key, hex
	Name    string
	Role    string // admin | viewer | client
	Group   string // empty: no group
	Created time.Time
	// Expires is when the key stops working; zero: until revoked.
	Expires time.Time
}

// Live reports whether the key works at t.
func (k KeyRow) Live(t time.Time) bool { return k.Expires.IsZero() || t.Before(k.Expires) }

// KeyChange is one change to the stored keys, made in one transaction.
type KeyChange struct {
	// End names the keys whose live rows stop working at EndAt (revoke:
	// now; rotate: now plus the grace period). Empty: none.
	End   string
	EndAt time.Time
	// Add are new keys. A name that already has a live key is refused
	// with ErrKeyExists, unless it is End's (rotation).
	Add []KeyRow
	// OnlyIfEmpty adds nothing when the table holds any key, live or not
	// (the zero-config gateway's first start: two starts at once make one
	// set of keys).
	OnlyIfEmpty bool
}

// KeyResult says what a KeyChange did.
type KeyResult struct {
	Ended int // live rows of End that now end at EndAt
	Added int
}

// Errors of the key store.
var (
	ErrKeyExists   = errors.New("store: a live key has this name")
	ErrKeyNotFound = errors.New("store: no live key has this name")
)

// KeyStore keeps API keys. The Store of both engines implements it; the
// gateway polls ListKeys (see internal/server).
type KeyStore interface {
	// ListKeys returns every stored key, ended ones included, oldest first.
	ListKeys(ctx context.Context) ([]KeyRow, error)
	// ChangeKeys applies c in one transaction; with End set and no live
	// key of that name it fails with ErrKeyNotFound and changes nothing.
	ChangeKeys(ctx context.Context, c KeyChange) (KeyResult, error)
}

// RedactDSN hides a password in a DSN, for messages that name the store.
func RedactDSN(dsn string) string { return redactDSN(dsn) }
