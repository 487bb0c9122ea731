package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/rollup"
)

// maxParams bounds the placeholders of one statement: SQLite allows 32766,
// PostgreSQL 65535.
const maxParams = 30000

// insertSQL caches the text of insert statements by dialect, table and row
// count.
var insertSQL sync.Map

// doNothing is the conflict clause of record inserts: a retried batch, or a
// record written twice, is kept once.
const doNothing = "ON CONFLICT DO NOTHING"

// valuesStatement is a multi-row INSERT ... VALUES (?, ...), (?, ...)
// followed by the conflict clause, with RETURNING returning when that is
// not empty.
func valuesStatement(table string, cs []store.Column, rows int, conflict, returning string) string {
	key := "values/" + table + "/" + strconv.Itoa(rows) + "x" + columnsKey(cs) + "/" + conflict + "/" + returning
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO " + table + " (" + strings.Join(store.ColumnNames(cs), ", ") + ") VALUES ")
	row := "(" + strings.Repeat("?, ", len(cs)-1) + "?)"
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	b.WriteString(" " + conflict)
	if returning != "" {
		b.WriteString(" RETURNING " + returning)
	}
	q := b.String()
	insertSQL.Store(key, q)
	return q
}

// columnsKey names a column list in insertSQL's keys: by its names, since
// two lists of one length differ (a table as stored now and before 0042,
// in tests of upgrades).
func columnsKey(cs []store.Column) string {
	return strings.Join(store.ColumnNames(cs), ",")
}

// inserter inserts rows of len(cs) arguments each (row-major) into table.
// When returning names a text column, it returns that column's values of
// the rows it inserted, which leaves out the rows ON CONFLICT skipped.
type inserter func(ctx context.Context, tx *sql.Tx, table string, cs []store.Column, args []any, conflict, returning string) ([]string, error)

// insertRows inserts rows with the inserter of d's engine.
func insertRows(ctx context.Context, tx *sql.Tx, d dialect, table string, cs []store.Column, args []any, conflict, returning string) ([]string, error) {
	if d.arrays {
		return insertUnnest(ctx, tx, table, cs, args, conflict, returning)
	}
	return insertValues(ctx, tx, d.stmts, table, cs, args, conflict, returning)
}

// insert inserts rows with the engine's inserter.
func (s *sqlStore) insert(ctx context.Context, tx *sql.Tx, table string, cs []store.Column, args []any, conflict, returning string) ([]string, error) {
	return insertRows(ctx, tx, s.d, table, cs, args, conflict, returning)
}

// execInsert runs one insert statement, collecting the returned column.
// With st (q prepared) it runs st in tx instead of preparing q again.
func execInsert(ctx context.Context, tx *sql.Tx, q string, st *sql.Stmt, args []any, returning string, got []string) ([]string, error) {
	if st != nil {
		st = tx.StmtContext(ctx, st)
		defer st.Close()
	}
	if returning == "" {
		var err error
		if st != nil {
			_, err = st.ExecContext(ctx, args...)
		} else {
			_, err = tx.ExecContext(ctx, q, args...)
		}
		return got, err
	}
	var rows *sql.Rows
	var err error
	if st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = tx.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return got, err
	}
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return got, err
		}
		got = append(got, v)
	}
	return got, rows.Close()
}

// queryCached runs the query q in tx, prepared when stmts has it (and
// noted for preparing when it does not), and calls each for every row.
func queryCached(ctx context.Context, tx *sql.Tx, stmts *stmtCache, q string, args []any, each func(*sql.Rows) error) error {
	st, err := stmts.get(ctx, q)
	if err != nil {
		return err
	}
	var rows *sql.Rows
	if st != nil {
		st = tx.StmtContext(ctx, st)
		defer st.Close()
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = tx.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Close()
}

// insertValues inserts rows as multi-row VALUES statements of at most
// maxParams placeholders. With a statement cache, the rows go in chunks of
// a few fixed sizes (chunkRows), whose statements stay prepared: SQLite
// otherwise parses every statement of every batch again, which was most of
// the writer's time.
func insertValues(ctx context.Context, tx *sql.Tx, stmts *stmtCache, table string, cs []store.Column, args []any, conflict, returning string) ([]string, error) {
	perStmt := maxParams / len(cs)
	var got []string
	for len(args) > 0 {
		n := min(len(args)/len(cs), perStmt)
		if stmts != nil {
			n = chunkRows(n)
		}
		chunk := args[:n*len(cs)]
		q := valuesStatement(table, cs, n, conflict, returning)
		st, err := stmts.get(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("insert %s: prepare: %w", table, err)
		}
		if got, err = execInsert(ctx, tx, q, st, chunk, returning, got); err != nil {
			return nil, fmt.Errorf("insert %s: %w", table, err)
		}
		args = args[len(chunk):]
	}
	return got, nil
}

// chunkRows is the largest of a few fixed row counts that is at most n.
// NumLevels is one of them: a write of one minute's records marks that
// many rollup units dirty (markDirty), in one statement rather than four.
func chunkRows(n int) int {
	for _, c := range [...]int{256, 64, 16, rollup.NumLevels, 4} {
		if c <= n {
			return c
		}
	}
	return 1
}

// stmtCache keeps insert statements prepared on a store's write pool. Its
// statements are of the few chunk sizes, tables and clauses there are, so
// it stays small. A statement is prepared between transactions (SQLite's
// write pool is one connection, which a transaction holds): one not yet
// prepared runs unprepared and is noted, and prepareNoted, called before
// the next transaction, prepares it. A nil cache prepares nothing.
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	m     map[string]*sql.Stmt
	noted []string
}

