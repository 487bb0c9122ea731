package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

func canary(what string) string {
	var b [8]byte
	rand.Read(b[:])
	return "canary-" + what + "-" + hex.EncodeToString(b[:])
}

// canaryRecord returns a record whose every string field is a unique
// canary, with the canaries it holds.
func canaryRecord(userHash string) (record.Record, []string) {
	r := record.Record{
		RequestID: canary("id"), Timestamp: time.Now().UTC(),
		API: canary("api"), Route: canary("route"), Model: canary("model"), Group: canary("group"),
		KeyName: canary("keyname"), UserHash: userHash,
		Channel: canary("channel"), Region: canary("region"), Provider: canary("provider"),
		Status: canary("status"), HTTPStatus: 200, Error: canary("error"), Stream: true,
		Terminal: canary("terminal"), FinishReason: canary("finish"),
		Fields: timeline.Fields{FirstTextDeltaMs: timeline.At(420 * time.Millisecond)},
		Tokens: record.Tokens{Visible: record.Int(12), Source: canary("source")},
		Attempts: []record.Attempt{{Channel: canary("attempt-channel"), Status: canary("attempt-status"), Error: canary("attempt-error"),
			Role: canary("attempt-role"), Outcome: canary("attempt-outcome")}},
		Diagnosis:      []string{canary("label")},
		SkippedEjected: []string{canary("skipped")},
		TraceID:        canary("trace"),
	}
	held := []string{r.RequestID, r.API, r.Route, r.Model, r.Group, r.KeyName, r.UserHash, r.Channel, r.Region,
		r.Provider, r.Status, r.Error, r.Terminal, r.FinishReason, r.Tokens.Source,
		r.Attempts[0].Channel, r.Attempts[0].Status, r.Attempts[0].Error, r.Attempts[0].Role, r.Attempts[0].Outcome,
		r.Diagnosis[0], r.SkippedEjected[0], r.TraceID}
	return r, held
}

type ctxKey string

// TestCanary writes records whose every string is a canary, through the
// Writer (with its log captured) and through Insert, while a prompt, a
// response, a client key and a user id travel beside them (the user id
// reaches the record only as record.HashUser). Afterwards the database —
// the SQLite file with its WAL, or a text dump of every PostgreSQL table —
// holds every canary of the records and none of the others, and neither
// does the log.
func TestCanary(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			s, dsn := e.open(t)
			prompt, response, clientKey, userID := canary("prompt"), canary("response"), canary("clientkey"), canary("userid")
			hashKey := []byte(canary("hashkey"))
			outside := []string{prompt, response, clientKey, userID, string(hashKey)}

			var held []string
			var logs bytes.Buffer
			w := NewWriter(s, WriterOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
			for range 3 {
				r, h := canaryRecord(record.HashUser(hashKey, userID))
				held = append(held, h...)
				w.Record(&r)
			}
			// An invalid record is logged: its log line must not carry
			// anything beyond the record either.
			bad, _ := canaryRecord("")
			bad.Timestamp = time.Time{}
			w.Record(&bad)
			if err := w.Close(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			// Insert directly too, with the outside strings in the context
			// the store is handed.
			ctx := context.WithValue(ctxT(t), ctxKey("prompt"), prompt)
			ctx = context.WithValue(ctx, ctxKey("authorization"), "Bearer "+clientKey)
			r, h := canaryRecord(record.HashUser(hashKey, userID))
			held = append(held, h...)
			if err := s.Insert(ctx, []record.Record{r}); err != nil {
				t.Fatal(err)
			}
			if st := w.Stats(); st.Written != 3 || st.Rejected != 1 {
				t.Fatalf("writer %+v", st)
			}

			var dump []byte
			switch e.name {
			case "sqlite":
				// Before and after a checkpoint: the WAL holds fresh pages.
				dump = append(dump, sqliteFiles(t, dsn)...)
				s.Close()
				dump = append(dump, sqliteFiles(t, dsn)...)
			case "postgres":
				dump = postgresDump(t, s)
			case "clickhouse":
				dump = clickhouseDump(t, s)
			}
			for _, c := range held {
				if !bytes.Contains(dump, []byte(c)) {
					t.Errorf("the dump lacks %s, which the record holds: the search finds nothing", c)
				}
			}
			for _, c := range outside {
				if bytes.Contains(dump, []byte(c)) {
					t.Errorf("the database holds %s", c)
				}
				if strings.Contains(logs.String(), c) {
					t.Errorf("the writer's log holds %s", c)
				}
			}
			if !strings.Contains(logs.String(), "rejected") {
				t.Errorf("the invalid record was not logged: %q", logs.String())
			}
		})
	}
}

