package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

func (s *sqlStore) ListKeys(ctx context.Context) ([]store.KeyRow, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT hash, name, role, group_name, created_ns, expires_ns FROM api_keys ORDER BY created_ns, name`)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer rows.Close()
	var out []store.KeyRow
	for rows.Next() {
		var k store.KeyRow
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

func (s *sqlStore) ChangeKeys(ctx context.Context, c store.KeyChange) (store.KeyResult, error) {
	var res store.KeyResult
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
			return res, fmt.Errorf("%w: %q", store.ErrKeyNotFound, c.End)
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
				return res, fmt.Errorf("%w: %q", store.ErrKeyExists, k.Name)
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
