package web

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
)

// The request detail: one record's waterfall, events, tokens, attempts,
// and its verdicts with their context (what `ttfx diagnose` prints).

// verdictCard is one verdict of a request, in order.
type verdictCard struct {
	Label   string
	Primary bool
	Kind    string // "status" or "rule"
	Symptom string
	Check   string
	NotHelp string
	Finding string
	Rule    string
}

// kv is a line of a context table.
type kv struct{ Key, Value string }

// compareRow sets a field of this request beside its channel and model.
type compareRow struct {
	Name, Field string
	This        string
	P50, P95    string
	Count       int
	OverP95     bool
}

// detailData feeds the request detail.
type detailData struct {
	R             record.Record
	Back          string
	Time          string
	Rows          []wfRow
	Scale         float64
	Axis          template.HTML
	AxisUnit      string // the unit the axis ticks are in: ms, or s past ten seconds
	Marks         []markRow
	Events        template.HTML
	Verdicts      []verdictCard
	Rules         []diagnose.Rule
	Context       []kv
	Scope         string
	Compare       []compareRow
	CompareWindow string
	CompareLink   string
	TPS           string
	ITL           string
	Tokens        []kv
	Lag           string
	TraceURL      string // the trace's page in the tracing UI; empty without TraceURL or a trace id
}

type markRow struct{ Key, Name, Field, Value string }

func (h *Handler) request(r *http.Request, p auth.Principal, q viewQuery) ([]byte, error) {
	id := r.PathValue("id")
	ctx := r.Context()
	var rec record.Record
	if err := h.call(ctx, r, "/api/requests/"+url.PathEscape(id), nil, &rec); err != nil {
		return nil, err
	}
	d := detailData{R: rec, Back: q.link("requests"), Time: rec.Timestamp.In(q.TZ).Format("2006-01-02 15:04:05.000 ") + q.TZ.String()}
	if rec.TraceID != "" && h.opts.TraceURL != "" {
		d.TraceURL = strings.ReplaceAll(h.opts.TraceURL, "{trace_id}", url.PathEscape(rec.TraceID))
	}
	d.Rows, d.Scale = detailRows(&rec)
	d.Axis = msAxis(d.Scale)
	_, d.AxisUnit = unitScale(d.Scale)
	fieldOf := map[string]string{"t1": "upstream_start_ms", "t2": "upstream_headers_at_ms", "t3": "first_sse_event_ms",
		"t4": "first_response_ms", "t5": "first_text_delta_ms", "t6": "upstream_done_ms", "t7": "total_handler_ms"}
	d.Marks = append(d.Marks, markRow{"t0", "gateway receives the request", "", "0 ms (origin)"})
	for _, m := range marks(&rec) {
		v := "absent"
		if m.OK {
			v = ms(m.At)
		}
		d.Marks = append(d.Marks, markRow{m.Key, m.Name, fieldOf[m.Key], v})
	}
	d.Marks = append(d.Marks, markRow{"", "first visible text sent to the client", "first_text_sent_ms", msOffset(rec.FirstTextSentMs.Ms())})
	if v, ok := rec.VisibleOutputTPS.Get(); ok {
		d.TPS = tps(v)
	} else {
		d.TPS = "absent"
	}
	d.ITL = msOffset(rec.InterTokenLatencyMs.Ms())
	d.Lag = msOffset(rec.RelayLag().Ms())
	tok := func(p *int) string {
		if p == nil {
			return "unknown"
		}
		return group(strconv.Itoa(*p))
	}
	src := rec.Tokens.Source
	switch src {
	case record.TokensUsage:
		src = "usage — reported by the provider"
	case record.TokensEstimate:
		src = "estimate — counted with the o200k_base tokenizer over the visible text"
	case "":
		src = "none — nothing was counted"
	}
	d.Tokens = []kv{{"input", tok(rec.Tokens.Input)}, {"output", tok(rec.Tokens.Output)},
		{"reasoning", tok(rec.Tokens.Reasoning)}, {"visible", tok(rec.Tokens.Visible)}, {"source", src}}
	ev := rec.Events
	d.Events = hbars([]bar{
		{Label: "heartbeat", Value: ev.Heartbeat, Class: "k-heartbeat"}, {Label: "metadata", Value: ev.Metadata, Class: "k-metadata"},
		{Label: "reasoning", Value: ev.Reasoning, Class: "k-reasoning"}, {Label: "tool", Value: ev.Tool, Class: "k-tool"},
		{Label: "text", Value: ev.Text, Class: "k-text"}, {Label: "done", Value: ev.Done, Class: "k-done"},
		{Label: "error", Value: ev.Error, Class: "k-error"}, {Label: "unknown", Value: ev.Unknown, Class: "k-unknown"},
	}, "events", "events")

	// Verdicts and context: what `ttfx diagnose` prints, from the
	// diagnosis endpoint. Without one (an older gateway, or one that
	// failed), the record's own labels with the diagnosis package's advice,
	// and the context from the stats of its channel and model.
	var rep diagnose.Report
	err := h.call(ctx, r, "/api/requests/"+url.PathEscape(id)+"/diagnosis", nil, &rep)
	if err == nil {
		h.fromReport(&d, q, rep)
	} else {
		var ae *apiError
		if !(asAPIError(err, &ae) && ae.Code == http.StatusNotFound) && ctx.Err() == nil {
			h.log.Warn("web: diagnosis endpoint failed; showing the record's labels", "request_id", id, "err", err)
		}
		d.Verdicts = h.localVerdicts(rec)
		if err := h.compare(ctx, r, q, &d); err != nil {
			return nil, err
		}
	}
	return render("request", d)
}

