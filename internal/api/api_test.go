package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/ttfx/ttfx/internal/store/chstore"  // registers ClickHouse
	_ "github.com/ttfx/ttfx/internal/store/sqlstore" // registers SQLite and PostgreSQL

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
	"github.com/ttfx/ttfx/internal/timeline"
)

var now = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "ttfx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// postgresDSN returns a DSN with a fresh schema of its own, or skips
// (fails under TTFX_REQUIRE_ALL=1) without TTFX_TEST_POSTGRES.
func postgresDSN(t testing.TB) string { return testenv.PostgresSchema(t) }

func rec(id, group, key string, at time.Time) record.Record {
	return record.Record{
		RequestID: id, Timestamp: at, API: "openai.chat", Route: "POST /v1/chat/completions",
		Model: "gpt-4o", Group: group, KeyName: key, Channel: "sim", Provider: "sim",
		Status: record.StatusOK, HTTPStatus: 200, Stream: true, Terminal: "done", FinishReason: "stop",
		Fields: timeline.Fields{
			UpstreamHeadersMs: timeline.SpanOf(240 * time.Millisecond),
			FirstResponseMs:   timeline.At(2900 * time.Millisecond),
			FirstTextDeltaMs:  timeline.At(8700 * time.Millisecond),
			TotalHandlerMs:    timeline.At(10200 * time.Millisecond),
		},
		VisibleOutputTPS: timeline.RateOf(55),
		Tokens:           record.Tokens{Visible: record.Int(80), Source: record.TokensUsage},
		Attempts:         []record.Attempt{{Channel: "sim", Status: record.StatusOK, HTTPStatus: 200}},
		Diagnosis:        []string{"response_to_text_gap"},
	}
}

// The principals of the access matrix.
const (
	keyAdmin    = "ttfx-admin-0123456789"
	keyViewerA  = "ttfx-viewer-a-0123456789"
	keyViewerB  = "ttfx-viewer-b-0123456789"
	keyClientA  = "ttfx-client-a-0123456789"
	keyNoGroup  = "ttfx-viewer-nogroup-0123"
	keyUnknown  = "ttfx-nobody-0123456789"
	keyClientA2 = "ttfx-client-a2-012345678"
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
		e(keyClientA2, "client-a2", auth.RoleClient, "team-a"),
		e(keyNoGroup, "dash-none", auth.RoleViewer, ""),
	})
}

// fixture serves the API over a SQLite store with three records: two of
// group team-a (made by client-a and client-a2) and one of team-b.
func fixture(t *testing.T) (*httptest.Server, store.Store) { return fixtureOn(t, openSQLite(t)) }