// sqliteFiles returns the bytes of a SQLite database and its -wal and -shm.
func sqliteFiles(t *testing.T, dsn string) []byte {
	path := strings.TrimPrefix(dsn, "sqlite:")
	var all []byte
	matches, _ := filepath.Glob(path + "*")
	if len(matches) == 0 {
		t.Fatalf("no files at %s", path)
	}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// postgresDump returns every row of every table in the store's schema as
// text.
func postgresDump(t *testing.T, s Store) []byte {
	db := s.(*sqlStore).read
	rows, err := db.QueryContext(ctxT(t), `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if !slices.Contains(tables, "requests") || !slices.Contains(tables, "request_labels") {
		t.Fatalf("tables %v", tables)
	}
	var dump bytes.Buffer
	for _, tbl := range tables {
		rows, err := db.QueryContext(ctxT(t), "SELECT CAST(x AS text) FROM "+tbl+" x")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			rows.Scan(&line)
			dump.WriteString(line)
			dump.WriteByte('\n')
		}
		rows.Close()
	}
	return dump.Bytes()
}

// TestSchemaHasNoPlaceForContent pins the schema: every table and column,
// and which columns are text. A new column fails this test until it is
// added here — the place to ask whether it could ever hold a prompt, a
// response, a key or a plaintext user id (SPEC.md §7).
func TestSchemaHasNoPlaceForContent(t *testing.T) {
	// Text columns and why each cannot carry content.
	textColumns := map[string]string{
		"requests.request_id": "gateway-generated id", "requests.api": "API name", "requests.route": "endpoint pattern",
		"requests.model": "model name, cleaned and capped at 256 bytes", "requests.group_name": "configured group",
		"requests.key_name": "configured key name, never the key", "requests.user_hash": "keyed hash (record.HashUser)",
		"requests.channel": "configured channel", "requests.region": "configured region", "requests.provider": "upstream host",
		"requests.status": "terminal status", "requests.error": "gateway's error summary, capped at 512 bytes",
		"requests.terminal": "done/truncated/error", "requests.finish_reason": "provider's finish reason",
		"requests.tokens_source": "usage/estimate",
		"requests.trace_id":      "W3C trace id (hex)", "requests.skipped_ejected": "JSON list of configured channel names",
		"request_attempts.role": "primary/retry/hedge", "request_attempts.outcome": "won/cancelled/failed",
		"request_attempts.request_id": "id", "request_attempts.channel": "configured channel",
		"request_attempts.status": "attempt status", "request_attempts.error": "gateway's error summary",
		"request_labels.request_id": "id", "request_labels.label": "diagnosis label",
		"schema_migrations.name": "migration file name",
		"rollups.api":            "API name", "rollups.route": "endpoint pattern", "rollups.model": "model name, cleaned and capped as in requests",
		"rollups.group_name": "configured group", "rollups.channel": "configured channel", "rollups.region": "configured region",
		"rollups.provider": "upstream host", "rollups.status": "terminal status", "rollups.writer": "random id of a gateway process",
		"rollups.labels": "diagnosis labels with counts", "rollups.statuses": "terminal statuses with counts",
		"rollup_dirty.writer": "random id of a gateway process",
		"api_keys.hash":       "SHA-256 of an API key, never the key", "api_keys.name": "key name given by an operator",
		"api_keys.role": "admin/viewer/client", "api_keys.group_name": "group given by an operator",
	}
	for _, f := range StatFields {
		textColumns["rollups."+f.rollupCol()] = "a quantile sketch: bucket counts and min/max/sum of a timing field"
	}
	want := map[string][]string{
		"requests":          requestColumns,
		"request_attempts":  attemptColumns,
		"request_labels":    labelColumns,
		"schema_migrations": {"version", "name", "applied_ns"},
		"rollups":           names(rollupTable),
		"rollup_dirty":      names(dirtyTable),
		"api_keys":          {"hash", "name", "role", "group_name", "created_ns", "expires_ns"},
	}
	for _, e := range sqlEngines() {
		t.Run(e.name, func(t *testing.T) {
			s, _ := e.open(t)
			db := readDB(s)
			got := map[string][]string{}
			text := map[string]bool{}
			var q string
			if e.name == "sqlite" {
				q = `SELECT m.name, p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p
					WHERE m.type = 'table' ORDER BY m.name, p.cid`
			} else {
				// Day partitions have their parent's columns (made LIKE it).
				q = `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
					JOIN pg_class k ON k.relname = c.table_name AND k.relnamespace = to_regnamespace(current_schema())
					WHERE c.table_schema = current_schema() AND NOT k.relispartition
					ORDER BY c.table_name, c.ordinal_position`
			}
			rows, err := db.QueryContext(ctxT(t), q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var tbl, col, typ string
				if err := rows.Scan(&tbl, &col, &typ); err != nil {
					t.Fatal(err)
				}
				got[tbl] = append(got[tbl], col)
				typ = strings.ToLower(typ)
				if strings.Contains(typ, "text") || strings.Contains(typ, "char") || strings.Contains(typ, "blob") ||
					strings.Contains(typ, "bytea") || strings.Contains(typ, "json") {
					text[tbl+"."+col] = true
				}
			}
			rows.Close()
			if len(got) != len(want) {
				t.Errorf("tables %v, want %v", keys(got), keys(want))
			}
			for tbl, cols := range want {
				if !slices.Equal(got[tbl], cols) {
					t.Errorf("%s columns\n got %v\nwant %v", tbl, got[tbl], cols)
				}
			}
			for c := range text {
				if textColumns[c] == "" {
					t.Errorf("text column %s is not on the list of columns known to hold no content", c)
				}
			}
			for c := range textColumns {
				if !text[c] {
					t.Errorf("%s is listed as text but is not a text column", c)
				}
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
