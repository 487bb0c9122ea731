package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// SQLite cannot change a column's type or a table's WITHOUT ROWID in
// place: the migrations that do (0034, 0036, 0042, 0043) rebuild the table
// with these helpers, in the migration's transaction.

// tableBody is what follows "CREATE TABLE table (" in ddl, the table's
// definition in sqlite_master.
func tableBody(ddl, table string) (string, error) {
	head, body, ok := strings.Cut(ddl, "(")
	if !ok || !strings.EqualFold(strings.Trim(strings.TrimSpace(strings.TrimPrefix(head, "CREATE TABLE")), `"`), table) {
		return "", fmt.Errorf("unexpected definition %.60q", ddl)
	}
	return body, nil
}

// tableDDL is table's definition in sqlite_master.
func tableDDL(ctx context.Context, tx *sql.Tx, table string) (string, error) {
	var ddl string
	err := tx.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&ddl)
	return ddl, err
}

// tableIndexes are the definitions of table's own indexes (not the
// automatic ones of its keys).
func tableIndexes(ctx context.Context, tx *sql.Tx, table string) ([]string, error) {
	return queryStrings(ctx, tx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`, table)
}

// tableColumns are table's columns, in order.
func tableColumns(ctx context.Context, tx *sql.Tx, table string) ([]string, error) {
	return queryStrings(ctx, tx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
}

func queryStrings(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// replaceTable makes table again as body (what follows "CREATE TABLE
// name ("): a new table whose columns to are filled from the expressions
// from over the old table (as t), the old one dropped, the new one
// renamed, and the old table's indexes (which went with it; their
// definitions name the table, which has its name again) made again.
func replaceTable(ctx context.Context, tx *sql.Tx, table, body string, to, from, indexes []string) error {
	stmts := []string{
		"CREATE TABLE " + table + "_rebuilt (" + body,
		"INSERT INTO " + table + "_rebuilt (" + strings.Join(to, ", ") + ") SELECT " + strings.Join(from, ", ") + " FROM " + table + " t",
		"DROP TABLE " + table,
		"ALTER TABLE " + table + "_rebuilt RENAME TO " + table,
	}
	stmts = append(stmts, indexes...)
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%.80s: %w", s, err)
		}
	}
	return nil
}
