package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ttfx/ttfx/internal/store"
)

// The text columns of a record that name configuration — the API, route,
// group, key name, channel, region, provider host, status, terminal,
// finish reason and token source of a request, the channel, status, role
// and outcome of an attempt — hold the id of their value in record_names
// (migration 0043) instead of the value: a few dozen values repeated on
// every row, about 110 bytes of a request row and 30 of an attempt's on
// SQLite, where an id under 128 takes one byte and the empty string,
// id 0, none. Their sets are bounded by the configuration, the gateway
// and the providers. Not the model (a client chooses it, any string), the
// user hash (one per user), the error summary, the trace id or the JSON
// lists: those stay text.
//
// An id is never reused nor its name changed, and names are never
// deleted, so every gateway keeps the ids it has seen in a nameCache.
// A name is added in the transaction of the first record that has it
// (INSERT … ON CONFLICT DO NOTHING, then its id read back) and cached once
// that transaction commits. A read that meets an id it does not know
// reloads the names: in its own snapshot, every id a row refers to is
// there, because a name commits with or before its first record. A
// summary from rows reloads them before it reads a row (it cannot stop
// its rows to look one up), in its snapshot: a few dozen rows. Counting
// them would not do: the cache may hold names newer than the snapshot and
// lack one older.

// nameColumns are the columns of requests and request_attempts kept as
// ids in record_names.
var nameColumns = map[string]map[string]bool{
	"requests": {"api": true, "route": true, "group_name": true, "key_name": true, "channel": true, "region": true,
		"provider": true, "status": true, "terminal": true, "finish_reason": true, "tokens_source": true},
	"request_attempts": {"channel": true, "status": true, "role": true, "outcome": true},
}

// nameCache maps names to ids and back, as stored in record_names.
type nameCache struct {
	mu    sync.RWMutex
	ids   map[string]int64
	names map[int64]string
}

func newNameCache() *nameCache {
	return &nameCache{ids: map[string]int64{"": 0}, names: map[int64]string{0: ""}}
}

func (c *nameCache) id(name string) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.ids[name]
	return id, ok
}

func (c *nameCache) name(id int64) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n, ok := c.names[id]
	return n, ok
}

func (c *nameCache) add(m map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, id := range m {
		c.ids[n], c.names[id] = id, n
	}
}

// load reads every name of record_names into c.
func (c *nameCache) load(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, `SELECT id, name FROM record_names`)
	if err != nil {
		return fmt.Errorf("read names: %w", err)
	}
	m := map[string]int64{}
	for rows.Next() {
		var id int64
		var n string
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return fmt.Errorf("read names: %w", err)
		}
		m[n] = id
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read names: %w", err)
	}
	c.add(m)
	return nil
}

// byID is a copy of c's names by id, for a read of many rows to look up
// without taking c's lock for each.
func (c *nameCache) byID() map[int64]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m := make(map[int64]string, len(c.names))
	for id, n := range c.names {
		m[id] = n
	}
	return m
}

// nameIn is nameOf over a copy made by byID.
func nameIn(m map[int64]string, v any) (string, bool) {
	if id, ok := v.(int64); ok {
		n, ok := m[id]
		return n, ok
	}
	return textName(v)
}

// textName is the name of a name column read as text: a table not yet
// migrated (backfillRollups reads rows of before 0043).
func textName(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case nil:
		return "", true
	}
	return "", false
}

// nameOf is the name of an id read from a name column, or the text of a
// column not yet migrated.
func (c *nameCache) nameOf(v any) (string, bool) {
	switch x := v.(type) {
	case int64:
		return c.name(x)
	}
	return textName(v)
}

