package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/ttfx/ttfx/internal/store/chstore"  // registers ClickHouse
	_ "github.com/ttfx/ttfx/internal/store/sqlstore" // registers SQLite and PostgreSQL

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

var now = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

const (
	keyAdmin   = "ttfx-admin-0123456789"
	keyViewerA = "ttfx-viewer-a-0123456789"
	keyViewerB = "ttfx-viewer-b-0123456789"
	keyClientA = "ttfx-client-a-0123456789"
)

func keyring() *auth.Keyring {
	e := func(key, name string, role auth.Role, group string) auth.Entry {
		return auth.Entry{Principal: auth.Principal{Name: name, Role: role, Group: group}, Hash: auth.HashKey(key)}
	}
	return auth.NewKeyring([]auth.Entry{
		e(keyAdmin, "ops", auth.RoleAdmin, ""),
		e(keyViewerA, "dash-a", auth.RoleViewer, "team-a"),
		e(keyViewerB, "dash-b", auth.RoleViewer, "team-b"),
		e(keyClientA, "client-a", auth.RoleClient, "team-a"),
	})
}

func at(ms float64) timeline.Offset {
	return timeline.At(time.Duration(ms * float64(time.Millisecond)))
}
func span(ms float64) timeline.Span {
	return timeline.SpanOf(time.Duration(ms * float64(time.Millisecond)))
}

// traceB is shaped like the seed's trace B: headers 240, tool call at 2900,
// text at 8700, end 10200, 55 t/s.
func traceB(id, group string, ts time.Time) record.Record {
	return record.Record{
		RequestID: id, Timestamp: ts, API: "anthropic", Route: "POST /v1/messages", Model: "trace-b", Group: group,
		KeyName: "client-a", Channel: "sim-anthropic", Region: "local", Provider: "sim",
		Status: record.StatusOK, HTTPStatus: 200, Stream: true, Terminal: "done", FinishReason: "end_turn",
		Fields: timeline.Fields{
			AuthMs: span(0.03), DistributionMs: span(0.002), BodyReadMs: span(0.01),
			UpstreamHeadersMs: span(240), UpstreamStartMs: at(0.2), UpstreamHeadersAtMs: at(240.2),
			FirstSSEEventMs: at(241), FirstResponseMs: at(2900), FirstTextDeltaMs: at(8700), FirstTextSentMs: at(8700.05),
			UpstreamDoneMs: at(10200), TotalHandlerMs: at(10200.2),
		},
		VisibleOutputTPS: timeline.RateOf(55.3), InterTokenLatencyMs: span(18.3),
		Tokens:   record.Tokens{Input: record.Int(5), Output: record.Int(94), Visible: record.Int(83), Source: record.TokensEstimate},
		Events:   record.Events{Heartbeat: 10, Metadata: 6, Tool: 11, Text: 83, Done: 2},
		Inflight: record.Inflight{Gateway: 3, Channel: 1},
		Attempts: []record.Attempt{{Channel: "sim-anthropic", UpstreamStartMs: at(0.2), UpstreamHeadersMs: span(240),
			UpstreamHeadersAtMs: at(240.2), Status: record.StatusOK, HTTPStatus: 200}},
		Diagnosis: []string{diagnose.ResponseToTextGap},
	}
}

