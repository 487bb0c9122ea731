package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

// cell returns the text of the cell data-col=col in the row of field.
func cell(t *testing.T, body, field, col string) string {
	t.Helper()
	i := strings.Index(body, `<tr data-field="`+field+`"`)
	if i < 0 {
		t.Fatalf("no row for %s", field)
	}
	row := body[i:]
	row = row[:strings.Index(row, "</tr>")]
	re := regexp.MustCompile(`data-col="` + col + `">(.*?)</td>`)
	m := re.FindStringSubmatch(row)
	if m == nil {
		t.Fatalf("row %s has no %s cell: %s", field, col, row)
	}
	return m[1]
}

// TestOverview: the four definitions with their sentences, counts and
// percentiles; an absent mark is counted as absent and left out of the
// percentiles, never drawn or summarised as 0.
func TestOverview(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	a := fx.get(t, "/ui/view/overview?since=1h", keyAdmin)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	b := a.body
	for _, def := range ttftDefs {
		if !strings.Contains(b, "<b>"+def.Name+"</b> <code>"+def.Field+"</code>") {
			t.Errorf("definition %s missing", def.Name)
		}
	}
	// The definitions are the store's sentences, written out.
	for _, f := range store.StatFields {
		if f.Name == "first_response_ms" && !strings.Contains(b, strings.ReplaceAll(f.Definition, "'", "&#39;")) {
			t.Errorf("first_response_ms definition not written out")
		}
	}
	if got := cell(t, b, "first_text_delta_ms", "count"); got != "4" {
		t.Errorf("first text count %q, want 4 (one record has no text)", got)
	}
	if got := cell(t, b, "first_text_delta_ms", "absent"); got != "1" {
		t.Errorf("first text absent %q, want 1", got)
	}
	// Present values: 120, 120, 120 (the fallback), 8700: p50 = 120.
	if got := cell(t, b, "first_text_delta_ms", "p50"); got != "120 ms" {
		t.Errorf("first text p50 %q", got)
	}
	if got := cell(t, b, "upstream_headers_ms", "p50"); got != "50.0 ms" {
		t.Errorf("headers p50 %q", got)
	}
	if !strings.Contains(b, `<b data-count>5</b> requests`) {
		t.Error("request count not shown")
	}
	// Four time charts, each naming its field, with units on both axes.
	charts := regexp.MustCompile(`<svg class="chart time"[^>]*data-field="([a-z_]+)"`).FindAllStringSubmatch(b, -1)
	if len(charts) != 4 {
		t.Fatalf("%d time charts", len(charts))
	}
	if !strings.Contains(b, `text-anchor="middle">ms</text>`) && !strings.Contains(b, `>s</text>`) {
		t.Error("no unit on the y axis")
	}
	if !strings.Contains(b, "time (UTC+00:00), 1m buckets") {
		t.Error("no unit on the time axis")
	}
	// The TPS distribution: the metadata-only model has no TPS, and says so.
	if !regexp.MustCompile(`data-label="metadata-only">.*?absent in all 1 requests`).MatchString(b) {
		t.Error("a model without visible TPS is not shown as absent")
	}
	// Statuses and verdicts come from the same answer.
	if !strings.Contains(b, `data-chart="statuses"`) || !strings.Contains(b, `<g class="bar-row" data-label="ok">`) {
		t.Error("no status chart")
	}
	if !strings.Contains(b, `data-label="response_to_text_gap"`) {
		t.Error("trace B's verdict is not among the most frequent")
	}
	// A filter narrows every part: only the anthropic channel.
	a = fx.get(t, "/ui/view/overview?since=1h&channel=sim-anthropic", keyAdmin)
	if !strings.Contains(a.body, `<b data-count>1</b> requests`) {
		t.Errorf("channel filter: %s", a.body[:min(len(a.body), 400)])
	}
	if got := cell(t, a.body, "first_text_delta_ms", "p50"); got != "8,700 ms" {
		t.Errorf("channel filter: first text p50 %q", got)
	}
	// An empty window: every percentile absent, not 0.
	a = fx.get(t, "/ui/view/overview?from=2025-03-13T00:00:00Z&to=2025-03-13T01:00:00Z", keyAdmin)
	for _, def := range ttftDefs {
		if got := cell(t, a.body, def.Field, "p95"); got != `<span class="absent">absent</span>` {
			t.Errorf("empty window: %s p95 %q", def.Field, got)
		}
	}
	if strings.Count(a.body, "absent: no request in the window had this mark") != 4 {
		t.Error("empty charts do not say their marks are absent")
	}
	if strings.Contains(a.body, `<path class="line`) {
		t.Error("an empty window draws a line")
	}
}

