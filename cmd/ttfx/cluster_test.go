package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/testenv"
)

// TestServeOnClickHouseCluster: two `ttfx serve` processes, each given a
// different node of a two-shard ClickHouse cluster of the test's own
// (store: clickhouse://node:9000/ttfx?cluster=ttfx), relay streams from
// clients; every record made on either gateway is read back through the
// other, /api/stats on both counts every request once, and the records
// lie on both shards. (The store's own test, chstore's
// TestClickHouseTwoShards, checks summaries, a lost shard and retention.)
func TestServeOnClickHouseCluster(t *testing.T) {
	nodes := testenv.StartClickHouseCluster(t, "ttfx", 2)
	up := httptest.NewServer(slowSim())
	defer up.Close()
	dir := t.TempDir()
	env := []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1", "T_UP=upstream-1"}
	const admin, client = "admin-secret-1", "client-secret-1"
	var procs []*process
	for i, n := range nodes {
		cfg := filepath.Join(dir, fmt.Sprintf("ttfx-%d.yaml", i+1))
		os.WriteFile(cfg, []byte(fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
channels:
  - {name: a, protocol: openai, base_url: %q, key_env: T_UP, models: [quick]}
`, n.DSN("ttfx")+"?cluster=ttfx", up.URL)), 0o644)
		procs = append(procs, serve(t, dir, env, "--config", cfg))
	}
	const perGateway = 20
	start := time.Now().Add(-time.Minute)
	var ids [2][]string
	for i := range perGateway * 2 {
		g := i % 2
		id, err := stream(procs[g].url, client, "quick")
		if err != nil {
			t.Fatalf("gateway %d: %v", g+1, err)
		}
		ids[g] = append(ids[g], id)
	}
	// Each record is read through the gateway that did not make it.
	for g := range procs {
		for _, id := range ids[g] {
			if rec := readRecord(t, procs[1-g].url, admin, id); rec.RequestID != id || rec.Status != "ok" {
				t.Fatalf("record %s made on gateway %d, read on the other: %+v", id, g+1, rec)
			}
		}
	}
	all := slices.Concat(ids[0], ids[1])
	for g, p := range procs {
		c := &api.Client{BaseURL: p.url, Key: admin}
		st, err := c.Stats(context.Background(), url.Values{"from": {start.UTC().Format(time.RFC3339)}})
		if err != nil {
			t.Fatalf("gateway %d stats: %v", g+1, err)
		}
		n := 0
		for _, gr := range st.Groups {
			n += gr.Count
		}
		if n != len(all) {
			t.Errorf("gateway %d: /api/stats counts %d requests, want %d", g+1, n, len(all))
		}
		list, err := c.Requests(context.Background(), url.Values{"limit": {"100"}})
		if err != nil {
			t.Fatalf("gateway %d list: %v", g+1, err)
		}
		var got []string
		for _, r := range list.Requests {
			got = append(got, r.RequestID)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(all))
		if !slices.Equal(got, want) {
			t.Errorf("gateway %d lists %d requests %v, want the %d made", g+1, len(got), got, len(want))
		}
	}
	total := 0
	for i, n := range nodes {
		db := clickhouse.OpenDB(&clickhouse.Options{Addr: []string{n.Addr()}, Auth: clickhouse.Auth{Database: "ttfx_local"}})
		var c uint64
		err := db.QueryRowContext(context.Background(), "SELECT uniqExact(request_id) FROM requests").Scan(&c)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if c == 0 {
			t.Errorf("shard %d holds no records", i+1)
		}
		total += int(c)
	}
	if total != len(all) {
		t.Errorf("the shards hold %d records, want %d", total, len(all))
	}
	for _, p := range procs {
		p.stop(t)
	}
}
