package store_test

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

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"

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
	for _, e := range storetest.Engines() {
		t.Run(e.Name, func(t *testing.T) {
			s, dsn := e.Open(t)
			prompt, response, clientKey, userID := canary("prompt"), canary("response"), canary("clientkey"), canary("userid")
			hashKey := []byte(canary("hashkey"))
			outside := []string{prompt, response, clientKey, userID, string(hashKey)}

			var held []string
			var logs bytes.Buffer
			w := store.NewWriter(s, store.WriterOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
			for range 3 {
				r, h := canaryRecord(record.HashUser(hashKey, userID))
				held = append(held, h...)
				w.Record(&r)
			}
			// An invalid record is logged: its log line storetest.Must not carry
			// anything beyond the record either.
			bad, _ := canaryRecord("")
			bad.Timestamp = time.Time{}
			w.Record(&bad)
			if err := w.Close(storetest.Ctx(t)); err != nil {
				t.Fatal(err)
			}
			// Insert directly too, with the outside strings in the context
			// the store is handed.
			ctx := context.WithValue(storetest.Ctx(t), ctxKey("prompt"), prompt)
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
			switch e.Name {
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
func postgresDump(t *testing.T, s store.Store) []byte {
	db := storetest.ReadDB(s)
	rows, err := db.QueryContext(storetest.Ctx(t), `SELECT table_name FROM information_schema.tables
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
		rows, err := db.QueryContext(storetest.Ctx(t), "SELECT CAST(x AS text) FROM "+tbl+" x")
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
