package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// withoutRowidTables are the SQLite tables that migration 0034 rebuilds as
// WITHOUT ROWID: each has a composite primary key (request_id and attempt
// or position) that a rowid table keeps a second time in its automatic
// index, while a WITHOUT ROWID table is that index. Their rows are small
// (an attempt about 125 bytes), which is where WITHOUT ROWID fits: at
// 100 000 records a week (ttfx seed) the two cost 137 and 33 bytes a
// record instead of 166 and 43.
//
// Not the rollups, in a file of 4 KB pages: measured the same way,
// WITHOUT ROWID made them cost 4 851 bytes a record instead of 4 013 (rows
// and key index). A dense row is over the 1 002 bytes an index page keeps
// inline (4 KB pages), so its tail goes to an overflow page that it mostly
// leaves empty, and the interior pages carry whole rows as keys. With
// 16 KB pages a page keeps 4 050 bytes of a row inline, which nearly
// every rollup row fits: see rebuildRollupsWithoutRowid.
var withoutRowidTables = []string{"request_attempts", "request_labels"}

// rebuildRollupsWithoutRowid is migration 0036 on SQLite: in a file of
// 16 KB pages or more (every file made since: see openSQLite) the
// rollups table becomes a WITHOUT ROWID table, so that its primary key —
// the unit and every key column — is no longer stored a second time in
// an automatic index. A file of smaller pages keeps its rollups as they
// are (its page size changes only with a VACUUM in rollback-journal mode,
// a rewrite of the whole file that a migration should not start).
func rebuildRollupsWithoutRowid(ctx context.Context, tx *sql.Tx, _ dialect) error {
	var page int
	if err := tx.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&page); err != nil {
		return fmt.Errorf("rollups without rowid: %w", err)
	}
	if page < 16384 {
		return nil
	}
	if err := rebuildTable(ctx, tx, "rollups", false); err != nil {
		return fmt.Errorf("rollups without rowid: %w", err)
	}
	return nil
}

// rebuildWithoutRowid is migration 0034 on SQLite: each table of
// withoutRowidTables is made again from its own current definition (so
// that the columns added by earlier migrations stay, in their order) with
// WITHOUT ROWID appended, its rows copied, its other indexes made again.
func rebuildWithoutRowid(ctx context.Context, tx *sql.Tx, _ dialect) error {
	for _, t := range withoutRowidTables {
		if err := rebuildTable(ctx, tx, t, false); err != nil {
			return fmt.Errorf("%s without rowid: %w", t, err)
		}
	}
	return nil
}

// rebuildTable makes table again as a rowid table or a WITHOUT ROWID one;
// it does nothing to a table that is one already. (Tests make the tables
// of a store before migration 0034 with rowid true.)
func rebuildTable(ctx context.Context, tx *sql.Tx, table string, rowid bool) error {
	ddl, err := tableDDL(ctx, tx, table)
	if err != nil {
		return err
	}
	ddl = strings.TrimSpace(ddl)
	const suffix = " WITHOUT ROWID"
	without := strings.HasSuffix(strings.ToUpper(ddl), suffix)
	if without != rowid {
		return nil
	}
	if without {
		ddl = strings.TrimSpace(ddl[:len(ddl)-len(suffix)])
	}
	body, err := tableBody(ddl, table)
	if err != nil {
		return err
	}
	indexes, err := tableIndexes(ctx, tx, table)
	if err != nil {
		return err
	}
	cols, err := tableColumns(ctx, tx, table)
	if err != nil {
		return err
	}
	if !rowid {
		body += suffix
	}
	return replaceTable(ctx, tx, table, body, cols, cols, indexes)
}
