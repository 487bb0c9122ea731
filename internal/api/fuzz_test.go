package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// FuzzQuery sends arbitrary query strings to every endpoint, as an admin
// over a real SQLite store: each answer is a 200 of the endpoint's shape or
// a 400 JSON error, never a panic, a 500 or a hang.
func FuzzQuery(f *testing.F) {
	for _, seed := range []string{
		"", "model=gpt-4o&limit=2", "from=2025-03-14T09:00:00Z&to=2025-03-14T13:00:00Z", "since=1h&status=ok",
		"cursor=MTc0MTk0NDQwMDAwMDAwMDAwMC5yZXEtYTE", "group_by=model,channel&bucket=1m&fields=first_text_delta_ms",
		"label=response_to_text_gap&group=team-a", "limit=1001", "bucket=0s", "since=99999999d", "from=0001-01-01T00:00:00Z",
		"to=9999-12-31T23:59:59Z", "model=%00%ff", "group_by=,,,", "cursor=%2F%2F%2F", "fields=relay_lag_ms&bucket=1d&since=30d",
	} {
		f.Add(seed)
	}
	s := openSQLite(f)
	if err := s.Insert(context.Background(), []record.Record{
		rec("req-a1", "team-a", "client-a", now.Add(-3*time.Minute)),
		rec("req-b1", "team-b", "client-b", now.Add(-1*time.Minute)),
	}); err != nil {
		f.Fatal(err)
	}
	h := New(Options{Store: s, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }, Timeout: 5 * time.Second})
	f.Fuzz(func(t *testing.T, rawQuery string) {
		for _, path := range []string{"/api/requests", "/api/stats", "/api/health"} {
			req := httptest.NewRequest("GET", "http://ttfx"+path, nil)
			req.URL.RawQuery = rawQuery
			req.Header.Set("Authorization", "Bearer "+keyAdmin)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			switch w.Code {
			case http.StatusOK:
				var v map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
					t.Fatalf("%s?%s: 200 with invalid JSON: %v", path, rawQuery, err)
				}
				want := map[string]string{"/api/requests": "requests", "/api/stats": "groups", "/api/health": "store"}[path]
				if _, ok := v[want]; !ok {
					t.Fatalf("%s?%s: 200 without %q: %s", path, rawQuery, want, w.Body)
				}
			case http.StatusBadRequest:
				var e ErrorBody
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Type != TypeInvalidRequest || e.Error.Message == "" {
					t.Fatalf("%s?%s: 400 that is not a JSON error: %s", path, rawQuery, w.Body)
				}
			default:
				t.Fatalf("%s?%s: status %d: %s", path, rawQuery, w.Code, w.Body)
			}
		}
	})
}
