package web

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// wholeFast is a non-streaming chat request: its headers come with its
// whole answer, 900 ms after the request.
func wholeFast(id string, ts time.Time) record.Record {
	r := fast(id, "team-a", ts, false)
	r.Stream, r.Terminal = false, ""
	r.UpstreamHeadersMs, r.UpstreamHeadersAtMs = span(900), at(900.1)
	r.FirstSSEEventMs, r.FirstTextSentMs = timeline.Offset{}, timeline.Offset{}
	r.FirstResponseMs, r.FirstTextDeltaMs, r.UpstreamDoneMs, r.TotalHandlerMs = at(900.2), at(900.2), at(900.2), at(900.3)
	r.Attempts[0].UpstreamHeadersMs, r.Attempts[0].UpstreamHeadersAtMs = span(900), at(900.1)
	return r
}

// modelsListing is a GET /v1/models: a channel, no model, not streamed.
func modelsListing(id string, ts time.Time) record.Record {
	return record.Record{RequestID: id, Timestamp: ts, API: "openai.models", Route: "GET /v1/models", Group: "team-a",
		KeyName: "client-a", Channel: "sim-openai", Status: record.StatusOK, HTTPStatus: 200,
		Fields: timeline.Fields{UpstreamHeadersMs: span(2), UpstreamStartMs: at(0.1), UpstreamHeadersAtMs: at(2.1), UpstreamDoneMs: at(2.2), TotalHandlerMs: at(2.3)}}
}

// stalled is a stream that stopped for 6 s mid-answer.
func stalled(id string, ts time.Time) record.Record {
	r := fast(id, "team-a", ts, false)
	r.Model = "stall"
	r.UpstreamDoneMs, r.TotalHandlerMs = at(6500), at(6500.1)
	r.MaxOutputGapMs, r.MaxOutputGapAtMs = span(6000), at(6300)
	r.Diagnosis = []string{diagnose.GenerationStalled}
	return r
}

// TestStreamSwitch: the overview and channels summarise streaming requests
// unless switched (a non-streaming answer's headers are its generation
// time and would skew them), the list shows both; a request without a model
// (GET /v1/models) is no row of the channels table.
func TestStreamSwitch(t *testing.T) {
	recs := append(standardRecords(), wholeFast("req-w1", now.Add(-3*time.Minute)), modelsListing("req-models", now.Add(-2*time.Minute)))
	fx := newFixture(t, recs, nil)

	ov := fx.get(t, "/ui/view/overview?since=1h", keyAdmin).body
	if !strings.Contains(ov, `<b data-count>5</b> requests`) || !strings.Contains(ov, `<span data-stream-scope>streaming requests</span>`) ||
		!strings.Contains(ov, `<option value="true" selected>streaming</option>`) {
		t.Errorf("overview by default: not the five streams")
	}
	if got := cell(t, ov, "upstream_headers_ms", "p95"); strings.Contains(got, "900") {
		t.Errorf("streams' headers p95 %s holds the non-streaming answer", got)
	}
	ov = fx.get(t, "/ui/view/overview?since=1h&stream=any", keyAdmin).body
	if !strings.Contains(ov, `<b data-count>7</b> requests`) || !strings.Contains(ov, `<option value="any" selected>both</option>`) {
		t.Errorf("overview with stream=any: not all seven requests")
	}
	ov = fx.get(t, "/ui/view/overview?since=1h&stream=false", keyAdmin).body
	if !strings.Contains(ov, `<b data-count>2</b> requests`) || cell(t, ov, "upstream_headers_ms", "count") != "2" {
		t.Errorf("overview with stream=false: not the two non-streaming requests")
	}
	// The links out of a summary keep its switch.
	if !strings.Contains(ov, "stream=false") {
		t.Error("the overview's links drop the stream switch")
	}

	ch := fx.get(t, "/ui/view/channels?since=1h", keyAdmin).body
	if strings.Contains(ch, `data-no-model`) || strings.Contains(ch, `data-model=""`) {
		t.Error("channels by default shows non-streaming requests")
	}
	ch = fx.get(t, "/ui/view/channels?since=1h&stream=any", keyAdmin).body
	if strings.Contains(ch, `data-model=""`) || !strings.Contains(ch, `data-no-model>1 requests that name no model`) {
		t.Errorf("channels with stream=any: the model listing is a row, or not accounted for")
	}
	if !strings.Contains(ch, `<tr data-channel="sim-openai" data-model="fast">`) {
		t.Error("channels with stream=any lacks sim-openai/fast")
	}

	list := fx.get(t, "/ui/view/requests?since=1h", keyAdmin).body
	if n := strings.Count(list, "<tr data-id="); n != 7 {
		t.Errorf("the list shows %d requests, want all 7", n)
	}
	if a := fx.get(t, "/ui/view/overview?since=1h&stream=yes", keyAdmin); a.status != 400 || errType(t, a) == "" {
		t.Errorf("stream=yes: %d", a.status)
	}
}