// TestTimeChartGaps: a bucket without a value breaks the line; it is not
// drawn at 0.
func TestTimeChartGaps(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	from := now.Add(-5 * time.Minute)
	c := timeChart{Title: "t", Field: "first_text_delta_ms", From: from, To: now, Bucket: time.Minute, Loc: time.UTC,
		Series: []series{{Name: "p50", Class: "p50", Points: []point{
			{T: from, V: v(100), N: 1},
			{T: from.Add(time.Minute), V: v(200), N: 1},
			{T: from.Add(2 * time.Minute), V: nil}, // records, none with the mark
			{T: from.Add(3 * time.Minute), V: v(300), N: 2},
			// minute 4: no records at all (no bucket)
			{T: from.Add(5 * time.Minute), V: v(400), N: 1},
		}}}}
	svg := string(c.SVG())
	d := regexp.MustCompile(`<path class="line p50" d="([^"]+)"`).FindStringSubmatch(svg)
	if d == nil {
		t.Fatalf("no line: %s", svg)
	}
	if got := strings.Count(d[1], "M"); got != 3 {
		t.Errorf("path %q has %d runs, want 3 (two gaps)", d[1], got)
	}
	if got := strings.Count(d[1], "L"); got != 1 {
		t.Errorf("path %q has %d joins, want 1", d[1], got)
	}
	if got := strings.Count(svg, `<circle class="dot p50"`); got != 4 {
		t.Errorf("%d dots, want 4", got)
	}
	// The y axis ends at a round number above the largest value, in ms.
	if !strings.Contains(svg, `text-anchor="end">400</text>`) || !strings.Contains(svg, `>ms</text>`) {
		t.Errorf("axis: %s", svg)
	}
	// Long waits are labelled in seconds.
	c.Series[0].Points[0].V = v(25000)
	if svg := string(c.SVG()); !strings.Contains(svg, `>s</text>`) || !strings.Contains(svg, `p50: 25.0 s (1 requests)`) {
		t.Errorf("seconds axis: %s", svg)
	}
}