func findingText(v, th float64, unit string) string {
	if unit == "ms" {
		return fmt.Sprintf("%s against a threshold of %s", ms(v), ms(th))
	}
	return fmt.Sprintf("%s %s against a threshold of %s %s", num(v), unit, num(th), unit)
}

// scopeText says what a diagnosis context's scope means.
var scopeText = map[string]string{
	"channel": "a slow channel: at least half of its other requests then carry the same primary verdict",
	"request": "a slow request: most other requests of the channel and model then do not carry its primary verdict",
	"unknown": "too few other requests of the channel and model then to tell a slow request from a slow channel",
}

// fromReport fills the verdicts and context from the diagnosis endpoint.
func (h *Handler) fromReport(d *detailData, q viewQuery, rep diagnose.Report) {
	for _, v := range rep.Verdicts {
		c := verdictCard{Label: v.Label, Primary: v.Primary, Kind: v.Kind, Symptom: v.Symptom, Check: v.Check, NotHelp: v.NotHelp}
		if v.Finding != nil {
			c.Finding = findingText(v.Finding.Value, v.Finding.Threshold, v.Finding.Unit)
			c.Rule = v.Finding.Rule
		}
		if v.Kind == "status" && d.R.Error != "" && c.Finding == "" {
			c.Finding = d.R.Error
		}
		d.Verdicts = append(d.Verdicts, c)
	}
	d.Rules = rep.Rules
	c := rep.Context
	d.Scope = scopeText[c.Scope]
	d.Context = []kv{
		{"route", orNone(c.Route)}, {"region", orNone(c.Region)}, {"provider", orNone(c.Provider)},
		{"inflight at receipt", fmt.Sprintf("gateway %d, channel %d", c.Inflight.Gateway, c.Inflight.Channel)},
		{"other " + streamKind(c.Stream) + " requests of the channel and model", strconv.Itoa(c.Peers)},
		{"of them with the same primary verdict", strconv.Itoa(c.FlaggedAlike)},
	}
	if !c.From.IsZero() {
		d.CompareWindow = fmt.Sprintf("%d other %s requests on %s for %s from %s to %s", c.Peers, streamKind(c.Stream), orNone(c.Channel), orNone(c.Model),
			c.From.In(q.TZ).Format("15:04:05"), c.To.In(q.TZ).Format("15:04:05 ")+q.TZ.String())
		d.CompareLink = peersLink(q, c.From, c.To, c.Channel, c.Model)
	}
	d.Compare = compareRows(c.Fields)
}

// contextFields names the fields of a context table, in timeline order.
var contextFields = []struct{ Field, Name string }{
	{"upstream_headers_ms", "Time to Headers"},
	{"first_sse_event_ms", "Time to First Event"},
	{"first_response_ms", "Time to First Effective Response"},
	{"first_text_delta_ms", "Time to First Visible Text"},
	{"upstream_done_ms", "Upstream done"},
	{"total_handler_ms", "Total handler time"},
	{"visible_output_tps", "Visible output TPS"},
	{"max_output_gap_ms", "Longest output gap"},
	{"relay_lag_ms", "Relay lag"},
}

// compareRows lays out a context's fields: this request's value, its
// peers' p50 and p95, and a mark where it is slower than their p95.
func compareRows(fields map[string]diagnose.FieldContext) []compareRow {
	var out []compareRow
	for _, cf := range contextFields {
		fc, ok := fields[cf.Field]
		if !ok {
			continue
		}
		format := msPtr
		rate := cf.Field == "visible_output_tps"
		if rate {
			format = func(p *float64) string {
				if p == nil {
					return "absent"
				}
				return tps(*p)
			}
		}
		row := compareRow{Name: cf.Name, Field: cf.Field, This: format(fc.Value), P50: format(fc.P50), P95: format(fc.P95), Count: fc.Count}
		// Slower than the p95 of its peers: a slow request, not (only) a
		// slow channel. Rates are lower-is-slower and have no low
		// percentile here, so they are not marked.
		if !rate && fc.Value != nil && fc.P95 != nil && fc.Count >= 2 {
			// The tolerance absorbs the float rounding between the value
			// computed from the record and the same value read back from
			// the store.
			row.OverP95 = *fc.Value > *fc.P95+1e-6+math.Abs(*fc.P95)*1e-9
		}
		out = append(out, row)
	}
	return out
}

