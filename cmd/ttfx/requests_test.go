package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

const testAdminKey = "ttfx-admin-test-0123456789"

// requestsServer serves the real API over a SQLite store holding n records,
// one a second, the newest a minute ago; every third is trace B's shape,
// the others failed before headers.
func requestsServer(t *testing.T, n int) *httptest.Server {
	s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ttfx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now()
	var recs []record.Record
	for i := range n {
		r := record.Record{
			RequestID: fmt.Sprintf("req-%05d", i), Timestamp: now.Add(-time.Minute - time.Duration(n-i)*time.Second),
			API: "openai.chat", Model: "trace-b", Channel: "sim", Status: record.StatusHeaderTimeout, HTTPStatus: 504,
			Diagnosis: []string{"header_timeout"},
		}
		if i%3 == 0 {
			r.Model, r.Status, r.HTTPStatus = "trace-b", record.StatusOK, 200
			r.UpstreamHeadersMs = timeline.SpanOf(240 * time.Millisecond)
			r.FirstResponseMs = timeline.At(2900 * time.Millisecond)
			r.FirstTextDeltaMs = timeline.At(8700 * time.Millisecond)
			r.TotalHandlerMs = timeline.At(10200 * time.Millisecond)
			r.VisibleOutputTPS = timeline.RateOf(55)
			r.Diagnosis = []string{"response_to_text_gap", "local_overhead"}
		}
		recs = append(recs, r)
	}
	if err := s.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	kr := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "ops", Role: auth.RoleAdmin}, Hash: auth.HashKey(testAdminKey)}})
	srv := httptest.NewServer(api.New(api.Options{Store: s, Resolve: api.KeyringResolver(kr)}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRequestsTable(t *testing.T) {
	srv := requestsServer(t, 6)
	var out bytes.Buffer
	env := map[string]string{"TTFX_ADMIN_KEY": testAdminKey}
	if err := requestsMain(context.Background(), []string{"--url", srv.URL}, &out, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want a header and 6 rows:\n%s", len(lines), out.String())
	}
	for _, col := range []string{"ID", "TIME", "MODEL", "STATUS", "HEADERS ms", "FIRST RESP ms", "FIRST TEXT ms", "TOTAL ms", "TPS", "VERDICT"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s: %s", col, lines[0])
		}
	}
	// Newest first: req-00005 (a timeout), ..., req-00003 (trace B).
	if !strings.HasPrefix(lines[1], "req-00005") || !strings.Contains(lines[1], "header_timeout 504") {
		t.Errorf("first row %q", lines[1])
	}
	traceB := strings.Fields(lines[3])
	want := []string{"req-00003", "openai.chat", "trace-b", "sim", "ok", "240.0", "2900.0", "8700.0", "10200.0", "55.0", "response_to_text_gap", "+1"}
	got := append(traceB[:1:1], traceB[4:]...) // skip the date, time and zone
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("trace B row\n got %v\nwant %v", got, want)
	}
	// id, date, time, zone, api, model, channel, "header_timeout", "504", then five absent values.
	f := strings.Fields(lines[1])
	if strings.Join(f[9:14], " ") != "- - - - -" || f[14] != "header_timeout" {
		t.Errorf("absent fields not shown as -: %q", lines[1])
	}
	// The time says its zone.
	if zone, _ := time.Now().Zone(); f[3] != zone {
		t.Errorf("time %s %s %s: want the zone %s", f[1], f[2], f[3], zone)
	}
	if strings.Contains(out.String(), "more requests match") {
		t.Errorf("all 6 shown, yet it says more match:\n%s", out.String())
	}
}

// TestRequestsSaysMoreExist: a table cut at --limit says that more
// requests match, and how to see them.
func TestRequestsSaysMoreExist(t *testing.T) {
	srv := requestsServer(t, 6)
	var out bytes.Buffer
	if err := requestsMain(context.Background(), []string{"--url", srv.URL, "--key", testAdminKey, "--limit", "4"}, &out, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 6 || !strings.Contains(lines[5], "the newest 4 shown; more requests match") {
		t.Fatalf("want a header, 4 rows and a note:\n%s", out.String())
	}
}

func TestRequestsFiltersAndPages(t *testing.T) {
	srv := requestsServer(t, 1300)
	run := func(args ...string) ([]record.Record, error) {
		var out bytes.Buffer
		err := requestsMain(context.Background(), append([]string{"--url", srv.URL, "--key", testAdminKey, "--json"}, args...),
			&out, func(string) string { return "" })
		var recs []record.Record
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			var r record.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			recs = append(recs, r)
		}
		return recs, err
	}
	// More than one API page: the command follows the cursor.
	recs, err := run("--limit", "1100")
	if err != nil || len(recs) != 1100 || recs[0].RequestID != "req-01299" || recs[1099].RequestID != "req-00200" {
		t.Fatalf("limit 1100: %d records, %v", len(recs), err)
	}
	recs, err = run("--status", "ok", "--label", "local_overhead", "--since", "1h", "--limit", "5")
	if err != nil || len(recs) != 5 {
		t.Fatalf("filtered: %d, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Status != record.StatusOK || r.Diagnosis[1] != "local_overhead" {
			t.Errorf("filter let through %+v", r)
		}
	}
	if recs, err := run("--since", "30s"); err != nil || len(recs) != 0 {
		t.Errorf("--since 30s: %d records, %v (all are older)", len(recs), err)
	}

	var ee *exitError
	if _, err := run("--status", "slow"); !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "status") {
		t.Errorf("bad status: %v", err)
	}
	var out bytes.Buffer
	err = requestsMain(context.Background(), []string{"--url", srv.URL, "--key", "wrong"}, &out, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "authentication_error") {
		t.Errorf("wrong key: %v", err)
	}
	err = requestsMain(context.Background(), []string{"--url", srv.URL}, &out, func(string) string { return "" })
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("no key: %v", err)
	}
}
