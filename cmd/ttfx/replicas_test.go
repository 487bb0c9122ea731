package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestChannelStateAcrossReplicas: two `ttfx serve` processes share a
// PostgreSQL or ClickHouse store. A drain made on one reaches the other
// within a few seconds; GET /api/channels on either names both replicas as
// having applied it, and the operator who made it; enable undoes it
// everywhere. A third process started afterwards applies the drain before
// serving.
func TestChannelStateAcrossReplicas(t *testing.T) {
	for _, e := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"postgres", testenv.PostgresSchema}, {"clickhouse", testenv.ClickHouseDatabase}} {
		t.Run(e.name, func(t *testing.T) {
			dsn := e.dsn(t)
			upA := httptest.NewServer(slowSim())
			defer upA.Close()
			upB := httptest.NewServer(slowSim())
			defer upB.Close()
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ttfx.yaml")
			os.WriteFile(cfg, []byte(fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
channels:
  - {name: a, protocol: openai, base_url: %q, key_env: T_UP, models: [quick], priority: 0}
  - {name: b, protocol: openai, base_url: %q, key_env: T_UP, models: [quick], priority: 1}
`, dsn, upA.URL, upB.URL)), 0o644)
			env := []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1", "T_UP=upstream-1"}
			const admin, client = "admin-secret-1", "client-secret-1"
			p1 := serve(t, dir, env, "--config", cfg)
			p2 := serve(t, dir, env, "--config", cfg)
			_, r1 := listChannels(t, p1.url, admin)
			_, r2 := listChannels(t, p2.url, admin)
			if r1.Replica == r2.Replica || r1.Replica == "" {
				t.Fatalf("replica names %q %q", r1.Replica, r2.Replica)
			}
			start := time.Now()
			if out := channelsCLI(t, p1, admin, "drain", "a"); !strings.Contains(out, "a: drained by ops") {
				t.Fatalf("drain: %s", out)
			}
			// The other replica applies it within a few seconds, and both
			// say so.
			var seen time.Duration
			for {
				_, res := listChannels(t, p2.url, admin)
				v := channelByName(res, "a")
				if v.State == "drained" && v.Operator != nil && len(v.Operator.Replicas) == 2 {
					seen = time.Since(start)
					if v.Operator.By != "ops" {
						t.Errorf("operator %+v", v.Operator)
					}
					var names []string
					for _, r := range v.Operator.Replicas {
						names = append(names, r.Replica)
					}
					slices.Sort(names)
					want := []string{r1.Replica, r2.Replica}
					slices.Sort(want)
					if !slices.Equal(names, want) {
						t.Errorf("replicas %v, want %v", names, want)
					}
					break
				}
				if time.Since(start) > 10*time.Second {
					t.Fatalf("the drain did not reach the other replica: %+v %+v", v, v.Operator)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("the drain reached the other replica and both acknowledged it in %v", seen.Round(time.Millisecond))
			id, err := stream(p2.url, client, "quick")
			if err != nil {
				t.Fatal(err)
			}
			if rec := readRecord(t, p2.url, admin, id); rec.Channel != "b" {
				t.Fatalf("the other replica still routes to a drained channel: %s", rec.Channel)
			}
			// A replica started now applies the drain before it serves.
			p3 := serve(t, dir, env, "--config", cfg)
			id, err = stream(p3.url, client, "quick")
			if err != nil {
				t.Fatal(err)
			}
			if rec := readRecord(t, p3.url, admin, id); rec.Channel != "b" {
				t.Fatalf("a new replica routes to a drained channel: %s", rec.Channel)
			}
			// Enable on the second undoes it on the first.
			channelsCLI(t, p2, admin, "enable", "a")
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, res := listChannels(t, p1.url, admin)
				if v := channelByName(res, "a"); v.State == "serving" && v.Operator != nil && v.Operator.State == "serving" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("enable did not reach the first replica")
				}
				time.Sleep(50 * time.Millisecond)
			}
			id, _ = stream(p1.url, client, "quick")
			if rec := readRecord(t, p1.url, admin, id); rec.Channel != "a" {
				t.Fatalf("after enable: %s", rec.Channel)
			}
			for _, p := range []*process{p1, p2, p3} {
				p.stop(t)
			}
			if !strings.Contains(p2.out.String(), "channel state from the store applied") {
				t.Errorf("the second replica did not log the state it applied")
			}
		})
	}
}