func peersLink(q viewQuery, from, to time.Time, channel, model string) string {
	return q.link("requests", "since", "", "from", from.UTC().Format(time.RFC3339), "to", to.UTC().Format(time.RFC3339),
		"channel", channel, "model", model, "status", "", "group", "", "label", "")
}

// streamKind names a stream flag for the context's peers, which share it
// with the request (SPEC.md §4).
func streamKind(stream bool) string {
	if stream {
		return "streaming"
	}
	return "non-streaming"
}

// localVerdicts are the verdicts of a record's labels, in order, with the
// advice and the fired rules' values when the thresholds are known.
func (h *Handler) localVerdicts(rec record.Record) []verdictCard {
	findings := map[string]diagnose.Finding{}
	if h.opts.Rules != nil {
		for _, f := range h.opts.Rules.Findings(rec) {
			findings[f.Label] = f
		}
	}
	var out []verdictCard
	for i, label := range rec.Diagnosis {
		a := diagnose.Advise(label)
		c := verdictCard{Label: label, Primary: i == 0, Kind: "rule", Symptom: a.Symptom, Check: a.Check, NotHelp: a.NotHelp}
		if !slices.Contains(diagnose.RuleLabels, label) {
			c.Kind = "status"
		}
		if f, ok := findings[label]; ok {
			c.Finding, c.Rule = findingText(f.Value, f.Threshold, f.Unit), f.Rule
		} else if def, ok := diagnose.Definitions()[label]; ok {
			c.Rule = def
		}
		if c.Kind == "status" && rec.Error != "" {
			c.Finding = rec.Error
		}
		out = append(out, c)
	}
	return out
}

// compareWindow is how far either side of a request its channel and model
// are summarised when the gateway has no diagnosis endpoint; the same as
// the endpoint's.
const compareWindow = diagnose.ContextWindow

// compare sets this request's fields beside the p50/p95 of the same
// channel and model around its time, from the stats API.
func (h *Handler) compare(ctx context.Context, r *http.Request, q viewQuery, d *detailData) error {
	rec := &d.R
	from, to := rec.Timestamp.Add(-compareWindow), rec.Timestamp.Add(compareWindow)
	var names []string
	for _, cf := range contextFields {
		names = append(names, cf.Field)
	}
	v := url.Values{"from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)},
		"fields": {strings.Join(names, ",")}}
	if rec.Channel != "" {
		v.Set("channel", rec.Channel)
	}
	if rec.Model != "" {
		v.Set("model", rec.Model)
	}
	v.Set("stream", strconv.FormatBool(rec.Stream))
	var st statsResp
	if err := h.call(ctx, r, "/api/stats", v, &st); err != nil {
		return err
	}
	var g store.Group
	if len(st.Groups) > 0 {
		g = st.Groups[0]
	}
	peers := max(g.Count-1, 0)
	d.CompareWindow = fmt.Sprintf("%d other %s requests on %s for %s within ±%d min of this one", peers, streamKind(rec.Stream), orNone(rec.Channel), orNone(rec.Model), int(compareWindow.Minutes()))
	d.CompareLink = peersLink(q, from, to, rec.Channel, rec.Model)
	values := map[string]*float64{}
	put := func(name string, o interface{ Ms() (float64, bool) }) {
		if v, ok := o.Ms(); ok {
			values[name] = &v
		}
	}
	f := rec.Fields
	put("upstream_headers_ms", f.UpstreamHeadersMs)
	put("first_sse_event_ms", f.FirstSSEEventMs)
	put("first_response_ms", f.FirstResponseMs)
	put("first_text_delta_ms", f.FirstTextDeltaMs)
	put("upstream_done_ms", f.UpstreamDoneMs)
	put("total_handler_ms", f.TotalHandlerMs)
	put("max_output_gap_ms", f.MaxOutputGapMs)
	put("relay_lag_ms", f.RelayLag())
	if v, ok := rec.VisibleOutputTPS.Get(); ok {
		values["visible_output_tps"] = &v
	}
	fields := map[string]diagnose.FieldContext{}
	for _, name := range names {
		fs := g.Fields[name]
		fields[name] = diagnose.FieldContext{Value: values[name], P50: fs.P50, P95: fs.P95, Count: fs.Count}
	}
	d.Compare = compareRows(fields)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