// TestRequestDetailTraceB: trace B's detail draws the response→text gap
// (t5 − t4 = 5800 ms) and names its verdict, with the value that fired it,
// the advice, and the channel's context.
func TestRequestDetailTraceB(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	a := fx.get(t, "/ui/view/request/req-b", keyViewerA)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	b := a.body
	row := regexp.MustCompile(`(?s)<div class="wf-row flagged" data-gap="response_to_text" data-flag="response_to_text_gap">(.*?)</div>\s*</div>`).FindStringSubmatch(b)
	if row == nil {
		t.Fatalf("no flagged response→text row: %s", b)
	}
	if !strings.Contains(row[1], "5,800 ms") {
		t.Errorf("gap row: %s", row[1])
	}
	// Its bar runs from t4 = 2900 to t5 = 8700 on a 0–12,000 ms axis.
	if !strings.Contains(row[1], `x="24.167%" y="2" width="48.333%"`) {
		t.Errorf("gap bar position: %s", row[1])
	}
	if !strings.Contains(b, `<article class="verdict-card primary" data-label="response_to_text_gap">`) {
		t.Error("verdict card missing")
	}
	if !strings.Contains(b, "5,800 ms against a threshold of 2,000 ms") {
		t.Error("the finding's value is not shown")
	}
	if !strings.Contains(b, diagnose.Advise(diagnose.ResponseToTextGap).Check) {
		t.Error("advice missing")
	}
	for _, want := range []string{
		`data-relay-lag>0.050 ms`,                      // first_text_sent − first_text_delta
		`data-tokens="source">estimate — counted with`, // tokens and their source
		`<g class="bar-row" data-label="tool">`,        // events by kind
		"attempt 1 · sim-anthropic",
		"0 other streaming requests on sim-anthropic for trace-b",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	// The other rows are not flagged.
	if n := strings.Count(b, `data-flag=`); n != 1 {
		t.Errorf("%d flagged rows", n)
	}
}

// TestRequestDetailTraceLink (issue 17): a traced request's detail links
// its trace id through the configured URL template; without a template the
// id is shown as text, and an untraced request shows none.
func TestRequestDetailTraceLink(t *testing.T) {
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	traced := traceB("req-t", "team-a", now.Add(-time.Minute))
	traced.TraceID = tid
	recs := append(standardRecords(), traced)
	linked := newFixture(t, recs, nil, func(o *Options) { o.TraceURL = "http://127.0.0.1:16686/trace/{trace_id}" })
	if b := linked.get(t, "/ui/view/request/req-t", keyAdmin).body; !strings.Contains(b, `<a href="http://127.0.0.1:16686/trace/`+tid+`" data-trace-link rel="noopener">`+tid+`</a>`) {
		t.Errorf("no trace link in the detail: %s", b)
	}
	if b := linked.get(t, "/ui/view/request/req-b", keyAdmin).body; strings.Contains(b, "data-trace") {
		t.Error("an untraced request shows a trace")
	}
	plain := newFixture(t, recs, nil)
	if b := plain.get(t, "/ui/view/request/req-t", keyAdmin).body; !strings.Contains(b, `<code data-trace-id>`+tid+`</code>`) || strings.Contains(b, "data-trace-link") {
		t.Errorf("without a URL template the id should show as text: %s", b)
	}
}

// TestRequestDetailAttemptsAndAbsent: each attempt has its own row; an
// attempt without headers is dashed until the next one starts; stretches
// whose marks are absent say so.
func TestRequestDetailAttemptsAndAbsent(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	b := fx.get(t, "/ui/view/request/req-fb", keyAdmin).body
	for _, want := range []string{"attempt 1 · sim-flaky", "attempt 2 · sim-down", "attempt 3 · sim-openai",
		"30.0 ms to headers · upstream_http_error 503 — upstream answered 503", "no headers · upstream_connect_error — connection refused"} {
		if !strings.Contains(b, want) {
			t.Errorf("fallback detail lacks %q", want)
		}
	}
	// Attempt 2 starts at 31 ms and runs, dashed, to attempt 3's start at
	// 40 ms, on a 0–500 ms axis.
	if !strings.Contains(b, `class="seg seg-fail dashed" x="6.200%" y="2" width="1.800%"`) {
		t.Errorf("dashed attempt: %s", b)
	}
	b = fx.get(t, "/ui/view/request/req-m1", keyAdmin).body
	row := regexp.MustCompile(`(?s)data-gap="response_to_text">(.*?)</div>\s*</div>`).FindStringSubmatch(b)
	if row == nil || !strings.Contains(row[1], `<span class="absent">absent (neither mark happened)</span>`) {
		t.Errorf("absent stretch: %v", row)
	}
	if strings.Contains(row[1], `<rect class="seg`) {
		t.Error("an absent stretch is drawn")
	}
	if !strings.Contains(b, `data-no-verdict`) {
		t.Error("a request without verdicts does not say so")
	}
}

// TestDiagnosisEndpoint: with GET /api/requests/{id}/diagnosis (here the
// diagnosis package's Explain, as the gateway serves it), the detail shows
// its verdicts, the rules in order, the scope reading and the peers'
// percentiles; without the endpoint it falls back to the record's labels
// and the stats API, with the same table.
func TestDiagnosisEndpoint(t *testing.T) {
	recs := standardRecords()
	// Three more trace-B-like requests around req-b on the same channel:
	// the channel, not the request, was slow then.
	for i := range 3 {
		recs = append(recs, traceB(fmt.Sprintf("req-b%d", i), "team-a", now.Add(-20*time.Minute+time.Duration(i+1)*time.Minute)))
	}
	var st store.Store
	rules := diagnose.New(config.Diagnosis{})
	fx := newFixture(t, recs, func(mux *http.ServeMux) {
		mux.HandleFunc("GET /api/requests/{id}/diagnosis", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+keyAdmin {
				http.Error(w, `{"error":{"message":"no","type":"not_found_error"}}`, 404)
				return
			}
			rec, err := st.Get(r.Context(), r.PathValue("id"))
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			rep, err := rules.Explain(r.Context(), st, rec, store.Filter{}) // an admin: every peer
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(rep)
		})
	})
	st = fx.store.Store
	b := fx.get(t, "/ui/view/request/req-b", keyAdmin).body
	for _, want := range []string{
		"5,800 ms against a threshold of 2,000 ms",
		`<li class="fired" data-rule="response_to_text_gap">`,
		`<li class="" data-rule="upstream_headers_slow">`,
		"Reading: " + scopeText["channel"],
		"Peers: 3 other streaming requests on sim-anthropic for trace-b from 11:25:00 to 11:55:00 UTC&#43;00:00",
		`<tr data-field="relay_lag_ms"><td class="name">Relay lag <code>relay_lag_ms</code></td><td class="n" data-th="this request">0.050 ms</td>`,
		"<td>of them with the same primary verdict</td><td>3</td>",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	// The endpoint applies its own access rules; its 404 for this caller
	// falls back to the record's labels and the stats API.
	b = fx.get(t, "/ui/view/request/req-b", keyViewerA).body
	for _, want := range []string{diagnose.Advise(diagnose.ResponseToTextGap).Symptom, "5,800 ms against a threshold of 2,000 ms",
		"Peers: 3 other streaming requests on sim-anthropic for trace-b within ±15 min of this one",
		`<tr data-field="first_text_delta_ms"><td class="name">Time to First Visible Text <code>first_text_delta_ms</code></td><td class="n" data-th="this request">8,700 ms</td><td class="n" data-th="p50">8,700 ms</td>`} {
		if !strings.Contains(b, want) {
			t.Errorf("fallback lacks %q", want)
		}
	}
	if strings.Contains(b, "Reading:") || strings.Contains(b, "data-rule=") {
		t.Error("the fallback claims the endpoint's reading")
	}
}

// TestChannels: p50/p95 per channel and model, error rate, inflight now;
// the slowest p95 of a column is marked.
func TestChannels(t *testing.T) {
	recs := standardRecords()
	bad := fast("req-err", "team-a", now.Add(-time.Minute), false)
	bad.Status, bad.HTTPStatus = record.StatusUpstreamHTTPError, 502
	recs = append(recs, bad)
	// A thousand of one model: counts read as the overview writes them.
	for i := range 1000 {
		r := fast(fmt.Sprintf("req-bulk-%d", i), "team-a", now.Add(-time.Duration(i)*time.Second), false)
		r.Model = "bulk"
		recs = append(recs, r)
	}
	fx := newFixture(t, recs, nil)
	b := fx.get(t, "/ui/view/channels?since=1h", keyAdmin).body
	row := func(ch, model string) string {
		i := strings.Index(b, `<tr data-channel="`+ch+`" data-model="`+model+`">`)
		if i < 0 {
			t.Fatalf("no row %s/%s: %s", ch, model, b)
		}
		r := b[i:]
		return r[:strings.Index(r, "</tr>")]
	}
	ant := row("sim-anthropic", "trace-b")
	if !strings.Contains(ant, "8,700 ms") || !strings.Contains(ant, `class="n worst" data-th="Time to First Visible Text p95">8,700 ms`) {
		t.Errorf("anthropic row: %s", ant)
	}
	fastRow := row("sim-openai", "fast")
	if !strings.Contains(fastRow, `<td class="n err" data-th="error rate">25%</td>`) || !strings.Contains(fastRow, `<td class="n" data-th="inflight now">2</td>`) {
		t.Errorf("openai fast row (1 error in 4; inflight 2): %s", fastRow)
	}
	if bulk := row("sim-openai", "bulk"); !strings.Contains(bulk, `data-th="requests">1,000</td>`) {
		t.Errorf("bulk row: the count is not grouped as elsewhere (1,000): %s", bulk)
	}
	meta := row("sim-openai", "metadata-only")
	if strings.Count(meta, `<span class="absent">absent</span>`) != 4 {
		t.Errorf("metadata-only row should have p50/p95 absent for response and text: %s", meta)
	}
	if !strings.Contains(b, `#/requests?channel=sim-anthropic&amp;model=trace-b&amp;since=1h`) {
		t.Error("a row does not lead to its requests")
	}
}

// TestRequestsList: each row has its waterfall on the page's shared
// scale; the channel filter narrows the list; absent values read absent.
func TestRequestsList(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	b := fx.get(t, "/ui/view/requests?since=1h", keyAdmin).body
	if got := len(rowRE.FindAllString(b, -1)); got != 5 {
		t.Fatalf("%d rows", got)
	}
	if !strings.Contains(b, "bars share one scale of 0–12,000 ms") {
		t.Error("scale not stated")
	}
	// Trace B's row: five stages drawn, the response→text one 48.3% wide.
	i := strings.Index(b, `<tr data-id="req-b"`)
	tr := b[i : i+strings.Index(b[i:], "</tr>")]
	if !strings.Contains(tr, `class="seg seg-t5" x="24.167%" y="3" width="48.333%"`) {
		t.Errorf("trace B mini waterfall: %s", tr)
	}
	i = strings.Index(b, `<tr data-id="req-m1"`)
	tr = b[i : i+strings.Index(b[i:], "</tr>")]
	if !strings.Contains(tr, `<td class="n" data-th="first text"><span class="absent">absent</span></td>`) || strings.Contains(tr, "seg-t5") {
		t.Errorf("metadata-only row: %s", tr)
	}
	b = fx.get(t, "/ui/view/requests?since=1h&channel=sim-anthropic", keyAdmin).body
	ids := rowRE.FindAllStringSubmatch(b, -1)
	if len(ids) != 1 || ids[0][1] != "req-b" {
		t.Errorf("channel filter: %v", ids)
	}
	b = fx.get(t, "/ui/view/requests?since=1h&label=response_to_text_gap", keyAdmin).body
	if ids := rowRE.FindAllStringSubmatch(b, -1); len(ids) != 1 {
		t.Errorf("label filter: %v", ids)
	}
}

// TestTimeZone: times are shown in the browser's offset.
func TestTimeZone(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	b := fx.get(t, "/ui/view/requests?since=1h&tz=120", keyAdmin).body
	// req-b is at 11:40:00 UTC.
	if !strings.Contains(b, `title="2025-03-14 13:40:00.000 UTC&#43;02:00">13:40:00</a>`) {
		t.Errorf("time in UTC+2: %s", b)
	}
	b = fx.get(t, "/ui/view/overview?since=1h&tz=-330", keyAdmin).body
	if !strings.Contains(b, "time (UTC-05:30)") {
		t.Error("chart axis not in the browser's zone")
	}
}

// TestLinksRoundTrip: every link a view writes parses back into the same
// window and filters.
func TestLinksRoundTrip(t *testing.T) {
	q, err := parseViewQuery(map[string][]string{"since": {"6h"}, "model": {"a&b c"}, "channel": {"x/y"}, "status": {"truncated"}, "label": {"generation_slow"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{q.link("requests"), q.link("overview", "cursor", "abc"), q.link("requests", "since", "", "from", "2025-03-14T11:00:00Z", "to", "2025-03-14T11:01:00Z")} {
		_, raw, _ := strings.Cut(link, "?")
		v, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseViewQuery(v, now)
		if err != nil {
			t.Fatalf("%s: %v", link, err)
		}
		if back.Model != q.Model || back.Channel != q.Channel || back.Status != q.Status || back.Label != q.Label {
			t.Errorf("%s: %+v", link, back)
		}
		if strings.Contains(link, "from=") != !back.From.IsZero() || (back.From.IsZero() && back.Since != 6*time.Hour) {
			t.Errorf("%s: window %v %v", link, back.From, back.Since)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.00031, "0.00031"}, {0.0018, "0.002"}, {0.42, "0.42"}, {4.256, "4.26"}, {50.04, "50.0"}, {240.2, "240"}, {8700, "8,700"}, {1234567, "1,234,567"}, {-2500, "-2,500"}} {
		if got := num(c.v); got != c.want {
			t.Errorf("num(%v) = %q, want %q", c.v, got, c.want)
		}
	}
	for _, c := range []struct {
		max  float64
		top  float64
		step float64
	}{{10202, 15000, 5000}, {8700, 10000, 5000}, {0.3, 0.3, 0.1}, {0.31, 0.4, 0.1}, {0, 1, 1}, {1, 1, 0.5}} {
		top, step := niceMax(c.max, 4)
		if top != c.top || step != c.step {
			t.Errorf("niceMax(%v) = %v, %v; want %v, %v", c.max, top, step, c.top, c.step)
		}
	}
	if got := waterfallScale(10202); got != 12000 {
		t.Errorf("waterfallScale(10202) = %v", got)
	}
	for _, c := range []struct {
		span time.Duration
		want time.Duration
	}{{time.Hour, time.Minute}, {5 * time.Minute, 5 * time.Second}, {24 * time.Hour, 30 * time.Minute}, {30 * 24 * time.Hour, 12 * time.Hour}, {400 * 24 * time.Hour, 7 * 24 * time.Hour}} {
		if got := bucketFor(c.span, 60); got != c.want {
			t.Errorf("bucketFor(%v) = %v, want %v", c.span, got, c.want)
		}
	}
	ticks, layout := timeTicks(now.Add(-time.Hour), now, 5, time.FixedZone("x", 30*60))
	if len(ticks) != 5 || layout != "15:04" || ticks[0].In(time.FixedZone("x", 30*60)).Minute()%15 != 0 {
		t.Errorf("ticks %v %s", ticks, layout)
	}
	if got := tickNum(0.1 + 0.2); got != "0.3" {
		t.Errorf("tickNum = %q", got)
	}
	if zoneName(-330) != "UTC-05:30" || zoneName(0) != "UTC+00:00" {
		t.Error("zoneName")
	}
	if got := fmt.Sprintln(percent(0.25), percent(0.012), percent(0)); got != "25% 1.2% 0%\n" {
		t.Errorf("percent: %s", got)
	}
}

// TestChannelsEdges: requests that never reached a channel are one
// "(no channel)" row at the bottom, with their statuses, never a nameless
// channel; a p95 that is highest by 1 ms is not marked (issue 43).
func TestChannelsEdges(t *testing.T) {
	a := fast("req-a", "team-a", now.Add(-3*time.Minute), false)
	b := fast("req-b2", "team-a", now.Add(-2*time.Minute), false)
	b.Channel, b.Attempts[0].Channel = "sim-openai-2", "sim-openai-2"
	b.Fields.FirstResponseMs, b.Fields.FirstTextDeltaMs = at(121), at(121) // 1 ms slower
	refused := fast("req-auth", "team-a", now.Add(-time.Minute), false)
	refused.Channel, refused.Attempts = "", nil
	refused.Fields = record.Record{}.Fields
	refused.Status, refused.HTTPStatus, refused.Model = record.StatusAuthFailed, 401, ""
	unknown := refused
	unknown.RequestID, unknown.Status, unknown.HTTPStatus, unknown.Model = "req-unknown", record.StatusNoChannel, 404, "nope"
	unknown2 := unknown
	unknown2.RequestID = "req-unknown2"
	fx := newFixture(t, []record.Record{a, b, refused, unknown, unknown2}, nil)
	body := fx.get(t, "/ui/view/channels?since=1h", keyAdmin).body
	if strings.Contains(body, `data-channel=""`) {
		t.Error("a nameless channel row")
	}
	i := strings.Index(body, `data-no-channel`)
	if i < 0 {
		t.Fatalf("no (no channel) row: %s", body)
	}
	row := body[i : i+strings.Index(body[i:], "</tr>")]
	for _, want := range []string{"(no channel)", `data-th="requests">3<`, `<span data-status="no_channel">no_channel 2</span> · <span data-status="auth_failed">auth_failed 1</span>`} {
		if !strings.Contains(row, want) {
			t.Errorf("no-channel row lacks %q: %s", want, row)
		}
	}
	if j := strings.LastIndex(body[:i+strings.Index(body[i:], "</table>")], `<tr data-channel="`); j > i {
		t.Error("the (no channel) row is not at the bottom")
	}
	if strings.Contains(body, "worst") && strings.Contains(body, `class="n worst"`) {
		t.Errorf("a 1 ms difference is marked: %s", body[strings.Index(body, `class="n worst"`)-200:strings.Index(body, `class="n worst"`)+80])
	}
}

// TestHedgeDrawn: a hedged request's wait before the winning hedge started
// is drawn as waiting for the race, not as local time; the loser's attempt
// is drawn as lost, not failed; the held headers are named as hedging's
// (issue 43).
func TestHedgeDrawn(t *testing.T) {
	r := fast("req-hedge", "team-a", now.Add(-time.Minute), false)
	r.UpstreamStartMs, r.UpstreamHeadersAtMs, r.FirstSSEEventMs = at(200), at(220), at(221)
	r.FirstResponseMs, r.FirstTextDeltaMs, r.FirstTextSentMs, r.HeadersSentMs = at(290), at(290), at(290.1), at(290.05)
	r.Attempts = []record.Attempt{
		{Channel: "sim-openai", Role: record.RoleHedge, Outcome: record.OutcomeWon, Status: record.StatusOK, HTTPStatus: 200,
			UpstreamStartMs: at(200), UpstreamHeadersMs: span(20), UpstreamHeadersAtMs: at(220)},
		{Channel: "slow", Role: record.RolePrimary, Outcome: record.OutcomeCancelled, Status: record.AttemptHedgeLost,
			Error:           "cancelled: the hedge attempt on sim-openai reached first output first",
			UpstreamStartMs: at(0.1), UpstreamHeadersMs: span(5), UpstreamHeadersAtMs: at(5.1)},
	}
	fx := newFixture(t, []record.Record{r}, nil)
	list := fx.get(t, "/ui/view/requests?since=1h", keyAdmin).body
	if !strings.Contains(list, `class="seg seg-race"`) || !strings.Contains(list, "waiting for the hedge race") {
		t.Errorf("the requests list does not draw the wait for the race: %s", list)
	}
	detail := fx.get(t, "/ui/view/request/req-hedge", keyAdmin).body
	if !strings.Contains(detail, "seg-lost") || !strings.Contains(detail, "lost the hedge race") || strings.Contains(detail, "seg-fail") {
		t.Errorf("the loser is not drawn as lost (or something is drawn failed)")
	}
	if !strings.Contains(detail, "held for hedging") {
		t.Errorf("the held headers are not named as hedging's")
	}
}

// TestRequestDetailUpstreamModel: a request a channel served under another
// name (an alias) shows that name beside the model asked; one served under
// the name asked shows the model once.
func TestRequestDetailUpstreamModel(t *testing.T) {
	aliased := traceB("req-alias", "team-a", now.Add(-time.Minute))
	aliased.UpstreamModel = "prod-gpt4o-deployment"
	same := traceB("req-same", "team-a", now.Add(-time.Minute))
	same.UpstreamModel = same.Model
	fx := newFixture(t, append(standardRecords(), aliased, same), nil)
	b := fx.get(t, "/ui/view/request/req-alias", keyAdmin).body
	if !strings.Contains(b, `<b>`+aliased.Model+`</b> <span data-upstream-model`) || !strings.Contains(b, `served as <b>prod-gpt4o-deployment</b>`) {
		t.Errorf("aliased detail lacks the provider's name: %s", b)
	}
	if b := fx.get(t, "/ui/view/request/req-same", keyAdmin).body; strings.Contains(b, "data-upstream-model") {
		t.Error("a request served under the name asked shows an upstream name")
	}
}

// TestRequestDetailProviderFigures: a Bedrock Converse record's detail
// names its API and shows the provider's own latency and the wait for the
// channel's credentials beside the marks; a record without them shows
// neither row.
func TestRequestDetailProviderFigures(t *testing.T) {
	conv := traceB("req-converse", "team-a", now.Add(-time.Minute))
	conv.API, conv.Route = "bedrock.converse", "POST /model/{target}/converse-stream"
	conv.ProviderLatencyMs, conv.UpstreamAuthMs = timeline.SpanOf(9874*time.Millisecond), timeline.SpanOf(403700*time.Microsecond)
	plain := traceB("req-plain", "team-a", now.Add(-time.Minute))
	fx := newFixture(t, append(standardRecords(), conv, plain), nil)
	b := fx.get(t, "/ui/view/request/req-converse", keyAdmin).body
	for _, re := range []string{`via bedrock\.converse</span>`, `data-provider-latency>9[ ,.]?874`, `data-upstream-auth>404`} {
		if !regexp.MustCompile(re).MatchString(b) {
			t.Errorf("the Converse record's detail lacks %s", re)
		}
	}
	if b := fx.get(t, "/ui/view/request/req-plain", keyAdmin).body; strings.Contains(b, "data-provider-latency") || strings.Contains(b, "data-upstream-auth") {
		t.Error("a record without the provider's latency or a credentials wait shows them")
	}
}