// resolve returns the ids of names in tx, adding the names record_names
// lacks; the ids new to c are also put in fresh, for c once tx commits.
func (c *nameCache) resolve(ctx context.Context, tx *sql.Tx, d dialect, names []string, fresh map[string]int64) (map[string]int64, error) {
	out := make(map[string]int64, len(names))
	var missing []string
	for _, n := range names {
		if id, ok := c.id(n); ok {
			out[n] = id
		} else if id, ok := fresh[n]; ok {
			out[n] = id
		} else if !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	// In one order on every gateway, so that two inserting the same new
	// names wait for each other rather than deadlock.
	slices.Sort(missing)
	args := make([]any, len(missing))
	for i, n := range missing {
		args[i] = n
	}
	if _, err := insertRows(ctx, tx, d, "record_names", store.Cols(store.TextCol, "name"), args, doNothing, ""); err != nil {
		return nil, fmt.Errorf("insert names: %w", err)
	}
	marks := make([]string, len(missing))
	for i := range missing {
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, name FROM record_names WHERE name IN (`+strings.Join(marks, ", ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("read names: %w", err)
	}
	for rows.Next() {
		var id int64
		var n string
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read names: %w", err)
		}
		out[n], fresh[n] = id, id
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("read names: %w", err)
	}
	for _, n := range missing {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("insert names: %q has no id", n)
		}
	}
	return out, nil
}

// namePositions are the positions in cs of the columns that
// nameColumns[table] lists.
func namePositions(table string, cs []store.Column) []int {
	var pos []int
	for i, col := range cs {
		if nameColumns[table][col.Name] {
			pos = append(pos, i)
		}
	}
	return pos
}

// collectNames adds to names the distinct strings at positions pos of
// the rows of row-major args (of width w).
func collectNames(args []any, w int, pos []int, names []string, seen map[string]bool) []string {
	for r := 0; r+w <= len(args); r += w {
		for _, p := range pos {
			if n, _ := args[r+p].(string); !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}

// replaceNames puts the ids of the strings at positions pos in their
// place.
func replaceNames(args []any, w int, pos []int, ids map[string]int64) {
	for r := 0; r+w <= len(args); r += w {
		for _, p := range pos {
			n, _ := args[r+p].(string)
			args[r+p] = ids[n]
		}
	}
}

// nameColumnDef matches a column's definition in a SQLite table's DDL.
var nameColumnDef = regexp.MustCompile(`(?i)\b([a-z_]+)(\s+)TEXT NOT NULL( DEFAULT '')?`)

// namesToIds is migration 0043 on SQLite: record_names gets every value
// of the name columns, and requests and request_attempts are made again
// with those columns INTEGER, their rows copied with each value's id. On
// PostgreSQL, 0043_record_names.postgres.sql does the same with ALTER
// TABLE.
func namesToIds(ctx context.Context, tx *sql.Tx, _ dialect) error {
	for _, table := range []string{"requests", "request_attempts"} {
		for col := range nameColumns[table] {
			if _, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO record_names (name) SELECT DISTINCT "+col+" FROM "+table+
				" WHERE "+col+" <> '' ORDER BY 1"); err != nil {
				return fmt.Errorf("record names of %s.%s: %w", table, col, err)
			}
		}
	}
	for _, table := range []string{"requests", "request_attempts"} {
		if err := rebuildNames(ctx, tx, table); err != nil {
			return fmt.Errorf("%s names as ids: %w", table, err)
		}
	}
	return nil
}

func rebuildNames(ctx context.Context, tx *sql.Tx, table string) error {
	ddl, err := tableDDL(ctx, tx, table)
	if err != nil {
		return err
	}
	body, err := tableBody(ddl, table)
	if err != nil {
		return err
	}
	body = nameColumnDef.ReplaceAllStringFunc(body, func(m string) string {
		g := nameColumnDef.FindStringSubmatch(m)
		if !nameColumns[table][strings.ToLower(g[1])] {
			return m
		}
		def := g[1] + g[2] + "INTEGER NOT NULL"
		if g[3] != "" {
			def += " DEFAULT 0"
		}
		return def
	})
	indexes, err := tableIndexes(ctx, tx, table)
	if err != nil {
		return err
	}
	cols, err := tableColumns(ctx, tx, table)
	if err != nil {
		return err
	}
	var from []string
	for _, c := range cols {
		if nameColumns[table][c] {
			from = append(from, "COALESCE((SELECT n.id FROM record_names n WHERE n.name = t."+c+"), 0)")
		} else {
			from = append(from, "t."+c)
		}
	}
	return replaceTable(ctx, tx, table, body, cols, from, indexes)
}