// fast is a quick chat request on sim-openai; noText leaves out every
// mark from t4 on, as a metadata-only stream has none.
func fast(id, group string, ts time.Time, noText bool) record.Record {
	r := record.Record{
		RequestID: id, Timestamp: ts, API: "openai.chat", Route: "POST /v1/chat/completions", Model: "fast", Group: group,
		KeyName: "client-" + group, Channel: "sim-openai", Region: "local", Provider: "sim",
		Status: record.StatusOK, HTTPStatus: 200, Stream: true, Terminal: "done",
		Fields: timeline.Fields{
			UpstreamHeadersMs: span(50), UpstreamStartMs: at(0.1), UpstreamHeadersAtMs: at(50.1), FirstSSEEventMs: at(51),
			FirstResponseMs: at(120), FirstTextDeltaMs: at(120), FirstTextSentMs: at(120.02), UpstreamDoneMs: at(420), TotalHandlerMs: at(420.1),
		},
		VisibleOutputTPS: timeline.RateOf(200),
		Tokens:           record.Tokens{Output: record.Int(60), Visible: record.Int(60), Source: record.TokensUsage},
		Attempts:         []record.Attempt{{Channel: "sim-openai", UpstreamStartMs: at(0.1), UpstreamHeadersMs: span(50), UpstreamHeadersAtMs: at(50.1), Status: record.StatusOK, HTTPStatus: 200}},
	}
	if noText {
		r.Model = "metadata-only"
		r.FirstResponseMs, r.FirstTextDeltaMs, r.FirstTextSentMs = timeline.Offset{}, timeline.Offset{}, timeline.Offset{}
		r.VisibleOutputTPS = timeline.Rate{}
		r.Tokens = record.Tokens{}
	}
	return r
}

// failedFallback failed on its first channel (503) and was relayed by
// the second.
func failedFallback(id string, ts time.Time) record.Record {
	r := fast(id, "team-a", ts, false)
	r.Attempts = []record.Attempt{
		{Channel: "sim-flaky", UpstreamStartMs: at(0.1), UpstreamHeadersMs: span(30), UpstreamHeadersAtMs: at(30.1), Status: record.StatusUpstreamHTTPError, HTTPStatus: 503, Error: "upstream answered 503"},
		{Channel: "sim-down", UpstreamStartMs: at(31), Status: record.StatusUpstreamConnectError, Error: "connection refused"},
		{Channel: "sim-openai", UpstreamStartMs: at(40), UpstreamHeadersMs: span(50), UpstreamHeadersAtMs: at(90), Status: record.StatusOK, HTTPStatus: 200},
	}
	return r
}

// countingStore counts the store calls the views cause.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	lists []store.Filter
	stats []store.StatsQuery
	gets  int
}

func (c *countingStore) List(ctx context.Context, f store.Filter) (store.Page, error) {
	c.mu.Lock()
	c.lists = append(c.lists, f)
	c.mu.Unlock()
	return c.Store.List(ctx, f)
}

func (c *countingStore) Stats(ctx context.Context, q store.StatsQuery) (store.Stats, error) {
	c.mu.Lock()
	c.stats = append(c.stats, q)
	c.mu.Unlock()
	return c.Store.Stats(ctx, q)
}

func (c *countingStore) Get(ctx context.Context, id string) (record.Record, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, id)
}

func (c *countingStore) reset() {
	c.mu.Lock()
	c.lists, c.stats, c.gets = nil, nil, 0
	c.mu.Unlock()
}

type fixture struct {
	srv   *httptest.Server
	store *countingStore
	mux   *http.ServeMux
}

// newFixture serves the read API and the dashboard over a SQLite store
// holding recs; extra registers more routes (a diagnosis endpoint).
func newFixture(t testing.TB, recs []record.Record, extra func(*http.ServeMux), opts ...func(*Options)) *fixture {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ttfx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for len(recs) > 0 {
		n := min(len(recs), 500)
		if err := s.Insert(context.Background(), recs[:n]); err != nil {
			t.Fatal(err)
		}
		recs = recs[n:]
	}
	return fixtureOver(t, s, func() time.Time { return now }, extra, opts...)
}