func newStmtCache(db *sql.DB) *stmtCache { return &stmtCache{db: db, m: map[string]*sql.Stmt{}} }

// get returns q prepared, or nil (and notes q) when it is not yet.
func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	if !slices.Contains(c.noted, q) {
		c.noted = append(c.noted, q)
	}
	return nil, nil
}

// prepareNoted prepares the statements get noted; outside a transaction.
// The lock is not held while preparing: that waits for the write
// connection, which a transaction of the same store (a compaction) may
// hold while it calls get.
func (c *stmtCache) prepareNoted(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	noted := c.noted
	c.noted = nil
	c.mu.Unlock()
	for i, q := range noted {
		st, err := c.db.PrepareContext(ctx, q)
		if err != nil {
			c.mu.Lock()
			c.noted = append(c.noted, noted[i:]...)
			c.mu.Unlock()
			return err
		}
		c.mu.Lock()
		if _, ok := c.m[q]; ok {
			st.Close()
		} else {
			c.m[q] = st
		}
		c.mu.Unlock()
	}
	return nil
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

// unnestStatement is INSERT ... SELECT * FROM unnest($1::text[], ...): one
// array parameter per column, whatever the row count, so PostgreSQL
// prepares and plans it once. It writes 4 times the rows per second of a
// 500-row VALUES statement with 23000 parameters (measured: 57k against
// 15k rows/s), which PostgreSQL re-plans on every execution.
func unnestStatement(table string, cs []store.Column, conflict, returning string) string {
	key := "unnest/" + table + "/" + columnsKey(cs) + "/" + conflict + "/" + returning
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	arrays := make([]string, len(cs))
	for i, c := range cs {
		arrays[i] = "$" + strconv.Itoa(i+1) + "::" + [...]string{store.TextCol: "text[]", store.IntCol: "int8[]", store.FloatCol: "float8[]", store.BoolCol: "bool[]", store.BytesCol: "bytea[]"}[c.Kind]
	}
	q := "INSERT INTO " + table + " (" + strings.Join(store.ColumnNames(cs), ", ") + ") SELECT * FROM unnest(" +
		strings.Join(arrays, ", ") + ") " + conflict
	if returning != "" {
		q += " RETURNING " + returning
	}
	insertSQL.Store(key, q)
	return q
}

// insertUnnest inserts row-major args column-wise, as typed arrays.
func insertUnnest(ctx context.Context, tx *sql.Tx, table string, cs []store.Column, args []any, conflict, returning string) ([]string, error) {
	rows := len(args) / len(cs)
	if rows == 0 {
		return nil, nil
	}
	params := make([]any, len(cs))
	for j, c := range cs {
		switch c.Kind {
		case store.TextCol:
			a := make([]string, rows)
			for i := range a {
				a[i], _ = args[i*len(cs)+j].(string)
			}
			params[j] = a
		// Nullable numbers as pgtype's own arrays: pgx encodes them
		// without reflection, which []*int64 and []*float64 cost (a fifth
		// of the writer's CPU on PostgreSQL, measured).
		case store.IntCol:
			a := make(pgtype.FlatArray[pgtype.Int8], rows)
			for i := range a {
				a[i].Int64, a[i].Valid = args[i*len(cs)+j].(int64)
			}
			params[j] = a
		case store.FloatCol:
			a := make(pgtype.FlatArray[pgtype.Float8], rows)
			for i := range a {
				a[i].Float64, a[i].Valid = args[i*len(cs)+j].(float64)
			}
			params[j] = a
		case store.BoolCol:
			a := make([]bool, rows)
			for i := range a {
				a[i], _ = args[i*len(cs)+j].(bool)
			}
			params[j] = a
		case store.BytesCol:
			a := make([][]byte, rows) // nil elements are NULL
			for i := range a {
				a[i], _ = args[i*len(cs)+j].([]byte)
			}
			params[j] = a
		}
	}
	got, err := execInsert(ctx, tx, unnestStatement(table, cs, conflict, returning), nil, params, returning, nil)
	if err != nil {
		return nil, fmt.Errorf("insert %s: %w", table, err)
	}
	return got, nil
}
