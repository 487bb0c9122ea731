package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

func TestSeedCommand(t *testing.T) {
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "seeded.db")
	now := time.Now()
	var out bytes.Buffer
	if err := seedMain(context.Background(), []string{"--store", dsn, "--records", "5000", "--days", "2d", "--batch", "700"},
		&out, func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	// Every phase is shown to its end, with a rate and the time left, and
	// then what the store costs per record.
	for _, want := range []string{"wrote 5,000 records", "their channels are named seed-",
		"writing     100.0%  5,000/5,000 records", "compacting  100.0%", "0s left", "bytes per record (rollups "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	s, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Every record is there, within the two days, and the summaries of
	// the week answer from rollups.
	st, err := s.Stats(context.Background(), store.StatsQuery{Filter: store.Filter{From: now.Add(-49 * time.Hour), To: now.Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Groups) != 1 || st.Groups[0].Count != 5000 {
		t.Fatalf("stats: %+v", st.Groups)
	}
	if st.Method != store.MethodRollups {
		t.Errorf("method %s", st.Method)
	}
	// The seeded fleet includes a bedrock channel: Converse records on
	// both of its routes, and Anthropic Messages records through it.
	byAPI, err := s.Stats(context.Background(), store.StatsQuery{Filter: store.Filter{From: now.Add(-49 * time.Hour), To: now.Add(time.Minute)},
		GroupBy: []string{"channel", "api", "route"}, Fields: []string{"upstream_headers_ms"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, g := range byAPI.Groups {
		seen[g.Key["channel"]+" "+g.Key["api"]+" "+g.Key["route"]] += g.Count
	}
	for _, want := range []string{
		"seed-bedrock-main bedrock.converse POST /model/{target}/converse-stream",
		"seed-bedrock-main bedrock.converse POST /model/{target}/converse",
		"seed-bedrock-main anthropic POST /v1/messages",
	} {
		if seen[want] == 0 {
			t.Errorf("no seeded record of %s: %v", want, seen)
		}
	}
	old, err := s.List(context.Background(), store.Filter{To: now.Add(-48*time.Hour - time.Second), Limit: 1})
	if err != nil || len(old.Records) != 0 {
		t.Errorf("records older than two days: %v %v", old.Records, err)
	}

	for _, bad := range [][]string{{"--days", "soon"}, {"--records", "0"}, {"extra"}} {
		var exit *exitError
		if err := seedMain(context.Background(), append([]string{"--store", dsn}, bad...), &out, time.Now); !errors.As(err, &exit) || exit.code != 2 {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
	if err := seedMain(context.Background(), []string{"--help"}, &out, time.Now); !errors.Is(err, errHelp) {
		t.Errorf("--help: %v", err)
	}
}
