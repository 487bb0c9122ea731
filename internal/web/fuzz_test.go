package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/api"
)

// FuzzViewQuery: any query string either parses into a window that ends
// after it starts, with a page size in bounds, or is refused; and the links
// a parsed query writes parse back to the same filters.
func FuzzViewQuery(f *testing.F) {
	for _, s := range []string{"", "since=1h", "since=7d&model=fast&channel=sim-openai", "from=2025-03-14T11:00:00Z&to=2025-03-14T11:01:00Z",
		"status=truncated&label=generation_slow&tz=-330", "limit=200&cursor=abc", "since=0m", "tz=841", "from=2025-03-14T11:00:00Z&since=1h",
		"model=%00%ff&group=%E2%80%AE", "since=99999d", "since=1m1ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseViewQuery(v, now)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if !q.start().Before(q.end()) && !q.start().Equal(q.end()) {
			t.Fatalf("%q: window %v – %v", raw, q.start(), q.end())
		}
		if q.Limit < 1 || q.Limit > maxLimit {
			t.Fatalf("%q: limit %d", raw, q.Limit)
		}
		if q.end().Sub(q.start()) > maxSince {
			t.Fatalf("%q: window of %v", raw, q.end().Sub(q.start()))
		}
		_, rawLink, _ := strings.Cut(q.link("requests"), "?")
		lv, err := url.ParseQuery(rawLink)
		if err != nil {
			t.Fatalf("%q: link %q does not parse: %v", raw, rawLink, err)
		}
		back, err := parseViewQuery(lv, now)
		if err != nil {
			t.Fatalf("%q: link %q refused: %v", raw, rawLink, err)
		}
		if back.Model != q.Model || back.Channel != q.Channel || back.Group != q.Group || back.Status != q.Status ||
			back.Label != q.Label || !back.start().Equal(q.start()) || !back.To.Equal(q.To) {
			t.Fatalf("%q: link %q reads back as %+v", raw, rawLink, back)
		}
	})
}

// FuzzViews sends arbitrary query strings to every view, as an admin over
// a real SQLite store: each answer is a 200 HTML fragment or a 400 JSON
// error, never a panic or a 500.
func FuzzViews(f *testing.F) {
	for _, s := range []string{"", "since=1h", "since=30d&channel=sim-anthropic", "from=2025-03-14T11:00:00Z&to=2025-03-14T11:01:00Z",
		"cursor=MTc0MTk0NDQwMDAwMDAwMDAwMC5yZXEtYTE", "status=ok&label=response_to_text_gap&tz=60", "limit=1", "model=<script>"} {
		f.Add(s)
	}
	fx := newFixture(f, standardRecords(), nil)
	f.Fuzz(func(t *testing.T, raw string) {
		for _, path := range []string{"/ui/view/overview", "/ui/view/requests", "/ui/view/channels", "/ui/view/request/req-b"} {
			req := httptest.NewRequest("GET", "http://ttfx"+path, nil)
			req.URL.RawQuery = raw
			req.Header.Set("Authorization", "Bearer "+keyAdmin)
			w := httptest.NewRecorder()
			fx.mux.ServeHTTP(w, req)
			switch w.Code {
			case http.StatusOK:
				if ct := w.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
					t.Fatalf("%s?%s: content type %q", path, raw, ct)
				}
				if strings.Contains(w.Body.String(), "<script") {
					t.Fatalf("%s?%s: a script tag reached the page", path, raw)
				}
			case http.StatusBadRequest:
				if !strings.Contains(w.Body.String(), `"type":"`+api.TypeInvalidRequest+`"`) {
					t.Fatalf("%s?%s: 400 that is not a JSON error: %s", path, raw, w.Body)
				}
			default:
				t.Fatalf("%s?%s: %d %s", path, raw, w.Code, w.Body)
			}
		}
	})
}

// FuzzDiagnosisAnswer feeds arbitrary bytes as the diagnosis endpoint's
// answer: the detail view shows what it can read, or falls back, and never
// fails or lets markup through.
func FuzzDiagnosisAnswer(f *testing.F) {
	for _, s := range []string{
		`{"request_id":"req-b","verdicts":[{"label":"response_to_text_gap","primary":true,"finding":{"value":5800,"threshold":2000,"unit":"ms","rule":"r"}}],"context":{"channel_slow":true,"fields":{"x":{"p50":1,"p95":2}}}}`,
		`{"verdicts":null,"context":{"a":{"b":{"c":{"d":{"e":1}}}}}}`, `{"context":[1,2]}`, `[]`, `null`, ``, `{"verdicts":[{"label":"<img src=x>"}]}`,
		`{"context":{"k":"</td><script>alert(1)</script>"}}`, `{"context":{"n":1e308,"m":-0,"s":"\u0000"}}`,
	} {
		f.Add(s)
	}
	var body string
	fx := newFixture(f, standardRecords(), func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/requests/{id}/diagnosis", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		})
	})
	f.Fuzz(func(t *testing.T, answer string) {
		body = answer
		req := httptest.NewRequest("GET", "http://ttfx/ui/view/request/req-b", nil)
		req.Header.Set("Authorization", "Bearer "+keyAdmin)
		w := httptest.NewRecorder()
		fx.mux.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("%d for %q: %s", w.Code, answer, w.Body)
		}
		if strings.Contains(w.Body.String(), "<script") || strings.Contains(w.Body.String(), "<img") {
			t.Fatalf("markup from the answer reached the page: %q", answer)
		}
		if !strings.Contains(w.Body.String(), `data-gap="response_to_text"`) {
			t.Fatalf("no waterfall for %q", answer)
		}
	})
}
