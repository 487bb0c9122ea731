package chstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/ttfx/ttfx/internal/store"
)

// StorageSize implements store.Sizer: the compressed bytes on disk of each
// table's active parts, primary index and marks included.
func (s *chStore) StorageSize(ctx context.Context) ([]store.TableSize, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT table, toInt64(sum(bytes_on_disk)) FROM system.parts
		WHERE database = currentDatabase() AND active GROUP BY table`)
	if err != nil {
		return nil, fmt.Errorf("storage size: %w", err)
	}
	defer rows.Close()
	var out []store.TableSize
	for rows.Next() {
		var t store.TableSize
		if err := rows.Scan(&t.Table, &t.Bytes); err != nil {
			return nil, fmt.Errorf("storage size: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage size: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out, nil
}
