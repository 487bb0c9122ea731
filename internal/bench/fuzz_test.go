package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/protocol"
)

// bodyTransport answers every request with a fixed status, content type
// and body, without a network: the fuzzer's bytes are the response.
type bodyTransport struct {
	status int
	ctype  string
	body   []byte
}

func (b *bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: b.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {b.ctype}},
		Body:    io.NopCloser(bytes.NewReader(b.body)),
		Request: r,
	}, nil
}

// FuzzResponse feeds arbitrary bytes to the measurement as a response body
// of any API, streamed or not, with any status: it must end with a row
// whose status, phase and marks are consistent, and never panic or hang.
func FuzzResponse(f *testing.F) {
	entries, _ := os.ReadDir(fixtureDir)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".sse" {
			if b, err := os.ReadFile(filepath.Join(fixtureDir, e.Name())); err == nil {
				f.Add(b, uint8(0), true, uint16(200))
			}
		}
	}
	f.Add([]byte(`{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"completion_tokens":1}}`), uint8(0), false, uint16(200))
	f.Add([]byte(`{"error":{"message":"no","type":"invalid_request_error"}}`), uint8(2), false, uint16(400))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]}}]}\n\n"), uint8(3), true, uint16(200))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\n"), uint8(2), true, uint16(200))
	f.Add([]byte(": ping\n\n"), uint8(1), true, uint16(503))
	base, _ := url.Parse("http://fuzz.invalid")
	f.Fuzz(func(t *testing.T, body []byte, apiSel uint8, stream bool, status uint16) {
		// The APIs the benchmark client speaks (request units).
		apis := request.APIs()
		api := protocol.API(apis[int(apiSel)%len(apis)])
		code := 100 + int(status)%500
		if code < 200 {
			code = 200
		}
		ctype := "application/json"
		if stream && apiSel&0x80 == 0 {
			ctype = "text/event-stream"
		}
		c := &Client{
			HTTP: &http.Client{Transport: &bodyTransport{status: code, ctype: ctype, body: body}},
			Wire: &Wire{API: api, Base: base, Model: "m", Stream: stream, MaxTokens: 8}, Timeout: 5 * time.Second,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r := c.Do(ctx, []byte(`{}`))
		known := false
		for _, s := range Statuses {
			known = known || s == r.Status
		}
		if !known {
			t.Fatalf("status %q", r.Status)
		}
		if (r.Status == StatusOK) != (r.Phase == "") {
			t.Fatalf("status %s with phase %q", r.Status, r.Phase)
		}
		if code >= 300 && r.Status != StatusHTTPError {
			t.Fatalf("HTTP %d gave %s", code, r.Status)
		}
		// Marks are ordered: text implies effective output implies an
		// event (when streamed), and all come before the end.
		ev, hasEv := r.FirstSSEEventMs.Get()
		resp, hasResp := r.FirstResponseMs.Get()
		tx, hasTx := r.FirstTextDeltaMs.Get()
		end, hasEnd := r.EndToEndMs.Get()
		if !hasEnd {
			t.Fatal("no end mark")
		}
		if hasTx && (!hasResp || resp > tx) || hasResp && stream && ctype == "text/event-stream" && (!hasEv || ev > resp) || hasTx && tx > end {
			t.Fatalf("marks out of order: event %v response %v text %v end %v", r.FirstSSEEventMs, r.FirstResponseMs, r.FirstTextDeltaMs, r.EndToEndMs)
		}
		if r.VisibleOutputTPS.Valid() && (r.Tokens.Visible == nil || *r.Tokens.Visible < 2 || !hasTx) {
			t.Fatalf("speed %v with visible %v", r.VisibleOutputTPS, r.Tokens.Visible)
		}
		if r.Bytes > int64(len(body)) {
			t.Fatalf("read %d bytes of %d", r.Bytes, len(body))
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("row does not encode: %v", err)
		}
	})
}

// FuzzDecode reads arbitrary bytes as a result file: Decode either fails
// or gives a result that the report, the page, the CSV and a comparison
// with itself handle without panicking.
func FuzzDecode(f *testing.F) {
	row := `{"run":"r","index":0,"status":"ok","start_ms":1,"end_to_end_ms":5,"first_text_delta_ms":-3,"visible_output_tps":1e308}`
	f.Add([]byte(`{"format":"ttfx-bench/1","requests":[` + row + `],"summary":{"time_to_headers_ms":{"p50":"+Inf"}}}`))
	f.Add([]byte(`{"format":"ttfx-bench/1","run":{"id":"x","sources":[{"id":"a"}]},"requests":[]}`))
	f.Add([]byte(`{"format":"ttfx-bench/1","requests":[{"start_ms":1e300,"end_to_end_ms":1e300}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := Decode(b)
		if err != nil {
			return
		}
		WriteReport(io.Discard, res)
		WriteHTML(io.Discard, res)
		WriteCSV(io.Discard, res.Requests)
		Compare([]string{"a", "b"}, []*Result{res, res}).WriteTable(io.Discard)
		if ds := Differences(res.Conditions, res.Conditions); len(ds) != 0 {
			t.Fatalf("a result differs from itself: %+v", ds)
		}
		Summarize(res.Requests, time.Second, res.Conditions.Load)
	})
}

// FuzzGatewayRecord serves arbitrary bytes as the gateway's answer for a
// record: the join either fails with an error or gives a split whose parts
// add up to the client's marks.
func FuzzGatewayRecord(f *testing.F) {
	f.Add([]byte(`{"request_id":"x","first_sse_event_ms":1,"first_response_ms":2,"first_text_delta_ms":3,"first_text_sent_ms":3.5,"upstream_done_ms":9,"total_handler_ms":9.2,"attempts":[{"upstream_start_ms":0.5}]}`), uint16(200))
	f.Add([]byte(`{"attempts":[{"upstream_start_ms":null}],"first_text_delta_ms":1e300}`), uint16(200))
	f.Add([]byte(`{"error":{"type":"not_found_error"}}`), uint16(404))
	var body []byte
	var code int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		w.Write(body)
	}))
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	j := &Joiner{HTTP: srv.Client(), Base: base, Key: "k", Wait: 0}
	f.Fuzz(func(t *testing.T, b []byte, status uint16) {
		body, code = b, 200+int(status)%400
		rows := []Row{{RequestID: "req_1", Status: StatusOK, FirstSSEEventMs: at(10), FirstResponseMs: at(20), FirstTextDeltaMs: at(30), EndToEndMs: at(100)}}
		j.Join(context.Background(), rows)
		g := rows[0].Gateway
		if g == nil || (g.Record == nil) == (g.Error == "") {
			t.Fatalf("join %+v", g)
		}
		for m, sp := range g.Split {
			a, _ := sp.NetworkClientMs.Ms()
			b, _ := sp.GatewayMs.Ms()
			c, _ := sp.UpstreamMs.Ms()
			var client float64
			switch m {
			case MetricFirstEvent:
				client = 10
			case MetricFirstResponse:
				client = 20
			case MetricFirstText:
				client = 30
			case MetricEndToEnd:
				client = 100
			}
			// Durations are whole nanoseconds; the parts add up exactly.
			if d := a + b + c - client; d > 1e-6 || d < -1e-6 {
				t.Fatalf("%s: %v + %v + %v ≠ %v", m, a, b, c, client)
			}
		}
		Summarize(rows, time.Second, Load{Mode: ModeConcurrency, Concurrency: 1})
	})
}