// fixtureOver is newFixture over the store s, with the clock given.
func fixtureOver(t testing.TB, s store.Store, clock func() time.Time, extra func(*http.ServeMux), opts ...func(*Options)) *fixture {
	cs := &countingStore{Store: s}
	keys := keyring()
	mux := http.NewServeMux()
	// Store failures go to the test's log, so that a 500 says why (a
	// fuzz target may not log through its *testing.F).
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	if _, fuzz := t.(*testing.F); fuzz {
		log = slog.New(slog.DiscardHandler)
	}
	api.New(api.Options{Store: cs, Resolve: api.KeyringResolver(keys), Now: clock, Log: log}).Register(mux)
	if extra != nil {
		extra(mux)
	}
	o := Options{
		API: mux, Log: log, Resolve: api.KeyringResolver(keys), Now: clock, Rules: diagnose.New(config.Diagnosis{}),
		Groups: []string{"team-a", "team-b"},
		Channels: func() []Channel {
			return []Channel{
				{Name: "sim-openai", Protocol: "openai", Region: "local", Provider: "sim", Inflight: 2},
				{Name: "sim-anthropic", Protocol: "anthropic", Region: "local", Provider: "sim"},
				{Name: "team-b-only", Protocol: "openai", Groups: []string{"team-b"}, Inflight: 7},
			}
		},
	}
	for _, f := range opts {
		f(&o)
	}
	New(o).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, store: cs, mux: mux}
}

// testWriter writes to a test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (fx *fixture) get(t testing.TB, path, key string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fx.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func errType(t *testing.T, a answer) string {
	t.Helper()
	var e api.ErrorBody
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || e.Error.Message == "" {
		t.Fatalf("status %d: not a JSON error: %s", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error content type %q", ct)
	}
	return e.Error.Type
}

func standardRecords() []record.Record {
	return []record.Record{
		traceB("req-b", "team-a", now.Add(-20*time.Minute)),
		fast("req-f1", "team-a", now.Add(-15*time.Minute), false),
		fast("req-f2", "team-a", now.Add(-10*time.Minute), false),
		fast("req-m1", "team-a", now.Add(-5*time.Minute), true),
		failedFallback("req-fb", now.Add(-4*time.Minute)),
	}
}

// TestAccess: the views follow the read API's rules — no key is a 401, a
// client key a 403, a viewer sees its own group and nothing of another.
func TestAccess(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	views := []string{"/ui/view/session", "/ui/view/overview", "/ui/view/requests", "/ui/view/channels", "/ui/view/request/req-b"}
	for _, v := range views {
		if a := fx.get(t, v, ""); a.status != 401 || errType(t, a) != api.TypeAuthentication {
			t.Errorf("%s without a key: %d %s", v, a.status, a.body)
		}
		if a := fx.get(t, v, "ttfx-nobody-000000000"); a.status != 401 {
			t.Errorf("%s with an unknown key: %d", v, a.status)
		}
		if a := fx.get(t, v, keyClientA); a.status != 403 || errType(t, a) != api.TypePermission {
			t.Errorf("%s with a client key: %d %s", v, a.status, a.body)
		}
		for _, k := range []string{keyAdmin, keyViewerA} {
			if a := fx.get(t, v, k); a.status != 200 {
				t.Errorf("%s as %s: %d %s", v, k, a.status, a.body)
			}
		}
	}

	// The viewer of team-b: the same views, none of team-a's data.
	for _, v := range []string{"/ui/view/overview", "/ui/view/requests", "/ui/view/channels"} {
		a := fx.get(t, v, keyViewerB)
		if a.status != 200 {
			t.Fatalf("%s as viewer B: %d %s", v, a.status, a.body)
		}
		for _, leak := range []string{"trace-b", "req-b", "req-f1", "metadata-only", `data-model="fast"`} {
			if strings.Contains(a.body, leak) {
				t.Errorf("%s as viewer B shows %q", v, leak)
			}
		}
	}
	if a := fx.get(t, "/ui/view/request/req-b", keyViewerB); a.status != 404 || errType(t, a) != api.TypeNotFound {
		t.Errorf("team-a's request as viewer B: %d %s", a.status, a.body)
	}
	// Asking for another group by filter gives nothing either.
	a := fx.get(t, "/ui/view/requests?group=team-a", keyViewerB)
	if a.status != 200 || strings.Contains(a.body, "data-id=") {
		t.Errorf("viewer B filtering on team-a: %d, rows shown", a.status)
	}
	// Viewer B sees the channel only its group may use; viewer A does not.
	if b := fx.get(t, "/ui/view/channels", keyViewerB).body; !strings.Contains(b, `data-channel="team-b-only"`) {
		t.Error("viewer B does not see its group's channel")
	}
	if b := fx.get(t, "/ui/view/channels", keyViewerA).body; strings.Contains(b, "team-b-only") {
		t.Error("viewer A sees team-b's channel")
	}
	var who sessionInfo
	if err := json.Unmarshal([]byte(fx.get(t, "/ui/view/session", keyViewerA).body), &who); err != nil || who.Name != "dash-a" || who.Role != "viewer" || who.Group != "team-a" {
		t.Errorf("session of viewer A: %+v %v", who, err)
	}
}

