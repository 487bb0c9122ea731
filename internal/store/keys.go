package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

func (s *sqlStore) ListKeys(ctx context.Context) ([]KeyRow, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT hash, name, role, group_name, created_ns, expires_ns FROM api_keys ORDER BY created_ns, name`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []KeyRow
	for rows.Next() {
		var k KeyRow
		var created int64
		var expires sql.NullInt64
		if err := rows.Scan(&k.Hash, &k.Name, &k.Role, &k.Group, &created, &expires); err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		k.Created = time.Unix(0, created)
		if expires.Valid {
			k.Expires = time.Unix(0, expires.Int64)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	return out, nil
}

func (s *sqlStore) ChangeKeys(ctx context.Context, c KeyChange) (KeyResult, error) {
	var res KeyResult
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("change keys: %w", err)
	}
	defer tx.Rollback()
	// Two commands changing keys at once must not both see a name free:
	// PostgreSQL takes ttfx's advisory lock, SQLite's BEGIN IMMEDIATE has
	// already taken the write lock.
	if s.d.migrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.migrationLock); err != nil {
			return res, fmt.Errorf("change keys: lock: %w", err)
		}
	}
	if c.OnlyIfEmpty {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys`).Scan(&n); err != nil {
			return res, fmt.Errorf("change keys: %w", err)
		}
		if n > 0 {
			return res, nil
		}
	}
	now := time.Now().UnixNano()
	if c.End != "" {
		r, err := tx.ExecContext(ctx, `UPDATE api_keys SET expires_ns = $1 WHERE name = $2 AND (expires_ns IS NULL OR expires_ns > $3)`,
			c.EndAt.UnixNano(), c.End, max(now, c.EndAt.UnixNano()))
		if err != nil {
			return res, fmt.Errorf("change keys: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return res, fmt.Errorf("change keys: %w", err)
		}
		if n == 0 {
			return res, fmt.Errorf("%w: %q", ErrKeyNotFound, c.End)
		}
		res.Ended = int(n)
	}
	for _, k := range c.Add {
		if k.Name != c.End {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE name = $1 AND (expires_ns IS NULL OR expires_ns > $2)`,
				k.Name, now).Scan(&n); err != nil {
				return res, fmt.Errorf("change keys: %w", err)
			}
			if n > 0 {
				return res, fmt.Errorf("%w: %q", ErrKeyExists, k.Name)
			}
		}
		var expires sql.NullInt64
		if !k.Expires.IsZero() {
			expires = sql.NullInt64{Int64: k.Expires.UnixNano(), Valid: true}
		}
		created := k.Created
		if created.IsZero() {
			created = time.Unix(0, now)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO api_keys (hash, name, role, group_name, created_ns, expires_ns) VALUES ($1, $2, $3, $4, $5, $6)`,
			k.Hash, k.Name, k.Role, k.Group, created.UnixNano(), expires); err != nil {
			return res, fmt.Errorf("change keys: add %q: %w", k.Name, err)
		}
		res.Added++
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("change keys: %w", err)
	}
	return res, nil
}

// RedactDSN hides a password in a DSN, for messages that name the store.
func RedactDSN(dsn string) string { return redactDSN(dsn) }
