package chstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/ttfx/ttfx/internal/store"
)

// StorageSize implements store.Sizer: the compressed bytes on disk of each
// table's active parts, primary index and marks included (on a cluster,
// summed over its nodes).
func (s *chStore) StorageSize(ctx context.Context) ([]store.TableSize, error) {
	sizes := map[string]int64{}
	for _, db := range s.partPools() {
		if err := addPartSizes(ctx, db, sizes); err != nil {
			return nil, fmt.Errorf("storage size: %w", err)
		}
	}
	out := make([]store.TableSize, 0, len(sizes))
	for t, b := range sizes {
		out = append(out, store.TableSize{Table: t, Bytes: b})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Table < out[j].Table
	})
	return out, nil
}

// addPartSizes adds the bytes of each table of db's database to sizes.
func addPartSizes(ctx context.Context, db *sql.DB, sizes map[string]int64) error {
	rows, err := db.QueryContext(ctx, `SELECT table, toInt64(sum(bytes_on_disk)) FROM system.parts
		WHERE database = currentDatabase() AND active GROUP BY table`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		var b int64
		if err := rows.Scan(&t, &b); err != nil {
			return err
		}
		sizes[t] += b
	}
	return rows.Err()
}