// TestPageAndAssets: the shell is served without a key, with a strict
// CSP; assets revalidate by ETag; unknown paths and methods get JSON
// errors.
func TestPageAndAssets(t *testing.T) {
	fx := newFixture(t, nil, nil)
	a := fx.get(t, "/ui/", "")
	if a.status != 200 || !strings.Contains(a.body, `<script src="/ui/assets/app.js"`) {
		t.Fatalf("/ui/: %d %s", a.status, a.body)
	}
	if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	if strings.Contains(a.body, "<script>") || strings.Contains(a.body, "style=") {
		t.Error("the page has inline script or style, which its CSP forbids")
	}
	js := fx.get(t, "/ui/assets/app.js", "")
	if js.status != 200 || !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") || js.header.Get("ETag") == "" {
		t.Fatalf("app.js: %d %v", js.status, js.header)
	}
	req, _ := http.NewRequest("GET", fx.srv.URL+"/ui/assets/app.js", nil)
	req.Header.Set("If-None-Match", js.header.Get("ETag"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: %d", resp.StatusCode)
	}
	if css := fx.get(t, "/ui/assets/app.css", ""); css.status != 200 || !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("app.css: %d %s", css.status, css.header.Get("Content-Type"))
	}
	for _, p := range []string{"/ui/assets/nope.js", "/ui/nope", "/ui/view/nope"} {
		if a := fx.get(t, p, keyAdmin); a.status != 404 || errType(t, a) != api.TypeNotFound {
			t.Errorf("%s: %d %s", p, a.status, a.body)
		}
	}
	resp, err = http.Post(fx.srv.URL+"/ui/view/overview", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || !strings.Contains(string(b), "GET only") {
		t.Errorf("POST: %d %s", resp.StatusCode, b)
	}
	resp, err = http.Get(fx.srv.URL + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/ui/" {
		t.Errorf("/ui leads to %s", resp.Request.URL.Path)
	}
}

// TestBadParameters: every bad view parameter is a 400 JSON error that
// says what was wrong.
func TestBadParameters(t *testing.T) {
	fx := newFixture(t, nil, nil)
	for q, want := range map[string]string{
		"since=forever":                      "since",
		"since=30s":                          "since",
		"since=1h&from=2025-03-14T10:00:00Z": "not both",
		"from=yesterday":                     "RFC 3339",
		"from=2025-03-14T11:00:00Z&to=2025-03-14T10:00:00Z": "before",
		"status=fine":                       "unknown status",
		"tz=9999":                           "tz",
		"limit=0":                           "limit",
		"limit=5000":                        "limit",
		"colour=red":                        "unknown parameter",
		"model=a&model=b":                   "given 2 times",
		"model=" + strings.Repeat("x", 300): "longer",
	} {
		for _, v := range []string{"overview", "requests", "channels"} {
			a := fx.get(t, "/ui/view/"+v+"?"+q, keyAdmin)
			if a.status != 400 || errType(t, a) != api.TypeInvalidRequest || !strings.Contains(a.body, want) {
				t.Errorf("%s?%s: %d %s (want a 400 mentioning %q)", v, q, a.status, a.body, want)
			}
		}
	}
	// A bad cursor is the read API's to judge; its error comes through.
	if a := fx.get(t, "/ui/view/requests?cursor=bogus", keyAdmin); a.status != 400 || !strings.Contains(a.body, "cursor") {
		t.Errorf("bad cursor: %d %s", a.status, a.body)
	}
}

