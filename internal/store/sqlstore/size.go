package sqlstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/ttfx/ttfx/internal/store"
)

// StorageSize implements store.Sizer. On SQLite it reads the pages of each
// table and its indexes (the dbstat table) and the free pages; the file
// holds exactly these. On PostgreSQL it sums pg_total_relation_size —
// heap, indexes and TOAST — over each table and its day partitions, in
// the store's schema.
func (s *sqlStore) StorageSize(ctx context.Context) ([]store.TableSize, error) {
	var q string
	if s.d.name == "sqlite" {
		q = `SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_schema m ON m.name = d.name GROUP BY m.tbl_name
			UNION ALL SELECT '(free)', (SELECT freelist_count FROM pragma_freelist_count) * (SELECT page_size FROM pragma_page_size)`
	} else {
		q = `SELECT COALESCE(p.relname, c.relname), SUM(pg_total_relation_size(c.oid))::bigint FROM pg_class c
			LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent
			WHERE c.relkind = 'r' AND c.relnamespace = to_regnamespace(current_schema()) GROUP BY 1`
	}
	rows, err := s.read.QueryContext(ctx, q)
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
		if t.Bytes > 0 {
			out = append(out, t)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage size: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bytes > out[j].Bytes })
	return out, nil
}