// TestDetailStallAndRules: the detail draws the longest output gap where it
// happened and points generation_stalled at it; rule 1 of a non-streaming
// request reads "not applicable (non-streaming)"; the axis names the unit
// its ticks are in.
func TestDetailStallAndRules(t *testing.T) {
	recs := append(standardRecords(), wholeFast("req-w1", now.Add(-3*time.Minute)), stalled("req-stall", now.Add(-2*time.Minute)))
	fx := newFixture(t, recs, nil)

	b := fx.get(t, "/ui/view/request/req-stall", keyAdmin).body
	row := regexp.MustCompile(`(?s)<div class="wf-row flagged" data-gap="output_gap" data-flag="generation_stalled">.*?</div>\s*</div>`).FindString(b)
	if row == "" {
		t.Fatalf("no flagged output-gap row:\n%s", b)
	}
	// 300 → 6300 ms on an axis of 7000 ms: from 4.286 % for 85.714 %.
	if !strings.Contains(row, `x="4.286%" y="2" width="85.714%"`) || !strings.Contains(row, "6,000 ms · ended at 6,300 ms") {
		t.Errorf("output-gap row: %s", row)
	}
	if !strings.Contains(b, `data-axis-unit>ms since t0`) {
		t.Error("a 7 s axis is not labelled in ms")
	}

	b = fx.get(t, "/ui/view/request/req-b", keyAdmin).body
	if !strings.Contains(b, `data-axis-unit>s since t0`) || !regexp.MustCompile(`>12 s</text>`).MatchString(b) {
		t.Error("trace B's 12 s axis is not labelled in s")
	}
	if !strings.Contains(b, `data-gap="output_gap"`) || !strings.Contains(b, "absent (fewer than two content events)") {
		t.Error("a request without a recorded gap does not show it as absent")
	}

	// The fallback context (no diagnosis endpoint) reads peers of the same
	// stream flag, and says so.
	b = fx.get(t, "/ui/view/request/req-w1", keyAdmin).body
	if !strings.Contains(b, "0 other non-streaming requests on sim-openai for fast") {
		t.Errorf("non-streaming context: %s", regexp.MustCompile(`Peers: [^.]*`).FindString(b))
	}
}

// TestRulesNotApplicable: the rules list renders the diagnosis report's
// not-applicable rule as such.
func TestRulesNotApplicable(t *testing.T) {
	var d detailData
	d.Rules = []diagnose.Rule{{Order: 1, Label: diagnose.UpstreamHeadersSlow, NotApplicable: diagnose.NotStreaming}, {Order: 6, Label: diagnose.GenerationStalled}}
	out, err := render("request", d)
	if err != nil {
		t.Fatal(err)
	}
	b := string(out)
	if !strings.Contains(b, `<li class="na" data-rule="upstream_headers_slow"><code>upstream_headers_slow</code> —  · <i data-not-applicable>not applicable (non-streaming)</i></li>`) {
		t.Errorf("rule 1: %s", regexp.MustCompile(`<ol class="rules">.*?</ol>`).FindString(b))
	}
	if !slices.Contains(diagnose.RuleLabels, diagnose.GenerationStalled) {
		t.Error("generation_stalled is not a rule")
	}
}

// TestOneUnitPerFamily: the four time charts of the overview share one
// unit, though one alone would be in s and the others in ms.
func TestOneUnitPerFamily(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	b := fx.get(t, "/ui/view/overview?since=1h", keyAdmin).body
	units := regexp.MustCompile(`transform="rotate\(-90[^"]*" text-anchor="middle">([a-z]+)</text>`).FindAllStringSubmatch(b, -1)
	if len(units) != 4 {
		t.Fatalf("%d y axes", len(units))
	}
	for _, u := range units {
		if u[1] != units[0][1] {
			t.Fatalf("the time charts mix units: %v", units)
		}
	}
	// Alone, the headers chart (at most 240 ms) would be in ms; trace B's
	// first text (8.7 s, an axis to 10 s) puts the family in s.
	if units[0][1] != "s" {
		t.Errorf("unit %s", units[0][1])
	}
}

// TestLiveBadgeClock: the live parts carry when the gateway made them, in
// the request list's format and zone.
func TestLiveBadgeClock(t *testing.T) {
	fx := newFixture(t, standardRecords(), nil)
	b := fx.get(t, "/ui/view/requests?since=1h&tz=120", keyAdmin).body
	m := regexp.MustCompile(`data-live id="req-live" data-asof="(\d\d:\d\d:\d\d) UTC&#43;02:00"`).FindStringSubmatch(b)
	row := regexp.MustCompile(`data-th="time"><a [^>]*>(\d\d:\d\d:\d\d)</a>`).FindStringSubmatch(b)
	if m == nil || row == nil || m[1] < row[1] {
		t.Fatalf("badge %v, newest row %v", m, row)
	}
}