var (
	rowRE  = regexp.MustCompile(`<tr data-id="([^"]+)"`)
	nextRE = regexp.MustCompile(`<a href="#/requests\?([^"]+)" data-next>`)
)

// TestRequestsPaging: pages of the list follow the API's cursor, newest
// first, without repeats; the first page is live, later ones are not.
func TestRequestsPaging(t *testing.T) {
	var recs []record.Record
	for i := range 120 {
		recs = append(recs, fast(fmt.Sprintf("req-%03d", i), "team-a", now.Add(-time.Duration(120-i)*time.Second), i%3 == 0))
	}
	fx := newFixture(t, recs, nil)
	seen := map[string]bool{}
	path := "/ui/view/requests?since=1h"
	var order []string
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("paging does not end")
		}
		a := fx.get(t, path, keyViewerA)
		if a.status != 200 {
			t.Fatalf("page %d: %d %s", page, a.status, a.body)
		}
		if live := strings.Contains(a.body, `data-live id="req-live"`); live != (page == 0) {
			t.Errorf("page %d: live %v", page, live)
		}
		ids := rowRE.FindAllStringSubmatch(a.body, -1)
		for _, m := range ids {
			if seen[m[1]] {
				t.Errorf("page %d repeats %s", page, m[1])
			}
			seen[m[1]] = true
			order = append(order, m[1])
		}
		m := nextRE.FindStringSubmatch(a.body)
		if m == nil {
			if len(ids) != 20 {
				t.Errorf("last page has %d rows, want 20", len(ids))
			}
			break
		}
		if len(ids) != defaultLimit {
			t.Errorf("page %d has %d rows", page, len(ids))
		}
		path = "/ui/view/requests?" + htmlUnescape(m[1])
	}
	if len(seen) != 120 || order[0] != "req-119" || order[119] != "req-000" {
		t.Errorf("saw %d, first %s, last %s", len(seen), order[0], order[len(order)-1])
	}
}

func htmlUnescape(s string) string { return strings.ReplaceAll(s, "&amp;", "&") }

// TestViewsAnswerFromStoreQueries: no view loads rows to summarise them:
// the overview and channels are Stats calls only; the list is one page of
// List; a detail is one Get (and a Stats for its context).
func TestViewsAnswerFromStoreQueries(t *testing.T) {
	var recs []record.Record
	for i := range 300 {
		recs = append(recs, fast(fmt.Sprintf("req-%03d", i), "team-a", now.Add(-time.Duration(i)*time.Second), false))
	}
	fx := newFixture(t, recs, nil)
	cs := fx.store
	check := func(path string, lists, stats, gets int) {
		t.Helper()
		cs.reset()
		if a := fx.get(t, path, keyAdmin); a.status != 200 {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if len(cs.lists) != lists || len(cs.stats) != stats || cs.gets != gets {
			t.Errorf("%s: %d List, %d Stats, %d Get; want %d, %d, %d", path, len(cs.lists), len(cs.stats), cs.gets, lists, stats, gets)
		}
		for _, f := range cs.lists {
			if f.Limit != defaultLimit {
				t.Errorf("%s: List with limit %d", path, f.Limit)
			}
		}
		for _, q := range cs.stats {
			if q.Filter.From.IsZero() {
				t.Errorf("%s: Stats without a lower bound", path)
			}
			for _, fld := range q.Fields {
				if fld == "" {
					t.Errorf("%s: empty field", path)
				}
			}
			if len(q.Fields) == 0 {
				t.Errorf("%s: Stats of every field; a view asks only for what it draws", path)
			}
		}
	}
	check("/ui/view/overview?since=1h", 0, 3, 0)
	check("/ui/view/channels?since=1h", 0, 1, 0)
	check("/ui/view/requests?since=1h", 1, 0, 0)
	// The record, then the stats of its channel and model around it
	// (this mux has no diagnosis endpoint, so nothing reads it twice).
	check("/ui/view/request/req-007", 0, 1, 1)
}