// fixtureOn is fixture over s, a store of any engine.
func fixtureOn(t *testing.T, s store.Store) (*httptest.Server, store.Store) {
	if err := s.Insert(context.Background(), []record.Record{
		rec("req-a1", "team-a", "client-a", now.Add(-3*time.Minute)),
		rec("req-a2", "team-a", "client-a2", now.Add(-2*time.Minute)),
		rec("req-b1", "team-b", "client-b", now.Add(-1*time.Minute)),
	}); err != nil {
		t.Fatal(err)
	}
	w := store.NewWriter(s, store.WriterOptions{})
	t.Cleanup(func() { w.Close(context.Background()) })
	h := New(Options{Store: s, Writer: w, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, s
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func call(t *testing.T, method, u, key string) answer {
	t.Helper()
	// A guard against a hang, not a measure: a page of records from
	// ClickHouse took over 10 s at a load average of 25 (loaded run 9).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
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
	return answer{resp.StatusCode, resp.Header, b}
}

// errorType checks a JSON error body and returns its type.
func errorType(t *testing.T, a answer) string {
	t.Helper()
	var e ErrorBody
	if err := json.Unmarshal(a.body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Errorf("status %d: not a JSON error: %s", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	return e.Error.Type
}

func listedIDs(t *testing.T, a answer) []string {
	t.Helper()
	var l ListResponse
	if err := json.Unmarshal(a.body, &l); err != nil {
		t.Fatalf("list: %v: %s", err, a.body)
	}
	ids := []string{}
	for _, r := range l.Requests {
		ids = append(ids, r.RequestID)
	}
	slices.Sort(ids)
	return ids
}

func statsCount(t *testing.T, a answer) int {
	t.Helper()
	var s StatsResponse
	if err := json.Unmarshal(a.body, &s); err != nil {
		t.Fatalf("stats: %v: %s", err, a.body)
	}
	n := 0
	for _, g := range s.Groups {
		n += g.Count
	}
	return n
}

// TestAccessMatrix: admin, viewer of group A, viewer of group B, client,
// no key (and an unknown key, and a viewer without a group) against every
// endpoint.
func TestAccessMatrix(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { srv, _ := fixture(t); accessMatrix(t, srv) })
	t.Run("clickhouse", func(t *testing.T) { srv, _ := fixtureOn(t, openClickHouse(t)); accessMatrix(t, srv) })
}

func accessMatrix(t *testing.T, srv *httptest.Server) {
	type want struct {
		status int
		ids    []string // for lists: the records visible; for stats: len is the count
	}
	all := []string{"req-a1", "req-a2", "req-b1"}
	groupA := []string{"req-a1", "req-a2"}
	cases := []struct {
		path string
		keys map[string]want
	}{
		{"/api/requests", map[string]want{
			keyAdmin: {200, all}, keyViewerA: {200, groupA}, keyViewerB: {200, []string{"req-b1"}},
			keyClientA: {403, nil}, "": {401, nil}, keyUnknown: {401, nil}, keyNoGroup: {403, nil},
		}},
		{"/api/requests?group=team-b", map[string]want{
			keyAdmin: {200, []string{"req-b1"}}, keyViewerA: {200, []string{}}, keyViewerB: {200, []string{"req-b1"}},
			keyClientA: {403, nil}, "": {401, nil},
		}},
		{"/api/requests/req-a1", map[string]want{
			keyAdmin: {200, nil}, keyViewerA: {200, nil}, keyViewerB: {404, nil},
			keyClientA: {200, nil}, keyClientA2: {404, nil}, "": {401, nil}, keyUnknown: {401, nil}, keyNoGroup: {404, nil},
		}},
		{"/api/requests/req-b1", map[string]want{
			keyAdmin: {200, nil}, keyViewerA: {404, nil}, keyViewerB: {200, nil}, keyClientA: {404, nil}, "": {401, nil},
		}},
		{"/api/requests/req-missing", map[string]want{
			keyAdmin: {404, nil}, keyViewerA: {404, nil}, keyClientA: {404, nil}, "": {401, nil},
		}},
		{"/api/stats", map[string]want{
			keyAdmin: {200, all}, keyViewerA: {200, groupA}, keyViewerB: {200, []string{"req-b1"}},
			keyClientA: {403, nil}, "": {401, nil}, keyUnknown: {401, nil}, keyNoGroup: {403, nil},
		}},
		{"/api/stats?group=team-b", map[string]want{
			keyAdmin: {200, []string{"req-b1"}}, keyViewerA: {200, []string{}}, keyViewerB: {200, []string{"req-b1"}},
		}},
		{"/api/health", map[string]want{
			keyAdmin: {200, nil}, keyViewerA: {403, nil}, keyViewerB: {403, nil}, keyNoGroup: {403, nil},
			keyClientA: {403, nil}, "": {401, nil}, keyUnknown: {401, nil},
		}},
	}
	names := map[string]string{keyAdmin: "admin", keyViewerA: "viewerA", keyViewerB: "viewerB", keyClientA: "client",
		keyClientA2: "client2", "": "none", keyUnknown: "unknown", keyNoGroup: "viewer-nogroup"}
	for _, c := range cases {
		for key, w := range c.keys {
			t.Run(c.path+"/"+names[key], func(t *testing.T) {
				a := call(t, "GET", srv.URL+c.path, key)
				if a.status != w.status {
					t.Fatalf("status %d, want %d: %s", a.status, w.status, a.body)
				}
				switch {
				case a.status != 200:
					typ := errorType(t, a)
					wantType := map[int]string{401: TypeAuthentication, 403: TypePermission, 404: TypeNotFound}[a.status]
					if typ != wantType {
						t.Errorf("error type %q, want %q", typ, wantType)
					}
					if a.status == 401 && a.header.Get("WWW-Authenticate") == "" {
						t.Error("401 without WWW-Authenticate")
					}
				case strings.HasPrefix(c.path, "/api/requests/"):
					var r record.Record
					if err := json.Unmarshal(a.body, &r); err != nil || "/api/requests/"+r.RequestID != c.path {
						t.Errorf("record %s: %v", a.body, err)
					}
				case strings.HasPrefix(c.path, "/api/requests"):
					if got := listedIDs(t, a); !slices.Equal(got, w.ids) {
						t.Errorf("visible %v, want %v", got, w.ids)
					}
				case strings.HasPrefix(c.path, "/api/stats"):
					if got := statsCount(t, a); got != len(w.ids) {
						t.Errorf("stats count %d, want %d", got, len(w.ids))
					}
				}
			})
		}
	}
	// Another group's record and a missing one look the same, so ids of
	// other groups cannot be probed.
	other := call(t, "GET", srv.URL+"/api/requests/req-b1", keyViewerA)
	missing := call(t, "GET", srv.URL+"/api/requests/req-zz", keyViewerA)
	if strings.ReplaceAll(string(other.body), "req-b1", "ID") != strings.ReplaceAll(string(missing.body), "req-zz", "ID") {
		t.Errorf("404s differ:\n%s\n%s", other.body, missing.body)
	}
}

func TestKeyForms(t *testing.T) {
	srv, _ := fixture(t)
	for _, c := range []struct {
		name    string
		set     func(r *http.Request)
		status  int
		mention string
	}{
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+keyAdmin) }, 200, ""},
		{"x-api-key", func(r *http.Request) { r.Header.Set("X-Api-Key", keyAdmin) }, 200, ""},
		// The Gemini forms are the model routes' (auth.FromRequest), not
		// the read API's; a key in the URL is refused outright, whatever
		// else the request carries, as URLs end up in access logs.
		{"x-goog-api-key", func(r *http.Request) { r.Header.Set("X-Goog-Api-Key", keyAdmin) }, 401, "no API key"},
		{"query", func(r *http.Request) { r.URL.RawQuery = "key=" + keyAdmin }, 400, "Authorization header"},
		{"query and header", func(r *http.Request) {
			r.URL.RawQuery = "key=" + keyAdmin
			r.Header.Set("Authorization", "Bearer "+keyAdmin)
		}, 400, "Authorization header"},
		{"empty query key", func(r *http.Request) { r.URL.RawQuery = "key=" }, 400, "Authorization header"},
	} {
		for _, path := range []string{"/api/requests", "/api/requests/req-a1", "/api/stats", "/api/health"} {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			c.set(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(b), c.mention) {
				t.Errorf("%s %s: %d %s; want %d mentioning %q", c.name, path, resp.StatusCode, b, c.status, c.mention)
			}
			if strings.Contains(string(b), keyAdmin) {
				t.Errorf("%s %s: the answer repeats the key: %s", c.name, path, b)
			}
		}
	}
}

func TestGetIsTheRecordJSON(t *testing.T) {
	srv, s := fixture(t)
	a := call(t, "GET", srv.URL+"/api/requests/req-a1", keyAdmin)
	stored, err := s.Get(context.Background(), "req-a1")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(stored)
	if strings.TrimSpace(string(a.body)) != string(want) {
		t.Errorf("body\n%s\nwant json.Marshal(record)\n%s", a.body, want)
	}
	for _, field := range []string{`"request_id":"req-a1"`, `"first_text_delta_ms":8700`, `"first_sse_event_ms":null`,
		`"diagnosis":["response_to_text_gap"]`, `"tokens":{`, `"attempts":[{`} {
		if !strings.Contains(string(a.body), field) {
			t.Errorf("record lacks %s", field)
		}
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
}

func TestListPagination(t *testing.T) {
	srv, s := fixture(t)
	var recs []record.Record
	for i := range 25 {
		recs = append(recs, rec("req-p"+string(rune('a'+i)), "team-c", "k", now.Add(-time.Hour+time.Duration(i)*time.Second)))
	}
	if err := s.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	var got []string
	u := srv.URL + "/api/requests?group=team-c&limit=10"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		a := call(t, "GET", u, keyAdmin)
		var l ListResponse
		if err := json.Unmarshal(a.body, &l); err != nil {
			t.Fatal(err)
		}
		for _, r := range l.Requests {
			got = append(got, r.RequestID)
		}
		if l.Definitions["first_text_delta_ms"] == "" {
			t.Errorf("list answer does not define its fields: %v", l.Definitions)
		}
		if l.NextCursor == nil {
			if !strings.Contains(string(a.body), `"next_cursor":null`) {
				t.Errorf("last page: %s", a.body)
			}
			break
		}
		u = srv.URL + "/api/requests?group=team-c&limit=10&cursor=" + url.QueryEscape(*l.NextCursor)
	}
	if len(got) != 25 || got[0] != "req-py" || got[24] != "req-pa" {
		t.Errorf("pages gave %v", got)
	}
}

func TestBadRequests(t *testing.T) {
	srv, _ := fixture(t)
	for _, c := range []struct {
		path, mention string
	}{
		{"/api/requests?from=yesterday", "from"},
		{"/api/requests?to=2025-13-01T00:00:00Z", "to"},
		{"/api/requests?from=2025-03-14T10:00:00Z&to=2025-03-14T09:00:00Z", "before"},
		{"/api/requests?since=-1h", "since"},
		{"/api/requests?since=1h&from=2025-03-14T10:00:00Z", "not both"},
		{"/api/requests?limit=0", "limit"},
		{"/api/requests?limit=1001", "limit"},
		{"/api/requests?limit=ten", "limit"},
		{"/api/requests?status=slow", "status"},
		{"/api/requests?labels=x", "unknown parameter"},
		{"/api/requests?model=a&model=b", "2 times"},
		{"/api/requests?cursor=garbage", "cursor"},
		{"/api/stats?group_by=prompt", "group_by"},
		{"/api/stats?fields=ttft", "fields"},
		{"/api/stats?bucket=1ms", "bucket"},
		{"/api/stats?bucket=1s&since=7d", "buckets"},
		{"/api/stats?since=36500d", "31 days"},
		{"/api/stats?since=32d", "31 days"},
		{"/api/stats?from=1970-01-01T00:00:00Z", "31 days"},
		{"/api/stats?from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:01Z", "31 days"},
		{"/api/stats?to=2030-01-01T00:00:00Z&since=1h", "31 days"},
		{"/api/stats?limit=5", "unknown parameter"},
		{"/api/health?verbose=1", "unknown parameter"},
	} {
		a := call(t, "GET", srv.URL+c.path, keyAdmin)
		if a.status != 400 {
			t.Errorf("%s: status %d, want 400: %s", c.path, a.status, a.body)
			continue
		}
		if typ := errorType(t, a); typ != TypeInvalidRequest {
			t.Errorf("%s: type %s", c.path, typ)
		}
		if !strings.Contains(string(a.body), c.mention) {
			t.Errorf("%s: error does not mention %q: %s", c.path, c.mention, a.body)
		}
	}
	a := call(t, "POST", srv.URL+"/api/requests", keyAdmin)
	if a.status != 405 || a.header.Get("Allow") == "" || errorType(t, a) != TypeInvalidRequest {
		t.Errorf("POST: %d %v %s", a.status, a.header, a.body)
	}
	a = call(t, "GET", srv.URL+"/api/nothing", keyAdmin)
	if a.status != 404 || errorType(t, a) != TypeNotFound {
		t.Errorf("unknown endpoint: %d %s", a.status, a.body)
	}
}

func TestStatsWindowBound(t *testing.T) {
	// A window of up to MaxStatsWindow is summarised; one longer is a
	// 400 that names the bound (TestBadRequests), whatever the retention.
	srv, _ := fixture(t)
	for _, path := range []string{
		"/api/stats?since=31d",
		"/api/stats?since=744h",
		"/api/stats?from=2025-02-11T12:00:00Z", // now − 31 days
		"/api/stats?from=2025-01-01T00:00:00Z&to=2025-02-01T00:00:00Z",
		"/api/stats?to=2025-03-14T12:00:00Z", // the default day before to
	} {
		a := call(t, "GET", srv.URL+path, keyViewerA)
		if a.status != 200 {
			t.Errorf("%s: %d %s", path, a.status, a.body)
		}
	}
	a := call(t, "GET", srv.URL+"/api/stats?from=2025-02-11T11:59:59Z", keyViewerA)
	if a.status != 400 || !strings.Contains(string(a.body), "longer than 31 days") {
		t.Errorf("a second past the bound: %d %s", a.status, a.body)
	}
	// /api/requests pages through any window: it is not bounded.
	if a := call(t, "GET", srv.URL+"/api/requests?from=1970-01-01T00:00:00Z", keyAdmin); a.status != 200 {
		t.Errorf("requests over a long window: %d %s", a.status, a.body)
	}
}

func TestStatsAnswer(t *testing.T) {
	srv, s := fixture(t)
	// Two days old: outside the default window of a day.
	if err := s.Insert(context.Background(), []record.Record{rec("req-old", "team-a", "k", now.Add(-48*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	a := call(t, "GET", srv.URL+"/api/stats?group_by=group&fields=first_text_delta_ms,upstream_headers_ms", keyAdmin)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var st StatsResponse
	if err := json.Unmarshal(a.body, &st); err != nil {
		t.Fatal(err)
	}
	// From rollups, the window widens to whole minutes.
	if st.Window.From == nil || !st.Window.From.Equal(now.Add(-DefaultStatsWindow).Truncate(time.Minute)) || st.Window.To != nil {
		t.Errorf("window %+v", st.Window)
	}
	if st.Method != store.MethodRollups || st.RelativeError != sketch.RelativeAccuracy {
		t.Errorf("method %q, relative error %v", st.Method, st.RelativeError)
	}
	if !strings.Contains(string(a.body), `"truncated":false`) || st.Definitions["truncated"] == "" {
		t.Errorf("the answer does not say whether it is truncated: %.200s", a.body)
	}
	if !strings.Contains(st.PercentileMethod, "R-7") || !strings.Contains(st.PercentileMethod, "sketch") {
		t.Errorf("method %q", st.PercentileMethod)
	}
	if st.Definitions["first_text_delta_ms"] == "" || st.Definitions["upstream_headers_ms"] == "" || st.Definitions["error_rate"] == "" {
		t.Errorf("definitions %v", st.Definitions)
	}
	if len(st.Groups) != 2 || st.Groups[0].Key["group"] != "team-a" || st.Groups[0].Count != 2 {
		t.Fatalf("groups %+v", st.Groups)
	}
	g := st.Groups[0].Fields["first_text_delta_ms"]
	if g.P50 == nil || *g.P50 != 8700 || g.Count != 2 || g.Absent != 0 {
		t.Errorf("team-a first_text_delta_ms %+v", g)
	}
	if st.Groups[0].Labels["response_to_text_gap"].Primary != 2 {
		t.Errorf("labels %+v", st.Groups[0].Labels)
	}
	// A viewer's answer names the group it was narrowed to.
	a = call(t, "GET", srv.URL+"/api/stats", keyViewerA)
	if err := json.Unmarshal(a.body, &st); err != nil || st.Filter["group"] != "team-a" {
		t.Errorf("viewer filter %v, %v", st.Filter, err)
	}
}

func TestHealth(t *testing.T) {
	s := openSQLite(t)
	w := store.NewWriter(s, store.WriterOptions{})
	w.Record(new(rec("req-h", "g", "k", now)))
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: s, Writer: w, Resolve: KeyringResolver(keyring())}))
	defer srv.Close()
	var h HealthResponse
	a := call(t, "GET", srv.URL+"/api/health", keyAdmin)
	if err := json.Unmarshal(a.body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || !h.Store.Reachable || h.Store.Engine != "sqlite" || h.Store.Writer == nil || h.Store.Writer.Written != 1 {
		t.Errorf("health %s", a.body)
	}
	for _, field := range []string{`"queued":0`, `"written":1`, `"dropped":0`, `"last_error":""`} {
		if !strings.Contains(string(a.body), field) {
			t.Errorf("health lacks %s: %s", field, a.body)
		}
	}
	// A viewer is told why it may not: health is the whole gateway's.
	a = call(t, "GET", srv.URL+"/api/health", keyViewerA)
	if a.status != 403 || errorType(t, a) != TypePermission || !strings.Contains(string(a.body), "only admin keys") {
		t.Errorf("viewer: %d %s", a.status, a.body)
	}
	s.Close()
	a = call(t, "GET", srv.URL+"/api/health", keyAdmin)
	if err := json.Unmarshal(a.body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || h.Store.Reachable || h.Store.Error == "" {
		t.Errorf("health of a closed store %s", a.body)
	}
}

// unreachable is a store whose pings fail as a dial to a PostgreSQL
// server does.
type unreachable struct{ store.Store }

func (unreachable) Ping(context.Context) error {
	return errors.New("failed to connect to `user=ttfx database=ttfx`: 10.1.2.3:5432 (10.1.2.3): dial error: dial tcp 10.1.2.3:5432: connect: connection refused")
}

func TestHealthHidesTheDatabaseAddress(t *testing.T) {
	srv := httptest.NewServer(New(Options{Store: unreachable{openSQLite(t)}, Resolve: KeyringResolver(keyring())}))
	defer srv.Close()
	a := call(t, "GET", srv.URL+"/api/health", keyAdmin)
	var h HealthResponse
	if err := json.Unmarshal(a.body, &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || !strings.Contains(h.Store.Error, "connection refused") || strings.Contains(h.Store.Error, "10.1.2.3") {
		t.Errorf("health of an unreachable store: %s", a.body)
	}
}

// TestTwoReplicasShareOnePostgres: what one gateway's writer stores,
// another gateway's API over the same database serves, record and stats.
func TestTwoReplicasShareOnePostgres(t *testing.T) {
	dsn := postgresDSN(t)
	a, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := store.NewWriter(a, store.WriterOptions{})
	w.Record(new(rec("req-replica", "team-a", "client-a", now.Add(-time.Minute))))
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Store: b, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }}))
	defer srv.Close()
	got := call(t, "GET", srv.URL+"/api/requests/req-replica", keyClientA)
	if got.status != 200 || !strings.Contains(string(got.body), `"first_text_delta_ms":8700`) {
		t.Errorf("record from the other replica: %d %s", got.status, got.body)
	}
	if n := statsCount(t, call(t, "GET", srv.URL+"/api/stats", keyAdmin)); n != 1 {
		t.Errorf("stats count %d on the other replica", n)
	}
}
