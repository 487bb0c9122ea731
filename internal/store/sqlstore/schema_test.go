package sqlstore

import (
	"slices"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestSchemaHasNoPlaceForContent pins the schema: every table and column,
// and which columns are text. A new column fails this test until it is
// added here — the place to ask whether it could ever hold a prompt, a
// response, a key or a plaintext user id (SPEC.md §7).
func TestSchemaHasNoPlaceForContent(t *testing.T) {
	// Text columns and why each cannot carry content.
	textColumns := map[string]string{
		"requests.request_id": "gateway-generated id",
		"requests.model":      "model name, cleaned and capped at 256 bytes",
		"requests.user_hash":  "keyed hash (record.HashUser)",
		"requests.error":      "gateway's error summary, capped at 512 bytes",
		// api, route, group_name, key_name, channel, region, provider,
		// status, terminal, finish_reason, tokens_source of requests and
		// channel, status, role, outcome of attempts are ids of these.
		"record_names.name": "API name, endpoint pattern, configured group, key name (never the key), channel or region, " +
			"upstream host, terminal status, done/truncated/error, provider's finish reason, usage/estimate, " +
			"attempt status, primary/retry/hedge, won/cancelled/failed",
		"requests.trace_id": "W3C trace id (hex)", "requests.skipped_ejected": "JSON list of configured channel names",
		"requests.skipped_rate_limited": "JSON list of configured channel names, a limit kind and counts",
		"requests.upstream_model":       "a channel's configured model name for the provider, cleaned and capped at 256 bytes",
		"request_attempts.request_id":   "id", "request_attempts.error": "gateway's error summary",
		"request_labels.request_id": "id", "request_labels.label": "diagnosis label",
		"schema_migrations.name": "migration file name",
		"rollup_series.api":      "API name", "rollup_series.route": "endpoint pattern", "rollup_series.model": "model name, cleaned and capped as in requests",
		"rollup_series.group_name": "configured group", "rollup_series.channel": "configured channel", "rollup_series.region": "configured region",
		"rollup_series.provider": "upstream host", "rollup_series.status": "terminal status", "rollups.writer": "random id of a gateway process",
		"rollups.labels": "diagnosis labels with counts", "rollups.statuses": "terminal statuses with counts",
		"rollup_dirty.writer": "random id of a gateway process",
		"api_keys.hash":       "SHA-256 of an API key, never the key", "api_keys.name": "key name given by an operator",
		"api_keys.role": "admin/viewer/client", "api_keys.group_name": "group given by an operator",
		"channel_states.channel": "configured channel", "channel_states.state": "serving/drained/disabled",
		"channel_states.set_by": "operator's key name", "channel_state_acks.channel": "configured channel",
		"channel_state_acks.replica": "random id of a gateway process",
	}
	for _, f := range store.StatFields {
		textColumns["rollups."+f.RollupColumn()] = "a quantile sketch: bucket counts and min/max/sum of a timing field"
	}
	want := map[string][]string{
		"requests":           store.ColumnNames(requestTable),
		"request_attempts":   store.ColumnNames(attemptTable),
		"request_labels":     store.ColumnNames(labelTable),
		"schema_migrations":  {"version", "name", "applied_ns"},
		"rollups":            store.ColumnNames(rollupTable),
		"rollup_dirty":       store.ColumnNames(dirtyTable),
		"rollup_units":       {"level", "start_ns", "missing"},
		"record_names":       {"id", "name"},
		"rollup_series":      append([]string{"id"}, store.ColumnNames(seriesTable)...),
		"api_keys":           {"hash", "name", "role", "group_name", "created_ns", "expires_ns"},
		"channel_states":     {"channel", "state", "set_by", "set_ns"},
		"channel_state_acks": {"replica", "channel", "set_ns", "applied_ns"},
	}
	for _, e := range storetest.SQLEngines() {
		t.Run(e.Name, func(t *testing.T) {
			s, _ := e.Open(t)
			db := storetest.ReadDB(s)
			got := map[string][]string{}
			text := map[string]bool{}
			var q string
			if e.Name == "sqlite" {
				q = `SELECT m.name, p.name, p.type FROM sqlite_master m, pragma_table_info(m.name) p
					WHERE m.type = 'table' ORDER BY m.name, p.cid`
			} else {
				// Day partitions have their parent's columns (made LIKE it).
				q = `SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
					JOIN pg_class k ON k.relname = c.table_name AND k.relnamespace = to_regnamespace(current_schema())
					WHERE c.table_schema = current_schema() AND NOT k.relispartition
					ORDER BY c.table_name, c.ordinal_position`
			}
			rows, err := db.QueryContext(storetest.Ctx(t), q)
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
				t.Errorf("tables %v, want %v", storetest.Keys(got), storetest.Keys(want))
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
